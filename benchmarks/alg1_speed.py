"""Speed of Rubick's Algorithm 1 at scale (issue "Scale and optimality gap", item 2: the same decisions
in <= 5 s on 1,280 nodes x 8 GPUs with 2,000 jobs).

    python benchmarks/alg1_speed.py [--sizes 160x400,640x1000,1280x2000] [--seed 0] [--counts]

Each size is ``optsched gen-round --kind rubick`` with 8 GPUs per node (``NODESxJOBS``); the table is
built first (not timed), then ``algorithm1(..., defer=True)`` runs once. Prints and writes
(``benchmarks/out/alg1_speed.csv``) the wall and CPU seconds, the jobs that run, the round objective
and a digest of the decision (sorted choices, reduced admission, message), so two versions of the code
can be compared for equal decisions; the target applies to the 1,280 x 8 / 2,000 case. With
``--counts`` it also counts, in a second run, the work Algorithm 1 does: ScheduleJob calls (and those
answered without a walk), node visits, shrinks, refreshes of the walk's position, lowest-slope
searches and GetBestPlan calls.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.heuristics import round_state, rubick, rubick_walk  # noqa: E402
from optsched.rounds.rubick.admission import admit  # noqa: E402
from optsched.rounds.rubick.decision import Schedule  # noqa: E402
from optsched.rounds.rubick.generate import generate_rubick_round  # noqa: E402
from optsched.rounds.rubick.objective import objective  # noqa: E402
from optsched.rounds.rubick.table import build_round_table  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: the issue's target for 1,280 nodes x 8 GPUs and 2,000 jobs (seconds)
TARGET_S = 5.0
TARGET_SIZE = (1280, 2000)

#: (class, method, counter) pairs counted with ``--counts``
_COUNTED = ((rubick.Algorithm1, "schedule_job", "schedule_job"), (rubick.Algorithm1, "_runs_best", "runs_best"),
            (rubick_walk.NodeWalk, "_visit", "visits"), (rubick_walk.NodeWalk, "_shrink", "shrinks"),
            (rubick_walk.NodeWalk, "refresh", "refreshes"), (rubick.Algorithm1, "_lowest", "lowest_searches"),
            (rubick.Algorithm1, "_shrink_of", "shrink_evaluations"), (round_state.RoundState, "best", "get_best_plan"),
            (round_state.RoundState, "best_on", "get_best_plan_small"))


def _digest(schedule: Schedule) -> str:
    body = [sorted((k, v.row, v.parts) for k, v in schedule.choices.items()), sorted(schedule.admission.protected),
            sorted(schedule.admission.waiting), schedule.message]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()[:16]


def _counts(problem, table, admission) -> Counter[str]:  # type: ignore[no-untyped-def]
    """Run Algorithm 1 once more with every counted method wrapped."""
    counts: Counter[str] = Counter()
    saved = []
    for cls, name, key in _COUNTED:
        fn = getattr(cls, name)
        saved.append((cls, name, fn))

        def wrapped(*args, _fn=fn, _key=key, **kw):  # type: ignore[no-untyped-def]
            out = _fn(*args, **kw)
            counts[_key] += 1 if _key != "runs_best" else bool(out)
            return out
        setattr(cls, name, wrapped)
    try:
        rubick.algorithm1(problem, table, admission, defer=True)
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)
    return counts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="160x400,640x1000,1280x2000", help="NODESxJOBS,... (8 GPUs per node)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--counts", action="store_true", help="also count the work done (a second, slower run)")
    args = ap.parse_args(argv)
    header = ["nodes", "gpus", "jobs", "seed", "table_s", "alg1_s", "alg1_cpu_s", "target_s", "met", "jobs_run",
              "objective", "decision"] + ([key for *_, key in _COUNTED] if args.counts else [])
    rows = []
    for size in args.sizes.split(","):
        nodes, jobs = (int(x) for x in size.lower().split("x"))
        problem = generate_rubick_round(nodes, 8, jobs, args.seed)
        t0 = time.perf_counter()
        table = build_round_table(problem)
        admission = admit(problem, table)
        t1, c1 = time.perf_counter(), time.process_time()
        schedule = rubick.algorithm1(problem, table, admission, defer=True)
        wall, cpu = time.perf_counter() - t1, time.process_time() - c1
        target = TARGET_S if (nodes, jobs) == TARGET_SIZE else None
        row = [nodes, nodes * 8, jobs, args.seed, round(t1 - t0, 2), round(wall, 2), round(cpu, 2),
               target if target is not None else "-", ("yes" if wall <= target else "NO") if target is not None else "-",
               len(schedule.choices), round(objective(problem, table, schedule.choices), 6), _digest(schedule)]
        if args.counts:
            counts = _counts(problem, table, admission)
            row += [counts[key] for *_, key in _COUNTED]
        rows.append(row)
    path = emit(header, rows, "alg1_speed.csv")
    sys.stdout.write(f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
