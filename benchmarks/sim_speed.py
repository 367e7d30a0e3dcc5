"""Simulator speed (issue "Trace-driven cluster simulator", Must show): the 406-job Rubick trace with the
Rubick heuristic (target < 60 s) and the 3,234-job busiest-12h Philly window on 1,280 GPUs (target
<= 90 s since issue "Scale and optimality gap", item 2; it was < 5 min), on 2 cores.

    python benchmarks/sim_speed.py [--data ../shared/data] [--policy rubick] [--philly-jobs N]
                                   [--min-round-gap S] [--skip-philly]

The 406-job trace runs on the 8x8 A800 cluster with the measured placements as ground truth; the
Philly window runs on ``a800-160x8`` (160 nodes x 8 A800) with the analytical ground truth (the
measurements only cover up to 64 GPUs), models and plans assigned with seed 0 as Rubick Sec. 7.3
describes. Prints wall time, rounds, time spent in the policy and the headline metrics, and writes
``benchmarks/out/sim_speed.csv``. Exits 0 with a message when the data is absent.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.core.catalog import get_cluster  # noqa: E402
from optsched.sim.config import SimConfig  # noqa: E402
from optsched.sim.ground_truth import AnalyticalGroundTruth, MeasuredGroundTruth  # noqa: E402
from optsched.experiments.compare import run_policies  # noqa: E402
from optsched.sim.traces import load_philly_csv, load_workload_csv  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--policy", default="rubick")
    ap.add_argument("--philly-jobs", type=int, default=None, help="keep only the first N Philly jobs")
    ap.add_argument("--min-round-gap", type=float, default=0.0)
    ap.add_argument("--skip-philly", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    workload = args.data / "morphling" / "workloads" / "workload-base.csv"
    philly = args.data / "traces" / "philly" / "philly_busiest12h.csv"
    if not workload.is_file() or not philly.is_file():
        sys.stdout.write(f"skipped: {args.data} lacks the Rubick workloads or the Philly window\n")
        return 0
    config = SimConfig(min_round_gap_s=args.min_round_gap)
    cases = []
    small = get_cluster("a800-8x8")
    truth = MeasuredGroundTruth.from_directory(args.data / "morphling" / "placements", small)
    cases.append(("rubick-406 (base)", small, truth, load_workload_csv(workload, small), 60.0))
    if not args.skip_philly:
        big = get_cluster("a800-160x8")
        analytical = AnalyticalGroundTruth(big)
        trace = load_philly_csv(philly, big, seed=0, iteration_time=analytical.iteration_time,
                                max_jobs=args.philly_jobs)
        cases.append(("philly-busiest-12h", big, analytical, trace, 90.0))
    header = ("trace", "gpus", "jobs", "policy", "wall_s", "target_s", "met", "rounds", "policy_s", "ms_per_round",
              "avg_jct_h", "makespan_h", "reconfigs", "unfinished")
    rows = []
    for name, cluster, gt, trace, target in cases:
        t0 = time.perf_counter()
        res = run_policies(cluster, trace.jobs, gt, [args.policy], config, round_fields=trace.round_fields(), trace_name=name,
                           progress=True)[args.policy]
        wall = time.perf_counter() - t0
        s = res.summary()
        rows.append((name, cluster.total_gpus, len(trace), args.policy, round(wall, 1), target,
                     "yes" if wall <= target else "NO", s["rounds"], round(s["policy_seconds"], 1),
                     round(1000 * s["policy_seconds"] / max(1, s["rounds"]), 1),
                     None if s["avg_jct_s"] is None else round(s["avg_jct_s"] / 3600, 3),
                     None if s["makespan_s"] is None else round(s["makespan_s"] / 3600, 2), s["reconfigurations"],
                     s["unfinished"]))
    path = emit(header, rows, "sim_speed.csv")
    sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
