"""Gap study (issue "Scale and optimality gap", item 5): for every round kind with a probe
(:func:`optsched.experiments.gap.probe_of`) and a size sweep, the heuristic's and the exact objective, the
bound and the gap, solve times, the times to the first solution and to a 1% gap with and without the
heuristic's warm start, and the pulp LP bound as a second opinion.

    python benchmarks/gap_study.py [--kinds K ...] [--time-limit 20] [--seeds 3]
                                   [--sizes 8:40 24:100 64:200 160:400] [--plots DIR] [--workers 1]
                                   [--runner local|ray|auto]

Prints the per-instance table and, per kind and instance size (the kind's size measure,
``optsched.experiments.gap.size_of``: GPUs, or jobs for ``crius``, experts x devices for ``experts``,
operations for ``moe-comm``, experts for ``training-packing``), the median heuristic gap to the best bound
(relative, and absolute in the objective's units: a relative gap says little where the objective crosses zero,
as ``placement``'s idle servers minus a penalty per unplaced worker does), the median exact gap, the
median exact time and the median warm-start speed-up to 1%; the fitted growth exponents of exact solve
time and of time to 1% (log-log least squares over the size); writes ``benchmarks/out/gap_study.csv``
and ``gap_study_summary.csv``, and per kind the PNG plots under ``benchmarks/out/`` (``--plots``) when
matplotlib is installed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.experiments.gap import GapPoint, probe_kinds, growth_exponent, median_by, plot_study, run_gap_point  # noqa: E402
from optsched.experiments.sweep import run_sweep  # noqa: E402
from report import OUT, emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: default sweep: (nodes, jobs) on 8-GPU nodes
SIZES = ("8:20", "8:40", "8:80", "24:100", "32:120", "48:150", "64:200", "160:400")
Options = tuple[tuple[str, int], ...]


def _lyra_servers(nodes: int) -> Options:
    """A Lyra cluster of ``nodes`` servers: half of them on-loan inference ``servers``, the rest ``training``."""
    return (("servers", max(1, nodes // 2)), ("training", nodes - nodes // 2))


#: per kind with a probe, its sweep: the generator options of each instance size, made from the NODES:JOBS
#: sizes of ``--sizes`` for the kinds whose rounds grow with nodes and jobs, the kind's own sizes otherwise
SWEEPS: dict[str, Callable[[Sequence[tuple[int, int]]], list[Options]]] = {
    "rubick": lambda sizes: [(("nodes", n), ("jobs", j)) for n, j in sizes],
    "crius": lambda sizes: [(("jobs", j),) for _, j in sizes],
    "lyra-reclaim": lambda sizes: [_lyra_servers(n) for n, _ in sizes],
    "lyra-allocate": lambda sizes: [_lyra_servers(n) + (("jobs", j),) for n, j in sizes],
    "placement": lambda sizes: [_lyra_servers(n) + (("jobs", j),) for n, j in sizes],
    "experts": lambda _: [(("devices", d), ("experts", e)) for e, d in ((12, 12), (16, 8), (16, 16), (32, 32), (64, 64))],
    "moe-comm": lambda _: [(("moe_layers", k),) for k in (1, 2, 4, 8)],
    "training-packing": lambda _: [(("experts", e),) for e in (8, 16, 32, 64, 128)],
}
COLUMNS = ("kind", "gpus", "jobs", "size", "seed", "heuristic_objective", "heuristic_s", "exact_objective", "bound", "gap",
           "heuristic_gap", "exact_s", "status", "encoding", "first_warm_s", "gap1_warm_s", "first_cold_s",
           "gap1_cold_s", "lp_bound", "table_s")


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=None, metavar="K", help="round kinds (default: every kind with a probe)")
    ap.add_argument("--time-limit", type=float, default=20.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--sizes", nargs="+", default=list(SIZES), help="NODES:JOBS on 8-GPU nodes")
    ap.add_argument("--plots", type=Path, default=OUT, help="directory of the PNG plots")
    ap.add_argument("--workers", type=int, default=1,
                    help="instances solved at once (default 1: times are measured on an otherwise idle core)")
    ap.add_argument("--runner", choices=("local", "ray", "auto"), default="local")
    args = ap.parse_args(argv)
    sizes = [(int(n), int(j)) for n, j in (s.split(":") for s in args.sizes)]
    kinds = list(probe_kinds()) if args.kinds is None else list(dict.fromkeys(args.kinds))
    unknown = [k for k in kinds if k not in probe_kinds()]
    if unknown:
        ap.error(f"no gap study for kind(s) {', '.join(unknown)} (known: {', '.join(probe_kinds())})")
    missing = sorted(set(kinds) - set(SWEEPS))
    if missing:
        ap.error(f"no sweep for kind(s) {', '.join(missing)}: add them to SWEEPS")
    points = [GapPoint(kind, opts, seed, args.time_limit) for kind in kinds for opts in SWEEPS[kind](sizes)
              for seed in range(args.seeds)]
    rows = run_sweep(points, args.runner, args.workers, progress=True, fn=run_gap_point)
    for row in rows:
        sys.stdout.write("  ".join(_fmt(row.get(c)) for c in COLUMNS) + "\n")
    emit(COLUMNS, [[_fmt(r.get(c)) for c in COLUMNS] for r in rows], "gap_study.csv")
    summary = []
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        h_gap = median_by(mine, "size", "heuristic_gap")
        h_abs = median_by([dict(r, abs_gap=r["bound"] - r["heuristic_objective"]) for r in mine
                           if r.get("bound") is not None and r.get("heuristic_objective") is not None], "size", "abs_gap")
        e_gap = median_by(mine, "size", "gap")
        t_exact = median_by(mine, "size", "exact_s")
        speedups = [dict(r, speedup=r["gap1_cold_s"] / r["gap1_warm_s"]) for r in mine
                    if r.get("gap1_cold_s") and r.get("gap1_warm_s")]
        speed = median_by(speedups, "size", "speedup")
        for g in sorted({r["size"] for r in mine}):
            summary.append((kind, mine[0]["size_of"], g, _fmt(100 * h_gap[g]) if g in h_gap else "-",
                            _fmt(h_abs.get(g)), _fmt(100 * e_gap[g]) if g in e_gap else "-", _fmt(t_exact.get(g)),
                            _fmt(speed.get(g))))
        for key in ("exact_s", "gap1_warm_s", "gap1_cold_s"):
            b = growth_exponent([r["size"] for r in mine], [r.get(key) for r in mine])
            sys.stdout.write(f"{kind}: growth exponent of {key} over {mine[0]['size_of']}: {_fmt(b)}\n")
    emit(("kind", "size_of", "size", "median_heuristic_gap_%", "median_heuristic_abs_gap", "median_exact_gap_%", "median_exact_s",
          "median_warm_speedup_to_1%"), summary, "gap_study_summary.csv")
    for p in plot_study(rows, args.plots):
        sys.stdout.write(f"wrote {p}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
