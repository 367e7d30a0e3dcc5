"""Issue 26, item 5: ``heuristic`` names the paper's heuristic in every kind that has one (an alias of the
method the kind's docs name: rubick ``rubick``, crius ``crius``, the Lyra kinds ``lyra``, experts, moe-comm and
training-packing ``lina``), gives that method's decision and is listed by ``optsched solve --help``."""

from __future__ import annotations

import pytest

from optsched import cli
from optsched.core.kinds import round_kind, round_kinds
from optsched.policies.registry import describe_methods, methods_of
from optsched.policies.solve import solve

#: kind -> the method ``heuristic`` aliases
ALIASED = {"rubick": "rubick", "crius": "crius", "lyra": "lyra", "lyra-allocate": "lyra", "lyra-reclaim": "lyra",
           "placement": "lyra", "experts": "lina", "moe-comm": "lina",
           "training-packing": "lina"}


def test_every_kind_has_heuristic() -> None:
    assert set(ALIASED) == set(round_kinds())
    for kind in round_kinds():
        assert "heuristic" in methods_of(kind), kind
        assert "alias of" in describe_methods()[kind]["heuristic"] or kind == "rubick"


@pytest.mark.parametrize("kind", sorted(ALIASED))
def test_heuristic_decides_as_the_method_it_aliases(kind: str) -> None:
    problem = round_kind(kind).generate(seed=0)
    a = solve(problem, "heuristic", time_limit=20.0)
    b = solve(problem, ALIASED[kind], time_limit=20.0)
    assert a.method == "heuristic"
    assert a.objective == pytest.approx(b.objective) and a.payload == b.payload


def test_solve_help_lists_heuristic_for_every_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["solve", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    for kind in ("experts", "moe-comm", "lyra"):
        listed = text.split(f"kind {kind}:")[1].split(";")[0]
        assert "heuristic" in listed, kind
