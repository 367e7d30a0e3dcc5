"""The coefficient table every formulation consumes."""

from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pytest

from optsched.core import (Cluster, ExecutionPlan, Node, UnknownNameError, ValidationError, a800_cluster,
                           get_cluster, get_gpu_type, get_model)
from optsched.core.pool import packed_placement
from optsched.perf.coefficients import CoefficientTable, build_coefficient_table, candidate_gpu_counts, pareto_front
from optsched.perf.memory import HOST_BASE_GIB_PER_GPU, estimate_memory
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans

from helpers import fixed_perf

A800 = get_gpu_type("A800")
SMALL = a800_cluster(2, 4)  # 2 nodes x 4 A800, 48 CPUs and 800 GiB per node


def perf_of(model: str, cluster: Cluster = SMALL) -> PerformanceModel:
    return fixed_perf(model, cluster)


@lru_cache(maxsize=None)
def small_table() -> CoefficientTable:
    jobs = [(f"j-{m}", perf_of(m)) for m in ("vit", "bert", "gpt2", "llama7")]
    return build_coefficient_table(jobs, SMALL, "A800")


def test_candidate_gpu_counts() -> None:
    assert candidate_gpu_counts(8, 64) == (1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64)
    assert candidate_gpu_counts(8, 20) == (1, 2, 4, 8, 16)
    assert candidate_gpu_counts(8, 3) == (1, 2)
    assert candidate_gpu_counts(6, 12) == (1, 2, 4, 6, 12)


def test_table_is_consistent() -> None:
    t = small_table()
    k = len(t)
    assert k > 0
    assert t.jobs == ("j-vit", "j-bert", "j-gpt2", "j-llama7")
    for arr in (t.job_index, t.gpus, t.cpus, t.mem_gib, t.throughput):
        assert arr.shape == (k,)
    assert len(t.plans) == len(t.gpus_per_node) == len(t.gpu_type) == k
    assert np.all(t.throughput > 0)
    assert all(p.num_gpus == g == sum(pl) for p, g, pl in zip(t.plans, t.gpus, t.gpus_per_node))
    assert all(pl == packed_placement(int(g), 4) for g, pl in zip(t.gpus, t.gpus_per_node))
    node = SMALL.nodes[0]
    assert np.all(t.cpus <= t.gpus * (node.num_cpus / node.num_gpus))
    assert set(t.gpu_type) == {"A800"}
    assert set(t.gpus.tolist()) <= {1, 2, 4, 8}
    assert set((t.cpus // t.gpus).tolist()) <= {2, 4, 8, 12}
    for j, name in enumerate(t.jobs):
        idx = t.configs_of(name)
        assert idx.size > 0 and np.all(t.job_index[idx] == j)
    assert sum(t.configs_of(n).size for n in t.jobs) == k
    # host memory: a worker's base need plus its offloaded states
    for name in t.jobs:
        model = get_model(name[2:])
        for i in t.configs_of(name):
            expected = t.gpus[i] * (HOST_BASE_GIB_PER_GPU + estimate_memory(model, t.plans[i]).host_gib_per_gpu)
            assert t.mem_gib[i] == pytest.approx(expected, rel=1e-12)
    with pytest.raises(UnknownNameError):
        t.configs_of("nobody")
    with pytest.raises(ValueError):
        t.throughput[0] = 1.0  # read-only


def test_table_keeps_the_pareto_front_of_each_gpu_cpu_pair() -> None:
    t = small_table()
    for name in t.jobs:
        perf = perf_of(name[2:])
        idx = t.configs_of(name)
        for g, cpus in sorted({(int(t.gpus[i]), int(t.cpus[i])) for i in idx}):
            rows = [i for i in idx if t.gpus[i] == g and t.cpus[i] == cpus]
            pl = packed_placement(g, 4)
            host = tuple(800.0 - n * HOST_BASE_GIB_PER_GPU for n in pl)
            plans = enumerate_plans(perf.model, pl, A800, host)
            thr = perf.throughputs([(p, pl, cpus / g) for p in plans])
            # the best-throughput plan of each (g, CPUs) is kept
            assert max(t.throughput[i] for i in rows) == pytest.approx(thr.max(), rel=1e-12)
            # kept rows do not dominate each other and are sorted by throughput, best first
            for a in rows:
                for b in rows:
                    if a != b:
                        assert not (t.throughput[a] >= t.throughput[b] and t.mem_gib[a] <= t.mem_gib[b])
            assert list(t.throughput[rows]) == sorted(t.throughput[rows], reverse=True)
            # every dropped plan is dominated by a kept one
            for p, x in zip(plans, thr):
                m = g * (HOST_BASE_GIB_PER_GPU + estimate_memory(perf.model, p).host_gib_per_gpu)
                assert any(t.throughput[i] >= x * (1 - 1e-12) and t.mem_gib[i] <= m + 1e-9 for i in rows)


def test_pareto_front_on_hand_data() -> None:
    thr = [10.0, 12.0, 12.0, 8.0, 11.0, 9.0]
    mem = [5.0, 20.0, 30.0, 1.0, 20.0, 5.0]
    # 12/20 best; 12/30 dominated; 11/20 dominated by 12/20; 10/5 kept; 9/5 dominated; 8/1 kept
    assert pareto_front(thr, mem) == [1, 0, 3]
    assert pareto_front([5.0, 5.0], [1.0, 1.0]) == [0]


def test_json_round_trip() -> None:
    t = small_table()
    text = json.dumps(t.to_dict())
    back = CoefficientTable.from_dict(json.loads(text))
    assert back == t
    assert back.to_dict() == t.to_dict()


def _fields(t: CoefficientTable) -> dict:
    return {f: getattr(t, f) for f in ("jobs", "job_index", "plans", "gpus_per_node", "gpu_type", "gpus", "cpus",
                                       "mem_gib", "throughput")}


def test_table_validation_names_the_field() -> None:
    d = small_table().to_dict()
    bad = dict(d, throughput=d["throughput"][:-1])
    with pytest.raises(ValidationError, match="throughput"):
        CoefficientTable.from_dict(bad)
    bad = dict(d, job_index=[len(d["jobs"])] + d["job_index"][1:])
    with pytest.raises(ValidationError, match="job_index"):
        CoefficientTable.from_dict(bad)
    bad = dict(d, gpus=[d["gpus"][0] + 1] + d["gpus"][1:])
    with pytest.raises(ValidationError, match="gpus"):
        CoefficientTable.from_dict(bad)
    with pytest.raises(ValidationError, match=r"row 0: gpus .* must agree"):
        CoefficientTable.from_dict(bad)
    shapes = [list(x) for x in d["gpus_per_node"]]
    bad = dict(d, gpus_per_node=[[shapes[0][0] + 1] + shapes[0][1:]] + shapes[1:])
    with pytest.raises(ValidationError, match=r"row 0: .* must agree"):
        CoefficientTable.from_dict(bad)
    bad = dict(d, gpus_per_node=[[0]] + shapes[1:])
    with pytest.raises(ValidationError, match=r"gpus_per_node\[0\]"):
        CoefficientTable.from_dict(bad)
    t = small_table()
    rows_of_first = int(np.count_nonzero(t.job_index == 0))
    for cur, shown in (([len(t)] + [-1] * (len(t.jobs) - 1), len(t)), ([-2] + [-1] * (len(t.jobs) - 1), -2)):
        with pytest.raises(ValidationError, match=rf"current_row of job '{t.jobs[0]}' .* got {shown}"):
            CoefficientTable(**{**_fields(t), "reference_throughput": np.ones(len(t.jobs)), "current_row": np.array(cur)})
    if len(t.jobs) > 1:  # a row of another job
        cur = [rows_of_first] + [-1] * (len(t.jobs) - 1)
        with pytest.raises(ValidationError, match=rf"current_row of job '{t.jobs[0]}'"):
            CoefficientTable(**{**_fields(t), "reference_throughput": np.ones(len(t.jobs)), "current_row": np.array(cur)})
    ok = [0] + [-1] * (len(t.jobs) - 1)
    assert CoefficientTable(**{**_fields(t), "reference_throughput": np.ones(len(t.jobs)),
                               "current_row": np.array(ok)}).current_row[0] == 0
    bad = dict(d, cpus=[1.5] + d["cpus"][1:])
    with pytest.raises(ValidationError, match="cpus"):
        CoefficientTable.from_dict(bad)
    bad = dict(d, jobs=d["jobs"][:1] * len(d["jobs"]))
    with pytest.raises(ValidationError, match="jobs"):
        CoefficientTable.from_dict(bad)
    with pytest.raises(ValidationError, match="mem_gib"):
        CoefficientTable.from_dict({k: v for k, v in d.items() if k != "mem_gib"})
    with pytest.raises(ValidationError, match="gpus_per_node"):
        CoefficientTable(jobs=("a",), job_index=np.zeros(1, dtype=int), plans=(ExecutionPlan(dp=1),),
                         gpus_per_node=(), gpu_type=("A800",), gpus=np.ones(1, dtype=int),
                         cpus=np.ones(1, dtype=int), mem_gib=np.ones(1), throughput=np.ones(1))
    empty = CoefficientTable(jobs=("a",), job_index=np.zeros(0, dtype=int), plans=(), gpus_per_node=(),
                             gpu_type=(), gpus=np.zeros(0, dtype=int), cpus=np.zeros(0, dtype=int),
                             mem_gib=np.zeros(0), throughput=np.zeros(0))
    assert len(empty) == 0 and empty.configs_of("a").size == 0
    assert CoefficientTable.from_dict(json.loads(json.dumps(empty.to_dict()))) == empty


def test_caps_and_cpu_options() -> None:
    # nodes with 6 CPUs per GPU only offer 2 and 4 CPUs per GPU
    node_cpus = Cluster("six", tuple(Node(f"n{i}", "A800", 4, 24, 800.0) for i in range(2)), (A800,),
                        150.0, 80.0, 20.0)
    t = build_coefficient_table([("b", perf_of("bert", node_cpus))], node_cpus, "A800")
    assert set((t.cpus // t.gpus).tolist()) == {2, 4}
    t = build_coefficient_table([("b", perf_of("bert")), ("v", perf_of("vit"))], SMALL, "A800",
                                max_gpus={"b": 2})
    assert t.gpus[t.configs_of("b")].max() == 2 and t.gpus[t.configs_of("v")].max() == 8
    t = build_coefficient_table([("b", perf_of("bert"))], SMALL, "A800", max_gpus=4,
                                cpus_per_gpu_options=(1, 2))
    assert set(t.gpus.tolist()) == {1, 2, 4} and set((t.cpus // t.gpus).tolist()) == {1, 2}
    with pytest.raises(ValidationError, match="nobody"):
        build_coefficient_table([("b", perf_of("bert"))], SMALL, "A800", max_gpus={"nobody": 2})
    with pytest.raises(ValidationError, match="unique"):
        build_coefficient_table([("b", perf_of("bert")), ("b", perf_of("vit"))], SMALL, "A800")
    with pytest.raises(ValidationError, match="CPU option"):
        build_coefficient_table([("b", perf_of("bert"))], SMALL, "A800", cpus_per_gpu_options=(16,))
    with pytest.raises(ValidationError, match="A40"):
        build_coefficient_table([("b", perf_of("bert"))], SMALL, "A40")


def test_configuration_count_stays_small_on_the_rubick_cluster() -> None:
    cluster = get_cluster("a800-8x8")
    jobs = [(m, perf_of(m, cluster)) for m in ("bert", "llama7")]
    t = build_coefficient_table(jobs, cluster, "A800")
    for name in t.jobs:
        assert 0 < t.configs_of(name).size < 100
    assert set(t.gpus.tolist()) <= set(candidate_gpu_counts(8, 64))


def test_a_table_without_rows_takes_current_rows() -> None:
    """No row at all (the one job fits nowhere): ``current_row`` -1 is valid and any other row is not
    (it used to index the empty ``job_index``: IndexError in every kind's table)."""
    fields = dict(jobs=("a",), job_index=np.zeros(0, dtype=int), plans=(), gpus_per_node=(), gpu_type=(),
                  gpus=np.zeros(0, dtype=int), cpus=np.zeros(0, dtype=int), mem_gib=np.zeros(0),
                  throughput=np.zeros(0), reference_throughput=np.ones(1))
    assert CoefficientTable(**fields, current_row=np.array([-1])).current_row[0] == -1
    with pytest.raises(ValidationError, match="current_row of job 'a' must be -1 or one of its rows, got 0"):
        CoefficientTable(**fields, current_row=np.array([0]))
