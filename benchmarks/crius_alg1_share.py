"""Crius Algorithm 1's share of the exact optimum (issue 25): its objective over the exact optimum's, both
in the round's objective, on generated Crius rounds.

    python benchmarks/crius_alg1_share.py [--objective throughput|deadline|normalised|normalised-deadline]
                                          [--time-limit 60]

Rounds: ``optsched gen-round --kind crius --jobs J --seed S`` for J = 100, 300 and S = 0, 1, 2, and the
rounds of ``benchmarks/crius.py --sections round`` (98 and 316 queued jobs beside about 150 running,
seed 0). Per round: Algorithm 1's objective, status and time, the exact objective and status, and the
ratio. ``--objective`` replaces the generated rounds' objective (default: theirs, the paper's raw
cluster throughput in samples/s, Crius Sec. 2.2).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import optsched
from optsched.rounds.crius import generate_crius_round


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objective", default=None)
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args(argv)
    cases = [("bench", n, 0, {"running_fraction": 150 / (n + 150)}, n + 150) for n in (100, 300)]
    cases += [("gen-round", j, s, {}, j) for j in (100, 300) for s in (0, 1, 2)]
    for src, n, seed, kw, total in cases:
        p = generate_crius_round(total, seed, **kw)
        if args.objective:
            p = dataclasses.replace(p, objective=args.objective)
        t0 = time.perf_counter()
        h = optsched.solve(p, "crius", seed=seed, time_limit=args.time_limit)
        e = optsched.solve(p, "exact", time_limit=args.time_limit, seed=seed)
        sys.stdout.write(f"{src:9s} jobs={n:4d} seed={seed} queued={len(p.jobs) - len(p.running)} "
                         f"running={len(p.running)} objective={p.objective} heuristic={h.objective:.6g} ({h.status}, "
                         f"{h.solve_seconds:.1f} s) exact={e.objective:.6g} ({e.status}) "
                         f"ratio={h.objective / e.objective:.3f} [{time.perf_counter() - t0:.1f} s]\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
