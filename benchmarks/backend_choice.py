"""No tail (issue 29, item 3): each back end's time on every round of a family, its median and its worst, and the
back ends the ``switch`` ran, in one run.

    python benchmarks/backend_choice.py [--families peer-hard-1024,crius-300] [--seeds 0-9]
                                        [--backends cpsat,switch,highs] [--limit 60]

**Families** (rounds of one size, one per seed):

* ``peer-hard-<GPUs>``: the Sia-shaped ``hard`` rounds of ``benchmarks/peer_instances.py`` (Rubick-kind rounds
  whose jobs carry Sia's utilities; the pooled encoding);
* ``peer-easy-<GPUs>``: its ``easy`` rounds;
* ``crius-<jobs>``: generated Crius rounds (:func:`optsched.rounds.crius.generate.generate_crius_round`, its
  default cluster and half the jobs running).

**Back ends**: ``cpsat`` (the default), ``switch`` (CP-SAT, then HiGHS from SciPy after a stall,
:mod:`optsched.formulations.switch`), ``highs`` (HiGHS through pulp and ``highspy``; left out, with a line, when
not installed), ``cbc``. Every solve is ``optsched.solve(round, "exact", --limit, backend=...)``, the whole call
timed (``seconds``).

**Columns**, one row per round and back end: family, seed, back end, seconds, status, the decision's objective,
``best`` (the best objective any back end returned for this round), ``ran`` (the back ends the switch ran, from the
decision's message). Then one row per family and back end: ``median`` and ``max`` seconds over the family's rounds,
``max/median`` (issue 29's target: no round above a few times the median of its size), how many rounds it proved
optimal and how many it returned below ``best``. Writes ``benchmarks/out/backend_choice.csv`` and
``backend_choice_summary.csv``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.core.round import RoundProblem  # noqa: E402
from optsched.formulations import milp  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: objectives within this relative difference are the same
SAME = 1e-6


def family_round(family: str, seed: int) -> Any:
    """The round of ``family`` (module docstring) for ``seed``."""
    kind, _, size = family.rpartition("-")
    if kind in ("peer-hard", "peer-easy"):
        import peer_instances as pi

        data = pi.optsched_round(pi.sia_instance(int(size), kind.split("-")[1], seed))
        return RoundProblem.from_dict(json.loads(json.dumps(data)))
    if kind == "crius":
        from optsched.rounds.crius.generate import generate_crius_round

        return generate_crius_round(int(size), seed=seed)
    raise SystemExit(f"unknown family {family!r}: peer-hard-<GPUs>, peer-easy-<GPUs> or crius-<jobs>")


def timed(problem: Any, backend: str, limit: float) -> tuple[float, Any]:
    t0 = time.perf_counter()
    decision = optsched.solve(problem, "exact", limit, backend=backend)
    return time.perf_counter() - t0, decision


def ran_of(decision: Any, backend: str) -> str:
    """The back ends a decision's message names (``back ends cpsat+highs``), else ``backend``."""
    found = re.search(r"back ends ([a-z+]+)", decision.message)
    return found.group(1) if found else backend


def seeds_of(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def summary(rows: list[tuple[Any, ...]], families: list[str], backends: list[str]) -> list[tuple[Any, ...]]:
    out = []
    for fam in families:
        for b in backends:
            mine = [r for r in rows if r[0] == fam and r[2] == b]
            if not mine:
                continue
            secs = [float(r[3]) for r in mine]
            med = statistics.median(secs)
            below = sum(1 for r in mine if float(r[5]) < float(r[6]) - SAME * max(1.0, abs(float(r[6]))))
            out.append((fam, b, len(mine), f"{med:.3f}", f"{max(secs):.3f}", f"{max(secs) / med:.2f}",
                        sum(1 for r in mine if r[4] == "optimal"), below))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="peer-hard-1024,crius-300", help="comma-separated round families")
    ap.add_argument("--seeds", default="0-9", help="seeds, e.g. 0-9 or 3")
    ap.add_argument("--backends", default="cpsat,switch,highs", help="comma-separated back ends")
    ap.add_argument("--limit", type=float, default=60.0, help="time limit of every solve, seconds")
    ap.add_argument("--out", type=Path, default=None, help="directory of the CSVs (default benchmarks/out)")
    args = ap.parse_args(argv)
    families = args.families.split(",")
    backends = []
    for b in args.backends.split(","):
        if b in milp.BACKENDS and b not in milp.available_backends():
            sys.stdout.write(f"{b}: not installed, left out\n")
            continue
        backends.append(b)
    rows: list[tuple[Any, ...]] = []
    for fam in families:
        warm = family_round(fam, 10_000)  # imports and first-call costs outside the timings
        timed(warm, backends[0], args.limit)
        for seed in seeds_of(args.seeds):
            problem = family_round(fam, seed)
            got: list[tuple[str, float, Any]] = [(b, *timed(problem, b, args.limit)) for b in backends]
            best = max(d.objective for _, _, d in got)
            for b, secs, d in got:
                rows.append((fam, seed, b, f"{secs:.3f}", d.status, f"{d.objective:.6f}", f"{best:.6f}", ran_of(d, b)))
                sys.stdout.write(f"{fam} seed {seed} {b}: {secs:.2f} s {d.status} {d.objective:.4f} "
                                 f"(best {best:.4f}) ran {ran_of(d, b)}\n")
                sys.stdout.flush()
    emit(("family", "seed", "backend", "seconds", "status", "objective", "best", "ran"), rows, "backend_choice.csv",
         args.out)
    emit(("family", "backend", "rounds", "median_s", "max_s", "max/median", "optimal", "below_best"),
         summary(rows, families, backends), "backend_choice_summary.csv", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
