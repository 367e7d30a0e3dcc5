"""Trace loaders (optsched.sim.traces) and the synthetic workload (optsched.sim.traces.synthetic).

Small CSVs are written into tmp_path with hand-checked expectations; the public traces in
``../shared/data`` are only read, by tests that skip when the folder is absent."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import numpy as np
import pytest

from optsched.core import ValidationError, ZeroMode, a800_cluster, get_model
from optsched.core.catalog import NO_3D_MODELS
from optsched.core.job import Job
from optsched.core.pool import gpu_pool
from optsched.perf.defaults import default_performance_model
from optsched.perf.measurements import read_placements_csv
from optsched.sim.traces import (RawJob, Trace, allowed_plans, assign_jobs, detect_format, load_itp_csv,
                                 load_philly_csv, load_trace, load_workload_csv)
from optsched.sim.traces.synthetic import (DEFAULT_MAX_DURATION_S, DEFAULT_MIN_DURATION_S, PHILLY_DURATION_QUANTILES,
                                           PHILLY_GPU_COUNTS, offered_load, sample_philly_jobs, synthetic_trace)

from helpers import shared_data_dir

CLUSTER = a800_cluster()  # 8 nodes x 8 A800
WORKLOAD_HEADER = "name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla\n"
PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
ITP_HEADER = "job_id,submission_time,duration,num_gpu\n"


def truth(m: str, g: str, p, gpn, c) -> float:
    """The simulator's kind of ground truth: the built-in analytical model."""
    return default_performance_model(m, CLUSTER, g).iteration_time(p, gpn, c)


def half_second(m, g, p, gpn, c) -> float:
    """A stub ground truth: every iteration takes 0.5 s (for hand arithmetic)."""
    return 0.5


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def shared(*parts: str) -> Path:
    p = shared_data_dir().joinpath(*parts)
    if not p.exists():
        pytest.skip(f"public data {p} is absent (../shared/data is not part of the repository)")
    return p


def rejected(fn, *args, **kwargs) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------------------------- workload

def test_workload_rows_become_jobs_with_measured_table_plans(tmp_path):
    p = write(tmp_path, WORKLOAD_HEADER
              + "t5-1,30,3312,t5,4,32,0,zero-offload,8109,0\n"
              + "vit-0,0,3163.09,vit,2,16,0,ga,37239,0\n"
              + "llama30-2,30,142.2,llama30,48,384,1.25,344,64,0\n")
    tr = load_workload_csv(p, CLUSTER)
    assert [j.name for j in tr.jobs] == ["vit-0", "llama30-2", "t5-1"]  # (submit_time, name) order
    vit, llama, t5 = tr.jobs
    assert (vit.submit_time, vit.total_iterations, vit.requested_gpus, vit.requested_cpus) == (0.0, 37239, 2, 16)
    assert vit.requested_plan.family == "ga" and vit.requested_plan.ga_steps == 2 and vit.requested_plan.dp == 2
    assert t5.requested_plan.zero is ZeroMode.OFFLOAD and t5.requested_plan.gc  # T5 >= 1B: ZeRO-Offload+GC
    assert (llama.requested_plan.pp, llama.requested_plan.tp, llama.requested_plan.dp) == (3, 4, 4)
    assert all(j.tenant == "default" and not j.guaranteed for j in tr.jobs) and tr.quotas == ()
    assert tr.name == "trace" and tr.source == str(p)
    # the same codes read as measurement rows give equal plans
    meas = write(tmp_path, "exec_plan,placement,iter_time\nzero-offload,4,1.0\n", "t5.csv")
    assert read_placements_csv(meas, get_model("t5"))[0].plan == t5.requested_plan


def test_guaranteed_row_gives_tenants_a_and_b_with_quota_of_the_cluster(tmp_path):
    p = write(tmp_path, WORKLOAD_HEADER + "a,0,10,vit,2,16,0,zero-dp,5,1\nb,1,10,bert,4,32,0,ga,6,0\n")
    tr = load_workload_csv(p, CLUSTER)
    assert [(j.name, j.tenant, j.guaranteed) for j in tr.jobs] == [("a", "A", True), ("b", "B", False)]
    assert tr.quotas == (("A", 64),) and tr.quota_map == {"A": 64}
    small = load_workload_csv(p, a800_cluster(2, 8))
    assert small.quotas == (("A", 16),)
    custom = load_workload_csv(p, CLUSTER, tenant_of=lambda name, g: f"team-{name}", quotas={"team-a": 8})
    assert [j.tenant for j in custom.jobs] == ["team-a", "team-b"] and custom.quotas == (("team-a", 8),)
    no_quota = load_workload_csv(p, CLUSTER, tenant_of=lambda name, g: "x")
    assert no_quota.quotas == ()


@pytest.mark.parametrize("row, rule", [
    ("a,x,10,vit,2,16,0,ga,5,0", "submission_time 'x' is not a number"),
    ("a,-1,10,vit,2,16,0,ga,5,0", "submission_time is a time and must be >= 0"),
    ("a,0,-5,vit,2,16,0,ga,5,0", "duration is a duration and must be >= 0"),
    ("a,0,10,vit,0,16,0,ga,5,0", "num_gpus is 0: a job needs at least one GPU"),
    ("a,0,10,gpt9,2,16,0,ga,5,0", "unknown model 'gpt9'"),
    ("a,0,10,vit,2,16,0,9x9,5,0", "unknown plan code '9x9'"),
    ("a,0,10,llama7,8,64,0,244,5,0", "needs 32 GPUs but the placement has 8"),
    ("a,0,10,vit,2,16,0,ga,0,0", "steps must be >= 1"),
    ("a,0,10,vit,2,16,0,ga,5,2", "is_sla must be 0 or 1"),
    ("a,0,10,vit,2,16,0,ga,5.5,0", "steps must be an integer"),
    ("a,0,10,vit,128,16,0,ga,5,0", "exceeds the 64 A800 GPUs"),
    ("a,0,10,llama30,4,32,0,zero-dp,5,0", "needs 255.5 GiB per GPU, A800 has 80 GiB"),
    ("a,0,10,gpt2,4,32,0,141,5,0", "tp=4 does not divide the 25 attention heads"),
    ("a,0,10,vit,2,16,0", "fields but the header has 10 columns"),
])
def test_malformed_workload_row_is_rejected_with_its_row_number(tmp_path, row, rule):
    p = write(tmp_path, WORKLOAD_HEADER + "ok,0,10,vit,2,16,0,ga,5,0\n" + row + "\n")
    msg = rejected(load_workload_csv, p, CLUSTER)
    assert f"{p} row 2 (line 3)" in msg and rule in msg, msg


def test_plan_that_cannot_span_small_nodes_is_a_topology_error(tmp_path):
    p = write(tmp_path, WORKLOAD_HEADER + "a,0,10,llama7,8,64,0,181,5,0\n")
    assert load_workload_csv(p, CLUSTER).jobs[0].requested_plan.tp == 8  # one 8-GPU node: fine
    msg = rejected(load_workload_csv, p, a800_cluster(4, 4))  # packed on (4, 4)
    assert "row 1" in msg and "tp=8 exceeds the 4 GPU(s) of the smallest node" in msg, msg


def test_infeasible_plan_policies(tmp_path, caplog):
    p = write(tmp_path, WORKLOAD_HEADER + "a,0,10,vit,2,16,0,ga,5,0\nb,5,10,llama30,4,32,0,zero-dp,5,0\n")
    assert 'infeasible_plans="unset"' in rejected(load_workload_csv, p, CLUSTER)
    with caplog.at_level(logging.WARNING, logger="optsched.sim.traces"):
        unset = load_workload_csv(p, CLUSTER, infeasible_plans="unset")
    assert unset.jobs[1].name == "b" and unset.jobs[1].requested_plan is None
    assert "row 2" in caplog.text and "255.5 GiB" in caplog.text
    assert [j.name for j in load_workload_csv(p, CLUSTER, infeasible_plans="skip").jobs] == ["a"]
    assert "infeasible_plans must be one of" in rejected(load_workload_csv, p, CLUSTER, infeasible_plans="no")


def test_duplicate_names_blank_lines_and_several_errors(tmp_path):
    p = write(tmp_path, WORKLOAD_HEADER + "a,0,10,vit,2,16,0,ga,5,0\n\n"
              + "a,1,10,vit,2,16,0,ga,5,0\nc,1,10,vit,zero,16,0,ga,5,0\n")
    msg = rejected(load_workload_csv, p, CLUSTER)
    assert "2 invalid row(s)" in msg
    assert "row 2 (line 4): duplicate job name 'a' (first used in row 1)" in msg  # blank line not a row
    assert "row 3 (line 5): num_gpus 'zero' is not a number" in msg


def test_missing_column_empty_file_and_header_only(tmp_path):
    p = write(tmp_path, "name,submission_time,duration,application,num_gpus,exec_plan,steps,is_sla\n"
                        "a,0,1,vit,1,ga,1,0\n")
    assert "missing column(s) num_cpus" in rejected(load_workload_csv, p, CLUSTER)
    assert "empty file" in rejected(load_workload_csv, write(tmp_path, "\n\n", "e.csv"), CLUSTER)
    assert "no data rows" in rejected(load_workload_csv, write(tmp_path, WORKLOAD_HEADER, "h.csv"), CLUSTER)
    assert "cannot read file" in rejected(load_workload_csv, tmp_path / "absent.csv", CLUSTER)


# --------------------------------------------------------------------------------------------- Philly / ITP

def test_philly_submit_times_names_and_iterations_by_hand(tmp_path):
    p = write(tmp_path, PHILLY_HEADER
              + "2017-10-04 20:00:10,100.0,1,100.0,vc1\n"
              + "2017-10-04 20:00:00,7.2,2,14.4,vc1\n"
              + "2017-10-04 21:00:00,0.0,1,0.0,vc2\n\n")  # unsorted, ends with an empty line
    tr = load_philly_csv(p, CLUSTER, seed=1, iteration_time=half_second, models=["vit"])
    assert [(j.name, j.submit_time) for j in tr.jobs] == [("philly-2", 0.0), ("philly-1", 10.0),
                                                          ("philly-3", 3600.0)]
    # ceil(7.2 / 0.5) = 15, ceil(100 / 0.5) = 200, duration 0 -> 1 iteration
    assert [j.total_iterations for j in tr.jobs] == [15, 200, 1]
    assert [(j.requested_gpus, j.requested_cpus, j.model) for j in tr.jobs] == [(2, 16, "vit"), (1, 8, "vit"),
                                                                                 (1, 8, "vit")]
    assert all(j.requested_plan in allowed_plans(get_model("vit"), j.requested_gpus, gpu_pool(CLUSTER))
               for j in tr.jobs)
    # with the analytical model: iterations = ceil(duration / T_iter(plan on the packed GPUs, 8 CPUs/GPU))
    tr2 = load_philly_csv(p, CLUSTER, seed=1, iteration_time=truth, models=["gpt2"], plan_choice="best")
    pm = default_performance_model("gpt2", CLUSTER, "A800")
    j = tr2.jobs[1]
    t = pm.iteration_time(j.requested_plan, (1,), 8.0)
    assert j.total_iterations == math.ceil(100.0 / t)
    assert t == min(pm.iteration_time(q, (1,), 8.0) for q in allowed_plans(get_model("gpt2"), 1, gpu_pool(CLUSTER)))


@pytest.mark.parametrize("model, gpus, new_gpus", [
    ("t5", 3, 4),      # batch 16 not divisible by 3 -> smallest feasible above
    ("bert", 64, 32),  # batch 32 < 64 GPUs and no TP/PP for bert -> largest feasible below
    ("vit", 128, 64),  # more than the cluster -> largest feasible below
])
def test_infeasible_gpu_count_moves_to_nearest_feasible_keeping_gpu_hours(tmp_path, model, gpus, new_gpus):
    p = write(tmp_path, PHILLY_HEADER + f"2017-10-04 20:00:00,1200,{gpus},0,vc\n")
    job = load_philly_csv(p, CLUSTER, seed=0, iteration_time=half_second, models=[model]).jobs[0]
    assert job.requested_gpus == new_gpus and job.requested_plan.num_gpus == new_gpus
    assert job.total_iterations == math.ceil(1200 * gpus / new_gpus / 0.5)  # GPU-hours kept
    assert job.requested_cpus == 8 * new_gpus
    if model in NO_3D_MODELS:
        assert not job.requested_plan.is_3d


def test_window_and_max_jobs(tmp_path):
    p = write(tmp_path, PHILLY_HEADER + "".join(f"2017-10-04 20:0{i}:00,60,1,60,vc\n" for i in range(6)))
    tr = load_philly_csv(p, CLUSTER, seed=0, iteration_time=half_second, start="2017-10-04 20:01:00",
                         end="2017-10-04 20:05:00", max_jobs=3)
    assert [(j.name, j.submit_time) for j in tr.jobs] == [("philly-2", 0.0), ("philly-3", 60.0),
                                                          ("philly-4", 120.0)]
    assert "no job left" in rejected(load_philly_csv, p, CLUSTER, seed=0, iteration_time=half_second,
                                     start="2018-01-01 00:00:00")
    assert "start must be a timestamp" in rejected(load_philly_csv, p, CLUSTER, seed=0,
                                                   iteration_time=half_second, start="yesterday")


@pytest.mark.parametrize("row, rule", [
    ("2017-10-04 20:00:00,60,0,0,vc", "num_gpus is 0: a job needs at least one GPU"),
    ("2017-13-04 20:00:00,60,1,60,vc", "timestamp '2017-13-04 20:00:00' is not YYYY-MM-DD HH:MM:SS"),
    ("2017-10-04 20:00:00,-3,1,60,vc", "duration is a duration and must be >= 0"),
    ("2017-10-04 20:00:00,abc,1,60,vc", "duration 'abc' is not a number"),
    ("2017-10-04 20:00:00,60,1.5,60,vc", "num_gpus must be a positive integer"),
])
def test_malformed_philly_row_rejected_or_skipped(tmp_path, caplog, row, rule):
    p = write(tmp_path, PHILLY_HEADER + "2017-10-04 20:00:00,60,1,60,vc\n" + row + "\n"
              + "2017-10-04 20:00:05,60,1,60,vc\n")
    msg = rejected(load_philly_csv, p, CLUSTER, seed=0, iteration_time=half_second)
    assert f"{p} row 2 (line 3)" in msg and rule in msg, msg
    with caplog.at_level(logging.WARNING, logger="optsched.sim.traces"):
        tr = load_philly_csv(p, CLUSTER, seed=0, iteration_time=half_second, skip_invalid=True)
    assert [j.name for j in tr.jobs] == ["philly-1", "philly-3"]
    assert "skipped 1 invalid row(s)" in caplog.text


def test_itp_rows_names_and_errors(tmp_path):
    p = write(tmp_path, ITP_HEADER + "aa,5000,600,1\nbb,5030,90,8\n")
    tr = load_itp_csv(p, CLUSTER, seed=0, iteration_time=half_second, models=["roberta"])
    assert [(j.name, j.submit_time, j.requested_gpus, j.total_iterations) for j in tr.jobs] == [
        ("itp-aa", 0.0, 1, 1200), ("itp-bb", 30.0, 8, 180)]
    assert [j.name for j in load_itp_csv(p, CLUSTER, seed=0, iteration_time=half_second, start=5010).jobs] \
        == ["itp-bb"]
    dup = write(tmp_path, ITP_HEADER + "aa,0,600,1\naa,10,60,1\n", "dup.csv")
    assert "row 2 (line 3): duplicate job name 'itp-aa'" in rejected(
        load_itp_csv, dup, CLUSTER, seed=0, iteration_time=half_second)
    zero = write(tmp_path, ITP_HEADER + "aa,0,600,1\nbb,10,60,0\n", "zero.csv")
    assert "row 2 (line 3): num_gpu is 0" in rejected(load_itp_csv, zero, CLUSTER, seed=0,
                                                      iteration_time=half_second)


def test_bad_iteration_time_and_options_are_reported(tmp_path):
    p = write(tmp_path, ITP_HEADER + "aa,0,600,1\n")
    msg = rejected(load_itp_csv, p, CLUSTER, seed=0, iteration_time=lambda *a: 0.0)
    assert "row 1" in msg and "must be a positive number of seconds" in msg
    assert "plan_choice must be one of" in rejected(load_itp_csv, p, CLUSTER, seed=0,
                                                    iteration_time=half_second, plan_choice="fast")
    assert "unknown model 'gpt9'" in rejected(load_itp_csv, p, CLUSTER, seed=0, iteration_time=half_second,
                                              models=["gpt9"])
    assert "seed must be >= 0" in rejected(load_itp_csv, p, CLUSTER, seed=-1, iteration_time=half_second)


def test_same_seed_same_trace_other_seed_other_models(tmp_path):
    p = write(tmp_path, PHILLY_HEADER + "".join(f"2017-10-04 20:{i:02d}:00,600,{1 << (i % 4)},0,vc\n"
                                                for i in range(40)))
    a = load_philly_csv(p, CLUSTER, seed=7, iteration_time=truth)
    b = load_philly_csv(p, CLUSTER, seed=7, iteration_time=truth)
    c = load_philly_csv(p, CLUSTER, seed=8, iteration_time=truth)
    assert a == b
    assert [j.model for j in a.jobs] != [j.model for j in c.jobs]
    assert len({j.model for j in a.jobs}) >= 5  # uniformly over seven models: 40 draws hit most
    best = load_philly_csv(p, CLUSTER, seed=7, iteration_time=truth, plan_choice="best")
    assert [j.model for j in best.jobs] == [j.model for j in a.jobs]  # models do not depend on plan_choice


def test_assign_jobs_reports_a_model_that_fits_nowhere():
    tiny = a800_cluster(1, 1)  # one GPU: llama30 needs several
    rng = np.random.default_rng(0)
    jobs = assign_jobs([RawJob("j", 0.0, 60.0, 1)], tiny, rng, half_second, models=["vit"])
    assert jobs[0].requested_gpus == 1
    from optsched.core.catalog import A800_EFFECTIVE_BANDWIDTH, GPU_TYPES
    from optsched.core.hardware import Cluster, Node
    t4 = Cluster("t4", (Node("n0", "T4", 1, 8, 64.0),), (GPU_TYPES["T4"],), **A800_EFFECTIVE_BANDWIDTH)
    msg = rejected(assign_jobs, [RawJob("j", 0.0, 60.0, 1)], t4, rng, half_second, models=["llama30"])
    assert "model 'llama30' has no feasible plan on any GPU count" in msg


def test_trace_value_object_sorts_and_validates():
    j1 = Job("b", "vit", 1, 5, submit_time=3.0)
    j2 = Job("a", "vit", 1, 5, submit_time=3.0)
    j3 = Job("c", "vit", 1, 5, submit_time=1.0)
    tr = Trace("t", (j1, j2, j3), (("B", 4), ("A", 8)))
    assert [j.name for j in tr.jobs] == ["c", "a", "b"] and tr.quotas == (("A", 8), ("B", 4)) and len(tr) == 3
    assert "used twice" in rejected(Trace, "t", (j1, j1))
    assert "two quotas" in rejected(Trace, "t", (j1,), (("A", 1), ("A", 2)))
    assert "GPUs must be >= 0" in rejected(Trace, "t", (j1,), (("A", -1),))


# --------------------------------------------------------------------------------------------- synthetic

def test_calibrated_gpu_counts_and_durations():
    gpus, dur = sample_philly_jobs(np.random.default_rng(0), 40_000)
    total = sum(PHILLY_GPU_COUNTS.values())
    for g in (1, 2, 4, 8):
        assert abs(np.mean(gpus == g) - PHILLY_GPU_COUNTS[g] / total) < 0.006, g
    assert set(np.unique(gpus)) <= set(PHILLY_GPU_COUNTS)
    assert dur.min() >= DEFAULT_MIN_DURATION_S and dur.max() <= DEFAULT_MAX_DURATION_S
    single_median = PHILLY_DURATION_QUANTILES["single"][6]  # level 0.5
    assert abs(np.median(dur[gpus == 1]) / single_median - 1) < 0.05
    multi_median = PHILLY_DURATION_QUANTILES["multi"][6]
    assert abs(np.median(dur[gpus > 1]) / multi_median - 1) < 0.25  # ~2,700 multi-GPU draws
    assert abs(np.mean(dur[gpus == 1] <= 3754) - 0.8) < 0.01  # the 0.8 quantile of 1-GPU jobs


def test_synthetic_trace_offered_load_matches_request():
    it = truth
    loads = []
    for seed in range(4):
        tr = synthetic_trace(CLUSTER, num_jobs=200, seed=seed, load=0.7, iteration_time=it)
        loads.append(offered_load(tr, it, CLUSTER))
        assert tr.jobs[0].submit_time == 0.0
    assert all(abs(x / 0.7 - 1) < 0.3 for x in loads), loads  # 1/sqrt(200) = 7% per trace
    assert abs(np.mean(loads) / 0.7 - 1) < 0.15, loads
    hi = synthetic_trace(CLUSTER, num_jobs=200, seed=0, load=1.4, iteration_time=it)
    lo = synthetic_trace(CLUSTER, num_jobs=200, seed=0, load=0.7, iteration_time=it)
    # same jobs, arrivals twice as dense
    assert hi.jobs[-1].submit_time == pytest.approx(lo.jobs[-1].submit_time / 2)


def test_synthetic_trace_gpu_counts_follow_the_calibration():
    big = a800_cluster(16, 8)  # 128 GPUs
    tr = synthetic_trace(big, num_jobs=1000, seed=1, models=["vit"], iteration_time=half_second)
    share_1 = np.mean([j.requested_gpus == 1 for j in tr.jobs])
    assert abs(share_1 - PHILLY_GPU_COUNTS[1] / sum(PHILLY_GPU_COUNTS.values())) < 0.03
    # vit (batch 64, no TP/PP) runs on powers of two only: 12 -> 16 and 24 -> 32 GPUs, 128 -> 64
    assert {j.requested_gpus for j in tr.jobs} <= {1, 2, 4, 8, 16, 32, 64}


def test_synthetic_trace_is_deterministic_and_multi_tenant():
    a = synthetic_trace(CLUSTER, seed=5)  # default: 200 jobs, built-in analytical model
    assert len(a) == 200 and a == synthetic_trace(CLUSTER, seed=5)
    assert [j.model for j in a.jobs] != [j.model for j in synthetic_trace(CLUSTER, seed=6).jobs]
    assert a.quotas == () and {j.tenant for j in a.jobs} == {"default"}
    assert [j.name for j in a.jobs] == sorted(j.name for j in a.jobs)  # syn-000 ... in arrival order
    mt = synthetic_trace(CLUSTER, seed=5, guaranteed_fraction=0.5)
    share = np.mean([j.guaranteed for j in mt.jobs])
    assert 0.35 < share < 0.65 and mt.quotas == (("A", 64),)
    assert all(j.tenant == ("A" if j.guaranteed else "B") for j in mt.jobs)
    for bad in ({"load": 0}, {"num_jobs": 0}, {"guaranteed_fraction": 1.5}, {"max_duration": 1.0}):
        with pytest.raises(ValidationError):
            synthetic_trace(CLUSTER, **bad)


# --------------------------------------------------------------------------------------------- dispatch

def test_load_trace_dispatches_on_the_header_not_the_name(tmp_path):
    wl = write(tmp_path, WORKLOAD_HEADER + "a,0,10,vit,2,16,0,ga,5,0\n", "philly.csv")
    ph = write(tmp_path, "\ufeff" + PHILLY_HEADER + "2017-10-04 20:00:00,60,1,60,vc\n", "workload.txt")
    itp = write(tmp_path, ITP_HEADER + "aa,0,600,1\n", "data")
    assert [detect_format(x) for x in (wl, ph, itp)] == ["workload", "philly", "itp"]
    assert load_trace(wl, CLUSTER, seed=0).jobs[0].name == "a"
    assert load_trace(ph, CLUSTER, seed=0, iteration_time=half_second).jobs[0].name == "philly-1"
    assert load_trace(itp, CLUSTER, seed=0, iteration_time=half_second, models=["bert"]).jobs[0].model == "bert"
    syn = load_trace("synthetic", CLUSTER, seed=2, iteration_time=half_second, num_jobs=20)
    assert len(syn) == 20 and syn.source.startswith("synthetic(seed=2")
    odd = write(tmp_path, "a,b,c\n1,2,3\n", "odd.csv")
    msg = rejected(load_trace, odd, CLUSTER, seed=0)
    assert "unrecognised trace header ['a', 'b', 'c']" in msg
    assert "philly: timestamp,duration,num_gpus" in msg and "itp: job_id,submission_time,duration,num_gpu" in msg
    assert "workload: name,submission_time" in msg
    assert "unknown option(s) models" in rejected(load_trace, wl, CLUSTER, seed=0, models=["vit"])
    assert "neither a file nor a built-in trace" in rejected(load_trace, tmp_path / "nope.csv", CLUSTER, seed=0)


# --------------------------------------------------------------------------------------------- public data

def test_real_406_job_workloads_load():
    base = load_workload_csv(shared("morphling", "workloads", "workload-base.csv"), CLUSTER)
    mt = load_workload_csv(shared("morphling", "workloads", "workload-mt.csv"), CLUSTER)
    assert len(base) == len(mt) == 406
    assert sum(j.guaranteed for j in mt.jobs) == 194 and mt.quotas == (("A", 64),)
    assert {j.tenant for j in mt.jobs if not j.guaranteed} == {"B"}
    assert all(j.requested_plan is not None for j in base.jobs)
    assert len(load_workload_csv(shared("morphling", "workloads", "naive.csv"), CLUSTER)) == 10


def test_real_bp_workload_has_five_plans_the_memory_model_rejects():
    p = shared("morphling", "workloads", "workload-bp.csv")
    msg = rejected(load_workload_csv, p, CLUSTER)
    assert "5 invalid row(s)" in msg
    for row in (74, 110, 170, 212, 339):
        assert f"row {row} (line {row + 1}): exec_plan 'zero-dp' on 2 GPUs" in msg
    bp = load_workload_csv(p, CLUSTER, infeasible_plans="unset")
    assert len(bp) == 406 and sum(j.requested_plan is None for j in bp.jobs) == 5


def test_real_philly_busiest_12h_loads_and_matches_the_full_log_window():
    p = shared("traces", "philly", "philly_busiest12h.csv")
    tr = load_philly_csv(p, CLUSTER, seed=0, iteration_time=truth)
    assert len(tr) == 3234  # no row is invalid (the file has no zero-GPU row)
    assert tr.jobs[0].submit_time == 0.0 and tr.jobs[-1].submit_time <= 12 * 3600
    full = load_philly_csv(shared("traces", "philly", "philly.csv"), CLUSTER, seed=0, iteration_time=truth,
                           start="2017-10-04 20:41:55", end="2017-10-05 08:41:55")
    assert sorted(j.submit_time for j in full.jobs) == sorted(j.submit_time for j in tr.jobs)


def test_real_itp_cluster_loads():
    tr = load_trace(shared("traces", "microsoft_itp_2021", "cluster01.csv"), CLUSTER, seed=0, iteration_time=truth)
    assert len(tr) == 1595 and all(j.name.startswith("itp-") for j in tr.jobs)
