"""Random Rubick rounds (optsched/rounds/rubick/generate.py): reproducible, valid, within capacity,
accepted by the round table, large clusters, and strict about their arguments."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from optsched.core import ValidationError, a800_cluster
from optsched.core.catalog import MODELS
from optsched.core.round import RoundProblem
from optsched.rounds.rubick.admission import admit, reaches_guarantee
from optsched.rounds.rubick.generate import candidate_requests, generate_rubick_round, request_weight
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table


def _held(p: RubickRound) -> dict[str, list[float]]:
    """GPUs, CPUs and GiB held per node by outside work and running jobs."""
    held = {n.name: [0, 0, 0.0] for n in p.cluster.nodes}
    shares = list(p.occupied) + [kv for a in p.running for kv in a.placement.shares]
    for node, s in shares:
        held[node][0] += s.gpus
        held[node][1] += s.cpus
        held[node][2] += s.mem_gib
    return held


def test_same_seed_same_round() -> None:
    a = generate_rubick_round(8, 8, 40, seed=11)
    b = generate_rubick_round(8, 8, 40, seed=11)
    assert a == b
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def test_different_seeds_differ() -> None:
    dicts = {json.dumps(generate_rubick_round(8, 8, 40, seed=s).to_dict()) for s in range(5)}
    assert len(dicts) == 5


def test_sizes_and_names() -> None:
    p = generate_rubick_round(5, 4, 23, seed=2, tenants=4)
    assert p.cluster == a800_cluster(5, 4) and p.cluster.name == "a800-5x4"
    assert len(p.cluster.nodes) == 5 and p.cluster.total_gpus == 20
    assert len(p.jobs) == 23 and len({j.name for j in p.jobs}) == 23
    assert p.kind == "rubick"
    assert {j.tenant for j in p.jobs} <= {f"tenant{i}" for i in range(4)}
    assert set(p.quota_map) == {f"tenant{i}" for i in range(4)}
    assert all(j.model in MODELS for j in p.jobs)
    assert RoundProblem.from_dict(json.loads(json.dumps(p.to_dict()))) == p


@pytest.mark.parametrize("args", [(8, 8, 40, 0), (3, 4, 25, 1), (1, 1, 4, 2), (2, 8, 12, 3), (6, 2, 30, 4)])
def test_capacity_never_exceeded_and_table_builds(args: tuple[int, int, int, int]) -> None:
    p = generate_rubick_round(*args)
    for node, (g, c, m) in _held(p).items():
        n = p.cluster.node(node)
        assert g <= n.num_gpus and c <= n.num_cpus and m <= n.memory_gib + 1e-9, node
    table = build_round_table(p)
    assert table.jobs == tuple(j.name for j in p.jobs)
    for j, job in enumerate(p.jobs):
        cur = p.current(job.name)
        assert (table.current_row[j] >= 0) == (cur is not None)
        if cur is not None and job.guaranteed:  # running guaranteed jobs run exactly their request
            assert cur.plan.num_gpus == job.requested_gpus
            assert cur.placement.total_cpus == job.requested_cpus
            assert reaches_guarantee(table, int(table.current_row[j]))[0], job.name
    admission = admit(p, table)
    running_guaranteed = {j.name for j in p.jobs if j.guaranteed and p.current(j.name) is not None}
    assert running_guaranteed <= set(admission.protected)  # they fit their tenants' quotas


def test_distributions_look_like_the_paper() -> None:
    p = generate_rubick_round(16, 8, 300, seed=5)
    jobs = p.jobs
    small = sum(j.requested_gpus <= 8 for j in jobs) / len(jobs)
    assert small > 0.75  # most jobs ask for at most a node
    counts = candidate_requests(8, 128)
    assert all(j.requested_gpus in counts for j in jobs)  # powers of two and whole nodes
    assert all(j.requested_gpus <= 64 for j in jobs)  # at most half the cluster
    for j in jobs:
        if j.model == "llama7":
            assert j.requested_gpus >= 8
        if j.model == "llama30":
            assert j.requested_gpus >= 16
        assert 4 * j.requested_gpus <= j.requested_cpus <= 12 * j.requested_gpus
    models = Counter(j.model for j in jobs)
    assert models["vit"] + models["roberta"] + models["bert"] > models["llama7"] + models["llama30"]
    guaranteed = sum(j.guaranteed for j in jobs) / len(jobs)
    assert 0.25 < guaranteed < 0.55
    assert 0 < sum(j.requested_plan is not None for j in jobs) < len(jobs) / 2
    running = sum(p.current(j.name) is not None for j in jobs)
    assert 0 < running <= 0.6 * len(jobs)
    assert len(p.occupied) == 4  # 25% of 16 nodes
    assert sum(p.quota_map.values()) == round(0.6 * (128 - sum(s.gpus for _, s in p.occupied)))
    assert all(j.submit_time <= p.time for j in jobs)
    assert all(j.completed_iterations == 0 for j in jobs if p.current(j.name) is None)


def test_fractions_are_honoured() -> None:
    none = generate_rubick_round(4, 8, 20, seed=0, guaranteed_fraction=0.0, running_fraction=0.0,
                                 occupied_fraction=0.0)
    assert not any(j.guaranteed for j in none.jobs) and none.running == () and none.occupied == ()
    full = generate_rubick_round(4, 8, 10, seed=0, guaranteed_fraction=1.0, occupied_fraction=1.0)
    assert all(j.guaranteed for j in full.jobs) and len(full.occupied) == 4


def test_request_weights_fall_with_size() -> None:
    assert candidate_requests(8, 64) == (1, 2, 4, 8, 16, 32, 64)
    assert candidate_requests(6, 30) == (1, 2, 4, 6, 12, 24)
    w = [request_weight(c, 8) for c in candidate_requests(8, 64)]
    assert w == sorted(w, reverse=True)


def test_large_cluster() -> None:
    p = generate_rubick_round(160, 8, 400, seed=0)
    assert len(p.jobs) == 400 and p.cluster.total_gpus == 1280
    assert sum(1 for _ in p.running) > 50


@pytest.mark.parametrize("kwargs, name", [
    (dict(num_nodes=0), "num_nodes"),
    (dict(num_nodes=2.0), "num_nodes"),
    (dict(gpus_per_node=-8), "gpus_per_node"),
    (dict(num_jobs=0), "num_jobs"),
    (dict(num_jobs=True), "num_jobs"),
    (dict(seed=-1), "seed"),
    (dict(seed="1"), "seed"),
    (dict(tenants=0), "tenants"),
    (dict(guaranteed_fraction=1.5), "guaranteed_fraction"),
    (dict(running_fraction=-0.1), "running_fraction"),
    (dict(occupied_fraction=float("nan")), "occupied_fraction"),
])
def test_bad_arguments_name_the_argument(kwargs: dict[str, Any], name: str) -> None:
    args: dict[str, Any] = dict(num_nodes=2, gpus_per_node=8, num_jobs=4, seed=0)
    args.update(kwargs)
    with pytest.raises(ValidationError, match=rf"generate_rubick_round: {name} must be"):
        generate_rubick_round(**args)
