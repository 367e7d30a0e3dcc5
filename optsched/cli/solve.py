"""``optsched solve``: solve one round file (``docs/rounds.md``) with a method of its kind and print
the decision as JSON."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from optsched.cli.common import PROG, check_output_file, emit_json, err, log
from optsched.core.collector import collector_paused
from optsched.core.errors import ValidationError
from optsched.core.jsonio import parse_json_text, read_json
from optsched.core.round import RoundProblem
from optsched.perf.lookup import fitted_models
from optsched.policies.options import BACKENDS, DEFAULT_TIME_LIMIT
from optsched.policies.registry import backend_methods, describe_methods
from optsched.rounds.rubick.admission import DEFER_OPTION as DEFER
from optsched.policies.solve import solve


def _methods_help() -> str:
    return "; ".join(f"kind {kind}: {', '.join(methods)}" for kind, methods in describe_methods().items())


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched solve``; the help lists the methods of every registered kind."""
    p.description = ("Solve one scheduling round (format: docs/rounds.md) with a method of its kind and print the "
                     f"decision as JSON. Methods per round kind: {_methods_help()}.")
    p.add_argument("round", metavar="ROUND.json", help="round file, or - to read the round from standard input")
    p.add_argument("--method", default="exact", metavar="METHOD",
                   help="a method of the round's kind (default: exact, the CP-SAT round warm-started by the "
                        f"heuristic); {_methods_help()}")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help=f"wall-clock limit in seconds for reading, table, heuristic and solver (default "
                        f"{DEFAULT_TIME_LIMIT:g}); a method it cuts short answers with status 'partial'")
    p.add_argument("--seed", type=int, default=0, help="solver seed (default 0)")
    p.add_argument("--params", action="append", default=[], metavar="PARAMS.json",
                   help="fitted performance model (from 'optsched fit') replacing the built-in one of its model "
                        "and GPU type; repeatable")
    p.add_argument("--defer-unreachable", action="store_true",
                   help="rubick rounds: defer a guaranteed job whose performance guarantee no node shape can reach "
                        "this round (it waits; named in the decision's message) instead of reporting the round "
                        "infeasible")
    p.add_argument("--on-invalid-job", choices=("error", "skip"), default=None,
                   help="what a job that fails validation does to a round that does not say (its on_invalid_job "
                        "field wins): error (default) fails the round; skip leaves the job out, listed with the "
                        "error in the decision's skipped list, and solves the rest (rubick rounds)")
    p.add_argument("--backend", default="auto", choices=("auto", *BACKENDS),
                   help="what solves exact formulations: auto (default), switch where the method offers it, else "
                        "cpsat; cpsat, CP-SAT alone; switch, CP-SAT and then HiGHS (SciPy's) "
                        "when CP-SAT spends its deterministic stall budget without a proof ("
                        + "; ".join(f"{k}: {', '.join(m)}" for k, m in backend_methods("switch").items())
                        + "); or a MILP through pulp with CBC, or HiGHS when highspy is installed ("
                        + "; ".join(f"{k}: {', '.join(m)}" for k, m in backend_methods().items())
                        + "); any other method refuses them")
    p.add_argument("--partitions", type=int, metavar="K",
                   help="solve K parts of the round (nodes and jobs split with --seed) in parallel processes and join "
                        "their decisions (POP-style; faster on large rounds, not optimal)")
    p.add_argument("--out", metavar="FILE", help="write the decision here instead of stdout")


def read_round(path: str) -> Any:
    """A round file's JSON, or standard input's for ``-``."""
    if path != "-":
        return read_json(path)
    try:
        text = sys.stdin.buffer.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"standard input: not UTF-8 text ({exc})") from None
    return parse_json_text(text, "standard input")


@collector_paused
def run(args: argparse.Namespace) -> int:
    """Solve the round and write the decision's JSON to ``--out`` or stdout (the cyclic garbage collector paused
    from reading to writing, :mod:`optsched.core.collector`: a 20,000-job round makes hundreds of thousands of
    objects as it is read)."""
    # the time limit covers importing the solve path and reading the round too (``main``'s ``args.started``)
    started = getattr(args, "started", None) or time.perf_counter()
    check_output_file(args.out)
    problem = RoundProblem.from_dict(read_round(args.round), on_invalid_job=args.on_invalid_job)
    for warning in problem.warnings():
        err(f"{PROG}: warning: {warning}")
    models = fitted_models(args.params, problem.cluster)
    extras = {DEFER: True} if args.defer_unreachable else {}
    decision = solve(problem, args.method, args.time_limit, args.seed, perf_models=models or None,
                     clock_start=started, partitions=args.partitions, backend=args.backend, **extras)
    emit_json(decision.to_dict(), args.out)
    log.info("%s: status %s, objective %.4f", args.method, decision.status, decision.objective)
    return 0
