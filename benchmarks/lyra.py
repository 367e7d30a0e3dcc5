"""Lyra (thesis chapter 3): the knapsack of phase two, exact vs heuristic reclaiming on a 443-server
pool, and a simulation with capacity loaning (issue "Lyra", Must show).

    python benchmarks/lyra.py [--quick] [--full] [--seeds 3] [--jobs N] [--training 40] [--inference 48]
                              [--parts mckp,reclaim,sim]

1. **MCKP** (Sec. 3.5.2: "the longest solution time in our evaluation is 0.02s with 354 items and 245
   GPUs"): elastic jobs of the generator's mix until their flexible demand makes 354 items, capacity 245
   GPUs; the dynamic program (median of 20 runs) and CP-SAT, their values and the time ratio.
2. **Reclaim** (Sec. 3.7.3: the heuristic runs in 1-3 ms, an exhaustive search 420,000 times longer):
   ``gen-round --kind lyra-reclaim --servers 443`` at 90% occupancy, returning 10 to 240 servers: jobs
   preempted and time of Lyra's heuristic, Random, SCF, the exact selection (components: dynamic
   program + CP-SAT + knapsack) and the monolithic CP-SAT model (10 s limit).
3. **Simulation** (Sec. 3.7.2, Table 3.5: 1.53x queuing and 1.48x JCT over the Baseline): the busiest
   12 hours of the Philly trace (``../shared/data/traces/philly/philly_busiest12h.csv``; the synthetic
   trace generator of :mod:`optsched.sim.traces.lyra` without it) as Lyra jobs of the Basic scenario,
   ``--training`` 8xV100 and ``--inference`` 8xT4 servers, the synthetic inference usage series from the
   trace's first hour (20:41), 2% headroom; FIFO Baseline (no loaning, no scaling), Lyra (loaning and
   scaling), loaning only, scaling only (Lyra without loaning), and Lyra's SJF alone (neither: how much
   of the gain is the job order); mean queuing time and JCT, their
   reductions over the Baseline, and the preemption ratio (preemptions / jobs). ``--full`` adds the
   reclaiming baselines (Random, SCF, loaning only), the scaling baselines (AFS, Gandiva), naive
   placement and opportunistic scheduling (no loaning; fungible jobs on idle inference GPUs, evicted
   when inference grows). ``--quick``: first 600 jobs, one seed for the reclaim table.

4. **Thesis** (``--parts thesis``; issue 25 item 3): Table 3.5 and Table 3.9 in the thesis' setting, the
   ``lyra-thesis`` preset (:mod:`optsched.sim.presets`: its simulator settings and options, each with its
   source): ``--window-days`` (the preset's 15; a Lyra run takes 35-41 s on 3 days, Pollux's 508 s, and
   155-241 s on 15 days, one at a time on the shared 2-core machine) of
   the full Philly trace (``../shared/data/traces/philly/philly.csv``, the busiest window), the job mix by
   load, the cluster sized for an 82% offered load. Runs: the Baseline (FIFO, no loaning), Lyra (Basic,
   row 2), loaning only (row 9, ``lyra-loan``), scaling only (row 13, ``lyra`` with no loaning), and
   scaling only with ``--errors`` of the jobs mispredicted within +-25% (Table 3.9, "obtained without
   capacity loaning in Basic scenario", Sec. 3.7.4). Prints, per row and metric, the thesis' number,
   ours and ours/thesis; the reductions over the Baseline ("Duration of a scheme compared / Duration of
   Lyra", Sec. 3.7.1, here Baseline / scheme) beside the thesis'; writes ``lyra_thesis_runs.csv``,
   ``lyra_table_3_5.csv`` and ``lyra_table_3_9.csv``. ``--processes 2`` runs two simulations at once.
   Beside each preemption ratio: preemptions per inference server per day (ours: preemptions / (inference
   servers x window days)) and the thesis' derived the same way, ratio x 50,390 jobs / (520 servers x 15 days)
   (our derivation; Sec. 3.7.1's jobs and days, Sec. 3.1's 4,160 inference GPUs at 8 a server).
   Also (issue 25 item 3, the part left open): Lyra in the Advanced scenario (row 3, ``--scenario advanced``:
   10% of the jobs heterogeneous at 70% of the ideal rate on inference GPUs) and the Pollux-like baseline with
   no loaning (row 12, policy ``pollux``), and Table 3.8's percentiles (50, 75, 95, 99) of queuing time and JCT
   for the Baseline, Pollux and Lyra scaling only, with the text's Pollux / Lyra ratios
   (``lyra_table_3_8.csv``; the table's Pollux and AFS labels are swapped, see ``TABLE_3_8``); Lyra in the
   Heterogeneous scenario (row 4); Lyra in the Ideal scenario (row 5, ``--scenario ideal``: every job elastic to
   twice its request and on inference servers at the ideal rate). Row 14 (Lyra+TunedJobs, Pollux's job agent
   tuning batch size and learning rate) is not run: our jobs carry no batch-size or learning-rate model.
   ``--parts pollux-sweep --noise-ratios 1,4,16``: Pollux at other values of
   its efficiency model's ratio (ours), ``lyra_pollux_sweep.csv``.

Prints the tables and writes ``benchmarks/out/lyra_mckp.csv``, ``lyra_reclaim.csv``, ``lyra_sim.csv``.
The default run takes about 6 minutes on one core.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.formulations import lyra_mckp, lyra_reclaim  # noqa: E402
from optsched.heuristics.lyra_allocate import mckp_dp, mckp_greedy  # noqa: E402
from optsched.heuristics.lyra_reclaim import lyra_reclaim as lyra_heuristic  # noqa: E402
from optsched.heuristics.lyra_reclaim import random_reclaim, scf_reclaim  # noqa: E402
from optsched.policies import PolicyOptions, make_policy  # noqa: E402
from optsched.rounds.lyra.cluster import two_pool_cluster  # noqa: E402
from optsched.rounds.lyra.generate import random_job  # noqa: E402
from optsched.rounds.lyra.jobs import base_workers, max_workers  # noqa: E402
from optsched.rounds.lyra_allocate import LyraAllocateRound  # noqa: E402
from optsched.rounds.lyra_allocate.items import flexible_items  # noqa: E402
from optsched.rounds.lyra_reclaim import ReclaimView, generate_reclaim_round  # noqa: E402
from optsched.sim.config import SimConfig  # noqa: E402
from optsched.sim.engine import Simulator  # noqa: E402
from optsched.sim.loaning import median_burst  # noqa: E402
from optsched.sim.lyra_setup import lyra_simulation, preemptions_per_server_day  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

PHILLY = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces" / "philly" / "philly_busiest12h.csv"
#: wall-clock hour of the trace's first submission (2017-10-04 20:41:55)
TRACE_START_HOUR = 20 + 42 / 60
SIM_CONFIG = SimConfig(round_interval_s=300.0, preempt_restart_s=63.0, checkpoint_on_preempt=False,
                       checkpoint_interval_s=0.0, reconfig_overhead_s=10.0, min_round_gap_s=60.0)


def mckp_table() -> None:
    rng = np.random.default_rng(0)
    jobs, items = [], 0
    while items < 354:
        j = random_job(rng, f"e{len(jobs):03d}", elastic=True)
        k = max_workers(j) - base_workers(j)
        if items + k > 354:
            continue
        jobs.append(j)
        items += k
    p = LyraAllocateRound(cluster=two_pool_cluster(31, 0), jobs=tuple(jobs))
    it = flexible_items(p, {j.name: base_workers(j) for j in jobs})
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        extra, value = mckp_dp(it, 245)
        times.append(time.perf_counter() - t0)
    dp_s = statistics.median(times)
    sol = lyra_mckp.solve(it, 245, time_limit=30.0)
    t0 = time.perf_counter()
    _, greedy = mckp_greedy(it, 245)
    greedy_s = time.perf_counter() - t0
    emit(("items", "groups", "gpus", "dp_value_s", "dp_s", "paper_s", "cpsat_value_s", "cpsat_status", "cpsat_s",
          "cpsat/dp_time", "afs_greedy_value_s", "afs_s"),
         [(it.size, len(it.jobs), 245, round(value, 2), f"{dp_s:.5f}", 0.02, round(sol.objective or 0.0, 2),
           sol.status, f"{sol.wall_seconds:.4f}", round(sol.wall_seconds / dp_s, 1), round(greedy, 2),
           f"{greedy_s:.4f}")], "lyra_mckp.csv")


def reclaim_table(seeds: int) -> None:
    rows = []
    for k in (10, 30, 60, 120, 240):
        for seed in range(seeds):
            p = generate_reclaim_round(seed=seed, servers=443, reclaim=k, occupancy=0.9)
            v = ReclaimView(p)
            t0 = time.perf_counter()
            h = lyra_heuristic(v, k)
            h_s = time.perf_counter() - t0
            ex = lyra_reclaim.solve(v, k, time_limit=60.0)
            mono = lyra_reclaim.solve_monolithic(v, k, time_limit=10.0, hint=h)
            r = random_reclaim(v, k, np.random.default_rng(seed))
            s = scf_reclaim(v, k)
            pre = {name: len(v.outcome(sel).preempted) for name, sel in
                   (("lyra", h), ("random", r), ("scf", s), ("exact", ex.payload["servers"]),
                    ("mono", mono.payload.get("servers", h)))}
            rows.append((443, k, seed, len(v.jobs), pre["lyra"], f"{h_s * 1000:.2f}", pre["exact"], ex.status,
                         f"{ex.wall_seconds:.3f}", round(ex.wall_seconds / h_s), pre["mono"], mono.status,
                         f"{mono.wall_seconds:.2f}", pre["random"], pre["scf"]))
    emit(("servers", "reclaim", "seed", "jobs_at_risk", "lyra_preempted", "lyra_ms", "exact_preempted", "exact_status",
          "exact_s", "exact/lyra_time", "cpsat_mono_preempted", "mono_status", "mono_s", "random_preempted",
          "scf_preempted"), rows, "lyra_reclaim.csv")


def sim_table(jobs_n: int | None, training: int, inference: int, full: bool) -> None:
    if not PHILLY.exists():
        print(f"({PHILLY} not found: the synthetic trace instead)")
    setup = lyra_simulation(PHILLY if PHILLY.exists() else "synthetic", training=training, inference=inference,
                            jobs=jobs_n or 3000, max_jobs=jobs_n, usage_days=4, start_hour=TRACE_START_HOUR, seed=0)
    trace = "philly_busiest12h" if PHILLY.exists() else "synthetic"
    runs = [("Baseline (FIFO)", "fifo", False), ("Lyra", "lyra", True), ("loaning only", "lyra-loan", True),
            ("scaling only", "lyra", False), ("SJF only (neither)", "lyra-loan", False)]
    if full:
        runs += [("loaning only, Random", "random", True), ("loaning only, SCF", "scf", True),
                 ("scaling only, AFS", "afs", False), ("scaling only, Gandiva", "gandiva", False),
                 ("Lyra, naive BFD", "bfd", True), ("Opportunistic", "opportunistic", "opp")]
    out = []
    base_q = base_j = None
    for label, method, lend in runs:
        policy = make_policy(method, PolicyOptions(time_limit=10.0), kind="lyra")
        t0 = time.perf_counter()
        opp = lend == "opp"
        res = Simulator(setup.cluster, setup.jobs, policy, setup.truth, SIM_CONFIG, trace_name=trace,
                        **setup.events(method, loaning=bool(lend))).run()
        wall = time.perf_counter() - t0
        q = np.array([r.queue_s for r in res.jobs if r.queue_s is not None])
        jct = np.array([r.jct_s for r in res.jobs if r.jct_s is not None])
        pre = sum(r.preemptions for r in res.jobs)
        if base_q is None:
            base_q, base_j = q.mean(), jct.mean()
        out.append((label, method, "opportunistic" if opp else "yes" if lend else "no", len(jct), len(res.jobs), round(q.mean()),
                    round(float(np.median(q))), round(float(np.percentile(q, 95))), round(jct.mean()),
                    round(float(np.percentile(jct, 95))), round(base_q / q.mean(), 2), round(base_j / jct.mean(), 2),
                    f"{100 * pre / len(res.jobs):.2f}%", res.rounds, round(wall, 1)))
    print(f"\ntrace {trace}: {len(setup.jobs)} jobs, {training} training + {inference} inference servers")
    emit(("scheme", "method", "loaning", "finished", "jobs", "queue_mean_s", "queue_median_s", "queue_p95_s",
          "jct_mean_s", "jct_p95_s", "queue_reduction", "jct_reduction", "preemption_ratio", "rounds", "wall_s"),
         out, "lyra_sim.csv")


PHILLY_FULL = PHILLY.parent / "philly.csv"
#: Table 3.5 (thesis Sec. 3.7.2): queuing time and JCT (s: mean, median, 95%ile) and preemption ratio of the rows
#: we run (row number, scheme); None: "NA" in the table
TABLE_3_5 = {
    "baseline": (1, "Baseline (FIFO)", (3072, 55, 8357), (16610, 791, 82933), 0.0),
    "lyra": (2, "Lyra, Basic", (2010, 26, 3358), (11236, 568, 56477), 0.1224),
    "loaning": (9, "Lyra, capacity loaning only", (2212, 23, 3427), (12947, 662, 57987), 0.1494),
    "scaling": (13, "Lyra, elastic scaling only", (2275, 47, 3475), (12048, 602, 57597), None),
    "advanced": (3, "Lyra, Advanced", (1835, 24, 3238), (10434, 525, 56553), 0.0735),
    "heterogeneous": (4, "Lyra, Heterogeneous", (1944, 27, 3574), (12113, 604, 57392), 0.1123),
    "ideal": (5, "Lyra, Ideal", (1157, 22, 3204), (8891, 422, 41146), 0.0572),
    "pollux": (12, "Pollux, elastic scaling (Basic)", (2791, 58, 5883), (14534, 721, 72123), None),
}
#: the thesis' trace (Sec. 3.7.1: "a 15-day job trace ... There are 50,390 training jobs") and inference servers
#: (Sec. 3.1: "4,160 inference GPUs"; 8 GPUs a server is ours, from the testbed's "four 8-GPU inference servers",
#: Sec. 3.7.1: the text does not give the production servers' size)
THESIS_JOBS = 50_390
THESIS_DAYS = 15.0
THESIS_INFERENCE_SERVERS = 4160 // 8


def thesis_per_server_day(ratio: float) -> float:
    """The thesis' preemptions per inference server per day, derived (ours; the thesis gives the ratio only):
    ratio x 50,390 jobs / (520 inference servers x 15 days), e.g. 12.24% (Table 3.5 row 2) -> 0.79."""
    rate = preemptions_per_server_day(ratio * THESIS_JOBS, THESIS_INFERENCE_SERVERS, THESIS_DAYS)
    assert rate is not None
    return rate


#: Table 3.8 (Sec. 3.7.4, "obtained without capacity loaning in Basic scenario"): 50/75/95/99th percentiles of
#: queuing time and JCT (s) of the rows we run. Pollux's is the row the table labels AFS: the table's AFS and
#: Pollux labels are swapped against Table 3.5 (rows 11, 12: Pollux 58/5883 s queuing, 721/72123 s JCT) and the
#: text ("Lyra outperforms Pollux by 1.23x and 1.69x in median and 95%ile queuing time" = 58/47 and 5883/3475;
#: "1.20x and 1.25x improvements in median and 95%ile JCT" = 721/602 and 72123/57597)
TABLE_3_8 = {
    "baseline": ("Baseline", (55, 1892, 8357, 14323), (791, 29163, 82933, 376513)),
    "pollux": ("Pollux (row labelled AFS)", (58, 1297, 5883, 11124), (721, 12304, 72123, 323513)),
    "scaling": ("Lyra", (47, 697, 3475, 8731), (602, 12072, 57597, 223815)),
}
PERCENTILES = (50, 75, 95, 99)
#: Table 3.9 (Sec. 3.7.4): share of wrong predictions -> (queuing time reduction, JCT reduction) over the Baseline
TABLE_3_9 = {0.2: (2.21, 1.52), 0.4: (2.17, 1.49), 0.6: (1.76, 1.38)}


def _thesis_run(job: tuple) -> dict[str, object]:  # type: ignore[type-arg]
    """One simulation of the thesis mode: (key, method, loaning, wrong share, window days, scenario[, Pollux's
    noise ratio]) -> its numbers."""
    from optsched.policies.lyra import LyraSimPolicy, PolluxAllocator
    from optsched.rounds.lyra.prediction import PREDICTOR_OPTION, runtime_predictor
    from optsched.sim.presets import get_preset
    key, method, lend, wrong, days, scenario = job[:6]
    noise = job[6] if len(job) > 6 else None
    preset = get_preset("lyra-thesis")
    opts = {k: v for k, v in preset.request.items() if k != "no_loaning"}
    opts["window_days"] = days
    opts["scenario"] = scenario
    setup = lyra_simulation(PHILLY_FULL, seed=0, **opts)
    pred = runtime_predictor(setup.jobs, wrong, seed=0)
    policy = make_policy(method, PolicyOptions(time_limit=10.0, extras={PREDICTOR_OPTION: pred}), kind="lyra")
    if noise is not None:   # Pollux with another gradient-noise ratio (ours, optsched/heuristics/lyra_pollux.py)
        policy = LyraSimPolicy("pollux", PolluxAllocator(time_limit=10.0, predictor=pred, noise_ratio=noise),
                               lyra_placement=False)
    t0 = time.perf_counter()
    res = Simulator(setup.cluster, setup.jobs, policy, setup.truth, preset.config(), trace_name="philly",
                    **setup.events(method, loaning=lend)).run()
    s = res.summary()
    q = np.array([r.queue_s for r in res.jobs if r.queue_s is not None])
    jct = np.array([r.jct_s for r in res.jobs if r.jct_s is not None])
    return {"key": key, "method": method, "loaning": lend, "wrong": wrong, "jobs": len(res.jobs),
            "unfinished": s["unfinished"], "queue": (q.mean(), float(np.median(q)), float(np.percentile(q, 95))),
            "jct": (jct.mean(), float(np.median(jct)), float(np.percentile(jct, 95))),
            "queue_pct": tuple(float(np.percentile(q, k)) for k in PERCENTILES),
            "jct_pct": tuple(float(np.percentile(jct, k)) for k in PERCENTILES),
            "preemptions": s["preemptions"], "preemption_ratio": s["preemption_ratio"],
            "per_server_day": setup.preemptions_per_server_day(s["preemptions"]),
            "inference_servers": len(setup.inference_nodes), "trace_days": setup.trace_days,
            "gpu_util": s["gpu_utilisation"], "wall_s": time.perf_counter() - t0,
            "setting": f"{setup.window}; {setup.sizing}; {setup.mix().describe()}; {setup.describe_elastic()}; "
                       f"{setup.describe_scenario()}"
                       + (f"; usage median 5-minute change "
                          f"{100 * median_burst(setup.usage.values, setup.usage.step_s):.2f}%" if setup.usage else "")}


def thesis_tables(days: float, errors: list[float], processes: int, skip: frozenset[str] = frozenset()) -> None:
    from concurrent.futures import ProcessPoolExecutor
    if not PHILLY_FULL.exists():
        print(f"({PHILLY_FULL} not found: the thesis mode needs the Philly trace)")
        return
    jobs = [("baseline", "fifo", False, 0.0, days, "basic"), ("lyra", "lyra", True, 0.0, days, "basic"),
            ("loaning", "lyra-loan", True, 0.0, days, "basic"), ("scaling", "lyra", False, 0.0, days, "basic"),
            ("advanced", "lyra", True, 0.0, days, "advanced"),
            ("heterogeneous", "lyra", True, 0.0, days, "heterogeneous"),
            ("ideal", "lyra", True, 0.0, days, "ideal"),
            ("pollux", "pollux", False, 0.0, days, "basic")]
    jobs += [(f"scaling-err{e:g}", "lyra", False, e, days, "basic") for e in errors]
    kept = {"baseline", "scaling"}
    unknown = sorted(skip - {j[0] for j in jobs} - kept)
    if skip & kept or unknown:
        raise SystemExit(f"--skip: the Baseline and scaling-only runs are needed; unknown runs: {unknown}")
    jobs = [j for j in jobs if j[0] not in skip]
    runs: dict[str, dict[str, object]] = {}
    with ProcessPoolExecutor(max_workers=max(1, processes)) as pool:
        for r in pool.map(_thesis_run, jobs):
            runs[str(r["key"])] = r
            print(f"run {r['key']} ({r['method']}, loaning {'yes' if r['loaning'] else 'no'}): {r['jobs']} jobs, "
                  f"{r['preemptions']} preemptions, wall {r['wall_s']:.0f} s", flush=True)
    if skip:
        print(f"left out (--skip): {', '.join(sorted(skip))}")
    print(f"\nthe thesis' setting (preset lyra-thesis, --window-days {days:g}): {runs['baseline']['setting']}")
    print(f"preemptions per inference server per day = preemptions / (inference servers x days of the window): ours "
          f"over {runs['baseline']['inference_servers']} servers x {runs['baseline']['trace_days']:g} days; the "
          f"thesis' derived (ours) as ratio x {THESIS_JOBS:,} jobs (Sec. 3.7.1) / ({THESIS_INFERENCE_SERVERS} servers "
          f"(Sec. 3.1: 4,160 inference GPUs / 8) x {THESIS_DAYS:g} days (Sec. 3.7.1)), e.g. Lyra Basic 12.24% -> "
          f"{thesis_per_server_day(0.1224):.3f}")
    for key, row in (("advanced", "Advanced (row 3)"), ("heterogeneous", "Heterogeneous (row 4)"),
                     ("ideal", "Ideal (row 5)")):
        if key in runs:
            print(f"{row}: {runs[key]['setting']}")
    emit(("run", "method", "loaning", "wrong_predictions", "jobs", "unfinished", "queue_mean_s", "queue_median_s",
          "queue_p95_s", "jct_mean_s", "jct_median_s", "jct_p95_s", "preemptions", "preemption_ratio",
          "preemptions_per_inference_server_day", "gpu_util", "wall_s"),
         [(k, r["method"], "yes" if r["loaning"] else "no", r["wrong"], r["jobs"], r["unfinished"],
           *(round(v) for v in r["queue"]), *(round(v) for v in r["jct"]), r["preemptions"],
           r["preemption_ratio"], None if r["per_server_day"] is None else round(r["per_server_day"], 4),
           None if r["gpu_util"] is None else round(r["gpu_util"], 3), round(r["wall_s"], 1))
          for k, r in runs.items()], "lyra_thesis_runs.csv")
    base = runs["baseline"]
    rows = []
    for key, (row, label, tq, tj, tp) in TABLE_3_5.items():
        if key not in runs:
            continue
        r = runs[key]
        for metric, thesis, ours in (("queuing time mean s", tq[0], r["queue"][0]),
                                     ("queuing time median s", tq[1], r["queue"][1]),
                                     ("queuing time p95 s", tq[2], r["queue"][2]),
                                     ("JCT mean s", tj[0], r["jct"][0]), ("JCT median s", tj[1], r["jct"][1]),
                                     ("JCT p95 s", tj[2], r["jct"][2])):
            rows.append((row, label, metric, thesis, round(ours), round(ours / thesis, 2) if thesis else "-"))
        ratio = r["preemption_ratio"]
        rows.append((row, label, "preemption ratio (preemptions / jobs submitted)",
                     "NA" if tp is None else f"{100 * tp:.2f}%", f"{100 * ratio:.2f}%",
                     round(ratio / tp, 2) if tp else "-"))
        rate = r["per_server_day"]
        derived = None if tp is None else thesis_per_server_day(tp)
        rows.append((row, label, "preemptions per inference server per day (thesis derived: ratio x 50,390 / (520 x "
                     "15))", "NA" if derived is None else round(derived, 3),
                     "-" if rate is None else round(rate, 3),
                     round(rate / derived, 2) if derived and rate is not None else "-"))
        if key != "baseline":
            for metric, i, tb, tt in (("queuing time mean", 0, TABLE_3_5["baseline"][2][0], tq[0]),
                                      ("JCT mean", 0, TABLE_3_5["baseline"][3][0], tj[0])):
                part = "queue" if metric.startswith("queuing") else "jct"
                ours = base[part][i] / r[part][i]
                rows.append((row, label, f"{metric} reduction over the Baseline (Baseline / scheme)",
                             round(tb / tt, 2), round(ours, 2), round(ours / (tb / tt), 2)))
    emit(("row", "scheme", "metric", "thesis", "ours", "ours/thesis"), rows, "lyra_table_3_5.csv")
    rows = []
    for key, (label, tq, tj) in TABLE_3_8.items():
        if key not in runs:
            continue
        r = runs[key]
        for metric, thesis, ours in (("queuing time", tq, r["queue_pct"]), ("JCT", tj, r["jct_pct"])):
            for k, t, o in zip(PERCENTILES, thesis, ours):
                rows.append((label, f"{metric} p{k} s", t, round(o), round(o / t, 2)))
    # Sec. 3.7.4: Lyra's improvement over Pollux in median and 95%ile (Pollux / Lyra: 1.23x, 1.69x queuing;
    # 1.20x, 1.25x JCT)
    for k, i in (("50", 0), ("95", 2)) if "pollux" in runs else ():
        for metric, part, col in (("queuing time", "queue_pct", 1), ("JCT", "jct_pct", 2)):
            thesis = TABLE_3_8["pollux"][col][i] / TABLE_3_8["scaling"][col][i]
            ours = runs["pollux"][part][i] / runs["scaling"][part][i]
            rows.append(("Pollux / Lyra", f"{metric} p{k} ratio", round(thesis, 2), round(ours, 2),
                         round(ours / thesis, 2)))
    emit(("scheme", "metric", "thesis", "ours", "ours/thesis"), rows, "lyra_table_3_8.csv")
    rows = []
    for e in [0.0, *errors]:
        key = "scaling" if e == 0.0 else f"scaling-err{e:g}"
        if key not in runs:
            continue
        r = runs[key]
        q_red, j_red = base["queue"][0] / r["queue"][0], base["jct"][0] / r["jct"][0]
        tq, tj = TABLE_3_9.get(e, (None, None))
        rows.append((f"{100 * e:g}%", tq if tq else "-", round(q_red, 2), round(q_red / tq, 2) if tq else "-",
                     tj if tj else "-", round(j_red, 2), round(j_red / tj, 2) if tj else "-"))
    emit(("wrong_predictions", "thesis_queue_reduction", "ours_queue_reduction", "ours/thesis",
          "thesis_jct_reduction", "ours_jct_reduction", "ours/thesis"), rows, "lyra_table_3_9.csv")


def pollux_sweep(days: float, ratios: list[float]) -> None:
    """Pollux (no loaning, Basic) at each gradient-noise ratio ``r`` (phi / M0, ours: the thesis' per-model goodput
    is not in our traces): queuing time and JCT (mean, p50, p95, s)."""
    if not PHILLY_FULL.exists():
        print(f"({PHILLY_FULL} not found: the thesis mode needs the Philly trace)")
        return
    rows = []
    for r in ratios:
        run = _thesis_run(("pollux", "pollux", False, 0.0, days, "basic", r))
        rows.append((r, *(round(v) for v in run["queue"]), *(round(v) for v in run["jct"]), run["unfinished"],
                     round(run["wall_s"], 1)))
    emit(("noise_ratio", "queue_mean_s", "queue_median_s", "queue_p95_s", "jct_mean_s", "jct_median_s", "jct_p95_s",
          "unfinished", "wall_s"), rows, "lyra_pollux_sweep.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="600 jobs, one reclaim seed")
    ap.add_argument("--full", action="store_true", help="also the baselines in the simulation")
    ap.add_argument("--seeds", type=int, default=3, help="reclaim instances per size")
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs of the trace (default all)")
    ap.add_argument("--training", type=int, default=40, help="training servers (8xV100)")
    ap.add_argument("--inference", type=int, default=48, help="inference servers (8xT4)")
    ap.add_argument("--parts", default="mckp,reclaim,sim", help="which tables (comma-separated; thesis: Tables "
                    "3.5 and 3.9 in the thesis' setting, not in the default)")
    ap.add_argument("--window-days", type=float, default=15.0, help="thesis mode: days of the Philly trace (15)")
    ap.add_argument("--errors", default="0.2,0.4,0.6", help="thesis mode: shares of wrong predictions (Table 3.9)")
    ap.add_argument("--processes", type=int, default=1, help="thesis mode: simulations run at once (1)")
    ap.add_argument("--skip", default="", help="thesis mode: runs left out, comma-separated (of lyra, loaning, "
                    "advanced, heterogeneous, ideal, pollux, scaling-errE; their rows are then not printed)")
    ap.add_argument("--noise-ratios", default="1,4,16", help="pollux-sweep: Pollux's gradient-noise ratios r = phi / "
                    "M0 (ours; default 1,4,16)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    if "mckp" in parts:
        mckp_table()
    if "reclaim" in parts:
        reclaim_table(1 if args.quick else args.seeds)
    if "sim" in parts:
        sim_table(600 if args.quick and args.jobs is None else args.jobs, args.training, args.inference, args.full)
    if "thesis" in parts:
        thesis_tables(args.window_days, [float(e) for e in args.errors.split(",") if e], args.processes,
                      frozenset(k for k in args.skip.split(",") if k))
    if "pollux-sweep" in parts:
        pollux_sweep(args.window_days, [float(r) for r in args.noise_ratios.split(",") if r])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
