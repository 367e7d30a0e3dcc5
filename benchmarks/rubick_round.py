"""Rubick round: Algorithm 1 vs the exact CP-SAT round warm-started by it (issue "Rubick scheduling
round", Must show).

    python benchmarks/rubick_round.py [--seeds 1] [--time-limit 30] [--workers 1] [--quick]

Instances come from ``optsched gen-round`` (:func:`optsched.rounds.rubick.generate.generate_rubick_round`):
8x8 GPUs with 20/40/80 jobs and 160x8 GPUs (1,280) with 200/400 jobs. For each: the heuristic's
objective and time, the exact objective, bound, gap and time, the encoding and model size, and the
exact/heuristic objective ratio, all measured in the same run. Prints a table and writes
``benchmarks/out/rubick_round.csv``. Targets: proven optimal within 2 s at 64 GPUs / 40 jobs; gap <= 2%
at 1,280 GPUs / 400 jobs within 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.policies import PolicyOptions, make_policy
from optsched.policies.rubick import RubickHeuristicPolicy
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

CASES = ((8, 20), (8, 40), (8, 80), (160, 200), (160, 400))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1, help="instances per size (seeds 0..n-1)")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT workers (1 = reproducible)")
    ap.add_argument("--quick", action="store_true", help="only the 8x8 cases")
    args = ap.parse_args(argv)
    header = ("gpus", "jobs", "seed", "heur_obj", "heur_s", "exact_obj", "bound", "gap_%", "exact_s", "status",
              "encoding", "variables", "ratio")
    rows = []
    for nodes, jobs in CASES:
        if args.quick and nodes > 8:
            continue
        for seed in range(args.seeds):
            problem = generate_rubick_round(nodes, 8, jobs, seed)
            t0 = time.perf_counter()
            h = RubickHeuristicPolicy("heuristic").decide(problem)
            h_s = time.perf_counter() - t0
            e = make_policy("exact", PolicyOptions(args.time_limit, seed, args.workers)).decide(problem)
            model = dict(re.findall(r"(\w+)=(\S+)", e.message))
            size, variables = model.get("encoding", ""), model.get("variables", "")
            rows.append((nodes * 8, jobs, seed, f"{h.objective:.4f}", f"{h_s:.2f}", f"{e.objective:.4f}",
                         "" if e.bound is None else f"{e.bound:.4f}",
                         "" if e.gap is None else f"{100 * e.gap:.3f}", f"{e.solve_seconds:.2f}", e.status, size,
                         variables, f"{e.objective / h.objective:.4f}" if h.objective > 0 else ""))
            sys.stdout.write("  ".join(str(c) for c in rows[-1]) + "\n")
            sys.stdout.flush()
    emit(header, rows, "rubick_round.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
