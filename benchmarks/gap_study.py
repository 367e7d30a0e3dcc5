"""Gap study (issue "Scale and optimality gap", item 5): for every round kind with a probe
(:data:`optsched.experiments.gap.PROBES`) and a size sweep, the heuristic's and the exact objective, the
bound and the gap, solve times, the times to the first solution and to a 1% gap with and without the
heuristic's warm start, and the pulp LP bound as a second opinion.

    python benchmarks/gap_study.py [--time-limit 20] [--seeds 3] [--sizes 8:40 24:100 64:200 160:400]
                                   [--plots DIR] [--workers 1] [--runner local|ray|auto]

Prints the per-instance table and a summary per size (median heuristic gap to the best bound, median
exact gap, median warm-start speed-up to 1%), the fitted growth exponents of exact solve time and of
time to 1% (log-log least squares over GPUs), writes ``benchmarks/out/gap_study.csv`` and
``gap_study_summary.csv``, and the PNG plots under ``benchmarks/out/`` (``--plots``) when matplotlib is
installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.experiments.gap import PROBES, GapPoint, growth_exponent, median_by, plot_study, run_gap_point  # noqa: E402
from optsched.experiments.sweep import run_sweep  # noqa: E402
from report import OUT, emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: default sweep: (nodes, jobs) on 8-GPU nodes
SIZES = ("8:20", "8:40", "8:80", "24:100", "32:120", "48:150", "64:200", "160:400")
#: the sweeps of kinds whose generator takes other options than nodes and jobs (kind -> options per size)
OTHER_SIZES: dict[str, tuple[tuple[tuple[str, int], ...], ...]] = {
    "experts": tuple((("devices", d), ("experts", e)) for e, d in ((12, 12), (16, 8), (16, 16), (32, 32), (64, 64))),
    "moe-comm": tuple((("moe_layers", k),) for k in (1, 2, 4, 8)),
}
COLUMNS = ("kind", "gpus", "jobs", "seed", "heuristic_objective", "heuristic_s", "exact_objective", "bound", "gap",
           "heuristic_gap", "exact_s", "status", "encoding", "first_warm_s", "gap1_warm_s", "first_cold_s",
           "gap1_cold_s", "lp_bound", "table_s")


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _options(kind: str, nodes: int, jobs: int) -> tuple[tuple[str, int], ...]:
    """Generator options of a size: ``nodes``/``jobs`` where the kind's generator takes them, else
    (Lyra kinds) half the nodes as on-loan ``servers``, the rest as ``training`` servers, and ``jobs``."""
    from optsched.core.kinds import round_kind
    known = round_kind(kind).generator_options
    if "nodes" in known:
        return (("nodes", nodes), ("jobs", jobs))
    opts = {"servers": max(1, nodes // 2), "training": nodes - nodes // 2, "jobs": jobs}
    return tuple((k, v) for k, v in opts.items() if k in known)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), help="NODES:JOBS on 8-GPU nodes")
    ap.add_argument("--plots", type=Path, default=OUT, help="directory of the PNG plots")
    ap.add_argument("--workers", type=int, default=1,
                    help="instances solved at once (default 1: times are measured on an otherwise idle core)")
    ap.add_argument("--runner", choices=("local", "ray", "auto"), default="local")
    args = ap.parse_args(argv)
    points = []
    for kind in sorted(PROBES):
        if kind in OTHER_SIZES:
            points += [GapPoint(kind, opts, seed, args.time_limit) for opts in OTHER_SIZES[kind]
                       for seed in range(args.seeds)]
            continue
        for size in args.sizes:
            nodes, jobs = (int(x) for x in size.split(":"))
            points += [GapPoint(kind, _options(kind, nodes, jobs), seed, args.time_limit)
                       for seed in range(args.seeds)]
    rows = run_sweep(points, args.runner, args.workers, progress=True, fn=run_gap_point)
    for row in rows:
        sys.stdout.write("  ".join(_fmt(row.get(c)) for c in COLUMNS) + "\n")
    emit(COLUMNS, [[_fmt(r.get(c)) for c in COLUMNS] for r in rows], "gap_study.csv")
    summary = []
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        h_gap = median_by(mine, "gpus", "heuristic_gap")
        e_gap = median_by(mine, "gpus", "gap")
        t_exact = median_by(mine, "gpus", "exact_s")
        speedups = [dict(r, speedup=r["gap1_cold_s"] / r["gap1_warm_s"]) for r in mine
                    if r.get("gap1_cold_s") and r.get("gap1_warm_s")]
        speed = median_by(speedups, "gpus", "speedup")
        for g in sorted({r["gpus"] for r in mine}):
            summary.append((kind, g, _fmt(100 * h_gap[g]) if g in h_gap else "-",
                            _fmt(100 * e_gap[g]) if g in e_gap else "-", _fmt(t_exact.get(g)), _fmt(speed.get(g))))
        for key in ("exact_s", "gap1_warm_s", "gap1_cold_s"):
            b = growth_exponent([r["gpus"] for r in mine], [r.get(key) for r in mine])
            sys.stdout.write(f"{kind}: growth exponent of {key} over GPUs: {_fmt(b)}\n")
    emit(("kind", "gpus", "median_heuristic_gap_%", "median_exact_gap_%", "median_exact_s",
          "median_warm_speedup_to_1%"), summary, "gap_study_summary.csv")
    for p in plot_study(rows, args.plots):
        sys.stdout.write(f"wrote {p}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
