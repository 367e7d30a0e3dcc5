"""The lyra-reclaim round: its vocabulary, JSON, generator and the errors the issue names (w_min >
w_max, a job on a server that does not exist, a reclaim asking for more servers than are on loan)."""

from __future__ import annotations

import json

import pytest
from lyra_cases import figure_3_5

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.core.round import RoundProblem
from optsched.rounds.lyra.cluster import two_pool_cluster, worker_allocation
from optsched.rounds.lyra.jobs import base_workers, is_elastic, max_workers, running_time, work_rate
from optsched.rounds.lyra_reclaim import LyraReclaimRound, ReclaimView, generate_reclaim_round


def test_round_trips_and_on_loan() -> None:
    p = generate_reclaim_round(seed=2, servers=12, reclaim=3)
    again = RoundProblem.from_dict(json.loads(json.dumps(p.to_dict())))
    assert again == p and again.flexible == p.flexible
    assert p.on_loan == tuple(f"inf-{i:03d}" for i in range(12))
    assert len(p.jobs) > 5 and p.flexible  # some elastic jobs run flexible workers


def test_generator_is_reproducible_and_places_whole_workers() -> None:
    a, b = generate_reclaim_round(seed=5, servers=10), generate_reclaim_round(seed=5, servers=10)
    assert a.to_dict() == b.to_dict()
    for alloc in a.running:
        job = a.job(alloc.job)
        assert base_workers(job) <= a.workers_of(job.name) <= max_workers(job)
        pools = {a.pool(n) for n, _ in alloc.placement.shares}
        assert len(pools) == 1


def test_elastic_job_vocabulary() -> None:
    job = Job("e", "bert", 12, 6 * 2 * 50, min_gpus=4, max_gpus=12, gpus_per_worker=2)
    assert is_elastic(job) and base_workers(job) == 2 and max_workers(job) == 6
    assert running_time(job, 6) == pytest.approx(50.0)
    # sub-linear: each worker beyond the base brings 20% less
    assert work_rate(job, 4, "sublinear") == pytest.approx(2 * (2 + 0.8 * 2))
    inelastic = Job("i", "cnn", 4, 400, gpus_per_worker=2)
    assert not is_elastic(inelastic) and base_workers(inelastic) == max_workers(inelastic) == 2


def test_w_min_above_w_max_is_named() -> None:
    with pytest.raises(ValidationError, match=r"job 'x'.*max_gpus must be >= 8"):
        Job("x", "bert", 8, 100, min_gpus=8, max_gpus=4, gpus_per_worker=2)


def test_job_on_missing_server_is_named() -> None:
    p = figure_3_5()
    data = p.to_dict()
    data["running"][0]["placement"] = {"inf-099": {"gpus": 8}}
    with pytest.raises(ValidationError, match=r"job 'a'.*inf-099"):
        RoundProblem.from_dict(data)


def test_reclaim_above_on_loan_is_named() -> None:
    with pytest.raises(ValidationError, match=r"reclaim asks for 7 servers but only 6 inference servers are on loan"):
        figure_3_5(reclaim=7)


def test_loaning_is_by_whole_server() -> None:
    from optsched.core.allocation import NodeShare
    with pytest.raises(ValidationError, match=r"inference server 'inf-000'.*whole servers"):
        LyraReclaimRound(cluster=two_pool_cluster(1, 2), inference_nodes=("inf-000", "inf-001"),
                         occupied=(("inf-000", NodeShare(3)),), reclaim=1)


def test_not_whole_workers_and_non_fungible_on_inference_are_named() -> None:
    cluster = two_pool_cluster(1, 1)
    job = Job("j", "cnn", 2, 100, gpus_per_worker=2)
    with pytest.raises(ValidationError, match=r"running job 'j' runs on inference servers but is not fungible"):
        LyraReclaimRound(cluster=cluster, jobs=(job,), running=(worker_allocation("j", {"inf-000": 4}),),
                         inference_nodes=("inf-000",))
    with pytest.raises(ValidationError, match=r"requested_gpus 3 is not a whole number of workers"):
        LyraReclaimRound(cluster=cluster, jobs=(Job("k", "cnn", 3, 100, gpus_per_worker=2),),
                         inference_nodes=("inf-000",))


def test_flexible_workers_must_add_up() -> None:
    cluster = two_pool_cluster(0, 2)
    job = Job("e", "bert", 8, 100, min_gpus=2, max_gpus=8, fungible=True)
    run = (worker_allocation("e", {"inf-000": 4, "inf-001": 4}),)   # 4 workers of 2 T4 GPUs; base 2
    ok = LyraReclaimRound(cluster=cluster, jobs=(job,), running=run, inference_nodes=("inf-000", "inf-001"),
                          flexible=(("e", (("inf-001", 4),)),))
    assert ok.base_of("e") == {"inf-000": 4} and ok.flexible_of("e") == {"inf-001": 4}
    with pytest.raises(ValidationError, match=r"flexible workers of job 'e': 1 flexible workers"):
        LyraReclaimRound(cluster=cluster, jobs=(job,), running=run, inference_nodes=("inf-000", "inf-001"),
                         flexible=(("e", (("inf-001", 2),)),))


def test_view_of_figure_3_5() -> None:
    v = ReclaimView(figure_3_5())
    assert v.jobs == ("a", "b", "c", "d")
    assert [sorted(v.jobs[j] for j in js) for js in v.base_jobs] == [["a"], ["a"], ["b"], ["c"], ["c", "d"], ["d"]]
    out = v.outcome([0, 1])
    assert out.preempted == ("a",) and out.collateral_gpus == 0 and v.kept(out) == 3
    assert v.outcome([3]).collateral_gpus == 1
