"""``--configs measured`` (issue 11): every policy's candidates restricted to the measured table's
configurations; checked on every round of small runs."""

from __future__ import annotations

import pytest

from optsched.core import ExecutionPlan, Job, ZeroMode, a800_cluster, get_model
from optsched.core.errors import ValidationError
from optsched.core.plan import parse_plan_code
from optsched.experiments.compare import measured_configs, run_policies
from optsched.perf.measurements import Measurement
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import make_policy
from optsched.policies.rubick import DEFER
from optsched.sim.engine import simulate
from optsched.sim.ground_truth import AnalyticalGroundTruth, MeasuredGroundTruth

from helpers import shared_data_dir

CLUSTER = a800_cluster(2, 8)
BERT = get_model("bert")
#: measured BERT rows: a few plans on a few packed placements (times from the model are irrelevant)
MEASURED = (("ga", (1,), 0.60), ("zero-dp", (2,), 0.38), ("gc", (4,), 0.28), ("ga", (8,), 0.16), ("zero-dp", (8,), 0.15),
            ("zero-offload", (8,), 0.28), ("ga", (8, 8), 0.12))


def _truth() -> MeasuredGroundTruth:
    rows = [Measurement(i, code, "".join(map(str, gpn)), parse_plan_code(code, sum(gpn), BERT.global_batch), gpn, t)
            for i, (code, gpn, t) in enumerate(MEASURED, start=1)]
    return MeasuredGroundTruth(CLUSTER, {"bert": rows})


def _jobs() -> list[Job]:
    # requests: measured (ga on 1), unmeasured plan on a measured count (gc on 2), unmeasured count (3 GPUs)
    specs = [("a", 1, ExecutionPlan(dp=1)), ("b", 2, ExecutionPlan(dp=2, gc=True)), ("c", 4, ExecutionPlan(dp=4)),
             ("d", 8, ExecutionPlan(dp=8, zero=ZeroMode.DP)), ("e", 2, ExecutionPlan(dp=2, zero=ZeroMode.DP)),
             ("f", 16, ExecutionPlan(dp=16)), ("g", 4, ExecutionPlan(dp=4, gc=True))]
    return [Job(name, "bert", g, 400 + 50 * i, requested_cpus=8 * g, requested_plan=plan, submit_time=30.0 * i,
                guaranteed=i % 2 == 0)
            for i, (name, g, plan) in enumerate(specs)]


class Checked:
    """Wraps a policy and checks that every allocation it decides is a measured configuration."""

    def __init__(self, inner, truth: MeasuredGroundTruth) -> None:
        self.inner, self.truth = inner, truth
        self.name, self.kind = inner.name, inner.kind
        self.rounds = self.allocations = 0

    def decide(self, problem):
        decision = self.inner.decide(problem)
        self.rounds += 1
        model = {j.name: j.model for j in problem.jobs}
        for d in decision.payload.jobs:
            if d.allocation is not None:
                self.allocations += 1
                a = d.allocation
                assert self.truth.is_measured(model[d.job], a.plan, a.placement.gpus_per_node), (
                    d.job, a.plan.label, a.placement.gpus_per_node)
        return decision


@pytest.mark.parametrize("method", ["rubick", "rubick-e", "rubick-r", "rubick-n", "sia", "synergy", "antman",
                                    "fifo-backfill", "exact"])
def test_measured_only_never_runs_an_unmeasured_configuration(method: str) -> None:
    truth = _truth()
    options = PolicyOptions(time_limit=5.0, extras={DEFER: True}, allowed_configs=measured_configs(truth))
    policy = Checked(make_policy(method, options), truth)
    result = simulate(CLUSTER, _jobs(), policy, truth, round_fields={"quotas": (("default", 16),)})
    assert policy.rounds > 3 and policy.allocations > 0
    summary = result.summary()
    assert summary["unfinished"] == 0 and summary["measured_share"] == 1.0


def test_all_configurations_do_run_unmeasured_ones_and_the_share_says_so() -> None:
    truth = _truth()
    out = run_policies(CLUSTER, _jobs(), truth, ["fifo-backfill"])
    assert out["fifo-backfill"].summary()["measured_share"] < 1.0


def test_measured_configs_needs_a_measured_ground_truth() -> None:
    with pytest.raises(ValidationError, match="must be a measured one"):
        measured_configs(AnalyticalGroundTruth(CLUSTER))


@pytest.mark.skipif(not (shared_data_dir() / "morphling" / "placements").is_dir(), reason="../shared/data is absent")
def test_naive_trace_on_the_public_tables_runs_measured_only() -> None:
    from optsched.core.catalog import get_cluster
    from optsched.sim.traces import load_workload_csv
    data = shared_data_dir() / "morphling"
    cluster = get_cluster("a800-8x8")
    truth = MeasuredGroundTruth.from_directory(data / "placements", cluster)
    trace = load_workload_csv(data / "workloads" / "naive.csv", cluster)
    options = PolicyOptions(extras={DEFER: True}, allowed_configs=measured_configs(truth))
    for method in ("rubick", "sia"):
        policy = Checked(make_policy(method, options), truth)
        result = simulate(cluster, trace.jobs, policy, truth)
        assert result.summary()["unfinished"] == 0 and result.measured_share == 1.0

