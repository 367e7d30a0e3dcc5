"""JSON has no integer type: a number with an integral value (``4.0``, ``13e9``) is accepted wherever an
integer is expected (:func:`optsched.core.checks.json_int`), in rounds of every kind, decisions of every
kind, params files and the options of a solve request; ``4.5``, ``true``, ``"4"``, NaN and infinity stay
errors naming the field."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
from crius_helpers import late_deadline_round
from helpers import own_coefficients_round, without_solve_time
from kind_decisions import TIME_LIMIT, decided, generated
import schema_check

import optsched
from optsched.cli import main
from optsched.core.catalog import get_cluster
from optsched.core.checks import json_int
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.core.jsonio import parse_json_text
from optsched.core.kinds import round_kinds
from optsched.core.round import RoundProblem
from optsched.perf.coefficients import CoefficientTable
from optsched.perf.crius.comm_profile import CommProfile, default_comm_profile
from optsched.perf.defaults import default_performance_model, prior_performance_model
from optsched.perf.lookup import load_params
from optsched.perf.performance_model import PerformanceModel
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.table import build_round_table
from optsched.service import ServiceConfig, parse_solve_request
from optsched.sim.ground_truth import read_params_json

JsonPath = tuple[str | int, ...]
#: stands for the member written in exponent form until the text is made
_EXPONENT = "<exponent>"


def fast_method(kind: str) -> str:
    """The first method of ``kind`` that is not a solver (a heuristic: quick and deterministic)."""
    return next(m for m in methods_of(kind) if "exact" not in m)


def int_paths(data: Any, path: JsonPath = ()) -> Iterator[JsonPath]:
    """Paths of the integers (not booleans) in JSON ``data``, in document order."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield from int_paths(v, (*path, k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from int_paths(v, (*path, i))
    elif isinstance(data, int) and not isinstance(data, bool):
        yield path


def exponent_form(n: int) -> str:
    """``n`` as a JSON number in exponent form: 13000000000 -> ``13e9``, 40 -> ``4e1``, 37 -> ``37e0``."""
    digits = str(n)
    mantissa = digits.rstrip("0") or "0"
    return f"{mantissa}e{len(digits) - len(mantissa)}"


def floated_text(data: Any, exponent_key: str | None = None) -> str:
    """``data`` as JSON text with every integer written as a float (``4`` -> ``4.0``) and the first member
    named ``exponent_key`` (when there is one) in exponent form (``13e9``)."""
    paths = list(int_paths(data))
    target = next((p for p in paths if p[-1] == exponent_key), None)
    out = copy.deepcopy(data)
    value = None
    for p in paths:
        parent = out
        for k in p[:-1]:
            parent = parent[k]
        if p == target:
            value, parent[p[-1]] = parent[p[-1]], _EXPONENT
        else:
            parent[p[-1]] = float(parent[p[-1]])
    text = json.dumps(out)
    if value is not None:
        text = text.replace(json.dumps(_EXPONENT), exponent_form(value), 1)
    assert not re.search(r"[:\[,] ?-?\d+[,}\]]", text), "an integer was left"
    return text


def strict_schema_errors(name: str, value: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Errors of ``value`` against schema ``name`` where ``integer`` means a Python ``int``: what a parsed
    object writes back must hold integers, not integral floats."""
    monkeypatch.setitem(schema_check._TYPES, "integer", lambda v: isinstance(v, int) and not isinstance(v, bool))
    return schema_check.structural_errors(name, value)


# -- the rule -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value, expected", [(4.0, 4), (13e9, 13_000_000_000), (-0.0, 0), (4, 4), (4.5, 4.5),
                                             (True, True), ("4", "4"), (None, None)])
def test_json_int_turns_integral_floats_into_ints_and_leaves_the_rest(value: Any, expected: Any) -> None:
    got = json_int(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_json_int_leaves_nan_and_infinities_alone(value: float) -> None:
    assert json_int(value) is value


def test_the_schema_checker_takes_integral_floats_as_integers_as_draft_2020_12_does() -> None:
    schema = {"type": "integer", "minimum": 1}
    assert schema_check.check(4.0, schema, schema) == [] and schema_check.check(13e9, schema, schema) == []
    for bad in (4.5, True, "4", math.nan, math.inf):
        assert schema_check.check(bad, schema, schema), bad
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(4.0, schema)


# -- rounds -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", round_kinds())
def test_a_round_of_every_kind_with_floats_for_integers_parses_equal_and_solves(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    original = generated(kind, 0)
    text = floated_text(original.to_dict(), "total_iterations" if original.jobs else "num_cpus")
    assert re.search(r"\d+e\d+", text)
    parsed = RoundProblem.from_dict(parse_json_text(text, "round.json"))
    assert parsed == original
    assert parsed.to_dict() == original.to_dict()
    assert strict_schema_errors("round", parsed.to_dict(), monkeypatch) == []
    method = fast_method(kind)
    decision = optsched.solve(parsed, method, TIME_LIMIT, 0)
    assert without_solve_time(decision) == without_solve_time(decided(kind, method, 0))


def _self_contained_rubick() -> dict[str, Any]:
    """:func:`own_coefficients_round` (own models, own rows, quotas, a running job) with the params of one
    of its models (``perf_params``) and a job without rows, so that the params are used."""
    data = own_coefficients_round()
    del data["coefficients"]["finetune-13b"]
    problem = RoundProblem.from_dict(copy.deepcopy(data))
    spec = problem.model_spec("my-13b")
    assert spec is not None
    data["perf_params"] = [prior_performance_model(spec, problem.cluster, "A800").to_dict()]
    return data


@pytest.mark.parametrize("name, build, exponent_key", [
    ("rubick with own models, rows and params", _self_contained_rubick, "num_params"),
    ("crius with own operator graphs", lambda: late_deadline_round(2).to_dict(), "kernels"),
    ("experts with replica bounds",
     lambda: {**generated("experts", 0).to_dict(),
              "experts": [{**e, "max_replicas": 2} for e in generated("experts", 0).to_dict()["experts"]]}, "slots"),
])
def test_self_contained_rounds_with_floats_for_integers_parse_equal_and_solve(
        name: str, build: Any, exponent_key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = build()
    original = RoundProblem.from_dict(copy.deepcopy(data))
    text = floated_text(data, exponent_key)
    parsed = RoundProblem.from_dict(parse_json_text(text, "round.json"))
    assert parsed.to_dict() == original.to_dict()
    assert strict_schema_errors("round", parsed.to_dict(), monkeypatch) == []
    method = fast_method(parsed.kind)
    assert without_solve_time(optsched.solve(parsed, method, TIME_LIMIT, 0)) == \
        without_solve_time(optsched.solve(original, method, TIME_LIMIT, 0))


def test_13e9_iterations_are_the_integer_13_billion() -> None:
    data = generated("rubick", 0).to_dict()
    name = data["jobs"][0]["name"]
    text = json.dumps(data).replace(f'"total_iterations": {data["jobs"][0]["total_iterations"]}',
                                    '"total_iterations": 13e9', 1)
    job = RoundProblem.from_dict(parse_json_text(text, "round.json")).job(name)
    assert job.total_iterations == 13_000_000_000 and type(job.total_iterations) is int


def test_the_cli_solves_a_round_file_with_floats_for_integers(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    original = generated("rubick", 0)
    path = tmp_path / "round.json"
    path.write_text(floated_text(original.to_dict(), "total_iterations"), encoding="utf-8")
    assert main(["solve", str(path), "--method", "heuristic"]) == 0
    answer = Decision.from_dict(json.loads(capsys.readouterr().out))
    assert without_solve_time(answer) == without_solve_time(decided("rubick", "heuristic", 0))


# -- decisions, params files, service options ----------------------------------------------------------
@pytest.mark.parametrize("kind", round_kinds())
def test_a_decision_of_every_kind_with_floats_for_integers_parses_equal(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    original = decided(kind, fast_method(kind), 0)
    data = original.to_dict()
    assert list(int_paths(data)), "the decision holds no integer to test"
    keys = [p[-1] for p in int_paths(data) if isinstance(p[-1], str)]
    parsed = Decision.from_dict(parse_json_text(floated_text(data, keys[0] if keys else None), "decision.json"))
    assert parsed == original
    assert strict_schema_errors("decision", parsed.to_dict(), monkeypatch) == []


def test_a_params_file_with_floats_for_integers_loads_equal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = default_performance_model("gpt2")
    original = default.with_params(default.params, n_samples=120)  # as 'optsched fit' writes it
    path = tmp_path / "gpt2.json"
    path.write_text(floated_text(original.to_dict(), "num_params"), encoding="utf-8")
    assert re.search(r'"num_params": \d+e\d+', path.read_text())
    loaded = load_params(path)
    assert loaded == original and type(loaded.n_samples) is int and type(loaded.bandwidths.gpus_per_node) is int
    assert read_params_json(path) == {"gpt2": original}
    assert strict_schema_errors("perf-params", loaded.to_dict(), monkeypatch) == []


def test_coefficient_tables_and_comm_profiles_with_floats_for_integers_load_equal() -> None:
    table = build_round_table(generated("rubick", 0))
    assert CoefficientTable.from_dict(parse_json_text(floated_text(table.to_dict()), "table.json")) == table
    profile = default_comm_profile(get_cluster("crius-testbed-64"))
    back = CommProfile.from_dict(parse_json_text(floated_text(profile.to_dict(), "ranks"), "profile.json"))
    assert back.to_dict() == profile.to_dict() and all(type(c.ranks) is int for c in back.curves)


def test_service_options_take_integral_numbers_as_integers() -> None:
    body = json.dumps({"round": {"kind": "rubick"}, "seed": 1.0, "partitions": 2e0, "time_limit": 2}).encode()
    _, options = parse_solve_request(body, {}, ServiceConfig())
    assert options == {"seed": 1, "partitions": 2, "time_limit": 2.0}
    assert type(options["seed"]) is int and type(options["partitions"]) is int
    for bad in ("1.5", "true", '"1"'):
        with pytest.raises(ValidationError, match=re.escape(f"option 'seed': expected int, got {json.loads(bad)!r}")):
            parse_solve_request(f'{{"round": {{}}, "seed": {bad}}}'.encode(), {}, ServiceConfig())


# -- what stays an error ---------------------------------------------------------------------------
def _set(data: Any, path: JsonPath, value: Any) -> Any:
    out = copy.deepcopy(data)
    parent = out
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return out


def _round_error(path: JsonPath, value: Any) -> str:
    with pytest.raises(ValidationError) as info:
        RoundProblem.from_dict(_set(generated("rubick", 0).to_dict(), path, value))
    return str(info.value)


def _first_running_node() -> str:
    return next(iter(generated("rubick", 0).to_dict()["running"][0]["placement"]))


@pytest.mark.parametrize("value", [4.5, True, "4", math.nan, math.inf])
@pytest.mark.parametrize("path, field", [
    (("jobs", 0, "requested_gpus"), "requested_gpus"),
    (("jobs", 0, "total_iterations"), "total_iterations"),
    (("cluster", "nodes", 0, "num_gpus"), "num_gpus"),
    (("running", 0, "plan", "dp"), "dp"),
    (("running", 0, "placement", None, "gpus"), "gpus"),
])
def test_non_integers_in_a_round_are_refused_naming_the_field(value: Any, path: JsonPath, field: str) -> None:
    path = tuple(_first_running_node() if k is None else k for k in path)
    assert f"{field} must be an integer, got {value!r}" in _round_error(path, value)


@pytest.mark.parametrize("value", [4.5, True, "4", math.nan])
def test_non_integers_elsewhere_are_refused_naming_the_field(value: Any) -> None:
    quota = next(iter(generated("rubick", 0).to_dict()["quotas"]))
    assert f"GPUs must be an integer, got {value!r}" in _round_error(("quotas", quota), value)
    params = default_performance_model("gpt2").to_dict()
    for path, field in ((("fit", "n_samples"), "n_samples"), (("bandwidths", "gpus_per_node"), "gpus_per_node"),
                        (("model", "layers"), "layers")):
        with pytest.raises(ValidationError, match=re.escape(f"{field} must be an integer, got {value!r}")):
            PerformanceModel.from_dict(_set(params, path, value))
    experts = decided("experts", fast_method("experts"), 0).to_dict()
    with pytest.raises(ValidationError, match=re.escape(f"expert must be an integer, got {value!r}")):
        Decision.from_dict(_set(experts, ("experts", 0, "expert"), value))
    with pytest.raises(ValidationError, match=re.escape(f"expert must be an integer, got {value!r}")):
        Decision.from_dict(_set(experts, ("devices", 0, "experts"), [value]))
    comm = decided("moe-comm", fast_method("moe-comm"), 0).to_dict()
    with pytest.raises(ValidationError, match=re.escape(f"parts must be an integer, got {value!r}")):
        Decision.from_dict(_set(comm, ("tasks", 0, "parts"), value))
