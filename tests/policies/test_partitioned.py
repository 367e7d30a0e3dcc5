"""Partitioned solving (optsched/policies/partitioned.py, optsched/rounds/rubick/partition.py): the parts
are disjoint, running jobs stay with their nodes, the joined decision is feasible for the whole cluster
and keeps every admitted guarantee or says why not, and runs are reproducible."""

from __future__ import annotations

import pytest

import optsched
from optsched.core import ValidationError
from optsched.core.capacity import NodeUsage
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.partition import split_round
from optsched.rounds.rubick.table import build_round_table


@pytest.fixture(scope="module")
def problem() -> optsched.RubickRound:
    return generate_rubick_round(16, 8, 70, 3)


def test_the_split_is_a_partition(problem: optsched.RubickRound) -> None:
    table = build_round_table(problem)
    split = split_round(problem, 3, 0, table)
    nodes = [n.name for part in split.parts for n in part.cluster.nodes]
    assert sorted(nodes) == sorted(n.name for n in problem.cluster.nodes)
    jobs = [j.name for part in split.parts for j in part.jobs]
    assert len(jobs) == len(set(jobs))
    assert set(jobs) | set(split.left_out) == {j.name for j in problem.jobs}
    assert set(admit(problem, table).waiting) <= set(split.left_out)
    for part in split.parts:
        names = {n.name for n in part.cluster.nodes}
        assert not part.quotas
        for a in part.running:  # a running job's nodes are all in its part
            assert {n for n, _ in a.placement.shares} <= names
    again = split_round(problem, 3, 0, table)
    assert [[j.name for j in p.jobs] for p in again.parts] == [[j.name for j in p.jobs] for p in split.parts]
    other = split_round(problem, 3, 1, table)
    assert [[j.name for j in p.jobs] for p in other.parts] != [[j.name for j in p.jobs] for p in split.parts]


@pytest.mark.parametrize("method", ["rubick", "exact", "sia"])
@pytest.mark.parametrize("parts", [2, 4])
def test_the_joined_decision_is_feasible_for_the_whole_cluster(problem: optsched.RubickRound, method: str,
                                                               parts: int) -> None:
    extras = {} if method == "sia" else {"defer_unreachable_guarantees": True}
    d = optsched.solve(problem, method, 20.0, partitions=parts, **extras)
    assert d.method == f"{method}/partitions={parts}" and d.bound is None and d.gap is None
    assert sorted(x.job for x in d.jobs) == sorted(j.name for j in problem.jobs)
    usage = NodeUsage()
    for x in d.jobs:
        if x.allocation is not None:
            usage.add_all(x.allocation.placement.shares)
            assert len({problem.cluster.node(n).gpu_type for n, _ in x.allocation.placement.shares}) == 1
        else:
            assert x.action == ("preempt" if problem.current(x.job) else "wait")
    assert usage.overflows(problem.free, 1e-6) == []
    table = build_round_table(problem)
    admitted = admit(problem, table)
    for x in d.jobs:  # every admitted guarantee is kept, or the message says why not
        if method != "sia" and x.job in admitted.protected and not x.protected:
            assert repr(x.job) in d.message
    objective = sum(x.normalised for x in d.jobs) \
        - problem.reconfig_penalty * sum(x.action == "reconfigure" for x in d.jobs) \
        - problem.preempt_penalty * sum(x.action == "preempt" for x in d.jobs)
    assert d.objective == pytest.approx(objective)
    assert "partitioned into" in d.message


def test_sequential_and_parallel_parts_agree(problem: optsched.RubickRound) -> None:
    from optsched.policies.options import PolicyOptions
    from optsched.policies.partitioned import PartitionedPolicy
    opts = PolicyOptions(time_limit=30.0, extras={"defer_unreachable_guarantees": True})
    one = PartitionedPolicy("rubick", "rubick", 3, opts, processes=1).decide(problem)
    two = PartitionedPolicy("rubick", "rubick", 3, opts, processes=2).decide(problem)
    assert [x.to_dict() for x in one.jobs] == [x.to_dict() for x in two.jobs]


def test_bad_partition_counts(problem: optsched.RubickRound) -> None:
    with pytest.raises(ValidationError, match="partitions must be an integer >= 2"):
        optsched.solve(problem, "rubick", 5.0, partitions=0)
