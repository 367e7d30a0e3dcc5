"""Scale (issue "Scale and optimality gap", Must show): time limits that hold on large rounds, partitioned
solving against the unpartitioned solve, and the mid-size round that used to get no bound.

    python benchmarks/scale.py [--nodes 1280] [--jobs 2000] [--limit 60] [--partitions 8]
                               [--long-limit 600] [--skip-long] [--queue-jobs 100000] [--queue-limit 5]
    python benchmarks/scale.py --constraints [--constrained 0.25] [--nodes 1280] [--jobs 2000] [--limit 60]

Cases, each one solve measured in this run (wall time includes the table and the heuristic):

* ``24x8/100`` (seed 0), ``exact`` at the default 10 s: status, objective, bound, gap;
* ``NODESx8/JOBS`` (seed 0): ``rubick`` (Algorithm 1) with an ample limit, ``exact`` with ``--limit``,
  ``exact`` with ``--limit`` and ``--partitions``, ``rubick`` with ``--limit`` and ``--partitions``, and
  (unless ``--skip-long``) ``exact`` with ``--long-limit``, the best unpartitioned objective found;
* ``1x8/QUEUE-JOBS`` (seed 0; ``--queue-jobs 0`` skips it): the round written to a file and solved by
  ``optsched solve --time-limit QUEUE-LIMIT`` in a fresh process per method (``exact``, ``rubick``
  and the baselines); ``wall_s`` is the command's time inside that process, after Python started and
  imported optsched (about 1 s, before the time limit's clock starts), writing the decision included.

Prints the table with each objective's ratio to Algorithm 1's and to the best unpartitioned one, and
writes ``benchmarks/out/scale.csv``.

``--constraints`` measures instead what hard constraints cost at scale (issue "A round a real cluster
scheduler can state", Performance: "solves within 1.5x the time of the same round without them"): the
``NODESx8/JOBS`` round (seed 0) and the same round with ``--constrained`` of its queued jobs carrying
a constraint (``generate_rubick_round(..., constrained=F)``: rack selectors, ``max_nodes``, gangs, CPU
floors, required and preferred rack topology rules; the nodes labelled with racks, the racks also
their topology) and that fraction of all jobs a priority of 1 or 2, each solved by ``rubick`` (ample
limit), ``exact`` (``--limit``)
and ``exact`` with ``--partitions``, in one run; prints each constrained wall time over the
unconstrained one and writes ``benchmarks/out/scale_constraints.csv``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
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


#: run in a fresh process: the optsched solve command, timed after Python started and imported it
_TIMED_SOLVE = """
import json, sys, time
t0 = time.perf_counter()
from optsched import cli
t1 = time.perf_counter()
code = cli.main(sys.argv[1:])
print(json.dumps({"import_s": t1 - t0, "command_s": time.perf_counter() - t1, "code": code}))
"""


def _queue_rows(jobs: int, limit: float) -> list[dict]:
    """The long-queue case (module docstring), one row per method."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "queue.json"
        path.write_text(json.dumps(generate_rubick_round(1, 8, jobs, 0).to_dict()))
        for method in ("exact", "rubick", "sia", "synergy", "fifo", "antman"):
            out = Path(tmp) / f"{method}.json"
            args = ["solve", str(path), "--method", method, "--time-limit", str(limit), "--out", str(out)]
            args += ["--defer-unreachable"] if method in ("exact", "rubick") else []
            t0 = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _TIMED_SOLVE, *args], check=True, capture_output=True,
                                  text=True)
            wall = time.perf_counter() - t0
            timing = json.loads(done.stdout.strip().splitlines()[-1])
            d = json.loads(out.read_text())
            rows.append({"case": f"1x8/{jobs}", "method": method, "limit_s": limit, "partitions": 1,
                         "wall_s": timing["command_s"], "status": d["status"], "objective": d["objective"],
                         "bound": d["bound"], "gap": d["gap"], "message": d["message"][:120]})
            sys.stdout.write(f"1x8/{jobs} {method} limit={limit:g}: the command took {timing['command_s']:.2f} s "
                             f"(process {wall:.1f} s, of which {timing['import_s']:.1f} s starting Python and "
                             f"importing optsched), {d['status']}\n")
            sys.stdout.flush()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1280)
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--long-limit", type=float, default=600.0)
    ap.add_argument("--skip-long", action="store_true")
    ap.add_argument("--queue-jobs", type=int, default=100_000)
    ap.add_argument("--queue-limit", type=float, default=5.0)
    ap.add_argument("--constraints", action="store_true", help="measure the cost of hard constraints only")
    ap.add_argument("--constrained", type=float, default=0.25, help="fraction of queued jobs with a constraint")
    args = ap.parse_args(argv)
    if args.constraints:
        return _constraint_cost(args)
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
    if args.queue_jobs:
        rows += _queue_rows(args.queue_jobs, args.queue_limit)
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


def _constraint_cost(args: argparse.Namespace) -> int:
    """The ``--constraints`` case (module docstring)."""
    case = f"{args.nodes}x8/{args.jobs}"
    rounds = {"none": generate_rubick_round(args.nodes, 8, args.jobs, 0),
              f"{args.constrained:g}": generate_rubick_round(args.nodes, 8, args.jobs, 0, constrained=args.constrained)}
    out = []
    for method, limit, parts in (("rubick", 3600.0, None), ("exact", args.limit, None),
                                 ("exact", args.limit, args.partitions)):
        base = None
        for label, problem in rounds.items():
            r = _run(problem, method, limit, parts)
            base = r["wall_s"] if base is None else base
            sys.stdout.write(f"{case} constrained={label} {method} partitions={parts or 1}: {r['wall_s']:.1f} s, "
                             f"{r['status']}, objective {r['objective']:.4f}\n")
            sys.stdout.flush()
            out.append((case, label, method, limit, parts or 1, f"{r['wall_s']:.1f}", f"{r['wall_s'] / base:.2f}",
                        r["status"], f"{r['objective']:.4f}", "-" if r["gap"] is None else f"{100 * r['gap']:.3f}"))
    emit(("case", "constrained", "method", "limit_s", "partitions", "wall_s", "wall_vs_unconstrained", "status",
          "objective", "gap_%"), out, "scale_constraints.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
