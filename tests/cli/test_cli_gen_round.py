"""``optsched gen-round`` takes its flags from the registered kinds' generators: every keyword option
but ``seed`` is a flag typed by its annotation (or default), a kind registered later gets its flags
with no change to the command line, and a flag the chosen kind's generator does not take is refused."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from optsched import cli
from optsched.cli import gen_round
from optsched.core import kinds
from optsched.core.kinds import round_kind, round_kinds
from optsched.rounds.rubick import KIND as RUBICK


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _register(monkeypatch: pytest.MonkeyPatch, name: str, generate: Any) -> None:
    """Register ``generate`` as the generator of a kind ``name`` (rubick's problem and payload) for one test."""
    monkeypatch.setitem(kinds._KINDS, name, type(RUBICK)(name, RUBICK.problem, RUBICK.payload, generate, "toy"))


def test_every_generator_option_is_a_typed_flag(capsys: pytest.CaptureFixture[str]) -> None:
    options = {o.name: o for o in gen_round.generator_options()}
    expected = {n for k in round_kinds() for n in round_kind(k).generator_options} - {"seed"}
    assert set(options) == expected
    assert list(options)[:3] == ["nodes", "gpus_per_node", "jobs"]  # the order of the help texts
    assert (options["jobs"].type, options["load"].type, options["occupancy"].type) == (int, float, float)
    assert options["devices"].type is int  # int | None
    code, out, _ = _run(capsys, "gen-round", "--help")
    assert code == 0
    for option in options.values():
        assert option.flag in out
    assert "--gpus-per-node N" in out and "--load X" in out and "--elastic X" in out


def test_the_new_float_options_reach_the_generator(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "gen-round", "--kind", "lyra-allocate", "--occupancy", "0.5", "--elastic", "0.2",
                          "--jobs", "6", "--seed", "1")
    assert code == 0, err
    assert json.loads(out)["kind"] == "lyra-allocate"
    code, _, err = _run(capsys, "gen-round", "--occupancy", "0.5")
    assert code == 2 and err.strip() == "optsched: error: gen-round --kind rubick does not take --occupancy"


def test_a_new_kind_gets_its_flags_with_no_cli_change(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    def toy(*, seed: int = 0, width: int = 2, scale: float | None = None, fancy: bool = False, label: str = "a",
            untyped=1.5):  # noqa: ANN001
        seen.update(seed=seed, width=width, scale=scale, fancy=fancy, label=label, untyped=untyped)
        return RUBICK.generate(seed=seed, nodes=1, jobs=2)
    _register(monkeypatch, "toy-gen", toy)
    types = {o.name: o.type for o in gen_round.generator_options() if "toy-gen" in o.kinds}
    assert types == {"width": int, "scale": float, "fancy": bool, "label": str, "untyped": float}
    code, out, err = _run(capsys, "gen-round", "--kind", "toy-gen", "--width", "3", "--scale", "0.5", "--fancy",
                          "--label", "b", "--untyped", "2", "--seed", "4")
    assert code == 0, err
    assert seen == {"seed": 4, "width": 3, "scale": 0.5, "fancy": True, "label": "b", "untyped": 2.0}
    assert json.loads(out)["kind"] == "rubick"
    code, _, err = _run(capsys, "gen-round", "--kind", "toy-gen", "--no-fancy")
    assert code == 0 and seen["fancy"] is False and seen["width"] == 2
    code, _, err = _run(capsys, "gen-round", "--kind", "toy-gen", "--width", "x")
    assert code == 2 and "argument --width: invalid int value: 'x'" in err
    code, _, err = _run(capsys, "gen-round", "--width", "3")
    assert code == 2 and err.strip() == "optsched: error: gen-round --kind rubick does not take --width"
    code, out, _ = _run(capsys, "gen-round", "--help")
    assert "option width of the kind's generator (toy-gen)" in " ".join(out.split())
    assert "--fancy, --no-fancy" in out


def test_generators_gen_round_cannot_offer_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def takes_out(*, seed: int = 0, out: str = "x"):  # noqa: ANN202
        raise AssertionError("not called")
    _register(monkeypatch, "toy-out", takes_out)
    with pytest.raises(TypeError, match="round kind 'toy-out' has an option 'out', which gen-round uses itself"):
        gen_round.generator_options()
    monkeypatch.delitem(kinds._KINDS, "toy-out")

    def float_jobs(*, seed: int = 0, jobs: float = 1.0):  # noqa: ANN202
        raise AssertionError("not called")
    _register(monkeypatch, "toy-jobs", float_jobs)
    with pytest.raises(TypeError, match="generator option 'jobs' is int for round kind 'crius' but float for "
                                        "'toy-jobs'"):
        gen_round.generator_options()


@pytest.mark.parametrize(("annotation", "default", "expected"), [
    ("int", 0, int), ("int | None", None, int), ("Optional[float]", None, float), ("bool", False, bool),
    ("str", "a", str), ("int | float", 1, float), ("Path", None, str), (inspect.Parameter.empty, 0.5, float),
    (inspect.Parameter.empty, None, str), (int | None, None, int), (float, 1.0, float),
])
def test_option_type(annotation: Any, default: Any, expected: type) -> None:
    param = inspect.Parameter("x", inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    assert gen_round.option_type(param) is expected
