"""The moe-comm round (optsched/rounds/moe_comm): fields and errors, task graphs at each granularity,
the fair-sharing execution on hand-computed cases, replay, and the feasibility check."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from optsched.core.deadline import Deadline
from optsched.core.errors import InfeasibleError, ValidationError
from optsched.core.round import RoundProblem
from optsched.heuristics.moe_comm import POLICIES, fair_rule, priority_rule
from optsched.rounds.experts.generate import lina_cluster
from optsched.rounds.moe_comm import AllReduce, MoECommRound, StreamOp, fig47_round, generate
from optsched.rounds.moe_comm.problem import ALL_TO_ALL, COMPUTE
from optsched.rounds.moe_comm.tasks import build_tasks, units
from optsched.rounds.moe_comm.timeline import Timeline, replay, simulate, violations


def _tiny(**kw: object) -> MoECommRound:
    """c0 (1 ms) releases a 100 MB allreduce, cm (2 ms), a 20 MB all-to-all, c1 (2 ms); 10 GB/s, no
    overhead (unless ``kw`` says otherwise)."""
    stream = (StreamOp("c0", COMPUTE, ms=1.0), StreamOp("cm", COMPUTE, ms=2.0), StreamOp("a", ALL_TO_ALL, mb=20.0),
              StreamOp("c1", COMPUTE, ms=2.0))
    fields = {"link_gbps": 10.0, "op_overhead_ms": 0.0, **kw}
    return MoECommRound(cluster=lina_cluster(4), stream=stream, allreduces=(AllReduce("g", 100.0, "c0"),),
                        **fields)  # type: ignore[arg-type]


def test_fair_sharing_by_hand() -> None:
    r = _tiny()
    tl = simulate(r, build_tasks(r, split=False), fair_rule)
    # g alone 1-3 ms (20 MB), then g and a share 5 MB/ms each: a ends at 3 + 4 = 7, g (60 MB left) at 7 + 6 = 13
    s = {t.op: (tl.start[t.index], tl.end[t.index]) for t in tl.graph.tasks}
    assert s["c0"] == (0.0, 1.0) and s["g"][0] == 1.0
    assert s["a"] == pytest.approx((3.0, 7.0)) and s["c1"] == pytest.approx((7.0, 9.0))
    assert s["g"][1] == pytest.approx(13.0) and tl.step_ms == pytest.approx(13.0) and not tl.exclusive
    # naive priority: g runs 1-11 alone, a waits: 11-13, c1 13-15
    tp = simulate(r, build_tasks(r, split=False), priority_rule)
    assert tp.step_ms == pytest.approx(15.0) and tp.exclusive and tp.compute_end_ms == pytest.approx(15.0)
    # contention: at 80% efficiency the shared phase runs at 4 MB/ms each
    slow = simulate(_tiny(sharing_efficiency=0.8), build_tasks(r, split=False), fair_rule)
    assert slow.end[2] == pytest.approx(3.0 + 20 / 4)


def test_overhead_per_micro_op() -> None:
    r = _tiny(op_overhead_ms=0.5, partition_mb=30.0)
    g = build_tasks(r, split=True)
    parts = [t for t in g.tasks if t.op == "g"]
    assert len(parts) == 4 and all(t.mb == 25.0 and t.ms == pytest.approx(0.5 + 2.5) for t in parts)


def test_pipelined_graph() -> None:
    r = fig47_round()
    g = build_tasks(r, split=True, pipeline=True)
    ffn = [t for t in g.tasks if t.op == "ffn_i"]
    first = [t for t in g.tasks if t.op == "a2a_i.1"]
    second = [t for t in g.tasks if t.op == "a2a_i.2"]
    assert len(ffn) == len(first) == len(second) == 2  # 45 MB in 30 MB micro-ops
    assert ffn[1].deps == (first[1].index, ffn[0].index) and second[0].deps == (ffn[0].index,)
    assert units(r)["ffn_i"] == units(r)["a2a_i.1"] == "triple:a2a_i.1" and units(r)["g_i"] == "op:g_i"
    whole = build_tasks(r, split=False)
    assert len([t for t in whole.tasks if t.op == "ffn_i"]) == 1
    mixed = build_tasks(r, split={"op:g_i": True}, pipeline=True)
    assert len([t for t in mixed.tasks if t.op == "g_i"]) == 5 and len([t for t in mixed.tasks if t.op == "ffn_i"]) == 1


def test_replay_and_violations() -> None:
    r = _tiny()
    g = build_tasks(r, split=False)
    tl = replay(r, g, [0, 4, 1, 2, 3])  # c0, g 1-11, cm 1-3, a 11-13, c1 13-15
    assert tl.step_ms == pytest.approx(15.0) and violations(r, tl) == []
    bad = Timeline(g, np.array([0.0, 1.0, 1.0, 3.0, 1.0]), np.array([1.0, 3.0, 3.0, 5.0, 11.0]), True)
    found = violations(r, bad)
    assert any("link: " in v for v in found) and any("a[1/1] starts at 1 ms before cm ends" in v for v in found)


def test_a_rule_that_never_launches_is_an_error() -> None:
    r = _tiny()
    with pytest.raises(InfeasibleError, match="never launches 'g'"):
        simulate(r, build_tasks(r, split=False), lambda state: [])


def test_a_rule_stops_when_the_deadline_passes() -> None:
    r = _tiny()
    past = Deadline(1.0, start=time.perf_counter() - 2.0)
    assert simulate(r, build_tasks(r, split=True), fair_rule, deadline=past) is None
    assert simulate(r, build_tasks(r, split=True), fair_rule, deadline=Deadline.never()) is not None


def test_json_round_trip() -> None:
    r = generate(seed=3, moe_layers=3)
    data = json.loads(json.dumps(r.to_dict()))
    del data["jobs"]
    back = RoundProblem.from_dict(data)
    assert back == r and isinstance(back, MoECommRound) and len(back.stream) == 3 * 7 + 1 and len(back.allreduces) == 3 * 2 + 1
    assert back.bandwidth == 12.5


@pytest.mark.parametrize(("change", "message"), [
    ({"allreduces": [{"name": "g", "mb": 10, "after": "nope"}]}, "allreduce 'g' comes after 'nope', which is not"),
    ({"allreduces": [{"name": "c0", "mb": 10, "after": "c0"}]}, "operation name 'c0' used twice"),
    ({"allreduces": [{"name": "g", "mb": 0, "after": "c0"}]}, "allreduce 'g': mb must be > 0"),
    ({"stream": [{"name": "a", "op": "all-to-all", "mb": 5}]}, "needs at least one compute operation"),
    ({"stream": [{"name": "c", "op": "compute", "ms": -1}]}, "stream op 'c': ms must be >= 0"),
    ({"stream": [{"name": "c", "op": "compute", "ms": 1, "role": "gate"}]}, "role must be one of"),
    ({"stream": [{"name": "c", "op": "send", "ms": 1}]}, r"stream\[0\]: expected an object with op"),
    ({"sharing_efficiency": 1.5}, "sharing_efficiency must be <= 1"),
    ({"partition_mb": 0}, "partition_mb must be > 0"),
    ({"partition_mb": 0.1}, "partition_mb 0.1 splits the communication into 1200 micro-ops, more than the limit of 1000"),
    ({"link_gbps": -3}, "link_gbps must be > 0"),
])
def test_bad_rounds_get_one_clear_error(change: dict, message: str) -> None:
    data = {**_tiny().to_dict(), **change}
    with pytest.raises(ValidationError, match=message):
        RoundProblem.from_dict(data)


@pytest.mark.parametrize("seed", range(4))
def test_every_rule_gives_a_feasible_timeline(seed: int) -> None:
    r = generate(seed=seed, moe_layers=1 + seed % 3)
    for name, policy in POLICIES.items():
        tl = policy.schedule(r)
        assert violations(r, tl) == [], name
        if name not in ("fair", "defer"):
            assert tl.exclusive
        assert tl.step_ms >= sum(op.ms for op in r.stream if op.op == COMPUTE) - 1e-9
