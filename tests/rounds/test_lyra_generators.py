"""The Lyra generators make rounds in which the allocation's phase two matters
(``optsched/rounds/lyra_allocate/generate.py``, ``optsched/rounds/lyra/generate.py``, option ``load``):
most seeds give a positive objective, phase one alone gives 0, ``load`` bounds the queued base demand,
and ``load=None`` keeps every job drawn."""

from __future__ import annotations

import json

import pytest

import optsched
from optsched import cli
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind
from optsched.rounds.lyra.generate import allocatable_gpus, lyra_state
from optsched.rounds.lyra.jobs import base_workers
from optsched.rounds.lyra_allocate.capacity import available
from optsched.rounds.lyra_allocate.generate import DEFAULT_LOAD, generate_allocate_round

SEEDS = range(10)


@pytest.mark.parametrize("kind", ("lyra-allocate", "lyra"))
def test_most_seeds_give_a_positive_objective_that_phase_two_brings(kind: str) -> None:
    positive = 0
    for seed in SEEDS:
        p = round_kind(kind).generate(seed=seed)
        lyra = optsched.solve(p, "lyra", 5.0, 0).objective
        phase_one = optsched.solve(p, "sjf" if kind == "lyra-allocate" else "lyra-loan", 5.0, 0).objective
        assert phase_one == 0.0  # no flexible workers, no JCT reduction
        positive += lyra > 0
    assert positive >= 8, positive


def _queued_demand(p: optsched.RoundProblem) -> int:
    return sum(base_workers(j) * j.gpus_per_worker for j in p.jobs if p.current(j.name) is None)


def test_load_bounds_the_queued_base_demand() -> None:
    for seed in (0, 1, 2):
        demands = []
        for load in (0.3, DEFAULT_LOAD, 1.5):
            p = generate_allocate_round(seed=seed, load=load)
            builder = lyra_state(seed, 8, 16, 30, 0.7, 0.3, "test")[0]
            cap = allocatable_gpus(builder)
            assert sum(available(p).values()) <= cap + 1  # the pools round inference GPUs down
            assert _queued_demand(p) <= load * cap
            demands.append(_queued_demand(p))
        assert demands == sorted(demands) and demands[0] < demands[-1]
        everything = generate_allocate_round(seed=seed, load=None)
        assert sum(everything.current(j.name) is None for j in everything.jobs) == 30
        assert _queued_demand(everything) > sum(available(everything).values())  # the old, full rounds


@pytest.mark.parametrize("load", (0, -1.0, "high", True, float("inf"), float("nan")))
def test_a_load_that_is_not_positive_is_an_error(load: object) -> None:
    with pytest.raises(ValidationError, match=r"load must be (a finite number|> 0)"):
        generate_allocate_round(load=load)  # type: ignore[arg-type]


def test_gen_round_takes_load_for_the_allocating_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["gen-round", "--kind", "lyra-allocate", "--load", "0.3", "--seed", "1"]) == 0
    low = json.loads(capsys.readouterr().out)
    assert cli.main(["gen-round", "--kind", "lyra", "--load", "2", "--seed", "1"]) == 0
    high = json.loads(capsys.readouterr().out)
    assert len(low["jobs"]) - len(low["running"]) < len(high["jobs"]) - len(high["running"])
    assert cli.main(["gen-round", "--kind", "rubick", "--load", "0.5"]) == 2
    assert "gen-round --kind rubick does not take --load" in capsys.readouterr().err
