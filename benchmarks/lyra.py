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

from optsched.core.events import PoolTarget  # noqa: E402
from optsched.formulations import lyra_mckp, lyra_reclaim  # noqa: E402
from optsched.heuristics.lyra_allocate import mckp_dp, mckp_greedy  # noqa: E402
from optsched.heuristics.lyra_reclaim import lyra_reclaim as lyra_heuristic  # noqa: E402
from optsched.heuristics.lyra_reclaim import random_reclaim, scf_reclaim  # noqa: E402
from optsched.policies import PolicyOptions, make_policy  # noqa: E402
from optsched.rounds.lyra.cluster import inference_name, two_pool_cluster  # noqa: E402
from optsched.rounds.lyra.generate import random_job  # noqa: E402
from optsched.rounds.lyra.jobs import base_workers, max_workers  # noqa: E402
from optsched.rounds.lyra_allocate import LyraAllocateRound  # noqa: E402
from optsched.rounds.lyra_allocate.items import flexible_items  # noqa: E402
from optsched.rounds.lyra_reclaim import ReclaimView, generate_reclaim_round  # noqa: E402
from optsched.sim.config import SimConfig  # noqa: E402
from optsched.sim.engine import Simulator  # noqa: E402
from optsched.sim.loaning import loan_targets, opportunistic_changes, synthetic_usage  # noqa: E402
from optsched.sim.lyra_truth import LyraGroundTruth  # noqa: E402
from optsched.sim.traces.lyra import lyra_jobs, philly_rows, synthetic_rows  # noqa: E402
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
    if PHILLY.exists():
        rows, trace = philly_rows(PHILLY), "philly_busiest12h"
    else:
        rows, trace = synthetic_rows(jobs_n or 3000, seed=0), "synthetic"
        print(f"({PHILLY} not found: the synthetic trace instead)")
    if jobs_n is not None:
        rows = rows[:jobs_n]
    jobs = lyra_jobs(rows, seed=0, max_gpus=8 * training)
    cluster = two_pool_cluster(training, inference)
    inf = tuple(inference_name(i) for i in range(inference))
    usage = synthetic_usage(4, seed=0, start_hour=TRACE_START_HOUR)
    loan = loan_targets(usage, inf)
    opportunistic = opportunistic_changes(usage, cluster, inf)
    no_loan = [PoolTarget(0.0, inf, 0)]
    truth = LyraGroundTruth(frozenset({"T4"}))
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
        res = Simulator(cluster, jobs, policy, truth, SIM_CONFIG,
                        round_fields={"inference_nodes": inf, "opportunistic": opp},
                        pool_targets=() if opp else loan if lend else no_loan,
                        capacity_changes=opportunistic if opp else (), trace_name=trace).run()
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
    print(f"\ntrace {trace}: {len(jobs)} jobs, {training} training + {inference} inference servers")
    emit(("scheme", "method", "loaning", "finished", "jobs", "queue_mean_s", "queue_median_s", "queue_p95_s",
          "jct_mean_s", "jct_p95_s", "queue_reduction", "jct_reduction", "preemption_ratio", "rounds", "wall_s"),
         out, "lyra_sim.csv")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="600 jobs, one reclaim seed")
    ap.add_argument("--full", action="store_true", help="also the baselines in the simulation")
    ap.add_argument("--seeds", type=int, default=3, help="reclaim instances per size")
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs of the trace (default all)")
    ap.add_argument("--training", type=int, default=40, help="training servers (8xV100)")
    ap.add_argument("--inference", type=int, default=48, help="inference servers (8xT4)")
    ap.add_argument("--parts", default="mckp,reclaim,sim", help="which tables (comma-separated)")
    args = ap.parse_args(argv)
    parts = set(args.parts.split(","))
    if "mckp" in parts:
        mckp_table()
    if "reclaim" in parts:
        reclaim_table(1 if args.quick else args.seeds)
    if "sim" in parts:
        sim_table(600 if args.quick and args.jobs is None else args.jobs, args.training, args.inference, args.full)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
