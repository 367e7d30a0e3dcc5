"""Which solver for the Rubick round: the same model, solved by CP-SAT and by MILP solvers.

    python benchmarks/round_solver_choice.py [--time-limit 30] [--seeds 1] [--cases 8x40,8x80,160x400]
                                             [--encodings default] [--solvers CP-SAT,pulp-CBC,...]

Builds the round model of :mod:`optsched.formulations.rubick_round` once (CP-SAT form) and solves it
with CP-SAT and as a MILP, all within the same time limit, on 1 thread, without a warm start:

* ``pulp-CBC``, ``pulp-HiGHS``: the library's MILP back ends (:func:`optsched.formulations.milp.solve_milp`,
  what ``rubick_round.solve(..., backend="cbc"|"highs")`` runs; HiGHS only when ``highspy`` is
  installed). CBC reports no bound before it proves optimality (empty ``bound``);
* ``SCIP``, ``CBC``, ``HIGHS``: OR-Tools ``pywraplp`` on the same rows
  (:func:`optsched.formulations.milp.linear_form`), for SCIP, which pulp does not bundle;
* ``LP``: the LP relaxation's optimum (:func:`optsched.formulations.milp.lp_bound`, CBC's simplex),
  an upper bound of the round.

A case is ``NODESxJOBS`` on nodes of 8 GPUs; ``--encodings`` is ``default`` (what ``build`` picks),
``per-node`` or ``aggregated`` (comma separated). Objective and bound are in round units (the model's
over ``SCALE`` plus its offset); the per-node and aggregated models have the same optimum only when the
aggregated answer maps onto nodes, which this raw comparison does not do. Prints objective, bound and
time per solver; writes ``benchmarks/out/round_solver_choice.csv``. CP-SAT's warm start is measured
in ``rubick_round.py``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from ortools.linear_solver import pywraplp  # noqa: E402
from ortools.sat.python import cp_model  # noqa: E402

from optsched.formulations import milp, rubick_round  # noqa: E402
from optsched.rounds.rubick.generate import generate_rubick_round  # noqa: E402
from optsched.rounds.rubick.table import build_round_table  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

CASES = ((8, 40), (8, 80), (160, 400))
SOLVERS = ("CP-SAT", "pulp-CBC", "pulp-HiGHS", "SCIP", "CBC", "HIGHS", "LP")


def pywraplp_model(form: milp.LinearForm, backend: str) -> tuple[pywraplp.Solver | None, list]:
    """The rows of a :class:`~optsched.formulations.milp.LinearForm` in an OR-Tools ``pywraplp`` solver
    (None when this OR-Tools has no such back end)."""
    s = pywraplp.Solver.CreateSolver(backend)
    if s is None:
        return None, []
    inf = s.infinity()
    xs = [s.IntVar(int(lo), int(hi), f"v{i}") for i, (lo, hi) in enumerate(zip(form.lower, form.upper))]
    m = form.matrix
    for r in range(m.shape[0]):
        lo, hi = form.row_lo[r], form.row_hi[r]
        ct = s.RowConstraint(lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf, f"r{r}")
        for v, c in zip(m.indices[m.indptr[r]:m.indptr[r + 1]], m.data[m.indptr[r]:m.indptr[r + 1]]):
            ct.SetCoefficient(xs[int(v)], float(c))
    obj = s.Objective()
    for i in np.flatnonzero(form.objective):
        obj.SetCoefficient(xs[int(i)], float(form.objective[i]))
    obj.SetOffset(form.constant)
    obj.SetMaximization() if form.maximize else obj.SetMinimization()
    return s, xs


def _fmt(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:.4f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--cases", default=",".join(f"{n}x{j}" for n, j in CASES),
                    help="NODESxJOBS,... on nodes of 8 GPUs")
    ap.add_argument("--encodings", default="default", help="default, per-node, aggregated (comma separated)")
    ap.add_argument("--solvers", default=",".join(SOLVERS), help=f"comma separated, of {', '.join(SOLVERS)}")
    args = ap.parse_args(argv)
    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",") if c]
    solvers = [s for s in args.solvers.split(",") if s]
    unknown = sorted(set(solvers) - set(SOLVERS))
    if unknown:
        ap.error(f"unknown solver(s) {', '.join(unknown)}; known: {', '.join(SOLVERS)}")
    have = milp.available_backends()
    header = ("gpus", "jobs", "seed", "encoding", "solver", "objective", "bound", "seconds", "status")
    rows = []

    def out(row: tuple) -> None:
        rows.append(row)
        sys.stdout.write("  ".join(map(str, row)) + "\n")
        sys.stdout.flush()

    tl = args.time_limit
    for nodes, jobs in cases:
        for seed in range(args.seeds):
            problem = generate_rubick_round(nodes, 8, jobs, seed)
            table = build_round_table(problem)
            for enc in args.encodings.split(","):
                built = rubick_round.build(problem, table, encoding=None if enc == "default" else enc)
                scale, off = rubick_round.SCALE, built.offset
                form = milp.linear_form(built.model)
                key = (nodes * 8, jobs, seed, built.encoding)
                for name in solvers:
                    t0 = time.perf_counter()
                    if name == "CP-SAT":
                        solver = cp_model.CpSolver()
                        solver.parameters.max_time_in_seconds = tl
                        solver.parameters.num_workers = 1
                        solver.parameters.linearization_level = 2
                        st = solver.solve(built.model)
                        ok = st in (cp_model.OPTIMAL, cp_model.FEASIBLE)
                        out((*key, name, _fmt(solver.objective_value / scale + off if ok else None),
                             _fmt(solver.best_objective_bound / scale + off if ok else None),
                             f"{time.perf_counter() - t0:.2f}", solver.status_name(st)))
                    elif name.startswith("pulp-"):
                        backend = name[5:].lower()
                        if backend not in have:
                            out((*key, name, "", "", "", "not installed (pip install highspy)"))
                            continue
                        res = milp.solve_milp(built.model, backend, tl, hint={})
                        out((*key, name, _fmt(None if res.objective is None else res.objective / scale + off),
                             _fmt(None if res.bound is None else res.bound / scale + off),
                             f"{res.wall_seconds:.2f}", res.status.upper()))
                    elif name == "LP":
                        lp = milp.lp_bound(built.model, tl)
                        out((*key, name, "", _fmt(None if lp is None else lp / scale + off),
                             f"{time.perf_counter() - t0:.2f}", "OPTIMAL" if lp is not None else "NOT_SOLVED"))
                    else:
                        s, _ = pywraplp_model(form, name)
                        if s is None:
                            out((*key, name, "", "", "", "not in this OR-Tools"))
                            continue
                        s.SetTimeLimit(int(tl * 1000))
                        s.SetNumThreads(1)
                        status = s.Solve()
                        ok = status in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE)
                        status_name = {pywraplp.Solver.OPTIMAL: "OPTIMAL",
                                       pywraplp.Solver.FEASIBLE: "FEASIBLE"}.get(status, str(status))
                        out((*key, name, _fmt(s.Objective().Value() / scale + off if ok else None),
                             _fmt(s.Objective().BestBound() / scale + off if ok else None),
                             f"{time.perf_counter() - t0:.2f}", status_name))
    emit(header, rows, "round_solver_choice.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
