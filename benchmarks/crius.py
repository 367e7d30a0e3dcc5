"""Crius (issue "Crius: Cell estimator on heterogeneous GPUs and the Cell-selection round", Must show):
the Cell estimator's accuracy, Cell-guided tuning, round times at 1,280 GPUs and a trace-driven
simulation against the baselines of Crius Sec. 8.1.

    python benchmarks/crius.py [--quick] [--sections estimate tuning round constants sim] [--time-limit 60]
                               [--sim-jobs 1500] [--sim-load 1.5] [--sim-exact-limit 2] [--seed 0]

1. **estimate** (Crius Fig. 12a, paper: 93.4% average, 90.5% worst): for every Cell of the
   configurations below (each model size with a GPU count growing with it, as the paper's figure
   does, on the four GPU types of Table 1, every stage count), the *sampling accuracy*
   ``1 - (T_assembled - T_opt) / T_opt`` of the best assembled plan (``2^Ns`` plans of data-only and
   tensor-only stages) against the full exploration's optimum, both in the estimator's cost model;
   over all Cells and over the Cell a scheduler picks per (model, type, GPUs) (best estimated stage
   count). Also the *prediction accuracy* ``1 - |T_est - T_true| / T_true`` of the estimate against
   the simulator's ground truth for the same plan (the paper's own definition).
2. **tuning** (Fig. 13, paper: 96.2% accuracy, 5.48x fewer plans): Cell-guided tuning against full
   exploration on the picked Cells, in the cost model and in the ground truth (the tuner measures the
   truth in the half spaces the *estimate* favours), and how many plans each explores (product over
   stages) and stage configurations each profiles (sum over stages).
3. **round** (target: the whole round proven optimal in <= 5 s at 300 queued jobs; Crius Sec. 8.7
   reports 0.88-5.98 s per job for its search): generated rounds on ``crius-sim-1280`` with 100, 300
   and 1,000 queued jobs and about 150 running; the table (cold: every Cell estimated by a fresh
   estimator; warm: the process's estimator, as in every round after the first), Algorithm 1 and the
   exact policy's whole call (table, heuristic, CP-SAT), its status, gap, model size, and the exact /
   heuristic objectives.
4. **constants**: the constants of our own in Algorithm 1's ScaleResource (the paper does not say how
   the choices are enumerated): ``BRANCHING`` (moves tried per search step) and ``SCALED_CELLS``
   (candidate Cells searched per job), swept on generated rounds (``gen-round --kind crius --jobs J
   --seed S``: J = 100, seeds 0-2, and J = 300, seed 0; ``--quick``: J = 100 only), printing
   Algorithm 1's objective over the exact optimum (the round's objective, by default the paper's raw
   cluster throughput, samples/s) and its time.
5. **sim** (Fig. 17, paper: up to 81.3% / 80.1% / 66.4% / 75.8% lower average JCT than FCFS / Gandiva /
   Gavel / ElasticFlow, 1.54x average throughput): a Philly-derived trace (``philly_busiest12h.csv``,
   the first ``--sim-jobs`` rows, arrivals scaled to ``--sim-load``; Philly-calibrated synthetic
   arrivals when ``../shared/data`` is absent) on ``crius-sim-1280``, 5-minute rounds (Sec. 7), the
   Crius ground truth; Crius (Algorithm 1), the exact round (``--sim-exact-limit`` seconds a round) and
   the four baselines; average / median / P99 JCT, queueing, makespan, average normalised throughput,
   GPU utilisation, restarts per job, and each Crius method's reduction of the average JCT and
   throughput ratio against each baseline.

6. **fig17** (Crius Sec. 8.4, Fig. 17(a): Crius's average JCT lower than FCFS / ElasticFlow-LS / Gandiva /
   Gavel's by 81.3 / 75.8 / 80.1 / 66.4%): the ``--preset`` setting, by default ``crius-paper`` (``optsched
   simulate --kind crius --preset crius-paper``: Fig. 16's "one-week Philly trace with heavy workloads", 14,185 jobs
   at the public Philly trace's busiest-week rate, 84.43 jobs/h, durations clipped at 168 h, five-minute rounds,
   depth 3; ``crius-paper-rate``: the uncontended Sec. 8.1 rate for a day), the first ``--fig17-jobs`` jobs
   (default all); or, with ``--fig17-load L``, arrivals rescaled to offered load ``L`` (ours, not the paper's).
   Per baseline: ours ``1 - JCT_crius / JCT_baseline``
   (mean JCT of the finished jobs) beside the paper's and their ratio; also each policy's finished jobs,
   queueing and GPU use. FCFS is ``fcfs`` (no backfilling; ``fcfs-backfill`` printed beside).
7. **deadline** (Crius Sec. 8.5: Crius-DDL's deadline satisfactory ratio 1.69x ElasticFlow's, JCT 33.1%
   lower): the same setting with deadlines ``submit + lambda x duration``, ``lambda`` uniform in
   ``--deadline-range`` (0.5,1.5), rounds under the deadline objective; per policy the deadline satisfactory
   ratio (ElasticFlow's metric, quoted by Sec. 8.5: "the ratio of jobs that can satisfy their deadline
   requirement among all training jobs") and Crius over ElasticFlow (the deadline-aware ``elasticflow-ddl``)
   beside the paper's 1.69x.

8. **depth** (Crius Sec. 8.7, Fig. 21: as the search depth grows, 0.88 -> 5.98 s of scheduling overhead per job,
   14.6% lower average JCT, 1.03% higher average throughput): Crius with each depth of ``--depths`` on the
   fig17 setting (the paper "increase[s] the density of job submissions"; ``crius-paper`` is already its heavy
   week, ``--fig17-load`` rescales further): per depth the
   average JCT, the time-averaged normalised throughput (ours; the paper's is raw samples/s), the policy's
   seconds per round and per job, and the first-to-last change beside the paper's.
9. **ablation** (Crius Sec. 8.6, Fig. 20: Crius-NA 2.54x the average JCT, 8.69% fewer finished jobs, 13.6% lower
   average throughput; Crius-NH 3.53x, 83.2% of the finished jobs, 17.3% lower): ``crius``, ``crius-na``,
   ``crius-nh`` on the fig17 setting, ours beside the paper's.

Writes ``benchmarks/out/crius_{estimate,tuning,round,constants,sim,fig17,fig17_vs,deadline,depth,ablation}.csv``.
The default run takes well under 15
minutes on one core; ``--quick`` a fraction of that.
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.core import get_cluster  # noqa: E402
from optsched.experiments.compare import run_policies  # noqa: E402
from optsched.heuristics.crius import algorithm1  # noqa: E402
from optsched.perf.crius.cell_estimator import EstimatorParams, all_splits, shared_estimator  # noqa: E402
from optsched.perf.crius.models import MODEL_SHAPES, crius_model  # noqa: E402
from optsched.perf.crius.stages import determine_stages  # noqa: E402
from optsched.perf.crius.tuning import cell_guided_tuning, explore, full_exploration, half_space  # noqa: E402
from optsched.rounds.crius.admission import admit  # noqa: E402
from optsched.rounds.crius.generate import generate_crius_round  # noqa: E402
from optsched.rounds.crius.objective import objective  # noqa: E402
from optsched.rounds.crius.table import CriusTableCache, build_crius_table, stage_counts  # noqa: E402
from optsched.sim.config import SimConfig  # noqa: E402
from optsched.sim.crius_truth import CriusGroundTruth  # noqa: E402
from optsched.sim.traces.crius import crius_philly_trace, crius_synthetic_trace  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PHILLY = SHARED / "traces" / "philly" / "philly_busiest12h.csv"
CLUSTER = "crius-sim-1280"
TYPES = ("A100-40G", "A40", "A10", "V100-32G")
#: GPUs per model size: growing with the size, as Crius Fig. 12 and 13 do
GPUS_OF = {"wresnet-0.5b": 2, "wresnet-1b": 4, "wresnet-2b": 8, "wresnet-4b": 16, "wresnet-6.8b": 32,
           "bert-0.76b": 2, "bert-1.3b": 4, "bert-2.6b": 8, "bert-6.7b": 16,
           "moe-0.69b": 2, "moe-1.3b": 4, "moe-2.4b": 8, "moe-10b": 16, "moe-27b": 32}
POLICIES = ("crius", "exact", "fcfs", "gandiva", "gavel", "elasticflow")
BASELINES = ("fcfs", "gandiva", "gavel", "elasticflow")


def _stats(values: list[float]) -> tuple[str, str, str]:
    a = np.array(values, dtype=float)
    return f"{100 * a.mean():.1f}", f"{100 * np.median(a):.1f}", f"{100 * a.min():.1f}"


def _configs(quick: bool) -> list[tuple[str, int]]:
    """(model@batch, GPUs): every size at its GPU count, with the family's middle Table 2 batch."""
    out = []
    for base, gpus in GPUS_OF.items():
        if quick and gpus > 8:
            continue
        fam = MODEL_SHAPES[base].family
        batch = {"wresnet": 512, "bert": 256, "moe": 512}[fam]
        out.append((f"{base}@{batch}", gpus))
    return out


def estimate_and_tuning(args: argparse.Namespace) -> None:
    cluster = get_cluster(CLUSTER)
    est = shared_estimator(cluster)
    truth = CriusGroundTruth(cluster).estimator
    samp_all, samp_pick, pred_pick = [], [], []
    tun_model, tun_truth, plans_full, plans_tuned, prof_full, prof_tuned = [], [], [], [], [], []
    t0 = time.perf_counter()
    est_rows = []
    for model, gpus in _configs(args.quick):
        graph = crius_model(model)
        for gtype in TYPES:
            picked = None
            for s in stage_counts(gpus, graph):
                cell = est.cell(graph, gtype, gpus, s)
                e = est.estimate(cell)
                if not e.feasible:
                    continue
                full = full_exploration(est, cell)
                acc = 1 - (e.iteration_time_s - full.iteration_time_s) / full.iteration_time_s
                samp_all.append(acc)
                if picked is None or e.iteration_time_s < picked[1].iteration_time_s:
                    picked = (cell, e, full, acc)
            if picked is None:
                continue
            cell, e, full, acc = picked
            samp_pick.append(acc)
            true_cell = truth.cell(graph, gtype, gpus, cell.stages, cell.gpus_per_node)
            t_true = truth.plan_latency(true_cell, e.plan.splits)
            pred = 1 - abs(e.iteration_time_s - t_true) / t_true
            pred_pick.append(pred)
            tuned = cell_guided_tuning(est, cell, e)
            tun_model.append(1 - (tuned.iteration_time_s - full.iteration_time_s) / full.iteration_time_s)
            part = determine_stages(graph, gpus, cell.stages)
            halves = [half_space(g, f) for g, f in zip(part.gpus, e.plan.splits)]
            t_tuned = explore(truth, true_cell, halves).iteration_time_s
            t_opt = full_exploration(truth, true_cell).iteration_time_s
            tun_truth.append(1 - (t_tuned - t_opt) / t_opt)
            plans_full.append(full.plans_evaluated)
            plans_tuned.append(tuned.plans_evaluated)
            prof_full.append(sum(len(all_splits(g)) for g in part.gpus))
            prof_tuned.append(sum(len(h) for h in halves))
            est_rows.append((model, gpus, gtype, cell.stages, "x".join(map(str, part.gpus)),
                             "".join(m[0] for m in e.plan.modes), f"{e.iteration_time_s:.3f}",
                             f"{full.iteration_time_s:.3f}", f"{100 * acc:.1f}", f"{t_true:.3f}", f"{100 * pred:.1f}",
                             f"{100 * tun_model[-1]:.1f}", f"{100 * tun_truth[-1]:.1f}", plans_full[-1],
                             plans_tuned[-1]))
    emit(("model", "gpus", "gpu_type", "stages", "stage_gpus", "modes", "estimate_s", "optimum_s", "sampling_acc_%",
          "truth_s", "prediction_acc_%", "tuning_acc_%", "tuning_acc_truth_%", "plans_full", "plans_tuned"),
         est_rows, "crius_estimate.csv")
    ratio = np.array(plans_full, dtype=float) / np.array(plans_tuned, dtype=float)
    prof = np.array(prof_full, dtype=float) / np.array(prof_tuned, dtype=float)
    rows = [("sampling accuracy, every Cell", len(samp_all), *_stats(samp_all), "93.4 avg / 90.5 worst"),
            ("sampling accuracy, picked Cells", len(samp_pick), *_stats(samp_pick), "93.4 avg / 90.5 worst"),
            ("prediction accuracy vs truth, picked", len(pred_pick), *_stats(pred_pick), "93.4 avg / 90.5 worst"),
            ("tuning accuracy (cost model)", len(tun_model), *_stats(tun_model), "96.2 avg"),
            ("tuning accuracy (ground truth)", len(tun_truth), *_stats(tun_truth), "96.2 avg")]
    emit(("measure", "cells", "mean_%", "median_%", "worst_%", "paper_%"), rows, "crius_tuning.csv")
    print(f"\nplans explored, full / Cell-guided: mean {ratio.mean():.2f}x, geometric mean "
          f"{math.exp(np.log(ratio).mean()):.2f}x, max {ratio.max():.0f}x; stage configurations profiled: mean "
          f"{prof.mean():.2f}x, max {prof.max():.2f}x (paper: 5.48x average, 10.88x at most)  "
          f"[{time.perf_counter() - t0:.1f} s]")


def rounds(args: argparse.Namespace) -> None:
    sizes = (100, 300) if args.quick else (100, 300, 1000)
    rows = []
    for n in sizes:
        running = 150
        problem = generate_crius_round(n + running, seed=args.seed, running_fraction=running / (n + running))
        queued = len(problem.jobs) - len(problem.running)
        t0 = time.perf_counter()
        build_crius_table(problem, CriusTableCache(EstimatorParams()))  # a fresh estimator: every Cell estimated
        cold_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = build_crius_table(problem)
        table_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        sched = algorithm1(problem, table, admit(problem, table))
        heur_s = time.perf_counter() - t1
        h_obj = objective(problem, table, sched.choices)
        d = optsched.solve(problem, "exact", time_limit=args.time_limit, seed=args.seed)
        size = dict(part.split("=") for part in d.message.split(";")[0].split() if "=" in part)
        rows.append((n, queued, len(problem.running), len(table), int(table.candidate.sum()), f"{cold_s:.2f}",
                     f"{table_s:.2f}",
                     f"{heur_s:.3f}", f"{1000 * heur_s / max(queued, 1):.2f}", f"{h_obj:.2f}", f"{d.objective:.2f}",
                     f"{h_obj / d.objective:.3f}",
                     d.status, "" if d.gap is None else f"{100 * d.gap:.3f}", f"{d.solve_seconds:.2f}",
                     size.get("variables", ""), size.get("constraints", "")))
        sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
        sys.stdout.flush()
    emit(("jobs_queued_target", "queued", "running", "cells", "candidates", "table_cold_s", "table_s", "heuristic_s",
          "heuristic_ms_per_job",
          "heuristic_obj", "exact_obj", "heuristic_over_exact", "status", "gap_%", "whole_round_s", "variables",
          "constraints"), rows,
         "crius_round.csv")


def constants(args: argparse.Namespace) -> None:
    """Section 4 (module docstring): BRANCHING x SCALED_CELLS against the exact optimum."""
    import optsched.heuristics.crius as alg1

    cases = [(100, s) for s in (0, 1, 2)] + ([] if args.quick else [(300, 0)])
    saved = (alg1.BRANCHING, alg1.SCALED_CELLS)
    print(f"\nconstants of Algorithm 1 (ours; defaults BRANCHING={saved[0]}, SCALED_CELLS={saved[1]}): "
          "Algorithm 1 / exact in the round's objective (default: the paper's raw cluster throughput, samples/s)")
    rows = []
    try:
        for jobs, seed in cases:
            problem = generate_crius_round(jobs, seed)
            table = build_crius_table(problem)
            exact = optsched.solve(problem, "exact", time_limit=args.time_limit, seed=seed)
            for b in (1, 3, 5):
                for c in (1, 4, 12):
                    alg1.BRANCHING, alg1.SCALED_CELLS = b, c
                    t0 = time.perf_counter()
                    sched = algorithm1(problem, table, admit(problem, table))
                    secs = time.perf_counter() - t0
                    h = objective(problem, table, sched.choices)
                    rows.append((jobs, seed, b, c, f"{h:.2f}", f"{exact.objective:.2f}", exact.status,
                                 f"{h / exact.objective:.3f}", f"{secs:.2f}"))
                    sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
                    sys.stdout.flush()
    finally:
        alg1.BRANCHING, alg1.SCALED_CELLS = saved
    emit(("jobs", "seed", "branching", "scaled_cells", "heuristic_obj", "exact_obj", "exact_status",
          "heuristic_over_exact", "heuristic_s"), rows, "crius_constants.csv")


def sim(args: argparse.Namespace) -> None:
    cluster = get_cluster(CLUSTER)
    truth = CriusGroundTruth(cluster)
    jobs = 150 if args.quick else args.sim_jobs
    if PHILLY.is_file():
        trace = crius_philly_trace(PHILLY, cluster, truth, seed=args.seed, max_jobs=jobs, load=args.sim_load)
    else:
        trace = crius_synthetic_trace(cluster, truth, num_jobs=jobs, seed=args.seed, load=args.sim_load)
    print(f"\ntrace: {trace.source}")
    cfg = SimConfig(rounds_on_events=False, seed=args.seed)
    results = {}
    for policy in POLICIES:
        t0 = time.perf_counter()
        limit = args.sim_exact_limit if policy == "exact" else 60.0
        results.update(run_policies(cluster, trace.jobs, truth, [policy], cfg, kind="crius", time_limit=limit,
                                    trace_name=trace.name))
        print(f"  {policy}: {time.perf_counter() - t0:.1f} s")
    rows = []
    summ = {p: r.summary() for p, r in results.items()}
    for p, s in summ.items():
        hours = lambda k: "" if s[k] is None else f"{s[k] / 3600:.2f}"  # noqa: E731
        restarts = (s["reconfigurations"] + s["preemptions"]) / max(1, s["jobs"])
        rows.append((p, s["finished"], s["unfinished"], hours("avg_jct_s"), hours("p50_jct_s"), hours("p99_jct_s"),
                     hours("avg_queue_s"), hours("makespan_s"), f"{s['avg_throughput']:.2f}",
                     f"{100 * s['gpu_utilisation']:.1f}", f"{restarts:.2f}", f"{s['policy_seconds']:.1f}"))
    emit(("policy", "finished", "unfinished", "avg_jct_h", "p50_jct_h", "p99_jct_h", "avg_queue_h", "makespan_h",
          "avg_throughput", "gpu_util_%", "restarts_per_job", "policy_s"), rows, "crius_sim.csv")
    paper = {"fcfs": 81.3, "gandiva": 80.1, "gavel": 66.4, "elasticflow": 75.8}
    comp = []
    for ours in ("crius", "exact"):
        for b in BASELINES:
            jct = 100 * (1 - summ[ours]["avg_jct_s"] / summ[b]["avg_jct_s"])
            thr = summ[ours]["avg_throughput"] / summ[b]["avg_throughput"]
            comp.append((ours, b, f"{jct:.1f}", f"{paper[b]:.1f}", f"{thr:.2f}", "up to 1.54"))
    emit(("method", "baseline", "avg_jct_reduction_%", "paper_%", "throughput_ratio", "paper"), comp,
         "crius_sim_vs_baselines.csv")


FIG17_PAPER = {"fcfs": 81.3, "elasticflow": 75.8, "gandiva": 80.1, "gavel": 66.4}
FIG17_POLICIES = ("crius", "fcfs", "fcfs-backfill", "elasticflow", "gandiva", "gavel")
DEADLINE_POLICIES = ("crius", "elasticflow-ddl", "elasticflow", "gavel", "gandiva", "fcfs-backfill", "fcfs")
#: Crius Sec. 8.5: "Crius-DDL surpasses ElasticFlow with a 1.69x improvement in deadline satisfactory ratio"
DDL_PAPER_RATIO = 1.69


def _request(args: argparse.Namespace, deadlines: bool = False, depth: int | None = None):  # noqa: ANN202
    """(preset, request) of the fig17 setting: ``--preset``'s workload (module docstring, sections 6-9), the first
    ``--fig17-jobs`` of its jobs (default: all), deadlines (section 7), search depth ``depth``."""
    from optsched.sim.presets import get_preset
    from optsched.sim.setup import SimulationRequest

    preset = get_preset(args.preset)
    options = {"search_depth": preset.request["search_depth"] if depth is None else depth,
               "max_duration": preset.request["max_duration"]}
    if args.fig17_load is None:
        options["arrival_rate"] = preset.request["arrival_rate"]
    if deadlines:
        options["deadline_range"] = args.deadline_range
    jobs = preset.request["jobs"] if args.fig17_jobs is None else args.fig17_jobs
    return preset, SimulationRequest(jobs=jobs, load=args.fig17_load or 1.0, seed=args.seed, options=options)


#: (request, policy) -> (inputs, result) of this process's runs: a section reuses a run another already did
#: (the ablation's ``crius`` is the depth sweep's depth 3 and fig17's ``crius``; simulations are deterministic)
_RUNS: dict = {}


def _runs(args: argparse.Namespace, policies: tuple[str, ...], deadlines: bool = False,
          depth: int | None = None):  # noqa: ANN202
    """(inputs, results) of ``policies`` in the fig17 setting (:func:`_request`), each policy simulated once per
    process (:data:`_RUNS`)."""
    from optsched.experiments.compare import simulate_kind

    preset, request = _request(args, deadlines, depth)
    key = repr((preset.name, request))
    missing = tuple(p for p in policies if (key, p) not in _RUNS)
    if missing:
        inputs, results = simulate_kind("crius", request, missing, preset.config(SimConfig(seed=args.seed)),
                                        time_limit=60.0)
        for p in missing:
            _RUNS[key, p] = (inputs, results[p])
    return _RUNS[key, policies[0]][0], {p: _RUNS[key, p][1] for p in policies}


def _paper_setting(args: argparse.Namespace, deadlines: bool):  # noqa: ANN202
    """Results of the fig17 (or deadline) policies in the ``--preset`` setting (module docstring, sections 6, 7)."""
    inputs, results = _runs(args, DEADLINE_POLICIES if deadlines else FIG17_POLICIES, deadlines)
    print(f"\n{inputs.heading}")
    return results


def _policy_rows(results):  # noqa: ANN001, ANN202
    rows = []
    for p, r in results.items():
        s = r.summary()
        hours = lambda k: "" if s[k] is None else f"{s[k] / 3600:.2f}"  # noqa: E731
        rows.append((p, s["finished"], s["unfinished"], hours("avg_jct_s"), hours("avg_queue_s"), hours("makespan_s"),
                     f"{100 * (s['gpu_utilisation'] or 0):.1f}", s.get("deadline_satisfactory_ratio", ""),
                     f"{r.wall_seconds:.0f}"))
    return rows


HEAD = ("policy", "finished", "unfinished", "avg_jct_h", "avg_queue_h", "makespan_h", "gpu_util_%",
        "deadline_satisfactory_ratio", "wall_s")


def fig17(args: argparse.Namespace) -> None:
    results = _paper_setting(args, deadlines=False)
    emit(HEAD, _policy_rows(results), "crius_fig17.csv")
    crius = results["crius"].summary()["avg_jct_s"]
    comp = []
    for b in (*FIG17_PAPER, "fcfs-backfill"):
        base = results[b].summary()["avg_jct_s"]
        ours = 100 * (1 - crius / base) if crius and base else float("nan")
        paper = FIG17_PAPER.get(b)
        comp.append((b, f"{ours:.1f}", "" if paper is None else f"{paper:.1f}",
                     "" if paper is None else f"{ours / paper:.2f}"))
    emit(("baseline", "ours_avg_jct_reduction_%", "paper_avg_jct_reduction_%", "ours_over_paper"), comp,
         "crius_fig17_vs.csv")


def deadline_sim(args: argparse.Namespace) -> None:
    results = _paper_setting(args, deadlines=True)
    emit(HEAD, _policy_rows(results), "crius_deadline.csv")
    c = results["crius"].summary()["deadline_satisfactory_ratio"]
    e = results["elasticflow-ddl"].summary()["deadline_satisfactory_ratio"]
    ratio = c / e if e else float("nan")
    print(f"deadline satisfactory ratio, Crius-DDL over ElasticFlow (deadline-aware): ours {ratio:.2f}x, "
          f"paper {DDL_PAPER_RATIO}x, ours / paper {ratio / DDL_PAPER_RATIO:.2f}")


def _setting_runs(args: argparse.Namespace, policies: tuple[str, ...], depth: int | None = None):  # noqa: ANN202
    """Results of ``policies`` in the fig17 setting (search depth ``depth``, default the preset's 3)."""
    return _runs(args, policies, depth=depth)


def depth_sweep(args: argparse.Namespace) -> None:
    rows = []
    first = last = None
    for d in args.depths:
        inputs, results = _setting_runs(args, ("crius",), d)
        r = results["crius"]
        s = r.summary()
        started = sum(1 for j in r.jobs if j.start_s is not None)
        restarts = (s["reconfigurations"] + s["preemptions"]) / max(1, s["jobs"])
        rows.append((d, s["finished"], f"{s['avg_jct_s'] / 3600:.3f}", f"{s['avg_throughput']:.3f}",
                     f"{s['policy_seconds'] / max(1, s['rounds']):.3f}", f"{s['policy_seconds'] / max(1, started):.3f}",
                     f"{restarts:.2f}"))
        sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
        sys.stdout.flush()
        first = first or s
        last = s
    print(f"\n{inputs.heading}")
    emit(("search_depth", "finished", "avg_jct_h", "avg_norm_throughput", "policy_s_per_round", "policy_s_per_job",
          "restarts_per_job"), rows, "crius_depth.csv")
    if first and last:
        jct = 100 * (1 - last["avg_jct_s"] / first["avg_jct_s"])
        thr = 100 * (last["avg_throughput"] / first["avg_throughput"] - 1)
        print(f"depth {args.depths[0]} -> {args.depths[-1]}: average JCT {abs(jct):.1f}% "
              f"{'lower' if jct >= 0 else 'higher'} (paper 14.6% lower), average "
              f"normalised throughput {thr:+.2f}% (paper +1.03%, raw samples/s)")


#: Crius Sec. 8.6: (average JCT x, finished jobs relative, average throughput change %) of Crius-NA and Crius-NH
ABLATION_PAPER = {"crius-na": (2.54, 1 - 0.0869, -13.6), "crius-nh": (3.53, 0.832, -17.3)}


def ablation(args: argparse.Namespace) -> None:
    inputs, results = _setting_runs(args, ("crius", "crius-na", "crius-nh"))
    print(f"\n{inputs.heading}")
    emit(HEAD, _policy_rows(results), "crius_ablation_runs.csv")
    c = results["crius"].summary()
    rows = []
    for p, (jct_x, fin, thr) in ABLATION_PAPER.items():
        s = results[p].summary()
        rows.append((p, f"{s['avg_jct_s'] / c['avg_jct_s']:.2f}", f"{jct_x:.2f}",
                     f"{s['finished'] / c['finished']:.3f}", f"{fin:.3f}", f"{100 * (s['avg_throughput'] / c['avg_throughput'] - 1):+.1f}", f"{thr:+.1f}"))
    emit(("ablation", "avg_jct_over_crius", "paper", "finished_over_crius", "paper", "avg_norm_throughput_change_%",
          "paper_raw_throughput_change_%"), rows, "crius_ablation.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer Cells, rounds and simulated jobs")
    ap.add_argument("--sections", nargs="+", default=["estimate", "round", "sim"],
                    choices=("estimate", "tuning", "round", "constants", "sim", "fig17", "deadline", "depth",
                             "ablation"),
                    help="what to run, in this order (estimate and tuning are one section, run first)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="limit of each exact round (60)")
    ap.add_argument("--sim-jobs", type=int, default=1500, help="jobs of the simulated trace (1500)")
    ap.add_argument("--sim-load", type=float, default=1.5, help="offered load of the simulated trace (1.5)")
    ap.add_argument("--sim-exact-limit", type=float, default=2.0, help="seconds a round of the exact policy (2)")
    ap.add_argument("--preset", default="crius-paper", choices=("crius-paper", "crius-paper-rate"),
                    help="fig17/deadline/depth/ablation: the setting (crius-paper: Fig. 16's one-week heavy trace; "
                         "crius-paper-rate: the uncontended Sec. 8.1 rate for a day)")
    ap.add_argument("--fig17-jobs", type=int, default=None,
                    help="jobs of the fig17/deadline/depth/ablation sections (default: the preset's, 14,185 / 929)")
    ap.add_argument("--fig17-load", type=float, default=None,
                    help="fig17/deadline: rescale arrivals to this offered load (ours) instead of the paper's rate")
    ap.add_argument("--deadline-range", default="0.5,1.5", help="deadline section: lambda range LO,HI (0.5,1.5)")
    ap.add_argument("--depths", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="depth section: depths (1-5)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    logging.getLogger("optsched").setLevel(logging.ERROR)
    started = time.perf_counter()
    if "estimate" in args.sections or "tuning" in args.sections:
        estimate_and_tuning(args)
    runs = {"round": rounds, "constants": constants, "sim": sim, "fig17": fig17, "deadline": deadline_sim,
            "depth": depth_sweep, "ablation": ablation}
    for section in dict.fromkeys(args.sections):  # in the order given (each once)
        if section in runs:
            runs[section](args)
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
