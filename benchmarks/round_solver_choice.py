"""Why the Rubick round runs on CP-SAT: the same model, solved by CP-SAT and by MILP solvers.

    python benchmarks/round_solver_choice.py [--time-limit 30] [--seeds 1]

Builds the round model of :mod:`optsched.formulations.rubick_round` once (CP-SAT form), translates
the model proto constraint by constraint into a MILP (OR-Tools ``pywraplp``: SCIP, CBC, HiGHS), and
solves both within the same time limit on 1 thread, without a warm start (pywraplp's MILP back-ends
take none; CP-SAT's hint is measured separately in ``rubick_round.py``). Prints objective, bound and
time per solver; writes ``benchmarks/out/round_solver_choice.csv``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from optsched.formulations import rubick_round
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.table import build_round_table
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

CASES = ((8, 40), (8, 80), (160, 400))


def to_milp(model: cp_model.CpModel, backend: str) -> tuple[pywraplp.Solver, float]:
    """The MILP of a CP-SAT model made of linear, at-most-one and bool-or constraints (what
    rubick_round builds); returns the solver and the objective's scaling factor."""
    proto = model.proto
    s = pywraplp.Solver.CreateSolver(backend)
    # (the proto's repeated fields do not support negative indices: copy them to lists)
    xs = [s.IntVar(list(v.domain)[0], list(v.domain)[-1], f"v{i}") for i, v in enumerate(proto.variables)]

    def lit(ref: int):  # CP-SAT negative references are negated literals
        return xs[ref] if ref >= 0 else 1 - xs[-ref - 1]

    for c in proto.constraints:
        if c.enforcement_literal:
            raise ValueError("enforced constraints are not translated")
        kind = next((k for k in ("linear", "at_most_one", "bool_or") if getattr(c, f"has_{k}")()), "other")
        if kind == "linear":
            expr = sum(coef * xs[v] for v, coef in zip(c.linear.vars, c.linear.coeffs))
            dom = list(c.linear.domain)
            lo, hi = dom[0], dom[-1]
            s.Add(expr >= lo) if lo > -2**62 else None
            s.Add(expr <= hi) if hi < 2**62 else None
        elif kind == "at_most_one":
            s.Add(sum(lit(r) for r in c.at_most_one.literals) <= 1)
        elif kind == "bool_or":
            s.Add(sum(lit(r) for r in c.bool_or.literals) >= 1)
        else:
            raise ValueError(f"constraint kind {kind} not translated")
    obj = proto.objective
    s.Minimize(sum(coef * xs[v] for v, coef in zip(obj.vars, obj.coeffs)))
    return s, (obj.scaling_factor or 1.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--seeds", type=int, default=1)
    args = ap.parse_args(argv)
    header = ("gpus", "jobs", "seed", "encoding", "solver", "objective", "bound", "seconds", "status")
    rows = []
    for nodes, jobs in CASES:
        for seed in range(args.seeds):
            problem = generate_rubick_round(nodes, 8, jobs, seed)
            table = build_round_table(problem)
            built = rubick_round.build(problem, table)
            scale, off = rubick_round.SCALE, built.offset
            solver = cp_model.CpSolver()
            solver.parameters.max_time_in_seconds = args.time_limit
            solver.parameters.num_workers = 1
            solver.parameters.linearization_level = 2
            t0 = time.perf_counter()
            st = solver.solve(built.model)
            rows.append((nodes * 8, jobs, seed, built.encoding, "CP-SAT", f"{solver.objective_value / scale + off:.4f}",
                         f"{solver.best_objective_bound / scale + off:.4f}", f"{time.perf_counter() - t0:.2f}",
                         solver.status_name(st)))
            sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
            for backend in ("SCIP", "CBC", "HIGHS"):
                milp, factor = to_milp(built.model, backend)
                milp.SetTimeLimit(int(args.time_limit * 1000))
                milp.SetNumThreads(1)
                t0 = time.perf_counter()
                status = milp.Solve()
                secs = time.perf_counter() - t0
                ok = status in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE)
                obj = milp.Objective().Value() * factor / scale + off if ok else float("nan")
                bound = milp.Objective().BestBound() * factor / scale + off if ok else float("nan")
                name = {pywraplp.Solver.OPTIMAL: "OPTIMAL", pywraplp.Solver.FEASIBLE: "FEASIBLE"}.get(status, str(status))
                rows.append((nodes * 8, jobs, seed, built.encoding, backend, f"{obj:.4f}", f"{bound:.4f}", f"{secs:.2f}", name))
                sys.stdout.write("  ".join(map(str, rows[-1])) + "\n")
                sys.stdout.flush()
    emit(header, rows, "round_solver_choice.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
