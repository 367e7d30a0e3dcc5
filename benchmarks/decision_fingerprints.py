"""Decision fingerprints: every round method on a fixed set of generated rounds, to show that a change
of code leaves the decisions alone (issue "One round layer for four systems", Must show: "decisions
byte-equal on the 12 generated rounds"; the same check serves any later refactor or speed-up).

    python benchmarks/decision_fingerprints.py [--out FILE.jsonl] [--compare OLD.jsonl]
                                               [--time-limit 30] [--quick]

Rounds: ``optsched gen-round --kind rubick`` on 8x8 GPUs with 20/40/80 jobs (seeds 0-2), 24x8 with
100 jobs and 160x8 with 200 and 400 jobs (seed 0): 12 rounds. Methods: every Rubick heuristic
(``rubick``, ``rubick-e``, ``rubick-r``, ``rubick-n``) with and without deferral of unreachable
guarantees, the baselines (``fifo``, ``fifo-backfill``, ``synergy``, ``sia``, ``antman``) and the exact
round (``exact``, seed 0, one CP-SAT worker). Each line of the output holds one (round, method) with the
decision as JSON minus its wall time (``solve_seconds``), or the error it raised, and the SHA-256 of
that JSON. ``--compare`` prints, per line, whether the old and new fingerprints are equal; an exact
decision counts as comparable only when both runs proved it optimal (a time-limited solve may stop at
another incumbent). Prints the table, writes ``benchmarks/out/decision_fingerprints.csv`` and the JSON
lines (default ``benchmarks/out/decision_fingerprints.jsonl``). Exits 1 when a comparable line differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.core.errors import OptschedError  # noqa: E402
from optsched.rounds.rubick.generate import generate_rubick_round  # noqa: E402
from report import OUT, emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: (nodes, GPUs per node, jobs, seed) of the 12 rounds
ROUNDS: tuple[tuple[int, int, int, int], ...] = (
    *((8, 8, jobs, seed) for jobs in (20, 40, 80) for seed in range(3)),
    (24, 8, 100, 0), (160, 8, 200, 0), (160, 8, 400, 0))
#: (method, defer unreachable guarantees)
METHODS: tuple[tuple[str, bool], ...] = (
    *((m, d) for m in ("rubick", "rubick-e", "rubick-r", "rubick-n") for d in (False, True)),
    *((m, False) for m in ("fifo", "fifo-backfill", "synergy", "sia", "antman")),
    ("exact", False), ("exact", True))


def fingerprint(problem: optsched.RoundProblem, method: str, defer: bool, time_limit: float) -> dict[str, Any]:
    """One line: the decision (minus its wall time) or the error, and its SHA-256."""
    try:
        d = optsched.solve(problem, method, time_limit, 0, defer_unreachable_guarantees=defer).to_dict()
        d.pop("solve_seconds")
        body: dict[str, Any] = {"decision": d}
    except OptschedError as exc:
        body = {"error": f"{type(exc).__name__}: {exc}"}
    text = json.dumps(body, sort_keys=True)
    return {**body, "sha256": hashlib.sha256(text.encode()).hexdigest(),
            "status": body["decision"]["status"] if "decision" in body else "error",
            "objective": body["decision"]["objective"] if "decision" in body else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT / "decision_fingerprints.jsonl")
    ap.add_argument("--compare", type=Path, help="an earlier output of this script")
    ap.add_argument("--time-limit", type=float, default=30.0, help="limit of the exact method per round")
    ap.add_argument("--quick", action="store_true", help="only the nine 8x8 rounds")
    args = ap.parse_args(argv)
    old: dict[tuple, dict[str, Any]] = {}
    if args.compare is not None:
        for line in args.compare.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            old[(rec["round"], rec["method"], rec["defer"])] = rec
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = ("round", "method", "defer", "status", "objective", "sha256", "same")
    rows, differ = [], 0
    with args.out.open("w", encoding="utf-8") as f:
        for nodes, gpn, jobs, seed in ROUNDS:
            if args.quick and nodes != 8:
                continue
            name = f"{nodes}x{gpn}-{jobs}j-s{seed}"
            problem = generate_rubick_round(nodes, gpn, jobs, seed)
            for method, defer in METHODS:
                rec = {"round": name, "method": method, "defer": defer,
                       **fingerprint(problem, method, defer, args.time_limit)}
                f.write(json.dumps(rec, sort_keys=True) + "\n")
                same = "-"
                prev = old.get((name, method, defer))
                if prev is not None:
                    comparable = method != "exact" or (prev["status"] == rec["status"] == "optimal")
                    same = ("yes" if prev["sha256"] == rec["sha256"] else "NO") if comparable else "n/a"
                    differ += same == "NO"
                rows.append((name, method, defer, rec["status"],
                             "" if rec["objective"] is None else f"{rec['objective']:.6f}", rec["sha256"][:12], same))
                sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
                sys.stdout.flush()
    emit(header, rows, "decision_fingerprints.csv")
    sys.stdout.write(f"wrote {args.out}" + (f"; {differ} comparable line(s) differ\n" if old else "\n"))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
