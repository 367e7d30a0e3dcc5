"""Optimality-gap studies: how far the papers' heuristics are from the exact optimum, and how the exact
solve scales (issue "Scale and optimality gap", item 5).

For one round, :func:`gap_row` measures with the round kind's *probe* (:func:`probe_of`: every kind
with an exact contract, :mod:`optsched.policies.exact`, is probed through it by :func:`contract_probe`;
:data:`PROBES` holds the others): the heuristic's objective and time; the exact objective, its proven bound,
the gap and the solve time; the times to the first feasible solution and to a 1% gap, with the
heuristic's warm start and without it; and an LP-relaxation bound through pulp as an independent
second opinion on the solver's bound (when the kind's formulation offers one). :func:`growth_exponent`
fits ``time = c size^b`` on log-log axes; :func:`plot_study` draws gap vs size and time vs size (PNG,
with the ``plot`` extra). :class:`GapPoint` and :func:`run_gap_point` make generated instances a grid
that :func:`optsched.experiments.sweep.run_sweep` runs in processes or on Ray.

Gaps are relative to the bound: ``(bound - objective) / |bound|`` (``optsched.core.decision.relative_gap``).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from optsched.core.deadline import Deadline
from optsched.core.decision import relative_gap
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind
from optsched.core.round import RoundProblem
from optsched.formulations.solution import Solution
from optsched.policies import PolicyOptions, make_policy
from optsched.policies.exact import exact_contract, exact_kinds, not_worse

log = logging.getLogger(__name__)

#: the gap at which "time to gap" is measured
TARGET_GAP = 0.01


def contract_probe(problem: RoundProblem, time_limit: float, seed: int) -> dict[str, Any]:
    """The probe of every kind with an exact contract (:mod:`optsched.policies.exact`): the contract's
    preparation (``table_s``), its warm-start heuristic, the model warm and cold
    (:func:`_warm_cold_rows`), and the contract's LP-relaxation bound where it has one (``lp_bound``,
    else None). Uses the contract's :meth:`~optsched.policies.exact.ExactKind.for_study` form (Rubick:
    unreachable guarantees deferred, so a generated round never fails; the row's ``deferred`` columns,
    :func:`deferred_columns`, name the jobs whose guarantee was deferred)."""
    contract = exact_contract(problem.kind, PolicyOptions(time_limit=time_limit, seed=seed)).for_study()
    p = contract.round_of(problem, "gap study")
    never = Deadline.never()
    t0 = time.perf_counter()
    ctx = contract.prepare(p, never)
    table_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    warm = contract.warm_start(ctx, never)
    row: dict[str, Any] = {"table_s": table_s, "heuristic_objective": warm.objective,
                           "heuristic_s": time.perf_counter() - t1}
    row.update(deferred_columns(contract.deferred(ctx, warm)))

    def solve(cold: bool, trace: list[tuple[float, float, float]]) -> Solution:
        return contract.solve(ctx, warm, time_limit=time_limit, seed=seed, workers=1, backend="cpsat", cold=cold,
                              trace=trace)
    row.update(_warm_cold_rows(warm.objective, solve))
    t2 = time.perf_counter()
    row["lp_bound"] = contract.lp_bound(ctx, warm, time_limit)
    if row["lp_bound"] is not None:
        row["lp_s"] = time.perf_counter() - t2
    return row


def deferred_columns(names: Sequence[str]) -> dict[str, Any]:
    """The columns saying which rules a study's round dropped: ``deferred`` (how many guaranteed jobs had
    their unreachable guarantee deferred, 0 if none), ``deferred_jobs`` (their names, comma-separated) and
    ``note`` (a sentence saying so, "" if none). A study measures a round ``solve`` calls infeasible by
    deferring those guarantees; its status and bound then describe the round without them."""
    if not names:
        return {"deferred": 0, "deferred_jobs": "", "note": ""}
    listed = ", ".join(names)
    return {"deferred": len(names), "deferred_jobs": listed,
            "note": (f"deferred the unreachable performance guarantee of {len(names)} job(s) ({listed}); status and "
                     "bound describe the round without those guarantees (as solve --defer-unreachable); "
                     "solve without it reports this round infeasible")}


def _trace_times(label: str, trace: Sequence[tuple[float, float, float]], objective: float | None,
                 bound: float | None, wall: float) -> dict[str, Any]:
    """Time to the first solution and to a gap of at most :data:`TARGET_GAP` from a solver's trace
    of (seconds, objective, bound) at each solution it found, and its final objective and bound."""
    first = trace[0][0] if trace else (wall if objective is not None else None)
    to_target = next((t for t, o, b in trace if (g := relative_gap(b, o)) is not None and g <= TARGET_GAP), None)
    final = relative_gap(bound, objective)
    if to_target is None and final is not None and final <= TARGET_GAP:
        to_target = wall
    return {f"first_{label}_s": first, f"gap1_{label}_s": to_target}


def _warm_cold_rows(h_obj: float, solve: Callable[[bool, list[tuple[float, float, float]]], Solution]
                    ) -> dict[str, Any]:
    """The solver columns of a probe whose ``solve(cold, trace)`` returns a ``Solution`` in the
    decision's (maximising) frame: warm and cold times to the first solution and to 1%, and the warm
    solve's objective (never below the heuristic's ``h_obj``), bound, gap, time, status and size."""
    row: dict[str, Any] = {}
    for label, cold in (("warm", False), ("cold", True)):
        trace: list[tuple[float, float, float]] = []
        sol = solve(cold, trace)
        row.update(_trace_times(label, trace, sol.objective, sol.bound, sol.wall_seconds))
        if label == "warm":
            best = sol.objective if sol.objective is not None and not_worse(sol.objective, h_obj) else h_obj
            row.update(exact_objective=best, bound=sol.bound, gap=relative_gap(sol.bound, best),
                       exact_s=sol.wall_seconds, status=sol.status, encoding=sol.size.encoding,
                       variables=sol.size.variables)
    row["heuristic_gap"] = relative_gap(row["bound"], h_obj)
    return row


def policy_probe(heuristic: str, exact: str = "exact") -> Callable[[RoundProblem, float, int], dict[str, Any]]:
    """A probe that runs two registered methods of the round's kind, a ``heuristic`` and an ``exact`` one
    (the Lyra kinds): their objectives and times, the exact method's bound, gap and status, and the
    heuristic's gap to that bound."""
    def probe(problem: RoundProblem, time_limit: float, seed: int) -> dict[str, Any]:
        options = PolicyOptions(time_limit=time_limit, seed=seed)
        h = make_policy(heuristic, options, kind=problem.kind).decide(problem)
        e = make_policy(exact, options, kind=problem.kind).decide(problem)
        return {"heuristic_objective": h.objective, "heuristic_s": h.solve_seconds, "exact_objective": e.objective,
                "bound": e.bound, "gap": e.gap, "exact_s": e.solve_seconds, "status": e.status,
                "heuristic_gap": relative_gap(e.bound, h.objective), **deferred_columns(())}
    return probe


Probe = Callable[[RoundProblem, float, int], dict[str, Any]]

#: probes of kinds studied otherwise than by :func:`contract_probe`: ``lyra-allocate`` by two of its
#: methods (its knapsack is no contract; Lyra's dynamic program is exact, so the AFS-like greedy is the
#: heuristic studied)
PROBES: dict[str, Probe] = {"lyra-allocate": policy_probe("afs")}


def probe_of(kind: str) -> Probe | None:
    """The probe of ``kind`` (module docstring): :data:`PROBES`, else :func:`contract_probe` for a kind
    with an exact contract, else None."""
    return PROBES.get(kind) or (contract_probe if kind in exact_kinds() else None)


def probe_kinds() -> tuple[str, ...]:
    """The kinds a gap study can probe, sorted."""
    return tuple(sorted(set(PROBES) | set(exact_kinds())))


def size_of(problem: RoundProblem) -> tuple[str, int]:
    """(name of the measure, size) of ``problem`` in a gap study: its kind's contract's
    (:meth:`~optsched.policies.exact.ExactKind.size`), GPUs for a kind without one."""
    if problem.kind in exact_kinds():
        contract = exact_contract(problem.kind)
        return contract.size(contract.round_of(problem, "gap study"))
    return "GPUs", sum(n.num_gpus for n in problem.cluster.nodes)


def gap_row(problem: RoundProblem, *, time_limit: float = 30.0, seed: int = 0, label: str = "") -> dict[str, Any]:
    """One row of a gap study for ``problem`` (module docstring); ``label`` names the instance."""
    probe = probe_of(problem.kind)
    if probe is None:
        raise ValidationError(f"no gap study for rounds of kind {problem.kind!r} (known: {', '.join(probe_kinds())})")
    gpus = sum(n.num_gpus for n in problem.cluster.nodes)
    size_name, size = size_of(problem)
    row: dict[str, Any] = {"instance": label, "kind": problem.kind, "nodes": len(problem.cluster.nodes),
                           "gpus": gpus, "jobs": len(problem.jobs), "size": size, "size_of": size_name, "seed": seed,
                           "time_limit": time_limit}
    row.update(probe(problem, time_limit, seed))
    return row


@dataclass(frozen=True)
class GapPoint:
    """One generated instance of a gap study, as plain values (so it pickles and crosses processes:
    ``experiments.sweep.run_sweep(points, fn=run_gap_point)`` runs a grid of them locally or on Ray):
    round ``kind``, the ``seed`` of generator and solver, the exact solve's ``time_limit`` and the
    generator's keyword ``options`` as sorted (name, value) pairs (for ``rubick``: ``nodes``,
    ``gpus_per_node``, ``jobs``). Checked when built: the kind must have a probe and the options must
    be ones its generator takes."""

    kind: str
    options: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    time_limit: float = 30.0

    def __post_init__(self) -> None:
        if probe_of(self.kind) is None:
            raise ValidationError(f"gap point: no gap study for rounds of kind {self.kind!r} "
                                  f"(known: {', '.join(probe_kinds())})")
        known = round_kind(self.kind).generator_options
        opts = tuple(sorted(dict(self.options).items()))
        bad = [k for k, _ in opts if k not in known or k == "seed"]
        if bad:
            raise ValidationError(f"gap point: the {self.kind} generator takes no option(s) {', '.join(bad)} "
                                  f"(it takes {', '.join(k for k in known if k != 'seed')})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValidationError(f"gap point: seed must be an integer >= 0, got {self.seed!r}")
        Deadline(self.time_limit)  # a positive number of seconds, or a ValidationError naming it
        object.__setattr__(self, "options", opts)

    @property
    def label(self) -> str:
        return "-".join([self.kind, *(f"{k}{v}" for k, v in self.options), f"s{self.seed}"])


def run_gap_point(point: GapPoint) -> dict[str, Any]:
    """Generate ``point``'s round and measure it (:func:`gap_row`); module level, so a process pool or
    Ray can run it. Its timing columns vary from run to run, the others are a function of the point
    when the exact solves end proven optimal or at the same solution."""
    problem = round_kind(point.kind).generate(seed=point.seed, **dict(point.options))
    return gap_row(problem, time_limit=point.time_limit, seed=point.seed, label=point.label)


def growth_exponent(sizes: Sequence[float], times: Sequence[float | None]) -> float | None:
    """``b`` of the least-squares fit ``log t = log c + b log size`` over the points with a positive
    time (None with fewer than two distinct sizes)."""
    pts = [(float(s), float(t)) for s, t in zip(sizes, times) if t is not None and t > 0 and s > 0]
    if len({s for s, _ in pts}) < 2:
        return None
    x = np.log([s for s, _ in pts])
    y = np.log([t for _, t in pts])
    return float(np.polyfit(x, y, 1)[0])


def median_by(rows: Sequence[Mapping[str, Any]], key: str, value: str) -> dict[Any, float]:
    """Median of ``value`` per ``key`` over the rows where it is known."""
    groups: dict[Any, list[float]] = {}
    for r in rows:
        v = r.get(value)
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            groups.setdefault(r[key], []).append(float(v))
    return {k: float(np.median(v)) for k, v in sorted(groups.items())}


def plot_study(rows: Sequence[Mapping[str, Any]], out_dir: str | Path) -> list[Path]:
    """Per round kind of ``rows``, ``gap_vs_size_<kind>.png`` (heuristic and exact gaps) and
    ``time_vs_size_<kind>.png`` (exact time, warm and cold time to 1%, log-log, with the fitted growth
    exponent) under ``out_dir``, over the kind's size measure (:func:`size_of`); nothing without
    matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.info("matplotlib is not installed; no plots (pip install 'optsched[plot]')")
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for kind in sorted({r["kind"] for r in rows}):
        mine = [r for r in rows if r["kind"] == kind]
        xlabel = str(mine[0].get("size_of", "GPUs"))
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in (("heuristic_gap", "heuristic (to the bound)"), ("gap", "exact")):
            pts = [(r["size"], 100 * r[key]) for r in mine if r.get(key) is not None]
            if pts:
                ax.scatter(*zip(*pts), label=label, s=18)
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("gap (%)")
        ax.set_title(kind)
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        paths.append(out / f"gap_vs_size_{kind}.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
        fig, ax = plt.subplots(figsize=(6, 4))
        for key, label in (("exact_s", "exact solve"), ("gap1_warm_s", "to 1%, warm start"),
                           ("gap1_cold_s", "to 1%, no warm start")):
            pts = [(r["size"], r[key]) for r in mine if r.get(key)]
            if pts:
                b = growth_exponent(*zip(*pts))
                ax.scatter(*zip(*pts), s=18, label=f"{label}" + ("" if b is None else f" (~size^{b:.2f})"))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("seconds")
        ax.set_title(kind)
        ax.legend()
        ax.grid(alpha=0.3, which="both")
        fig.tight_layout()
        paths.append(out / f"time_vs_size_{kind}.png")
        fig.savefig(paths[-1], dpi=120)
        plt.close(fig)
    return paths


__all__ = ["GapPoint", "PROBES", "Probe", "TARGET_GAP", "contract_probe", "deferred_columns", "gap_row",
           "growth_exponent", "median_by", "plot_study", "policy_probe", "probe_kinds", "probe_of", "run_gap_point", "size_of"]
