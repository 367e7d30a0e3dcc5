"""The exact moe-comm schedule (optsched/formulations/moe_comm_schedule.py): adjacent units that take
different granularities still wait for each other."""

from __future__ import annotations

import pytest

from optsched.formulations import moe_comm_schedule
from optsched.formulations.cpsat import cp_solver
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.moe_comm import MoECommRound, StreamOp
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE
from optsched.rounds.moe_comm.timeline import violations


def _adjacent_all_to_alls() -> MoECommRound:
    """c0, x1 (65 MB: 3 micro-ops of 30 MB), x2 (48 MB: 2), c1 on 12.5 GB/s, 0.1 ms per op."""
    stream = (StreamOp("c0", COMPUTE, ms=1.0), StreamOp("x1", ALL_TO_ALL, mb=65.0), StreamOp("x2", ALL_TO_ALL, mb=48.0),
              StreamOp("c1", COMPUTE, ms=1.0))
    return MoECommRound(cluster=lina_cluster(4), stream=stream)


@pytest.mark.parametrize("split", [(True, False), (False, True)])
def test_a_split_unit_and_a_whole_one_keep_their_order(split: tuple[bool, bool]) -> None:
    r = _adjacent_all_to_alls()
    built = moe_comm_schedule.build(r)
    for unit, on in zip(("op:x1", "op:x2"), split):
        built.model.add(built.choice[unit] == int(on))
    solver = cp_solver(10.0, 0, 1)
    assert solver.status_name(solver.solve(built.model)) == "OPTIMAL"
    start = {k: solver.value(v) for k, v in built.starts.items()}
    x1 = [("x1", p, 3) for p in range(3)] if split[0] else [("x1", 0, 1)]
    x2 = [("x2", p, 2) for p in range(2)] if split[1] else [("x2", 0, 1)]
    assert min(start[k] for k in x2) >= max(start[k] + built.durations[k] for k in x1)


def test_the_solved_schedule_of_adjacent_units_is_feasible() -> None:
    r = _adjacent_all_to_alls()
    sol = moe_comm_schedule.solve(r, time_limit=10)
    assert sol.status == "optimal" and violations(r, sol.payload["timeline"]) == []
    assert -sol.objective == pytest.approx(11.24)  # whole ops: 1 + (0.1 + 5.2) + (0.1 + 3.84) + 1
