"""Time limits as a property over sizes (issue 26, item 2): every (kind, method, back end) on generated rounds of
growing size, each solve's wall time over its ``--time-limit``.

    python benchmarks/time_limits.py [--sizes 2000,20000] [--kinds rubick,crius,...] [--methods ...]
                                     [--backends cpsat,cbc,highs] [--partitions 4] [--limit 1] [--seed 0]
                                     [--via library|cli]

For each kind and each size N one round is generated (seed ``--seed``), its size set by N as
:data:`SIZE_RULES` says per kind: the kinds whose generator takes ``jobs`` get N jobs on a cluster scaled
with them as the kind's defaults are (rubick ``nodes = ceil(N / 12.5)`` 8-GPU nodes, the 2,000-job / 160-node
ratio of ``benchmarks/scale.py``; the Lyra kinds ``servers`` and ``training`` times N over the default jobs;
the Lyra kinds that take ``load`` draw N jobs of which those within the load are queued, so the round holds
fewer); ``placement``, whose round lists its running jobs beside the queued ones, queues
``floor(N / 1.72)`` (:data:`PLACEMENT_JOBS_PER_QUEUED`) on a cluster scaled with them, so that the round holds
about N jobs in all (before issue 26's last step it queued N, a round of 1.6-1.7 N jobs); ``lyra-reclaim``,
whose jobs are the running ones, takes ``servers = ceil(N / 0.97)``
(:data:`RECLAIM_JOBS_PER_SERVER`, training servers half as many: its default), up to what its generator fills
(10,000 jobs tried per pool); ``experts``, ``moe-comm`` and ``training-packing`` have no jobs and take their own
size, capped by what the kind accepts (experts: ``min(N // 20, 1,024)`` experts on as many devices, 64 tokens an
expert up to 1,000,000; moe-comm: ``min(N // 250, 60)`` MoE layers, the most below the kind's 1,000 micro-ops;
training-packing: ``min(N // 20, 1,024)`` experts, as experts). Each round
is solved in this process by every method of the kind (``optsched.solve(problem, method, limit,
clock_start=t0)``, deferring unreachable guarantees where the method takes that option, with ``t0`` taken just
before the call: generation and parsing are not counted, nor Python's start-up: ``optsched solve`` adds
reading the round, about 18 us a Rubick job, and writing the decision), the methods that solve a MILP once per
back end of ``--backends``, and with ``--partitions K`` once more partitioned into K parts where the kind has a
partitioner. With ``--via cli`` each solve is instead the command ``python -m optsched.cli solve FILE
--time-limit L --out ...`` on the round written to a file, one process a solve, timed from its start to its end
(reading the round and writing the decision included); the command's start-up, the least wall of 5 runs of
``python -m optsched.cli solve --help`` (Python's start-up and the imports of the solve command and its methods'
registry: everything before the round is read), is taken off (the issue's "plus Python start-up for the CLI";
the least of ``--version``, Python's own start-up, is printed beside it). With ``--repeat R`` each solve runs R
times (a shared machine's wall times vary by 0.1-0.2 s from run to run at 20,000 jobs). Columns:
via, kind, method, backend, partitions, size (N), ``round_jobs`` (jobs in the generated round; ``-`` for the
kinds without jobs), limit_s, wall_s (the median of the R runs, the lower middle one when R is even),
wall_max_s (the slowest), startup_s, ``wall_over_limit`` = (wall_s - startup_s) / limit_s (the property: at
most 1.2), ``max_over_limit`` (the same of the slowest run), the median run's status and the decision's
objective. Writes ``benchmarks/out/time_limits.csv``.
Generating the Lyra kinds' rounds takes about 5 s for 20,000 jobs and 30 s for 100,000 (issue 26: before the
generator's pool indices, 80-90 s for 20,000), the Rubick kind's 27 s for 100,000; the default size is smaller.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.core.kinds import round_kind, round_kinds  # noqa: E402
from optsched.policies.registry import backend_methods, method as registered, methods_of  # noqa: E402
from optsched.rounds.rubick.admission import DEFER_OPTION as DEFER  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

#: jobs per 8-GPU node of the generated Rubick rounds (benchmarks/scale.py: 2,000 jobs on 160 nodes)
RUBICK_JOBS_PER_NODE = 12.5
#: running jobs per on-loan server of a generated lyra-reclaim round with its defaults (0.95-1.0 measured on
#: 320 to 9,000 servers, seed 0)
RECLAIM_JOBS_PER_SERVER = 0.97
#: jobs of a generated placement round (queued and running) per queued job, with its defaults (1.63-1.72 measured
#: at 500 to 20,000 queued jobs, seed 0): size N queues ``floor(N / 1.72)`` so that the round holds about N jobs
PLACEMENT_JOBS_PER_QUEUED = 1.72


#: per kind: the generator's arguments for size N (module docstring); the Rubick and Lyra kinds take jobs
SIZE_RULES: dict[str, object] = {
    "experts": lambda n: {"experts": min(max(n // 20, 2), 1024), "tokens": min(64 * max(n // 20, 2), 1_000_000)},
    "moe-comm": lambda n: {"moe_layers": min(max(n // 250, 1), 60)},
    "training-packing": lambda n: {"experts": min(max(n // 20, 2), 1024)},
    "lyra-reclaim": lambda n: {"servers": max(1, math.ceil(n / RECLAIM_JOBS_PER_SERVER))},
}


def scaled_round(kind: str, jobs: int, seed: int) -> object:
    """The generated round of ``kind`` of size ``jobs`` (module docstring)."""
    gen = round_kind(kind).generate
    params = inspect.signature(gen).parameters
    kw: dict[str, object] = {"seed": seed}
    rule = SIZE_RULES.get(kind)
    if callable(rule):
        kw.update(rule(jobs))
        return gen(**kw)
    if kind == "placement":  # its running jobs are jobs of the round too (module docstring)
        jobs = max(1, math.floor(jobs / PLACEMENT_JOBS_PER_QUEUED))
    kw["jobs"] = jobs
    if kind == "rubick":
        kw["nodes"] = max(8, math.ceil(jobs / RUBICK_JOBS_PER_NODE))
    for name in ("servers", "training"):
        if name in params:
            default = params[name].default
            kw[name] = max(int(default), math.ceil(int(default) * jobs / int(params["jobs"].default)))
    return gen(**kw)


def runs(kind: str, methods: list[str], backends: list[str], partitions: int | None
         ) -> list[tuple[str, str, int | None]]:
    """(method, back end, parts) of every solve of one round (module docstring)."""
    milp = set(backend_methods().get(kind, ()))
    out = [(m, b, None) for m in methods for b in (backends if m in milp else ["cpsat"])]
    if partitions and round_kind(kind).partitioner is not None:
        out += [(m, "cpsat", partitions) for m in methods]
    return out


def in_process(problem: object, method: str, limit: float, backend: str, parts: int | None,
               defer: bool) -> tuple[float, str, str]:
    """(wall seconds, status, objective) of ``optsched.solve`` on ``problem``, timed from just before the call."""
    t0 = time.perf_counter()
    try:
        d = optsched.solve(problem, method, limit, seed=0, clock_start=t0, backend=backend,  # type: ignore[arg-type]
                           partitions=parts, **({DEFER: True} if defer else {}))
        status, objective = d.status, f"{d.objective:.4g}"
    except optsched.OptschedError as exc:
        status, objective = f"error: {type(exc).__name__}", "-"
    return time.perf_counter() - t0, status, objective


def _round_file(problem: object) -> str:
    """``problem``'s JSON in a temporary file (its path)."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="optsched-round-")
    with os.fdopen(fd, "w") as f:
        json.dump(problem.to_dict(), f)  # type: ignore[attr-defined]
    return path


def by_command(round_file: str, method: str, limit: float, backend: str, parts: int | None,
               defer: bool) -> tuple[float, str, str]:
    """(wall seconds, status, objective) of ``python -m optsched.cli solve`` on ``round_file``: the whole process,
    Python's start-up included (module docstring)."""
    fd, out = tempfile.mkstemp(suffix=".json", prefix="optsched-decision-")
    os.close(fd)
    cmd = [sys.executable, "-m", "optsched.cli", "solve", round_file, "--method", method, "--time-limit", f"{limit:g}",
           "--backend", backend, "--out", out, *(["--partitions", str(parts)] if parts else []),
           *(["--defer-unreachable"] if defer else [])]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    try:
        if done.returncode != 0:
            return wall, f"error: rc {done.returncode}: {done.stderr.strip().splitlines()[-1][:80]}", "-"
        with open(out) as f:
            d = json.load(f)
        return wall, d["status"], f"{d['objective']:.4g}"
    finally:
        os.unlink(out)


def python_startup(*command: str) -> float:
    """Seconds ``python -m optsched.cli COMMAND`` takes, the least of 5 runs (module docstring)."""
    walls = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "optsched.cli", *command], capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
    return min(walls)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000", help="comma-separated sizes N (job counts; SIZE_RULES for the others)")
    ap.add_argument("--kinds", default=None, help="comma-separated kinds (default: every kind with a size rule)")
    ap.add_argument("--methods", default=None, help="comma-separated methods (default: every method of a kind)")
    ap.add_argument("--backends", default="cpsat", help="comma-separated back ends of the methods that solve a MILP")
    ap.add_argument("--partitions", type=int, default=None, help="also solve partitioned into K parts")
    ap.add_argument("--limit", type=float, default=1.0, help="--time-limit of every solve, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--via", choices=("library", "cli"), default="library",
                    help="solve in this process (optsched.solve) or by the command, one process a solve")
    ap.add_argument("--repeat", type=int, default=1,
                    help="solve each R times: wall_s is the median run's, wall_max_s the slowest's")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    startup = python_startup("solve", "--help") if args.via == "cli" else 0.0
    if args.via == "cli":
        sys.stdout.write(f"python -m optsched.cli --version: {python_startup('--version'):.2f} s; solve --help: "
                         f"{startup:.2f} s (the start-up taken off each wall)\n")
    kinds = args.kinds.split(",") if args.kinds else [
        k for k in round_kinds() if "jobs" in inspect.signature(round_kind(k).generate).parameters or k in SIZE_RULES]
    rows = []
    for kind in kinds:
        for size in (int(s) for s in args.sizes.split(",")):
            t = time.perf_counter()
            problem = scaled_round(kind, size, args.seed)
            sys.stdout.write(f"{kind} size {size}: generated in {time.perf_counter() - t:.1f} s\n")
            methods = args.methods.split(",") if args.methods else list(methods_of(kind))
            methods = [m for m in methods if m in methods_of(kind)]
            round_file = _round_file(problem) if args.via == "cli" else None
            for method, backend, parts in runs(kind, methods, args.backends.split(","), args.partitions):
                defer = DEFER in registered(kind, method).extras
                tries = sorted((in_process(problem, method, args.limit, backend, parts, defer) if round_file is None
                                else by_command(round_file, method, args.limit, backend, parts, defer))
                               for _ in range(args.repeat))
                wall, status, objective = tries[(len(tries) - 1) // 2]  # the median run (the lower one of two)
                worst = tries[-1][0]
                over = (wall - startup) / args.limit
                held = getattr(problem, "jobs", None)
                rows.append((args.via, kind, method, backend, parts or "", size, "-" if held is None else len(held),
                             f"{args.limit:g}", f"{wall:.2f}", f"{worst:.2f}", f"{startup:.2f}", f"{over:.2f}",
                             f"{(worst - startup) / args.limit:.2f}", status, objective))
                sys.stdout.write(f"  {method} {backend}{f' K={parts}' if parts else ''}: {wall:.2f} s "
                                 f"({over:.2f}x), {status}\n")
                sys.stdout.flush()
            if round_file is not None:
                os.unlink(round_file)
    emit(("via", "kind", "method", "backend", "partitions", "size", "round_jobs", "limit_s", "wall_s", "wall_max_s",
          "startup_s", "wall_over_limit", "max_over_limit", "status", "objective"), rows, "time_limits.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
