"""The moe-comm launch rules (optsched/heuristics/moe_comm.py): the deferral rule on passes whose
all-to-all count is odd."""

from __future__ import annotations

import pytest

from optsched.heuristics.moe_comm import POLICIES
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.moe_comm import AllReduce, MoECommRound, StreamOp
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE
from optsched.rounds.moe_comm.timeline import violations


def _odd_pass() -> MoECommRound:
    """c1 (1 ms) releases g1 (50 MB), one all-to-all x (20 MB), c2 (1 ms); 12.5 GB/s, 0.1 ms per op."""
    stream = (StreamOp("c1", COMPUTE, ms=1.0), StreamOp("x", ALL_TO_ALL, mb=20.0), StreamOp("c2", COMPUTE, ms=1.0))
    return MoECommRound(cluster=lina_cluster(4), stream=stream, allreduces=(AllReduce("g1", 50.0, "c1"),))


def test_defer_releases_the_allreduce_once_no_all_to_all_is_left_to_pair_with() -> None:
    r = _odd_pass()
    tl = POLICIES["defer"].schedule(r)
    s = {t.op: (tl.start[t.index], tl.end[t.index]) for t in tl.graph.tasks}
    # x 1-2.7 ms (0.1 + 20 / 12.5); only one all-to-all, so g1 runs after it: 2.7-6.8 ms (0.1 + 50 / 12.5)
    assert s["x"] == pytest.approx((1.0, 2.7)) and s["g1"] == pytest.approx((2.7, 6.8))
    assert tl.step_ms == pytest.approx(6.8) and violations(r, tl) == []


def test_defer_still_waits_for_the_second_all_to_all_of_a_layer() -> None:
    stream = (StreamOp("c1", COMPUTE, ms=1.0), StreamOp("x1", ALL_TO_ALL, mb=20.0), StreamOp("f", COMPUTE, ms=1.0),
              StreamOp("x2", ALL_TO_ALL, mb=20.0), StreamOp("c2", COMPUTE, ms=1.0))
    r = MoECommRound(cluster=lina_cluster(4), stream=stream, allreduces=(AllReduce("g1", 50.0, "c1"),))
    tl = POLICIES["defer"].schedule(r)
    s = {t.op: (tl.start[t.index], tl.end[t.index]) for t in tl.graph.tasks}
    assert s["g1"][0] == pytest.approx(s["x2"][1]) == pytest.approx(5.4)  # x1 1-2.7, f 2.7-3.7, x2 3.7-5.4
