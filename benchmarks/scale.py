"""Scale (issue "Scale and optimality gap", Must show): time limits that hold on large rounds, partitioned
solving against the unpartitioned solve, and the mid-size round that used to get no bound.

    python benchmarks/scale.py [--nodes 1280] [--jobs 2000] [--limit 60] [--partitions 8]
                               [--long-limit 600] [--skip-long]

Cases, each one solve measured in this run (wall time includes the table and the heuristic):

* ``24x8/100`` (seed 0), ``exact`` at the default 10 s: status, objective, bound, gap;
* ``NODESx8/JOBS`` (seed 0): ``rubick`` (Algorithm 1) with an ample limit, ``exact`` with ``--limit``,
  ``exact`` with ``--limit`` and ``--partitions``, ``rubick`` with ``--limit`` and ``--partitions``, and
  (unless ``--skip-long``) ``exact`` with ``--long-limit``, the best unpartitioned objective found.

Prints the table with each objective's ratio to Algorithm 1's and to the best unpartitioned one, and
writes ``benchmarks/out/scale.csv``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.rounds.rubick.generate import generate_rubick_round  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)


def _run(problem: optsched.RubickRound, method: str, limit: float, partitions: int | None = None) -> dict:
    t0 = time.perf_counter()
    d = optsched.solve(problem, method, limit, partitions=partitions, defer_unreachable_guarantees=True)
    return {"method": method, "limit_s": limit, "partitions": partitions or 1, "wall_s": time.perf_counter() - t0,
            "status": d.status, "objective": d.objective, "bound": d.bound, "gap": d.gap, "message": d.message[:120]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1280)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--long-limit", type=float, default=600.0)
    ap.add_argument("--skip-long", action="store_true")
    args = ap.parse_args(argv)
    rows = []
    mid = generate_rubick_round(24, 8, 100, 0)
    rows.append({"case": "24x8/100", **_run(mid, "exact", 10.0)})
    big = generate_rubick_round(args.nodes, 8, args.jobs, 0)
    case = f"{args.nodes}x8/{args.jobs}"
    plan = [("rubick", 3600.0, None), ("exact", args.limit, None), ("exact", args.limit, args.partitions),
            ("rubick", args.limit, args.partitions)]
    if not args.skip_long:
        plan.append(("exact", args.long_limit, None))
    for method, limit, parts in plan:
        rows.append({"case": case, **_run(big, method, limit, parts)})
        r = rows[-1]
        sys.stdout.write(f"{case} {method} limit={limit:g} partitions={parts or 1}: {r['wall_s']:.1f} s, "
                         f"{r['status']}, objective {r['objective']:.4f}\n")
        sys.stdout.flush()
    heuristic = next(r["objective"] for r in rows if r["case"] == case and r["method"] == "rubick"
                     and r["partitions"] == 1)
    best = max(r["objective"] for r in rows if r["case"] == case and r["partitions"] == 1)
    header = ("case", "method", "limit_s", "partitions", "wall_s", "within_limit", "status", "objective",
              "vs_heuristic", "vs_best_unpartitioned", "bound", "gap_%")
    out = []
    for r in rows:
        big_case = r["case"] == case
        out.append((r["case"], r["method"], r["limit_s"], r["partitions"], f"{r['wall_s']:.1f}",
                    "yes" if r["wall_s"] <= r["limit_s"] + 1.0 else "NO", r["status"], f"{r['objective']:.4f}",
                    f"{r['objective'] / heuristic:.4f}" if big_case else "-",
                    f"{r['objective'] / best:.4f}" if big_case else "-",
                    "-" if r["bound"] is None else f"{r['bound']:.4f}",
                    "-" if r["gap"] is None else f"{100 * r['gap']:.3f}"))
    emit(header, out, "scale.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
