"""Sweep of simulations (policies x traces x clusters x seeds) through ``optsched.experiments.sweep``:
prints one line per point and writes the tidy CSV ``benchmarks/out/sweep.csv`` (every column of
:func:`optsched.experiments.sweep.run_point`, full precision).

    python benchmarks/sweep.py --policies rubick sia fifo --traces synthetic:60:1.0 --seeds 0 1 \\
                               --runner local --workers 2 [--scaling]

Trace specs are ``synthetic:N:LOAD`` or trace CSV paths; clusters are catalogue names. ``--scaling``
also runs the same grid in this process (local, 1 worker) and prints both wall times, the speed-up
and whether the two runs gave identical rows (wall-clock columns aside), in
``benchmarks/out/sweep_scaling.csv``. The per-point table is also written as
``benchmarks/out/sweep_table.csv`` (hours, rounded).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.core.errors import OptschedError  # noqa: E402
from optsched.experiments.sweep import RUNNERS, comparable, grid, resolve_runner, run_sweep, write_csv  # noqa: E402
from optsched.policies.options import DEFAULT_TIME_LIMIT  # noqa: E402
from optsched.sim.config import ROUND_INTERVAL_S  # noqa: E402
from report import OUT, emit  # noqa: E402  (benchmarks/report.py, next to this script)


def _hours(v: float | None) -> str:
    return "-" if v is None else f"{v / 3600.0:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", nargs="+", default=["rubick", "sia", "fifo"], metavar="NAME")
    ap.add_argument("--traces", nargs="+", default=["synthetic:60:1.0"], metavar="SPEC")
    ap.add_argument("--clusters", nargs="+", default=["a800-8x8"], metavar="NAME")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1], metavar="N")
    ap.add_argument("--ground-truth", default="analytical", metavar="SPEC",
                    help="'analytical', 'measured:DIR' or 'params:FILE.json' (analytical)")
    ap.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                    help=f"per-round limit of solver-backed policies ({DEFAULT_TIME_LIMIT:g})")
    ap.add_argument("--round-interval", type=float, default=ROUND_INTERVAL_S, metavar="S")
    ap.add_argument("--max-time", type=float, default=None, metavar="S")
    ap.add_argument("--runner", choices=RUNNERS, default="auto")
    ap.add_argument("--workers", type=int, default=None, help="processes / Ray tasks in flight (all cores)")
    ap.add_argument("--scaling", action="store_true",
                    help="also run the grid in-process (1 worker) and compare wall times and rows")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        points = grid(policies=args.policies, traces=args.traces, clusters=args.clusters, seeds=args.seeds,
                      ground_truth=args.ground_truth, time_limit=args.time_limit,
                      round_interval_s=args.round_interval, max_time_s=args.max_time)
        runner = resolve_runner(args.runner)
        t0 = time.perf_counter()
        rows = run_sweep(points, runner=runner, workers=args.workers, progress=args.progress)
        wall = time.perf_counter() - t0
        serial = None
        if args.scaling:
            t0 = time.perf_counter()
            serial_rows = run_sweep(points, runner="local", workers=1, progress=args.progress)
            serial = (time.perf_counter() - t0, serial_rows)
    except OptschedError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2

    header = ("policy", "trace", "cluster", "seed", "jobs", "unfinished", "avg_jct_h", "p50_jct_h", "p99_jct_h",
              "makespan_h", "avg_queue_h", "reconfigs", "preempts", "gpu_util", "rounds", "failed_rounds", "wall_s")
    table = [(r["policy"], r["trace"], r["cluster"], r["seed"], r["jobs"], r["unfinished"], _hours(r["avg_jct_s"]),
              _hours(r["p50_jct_s"]), _hours(r["p99_jct_s"]), _hours(r["makespan_s"]), _hours(r["avg_queue_s"]),
              r["reconfigurations"], r["preemptions"],
              "-" if r["gpu_utilisation"] is None else f"{100 * r['gpu_utilisation']:.1f}%", r["rounds"],
              r["failed_rounds"], f"{r['wall_seconds']:.1f}") for r in rows]
    emit(header, table, "sweep_table.csv")
    path = write_csv(rows, OUT / "sweep.csv")
    workers = args.workers if args.workers is not None else "all"
    sys.stdout.write(f"{len(points)} points on {runner} (workers={workers}) in {wall:.1f} s; wrote {path}\n")
    if serial is not None:
        serial_wall, serial_rows = serial
        same = [comparable(r) for r in rows] == [comparable(r) for r in serial_rows]
        emit(("runner", "workers", "points", "wall_s", "speedup", "rows_identical"),
             [("local", 1, len(points), f"{serial_wall:.1f}", "1.00x", "-"),
              (runner, workers, len(points), f"{wall:.1f}", f"{serial_wall / wall:.2f}x", "yes" if same else "NO")],
             "sweep_scaling.csv")
        if not same:
            sys.stderr.write("error: the rows differ between the two runs\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
