"""Issue 26: a queued job whose requested host memory no node can hold is refused naming the job and the
rule (every method; skipped under ``on_invalid_job: skip``), never left waiting with "the free resources went
to other jobs" (optsched/rounds/rubick/table.py, ``check_memory_fits``)."""

from __future__ import annotations

import pytest

from optsched.core import Job, ValidationError, a800_cluster
from optsched.policies.registry import methods_of
from optsched.policies.solve import solve
from optsched.rounds.rubick.problem import RubickRound

RULE = r"job 'big': requests 1e\+300 GiB of host memory .* no node of cluster 'a800-2x8' can hold any of its"


def _round(mem: float, *, skip: bool = False) -> RubickRound:
    jobs = (Job("big", "bert", 2, 1000, tenant="t", requested_mem_gib=mem),
            Job("small", "vit", 1, 1000, tenant="t"))
    return RubickRound(a800_cluster(2, 8), jobs, on_invalid_job="skip" if skip else "error")


@pytest.mark.parametrize("method", methods_of("rubick"))
def test_every_method_refuses_a_request_no_node_holds(method: str) -> None:
    with pytest.raises(ValidationError, match=RULE):
        solve(_round(1e300), method, time_limit=10.0)


def test_skip_leaves_it_out_with_that_reason_and_solves_the_rest() -> None:
    decision = solve(_round(1e300, skip=True), "heuristic")
    assert [s.job for s in decision.skipped] == ["big"] and "no node of cluster" in decision.skipped[0].reason
    assert decision.job("small").allocation is not None


def test_a_request_a_node_can_hold_is_scheduled() -> None:
    decision = solve(_round(300.0), "heuristic")  # 150 GiB per GPU: a node holds 1,600 GiB
    assert decision.job("big").allocation is not None
