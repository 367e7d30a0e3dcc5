"""A CP-SAT model solved as a MILP through pulp: the second back end of the exact round formulations
(DESIGN.md, ``optsched/formulations``: "back ends CP-SAT and, where it wins, a MILP through pulp").

The formulations build their models once, in CP-SAT (:mod:`ortools.sat.python.cp_model`). A model made
only of unconditional ``linear`` (one interval), ``at_most_one``, ``exactly_one``, ``bool_or`` and
``bool_and`` constraints over integer variables with interval domains is a MILP; :func:`linear_form`
reads its proto into rows ``lo <= sum a x <= hi`` (a negated literal ``not x`` is ``1 - x``), and
:func:`to_pulp` makes the :class:`pulp.LpProblem`: binary variables for 0/1 domains, integer variables
otherwise (continuous for the LP relaxation), maximised when the proto's objective ``scaling_factor`` is
negative (what ``CpModel.maximize`` writes), minimised otherwise, and with the objective in the CP-SAT
model's own units, ``scaling_factor * (sum coeffs x + offset)`` (what ``CpSolver.objective_value``
reports). Anything else (enforcement literals, a domain with holes, another constraint kind) raises
:class:`~optsched.core.errors.ValidationError` naming the constraint and its kind.

:func:`solve_milp` solves it with

* ``"cbc"``: CBC through pulp (``pulp.PULP_CBC_CMD``, the binary bundled with pulp; ``COIN_CMD`` when
  only a system CBC is there), warm-started from the hint (``-mips``), always given a minimisation
  (the bundled CBC 2.10.3 mishandles a warm start under ``-max``, see :func:`to_pulp`);
* ``"highs"``: HiGHS through pulp (``pulp.HiGHS`` on ``highspy``, warm-started with
  ``Highs.setSolution``; ``pulp.HiGHS_CMD`` with its ``warmStart`` when only the ``highs`` binary is
  there). Not a dependency of optsched: the ``highs`` extra (``pip install 'optsched[highs]'``). HiGHS
  is run with ``mip_rel_gap = 0``, so that "optimal" means what it means for CP-SAT (its default
  stops at a 0.01% gap).

**Bounds.** HiGHS (``highspy``) reports its MIP dual bound; it is returned (in the model's units, never
below the objective found, for a maximisation). CBC prints its best possible objective only in its log,
which pulp does not read, and neither does ``HiGHS_CMD``: for those the bound is the objective when the
solve is proven optimal and ``None`` otherwise (no bound is made up). :func:`lp_bound` solves the LP
relaxation with CBC's simplex instead: its optimum bounds every integer solution (from above for a
maximisation).

**Values** are returned per CP-SAT variable index, rounded to integers, and only after they satisfied
every constraint and domain of the CP-SAT model exactly (in integers); an answer that does not is
reported as status ``"unknown"``. A feasible warm start is never lost: when the solver returns
nothing in time, or a worse solution, the warm start is the answer (status ``"feasible"``). (With a
pulp before 3.3, a variable in no constraint and not in the objective is not in the MILP; it takes its
hint, or the value of its domain closest to 0.)

Every call has a time limit (seconds, the translation included, which looks at the clock as it goes; the
solver gets what is left, at least :data:`~optsched.formulations.solution.MIN_SOLVER_SECONDS`, and when not
even that is left the solver is not started: the warm start stands). CBC and ``HiGHS_CMD`` run as
subprocesses through pulp; like CP-SAT they check the clock themselves, and a large model may overrun the
limit by the time they take to read it, so a process still running at the end of the whole call's limit is
killed (:mod:`optsched.formulations.hard_stop`; the warm start stands). CBC's limit is what is left less the
time pulp needs around it, estimated from what was measured: writing the MPS file and reading the solution
back are each taken to cost as long as building the pulp model did (:func:`to_pulp`, measured), plus
:data:`CBC_START_S` to start the process; HiGHS through ``highspy`` gets what is left less twice that build
too (pulp hands it the model row by row in Python, then reads every value back).

**Reproducibility.** CBC and HiGHS stop on wall-clock time, so with the same seed their answer to a
model they cannot finish within the limit varies between runs (with the machine's load); CP-SAT with
one worker (``workers=1``) is reproducible (DESIGN.md, "Determinism").
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pulp
from ortools.sat.python import cp_model
from scipy import sparse

from optsched.core.errors import OptschedError, ValidationError
from optsched.formulations.hard_stop import hard_stop
from optsched.formulations.solution import MILP_BACKENDS, MIN_SOLVER_SECONDS, SOLUTION_STATUSES, OutOfTime

log = logging.getLogger(__name__)

#: seconds to start the CBC process, kept off its time limit (module docstring)
CBC_START_S = 0.05
#: the MILP back ends of :func:`solve_milp`
BACKENDS = MILP_BACKENDS
#: CP-SAT writes an unbounded side of a domain as +-(2^63 - 1); anything this large is infinite
_INF = 2**62
#: constraint kinds translated (the others raise)
TRANSLATED_KINDS = ("linear", "at_most_one", "exactly_one", "bool_or", "bool_and")
#: every constraint kind of cp_model.proto, to name an untranslated one
_ALL_KINDS = ("bool_or", "bool_and", "at_most_one", "exactly_one", "bool_xor", "int_div", "int_mod", "int_prod",
              "lin_max", "linear", "all_diff", "element", "circuit", "routes", "table", "automaton", "inverse",
              "reservoir", "interval", "no_overlap", "no_overlap_2d", "cumulative", "dummy_constraint")

HIGHS_INSTALL_HINT = "pip install 'optsched[highs]' (highspy, HiGHS for pulp), or put the `highs` binary on PATH"
CBC_INSTALL_HINT = "pip install 'pulp[cbc]' (or a pulp that bundles CBC), or put the `cbc` binary on PATH"


class BackendUnavailableError(OptschedError, RuntimeError):
    """A MILP back end is not installed; the message says how to install it."""


@dataclass(frozen=True)
class LinearForm:
    """A CP-SAT model as ``lo <= A x <= hi`` over integer ``x`` in ``[lower, upper]``, with the objective
    ``constant + sum c x`` (the CP-SAT model's own units), maximised when ``maximize``. ``infeasible``
    names a constraint with no variables that cannot hold (the model is infeasible as written)."""

    lower: np.ndarray  # int64, per CP-SAT variable index
    upper: np.ndarray
    matrix: sparse.csr_matrix  # rows x variables, integer coefficients
    row_lo: np.ndarray  # float, -inf when unbounded
    row_hi: np.ndarray
    row_names: tuple[str, ...]  # "c<i> <kind>", the CP-SAT constraint each row comes from
    objective: np.ndarray  # float, per variable
    constant: float
    maximize: bool
    infeasible: str | None = None

    @property
    def num_vars(self) -> int:
        return len(self.lower)

    def violations(self, values: np.ndarray) -> list[str]:
        """Rows and domains that integer ``values`` break (exact integer arithmetic)."""
        x = np.asarray(values, dtype=np.int64)
        out = [f"variable {i} = {x[i]} outside [{self.lower[i]}, {self.upper[i]}]"
               for i in np.flatnonzero((x < self.lower) | (x > self.upper))]
        act = self.matrix @ x
        for r in np.flatnonzero((act < self.row_lo) | (act > self.row_hi)):
            out.append(f"{self.row_names[r]}: {act[r]} outside [{self.row_lo[r]}, {self.row_hi[r]}]")
        if self.infeasible:
            out.append(self.infeasible)
        return out

    def value(self, values: np.ndarray) -> float:
        """The objective of ``values`` in the CP-SAT model's units."""
        return float(self.constant + np.dot(self.objective, np.asarray(values, dtype=float)))


@dataclass(frozen=True)
class MilpResult:
    """A MILP solve of a CP-SAT model: ``status`` (one of
    :data:`~optsched.formulations.solution.SOLUTION_STATUSES`), ``objective`` and ``bound`` in the CP-SAT
    model's own objective units (``bound``: the solver's proven bound when it reports one, see the module
    docstring; ``None`` otherwise), ``values`` per CP-SAT variable index (``None`` without a solution),
    wall seconds of the whole call, the back end and whether a warm start was given to it."""

    status: str
    objective: float | None
    bound: float | None
    values: tuple[int, ...] | None
    wall_seconds: float
    backend: str
    warm_start: bool = False

    def __post_init__(self) -> None:
        if self.status not in SOLUTION_STATUSES:
            raise ValidationError(f"MilpResult status must be one of {', '.join(SOLUTION_STATUSES)}, "
                                  f"got {self.status!r}")


# -- translation ----------------------------------------------------------------------------------------
def _has(msg: Any, name: str) -> bool:
    """Whether a proto message has the sub-message ``name`` (pybind protos since OR-Tools 9.13 have
    ``has_<name>()``, the protobuf ones ``HasField``)."""
    has = getattr(msg, f"has_{name}", None)
    return bool(has()) if callable(has) else msg.HasField(name)


def _kind(c: Any) -> str | None:
    if hasattr(c, "WhichOneof"):
        return c.WhichOneof("constraint")
    return next((k for k in _ALL_KINDS if _has(c, k)), None)


def _bound(v: int) -> float:
    return -math.inf if v <= -_INF else math.inf if v >= _INF else float(v)


#: rows or variables translated between two looks at the clock
_CLOCK_EVERY = 256


def _check_clock(count: int, until: float | None) -> None:
    if until is not None and count % _CLOCK_EVERY == 0 and time.perf_counter() > until:
        raise OutOfTime


def linear_form(model: cp_model.CpModel, until: float | None = None) -> LinearForm:
    """Read a CP-SAT model into a :class:`LinearForm` (module docstring); raises
    :class:`~optsched.core.errors.ValidationError` naming the first constraint that is not linear, and
    :class:`OutOfTime` once past ``until`` (a ``time.perf_counter()`` reading; about 100 us a constraint)."""
    proto = model.proto
    n = len(proto.variables)
    lower = np.zeros(n, dtype=np.int64)
    upper = np.zeros(n, dtype=np.int64)
    for i, v in enumerate(proto.variables):
        dom = list(v.domain)
        if len(dom) != 2:
            raise ValidationError(f"variable {i} ({v.name or 'unnamed'}) has a domain of {len(dom) // 2} intervals; "
                                  "only a single interval is translated to a MILP")
        if dom[0] <= -_INF or dom[1] >= _INF:
            raise ValidationError(f"variable {i} ({v.name or 'unnamed'}) has an unbounded domain; "
                                  "the MILP translation needs finite bounds")
        lower[i], upper[i] = dom
    rows_i: list[int] = []
    cols: list[int] = []
    data: list[int] = []
    lo: list[float] = []
    hi: list[float] = []
    names: list[str] = []
    infeasible: str | None = None

    def literal(ref: int, where: str) -> tuple[int, int, int]:
        """(variable, coefficient, constant) of a literal: x, or 1 - x for a negated one."""
        var = ref if ref >= 0 else -ref - 1
        if not 0 <= var < n:
            raise ValidationError(f"{where}: literal {ref} refers to no variable")
        if lower[var] < 0 or upper[var] > 1:
            raise ValidationError(f"{where}: literal {ref} is not a Boolean variable "
                                  f"(domain [{lower[var]}, {upper[var]}])")
        return (var, 1, 0) if ref >= 0 else (var, -1, 1)

    def add_row(terms: Mapping[int, int], lo_: float, hi_: float, name: str) -> None:
        nonlocal infeasible
        terms = {v: c for v, c in terms.items() if c != 0}
        if not terms:
            if not lo_ <= 0 <= hi_ and infeasible is None:
                infeasible = f"{name} cannot hold (no variables, 0 outside [{lo_:g}, {hi_:g}])"
            return
        r = len(lo)
        for v, c in terms.items():
            rows_i.append(r)
            cols.append(v)
            data.append(c)
        lo.append(lo_)
        hi.append(hi_)
        names.append(name)

    def literal_row(refs: Sequence[int], lo_: float, hi_: float, name: str) -> None:
        terms: dict[int, int] = {}
        const = 0
        for ref in refs:
            var, coef, c0 = literal(ref, name)
            terms[var] = terms.get(var, 0) + coef
            const += c0
        add_row(terms, lo_ - const, hi_ - const, name)

    for ci, c in enumerate(proto.constraints):
        _check_clock(ci, until)
        kind = _kind(c)
        if kind is None:  # an empty constraint holds
            continue
        name = f"constraint {ci} ({kind})"
        if kind not in TRANSLATED_KINDS:
            raise ValidationError(f"{name} is not translated to a MILP; translated kinds: "
                                  f"{', '.join(TRANSLATED_KINDS)}")
        if len(c.enforcement_literal):
            raise ValidationError(f"{name} has enforcement literals; only unconditional constraints are "
                                  "translated to a MILP")
        if kind == "linear":
            dom = list(c.linear.domain)
            if len(dom) != 2:
                raise ValidationError(f"{name} has a domain of {len(dom) // 2} intervals; only a single "
                                      "interval is translated to a MILP")
            terms: dict[int, int] = {}
            for v, coef in zip(c.linear.vars, c.linear.coeffs):
                if not 0 <= v < n:
                    raise ValidationError(f"{name}: term {v} is not a (positive) variable reference")
                terms[v] = terms.get(v, 0) + int(coef)
            add_row(terms, _bound(dom[0]), _bound(dom[1]), name)
        elif kind == "at_most_one":
            literal_row(list(c.at_most_one.literals), -math.inf, 1, name)
        elif kind == "exactly_one":
            literal_row(list(c.exactly_one.literals), 1, 1, name)
        elif kind == "bool_or":
            literal_row(list(c.bool_or.literals), 1, math.inf, name)
        else:  # bool_and: every literal true
            for ref in c.bool_and.literals:
                literal_row([ref], 1, 1, name)
    for ref in proto.assumptions:  # assumptions are literals fixed to true
        literal_row([ref], 1, 1, "assumption")

    obj = np.zeros(n)
    constant = 0.0
    maximize = False
    if _has(proto, "floating_point_objective"):
        fo = proto.floating_point_objective
        for v, coef in zip(fo.vars, fo.coeffs):
            if not 0 <= v < n:
                raise ValidationError(f"objective term {v} is not a (positive) variable reference")
            obj[v] += coef
        constant, maximize = float(fo.offset), bool(fo.maximize)
    elif _has(proto, "objective"):
        o = proto.objective
        factor = o.scaling_factor or 1.0
        terms = {}
        for v, coef in zip(o.vars, o.coeffs):
            if not 0 <= v < n:
                raise ValidationError(f"objective term {v} is not a (positive) variable reference")
            terms[v] = terms.get(v, 0) + int(coef)
            obj[v] += factor * coef
        constant, maximize = factor * o.offset, factor < 0
        dom = list(o.domain)  # a domain on sum(coeffs x), without offset and scaling
        if len(dom) > 2:
            raise ValidationError(f"the objective has a domain of {len(dom) // 2} intervals; only a single "
                                  "interval is translated to a MILP")
        if dom:
            add_row(terms, _bound(dom[0]), _bound(dom[1]), "objective domain")
    matrix = sparse.csr_matrix((np.array(data, dtype=np.int64), (rows_i, cols)), shape=(len(lo), n), dtype=np.int64)
    return LinearForm(lower, upper, matrix, np.array(lo, dtype=float), np.array(hi, dtype=float), tuple(names),
                      obj, float(constant), maximize, infeasible)


def to_pulp(model: cp_model.CpModel | LinearForm, *, relax: bool = False, as_minimization: bool = False,
            name: str = "cpsat_model", until: float | None = None) -> tuple[pulp.LpProblem, list[pulp.LpVariable]]:
    """The :class:`pulp.LpProblem` of a CP-SAT model (or of its :func:`linear_form`) and its variables
    by CP-SAT index; ``relax`` makes every variable continuous (the LP relaxation);
    ``as_minimization`` states a maximisation as the minimisation of the negated objective (what
    :func:`solve_milp` gives CBC: pulp's CBC 2.10.3 reads a warm start's cost with the wrong sign under
    ``-max``, takes later worse solutions for improvements and may return one worse than the warm
    start). A row with a range becomes two constraints. A model that is infeasible as written
    (:attr:`LinearForm.infeasible`) gets the constraint ``0 >= 1`` on a fixed variable. :class:`OutOfTime`
    once past ``until`` (a ``time.perf_counter()`` reading)."""
    form = model if isinstance(model, LinearForm) else linear_form(model, until)
    flip = -1.0 if (as_minimization and form.maximize) else 1.0
    maximize = form.maximize and not as_minimization
    prob = pulp.LpProblem(name, pulp.LpMaximize if maximize else pulp.LpMinimize)
    # pulp >= 3.3 attaches variables to the problem (prob.add_variable; LpVariable(...) is deprecated)
    make = getattr(prob, "add_variable", None) or pulp.LpVariable
    xs: list[pulp.LpVariable] = []
    for i in range(form.num_vars):
        _check_clock(i, until)
        lo_, hi_ = int(form.lower[i]), int(form.upper[i])
        cat = pulp.LpContinuous if relax else pulp.LpBinary if (lo_, hi_) == (0, 1) else pulp.LpInteger
        xs.append(make(f"x{i}", lo_, hi_, cat))
    prob += pulp.LpAffineExpression([(xs[i], flip * float(form.objective[i])) for i in np.flatnonzero(form.objective)],
                                    constant=flip * form.constant), "objective"
    m = form.matrix
    for r in range(m.shape[0]):
        _check_clock(r, until)
        a, b = m.indptr[r], m.indptr[r + 1]
        expr = pulp.LpAffineExpression([(xs[int(v)], int(c)) for v, c in zip(m.indices[a:b], m.data[a:b])])
        lo_, hi_ = form.row_lo[r], form.row_hi[r]
        if lo_ == hi_:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintEQ, f"r{r}", lo_)
            continue
        if lo_ > -math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintGE, f"r{r}_lo", lo_)
        if hi_ < math.inf:
            prob += pulp.LpConstraint(expr, pulp.LpConstraintLE, f"r{r}_hi", hi_)
    if form.infeasible:
        dummy = make("infeasible", 0, 0, pulp.LpContinuous)
        prob += pulp.LpConstraint(pulp.LpAffineExpression([(dummy, 1)]), pulp.LpConstraintGE, "infeasible", 1)
    return prob, xs


# -- back ends ------------------------------------------------------------------------------------------
def available_backends() -> tuple[str, ...]:
    """The back ends of :func:`solve_milp` that can run here."""
    out = []
    if _cbc_class() is not None:
        out.append("cbc")
    if _highs_kind() is not None:
        out.append("highs")
    return tuple(out)


def _cbc_class() -> type | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for cls_name in ("PULP_CBC_CMD", "COIN_CMD"):
            cls = getattr(pulp, cls_name, None)
            if cls is not None and cls(msg=False).available():
                return _reporting_cbc(cls)
    return None


_CBC_CLASSES: dict[type, type] = {}


def _reporting_cbc(base: type) -> type:
    """``base`` that also keeps the objective CBC writes on the first line of its solution file (15
    significant digits, where the variable values have 8: what :func:`lp_bound` reports)."""
    if base not in _CBC_CLASSES:
        class Reporting(base):  # type: ignore[misc, valid-type]
            reported_objective: float | None = None

            def readsol_MPS(self, filename, *args, **kwargs):  # noqa: N802 (pulp's name)
                with open(filename) as f:
                    words = f.readline().split()
                self.reported_objective = None
                if "value" in words and words.index("value") + 1 < len(words):
                    try:
                        self.reported_objective = float(words[words.index("value") + 1])
                    except ValueError:
                        pass
                return super().readsol_MPS(filename, *args, **kwargs)

        Reporting.__name__ = base.__name__
        _CBC_CLASSES[base] = Reporting
    return _CBC_CLASSES[base]


def require_backend(backend: str) -> Any:
    """Check that ``backend`` is a known MILP back end and is installed; returns what
    :func:`solve_milp` runs it with. Raises :class:`~optsched.core.errors.ValidationError` (unknown) or
    :class:`BackendUnavailableError` (not installed, with how to install it)."""
    if backend not in BACKENDS:
        raise ValidationError(f"unknown MILP backend {backend!r}; known: {', '.join(BACKENDS)}")
    if backend == "cbc":
        cbc = _cbc_class()
        if cbc is None:
            raise BackendUnavailableError(f"CBC is not available to pulp: {CBC_INSTALL_HINT}")
        return cbc
    highs = _highs_kind()
    if highs is None:
        raise BackendUnavailableError(f"HiGHS is not available to pulp: {HIGHS_INSTALL_HINT}")
    return highs


def _highs_kind() -> str | None:
    """"api" (pulp.HiGHS on highspy), "cmd" (pulp.HiGHS_CMD) or None."""
    try:
        available = set(pulp.listSolvers(onlyAvailable=True))
    except Exception:  # pragma: no cover - pulp probing its solvers
        return None
    if "HiGHS" in available:
        return "api"
    if "HiGHS_CMD" in available:
        return "cmd"
    return None


_BANNER_SHOWN = False


def _silence_highs_banner() -> None:
    """HiGHS writes its banner to the process's stdout (file descriptor 1, below Python) when the first
    ``Highs`` object is made, before pulp can turn its output off; that would corrupt a JSON answer on
    stdout. Make that first object here with descriptor 1 pointing to /dev/null."""
    global _BANNER_SHOWN
    if _BANNER_SHOWN:
        return
    _BANNER_SHOWN = True
    try:
        import highspy  # type: ignore[import-not-found, import-untyped, unused-ignore]

        sys.stdout.flush()
        saved = os.dup(1)
    except (ImportError, OSError, ValueError):  # no highspy, or no descriptor 1 to silence
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            try:
                highspy.Highs()
            finally:
                os.dup2(saved, 1)
    finally:
        os.close(saved)


def _highs_api_solver(time_limit: float, threads: int, start: Mapping[pulp.LpVariable, float] | None,
                      mip: bool = True) -> pulp.LpSolver:
    """pulp.HiGHS with ``mip_rel_gap = 0`` and, when ``start`` is given, that solution set before the
    run (pulp's HiGHS interface takes no warm start itself)."""

    _silence_highs_banner()

    class WarmHiGHS(pulp.HiGHS):  # type: ignore[misc, valid-type]
        def callSolver(self, lp):  # noqa: N802 (pulp's name)
            if start:
                cols = [(v.index, float(val)) for v, val in start.items() if getattr(v, "index", None) is not None]
                if cols:
                    idx = np.array([c for c, _ in cols], dtype=np.int32)
                    vals = np.array([x for _, x in cols], dtype=np.float64)
                    lp.solverModel.setSolution(len(cols), idx, vals)
            super().callSolver(lp)

    kwargs: dict[str, Any] = {"mip_rel_gap": 0.0} if mip else {}
    if threads > 1:
        kwargs["threads"] = threads
    return WarmHiGHS(mip=mip, msg=False, timeLimit=time_limit, **kwargs)


def _status(prob: pulp.LpProblem) -> str:
    sol = getattr(prob, "sol_status", None)
    if sol == pulp.LpSolutionOptimal:
        return "optimal"
    if sol == pulp.LpSolutionIntegerFeasible:
        return "feasible"
    if prob.status == pulp.LpStatusInfeasible:
        return "infeasible"
    if sol is None and prob.status == pulp.LpStatusOptimal:  # pulp before sol_status
        return "optimal"
    return "unknown"


def check_solve_options(time_limit: float, backend: str, backends: Sequence[str]) -> None:
    """What a formulation that solves by CP-SAT or as a MILP checks before it builds: a positive
    ``time_limit`` and a ``backend`` among ``backends`` (:data:`~optsched.formulations.solution.CPSAT_BACKENDS`
    and :data:`BACKENDS`), installed when it is a MILP back end (:func:`require_backend`). ``ValidationError`` or
    :class:`BackendUnavailableError` otherwise."""
    if not (isinstance(time_limit, (int, float)) and time_limit > 0):
        raise ValidationError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    if backend not in backends:
        raise ValidationError(f"unknown backend {backend!r}; known: {', '.join(backends)}")
    if backend in BACKENDS:
        require_backend(backend)


def _check_time_limit(time_limit: float) -> None:
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit > 0:
        raise ValidationError(f"time_limit must be a positive number of seconds, got {time_limit!r}")


def _hint_array(form: LinearForm, hint: Mapping[int, int] | Sequence[int] | None,
                model: cp_model.CpModel) -> dict[int, int]:
    if hint is None:
        h = model.proto.solution_hint
        return {int(v): int(x) for v, x in zip(h.vars, h.values)}
    if isinstance(hint, Mapping):
        out = {int(k): int(v) for k, v in hint.items()}
    else:
        out = {i: int(v) for i, v in enumerate(hint)}
    bad = [k for k in out if not 0 <= k < form.num_vars]
    if bad:
        raise ValidationError(f"hint names variable {bad[0]}, but the model has {form.num_vars} variables")
    return out


def solve_milp(model: cp_model.CpModel, backend: str, time_limit: float,
               hint: Mapping[int, int] | Sequence[int] | None = None, threads: int = 1) -> MilpResult:
    """Solve a CP-SAT model as a MILP with ``backend`` (:data:`BACKENDS`) within ``time_limit`` seconds
    (translation included) on ``threads`` threads. ``hint`` (CP-SAT variable index -> value, or a
    value per index; default: the model's own solution hint) is the warm start; hinted values outside
    a variable's domain are clipped to it, unhinted variables start at the value of their domain
    closest to 0. A warm start that satisfies the model is never lost: when the solver returns nothing
    (time limit) or a worse solution, it is the answer, with status ``"feasible"``. See the module
    docstring for the bound. Raises
    :class:`~optsched.core.errors.ValidationError` for an unknown back end or an untranslatable model
    and :class:`BackendUnavailableError` when the back end is not installed."""
    t0 = time.perf_counter()
    _check_time_limit(time_limit)
    if not (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
        raise ValidationError(f"threads must be a positive integer, got {threads!r}")
    found = require_backend(backend)
    cbc = found if backend == "cbc" else None
    highs = found if backend == "highs" else None
    until = t0 + time_limit - MIN_SOLVER_SECONDS  # the translation leaves the solver its least time
    try:
        form = linear_form(model, until)
    except OutOfTime:
        return MilpResult("unknown", None, None, None, time.perf_counter() - t0, backend, hint is not None)
    start = _hint_array(form, hint, model)
    warm = bool(start)
    # the warm start, every variable inside its domain (unhinted ones at the value closest to 0)
    default = np.clip(0, form.lower, form.upper)
    fill = np.clip(np.array([start.get(i, int(default[i])) for i in range(form.num_vars)], dtype=np.int64),
                   form.lower, form.upper)
    if form.infeasible:
        return MilpResult("infeasible", None, None, None, time.perf_counter() - t0, backend, warm)
    t_export = time.perf_counter()
    try:
        prob, xs = to_pulp(form, as_minimization=cbc is not None, until=until)
    except OutOfTime:  # no time for a solver: the warm start, when it holds
        return _warm_only(form, fill, warm, t0, backend)
    export_s = time.perf_counter() - t_export
    if warm:
        for i, x in enumerate(xs):
            x.setInitialValue(int(fill[i]))
    left = max(MIN_SOLVER_SECONDS, time_limit - (time.perf_counter() - t0))
    if (cbc is not None and left - 2 * export_s - CBC_START_S < MIN_SOLVER_SECONDS) or \
            (highs == "api" and left - 2 * export_s < MIN_SOLVER_SECONDS):
        return _warm_only(form, fill, warm, t0, backend)  # the solver would not get the model, solve and answer
    used = {v.name for v in prob.variables()}
    if not used:  # nothing for a solver to do
        status = "infeasible" if form.violations(fill) else "optimal"
        obj = None if status == "infeasible" else form.value(fill)
        return MilpResult(status, obj, obj, None if obj is None else tuple(int(v) for v in fill),
                          time.perf_counter() - t0, backend, warm)
    bound: float | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if cbc is not None:
            # the MPS file written, the solution read back and the process started count (module docstring)
            cbc_left = max(MIN_SOLVER_SECONDS, left - 2 * export_s - CBC_START_S)
            kwargs: dict[str, Any] = {"timeLimit": cbc_left, "msg": False, "warmStart": warm}
            if threads > 1:
                kwargs["threads"] = threads
            solver = cbc(**kwargs)
        elif highs == "api":
            solver = _highs_api_solver(max(MIN_SOLVER_SECONDS, left - 2 * export_s), threads,
                                       {xs[i]: xs[i].varValue for i in range(len(xs))} if warm else None)
        else:
            solver = pulp.HiGHS_CMD(msg=False, timeLimit=left, warmStart=warm, gapRel=0.0,
                                    threads=threads if threads > 1 else None)
        with hard_stop(t0 + time_limit) as stop:
            try:
                prob.solve(solver)
            except pulp.PulpSolverError:
                if not stop.fired:
                    raise
                log.info("%s: killed at the end of its %.2f s time limit; the warm start stands", backend,
                         time_limit)
                return _warm_only(form, fill, warm, t0, backend)
    status = _status(prob)
    values_t: tuple[int, ...] | None = None
    obj: float | None = None
    if status in ("optimal", "feasible"):
        raw = np.array([x.varValue if x.name in used and x.varValue is not None else np.nan for x in xs])
        values = np.rint(np.where(np.isnan(raw), fill, raw)).astype(np.int64)
        if form.violations(values):
            status = "unknown"
        else:
            values_t = tuple(int(v) for v in values)
            obj = form.value(values)
    if highs == "api" and status in ("optimal", "feasible"):
        bound = _highs_bound(prob, form)
    if warm and not form.violations(fill):  # a feasible warm start is never lost
        start_obj = form.value(fill)
        better = obj is None or (start_obj - obj if form.maximize else obj - start_obj) > 1e-9 * max(1.0, abs(obj))
        if better:
            if status == "optimal":  # the solver contradicts itself: claim nothing
                bound = None
            status, obj, values_t = "feasible", start_obj, tuple(int(v) for v in fill)
    if status == "optimal" and obj is not None:
        bound = obj if bound is None else (max(bound, obj) if form.maximize else min(bound, obj))
    elif bound is not None and obj is not None:
        bound = max(bound, obj) if form.maximize else min(bound, obj)
    return MilpResult(status, obj, bound, values_t, time.perf_counter() - t0, backend, warm)


def _warm_only(form: LinearForm, fill: np.ndarray, warm: bool, t0: float, backend: str) -> MilpResult:
    """The answer of :func:`solve_milp` when the time limit leaves no time for the solver: the warm start
    (status ``feasible``, no bound) when there is one and it holds, else ``unknown``."""
    if warm and not form.violations(fill):
        obj = form.value(fill)
        return MilpResult("feasible", obj, None, tuple(int(v) for v in fill), time.perf_counter() - t0, backend, warm)
    return MilpResult("unknown", None, None, None, time.perf_counter() - t0, backend, warm)


def _highs_bound(prob: pulp.LpProblem, form: LinearForm) -> float | None:
    """HiGHS's MIP dual bound in the model's units: pulp hands HiGHS ``min sense * (sum c x)`` (sense -1
    for a maximisation) without the objective's constant."""
    try:
        raw = float(prob.solverModel.getInfo().mip_dual_bound)
    except Exception:  # pragma: no cover - an older highspy
        return None
    if not math.isfinite(raw):
        return None
    sense = -1.0 if form.maximize else 1.0
    return sense * raw + form.constant


def lp_bound(model: cp_model.CpModel, time_limit: float) -> float | None:
    """The optimum of the LP relaxation of a CP-SAT model (every variable continuous within its
    domain), solved by CBC's simplex within ``time_limit`` seconds, in the model's objective units: an
    upper bound of every solution of a maximisation (a lower bound of a minimisation). The value is
    the one CBC reports (15 significant digits). ``None`` when the LP is not solved to optimality in
    time, and when it is infeasible (then the model is too) or unbounded."""
    t0 = time.perf_counter()
    _check_time_limit(time_limit)
    cbc = require_backend("cbc")
    form = linear_form(model)
    if form.infeasible:
        return None
    prob, xs = to_pulp(form, relax=True)
    if not prob.variables():
        return form.constant
    left = max(MIN_SOLVER_SECONDS, time_limit - (time.perf_counter() - t0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = cbc(mip=False, msg=False, timeLimit=left)
        prob.solve(solver)
    if _status(prob) != "optimal":
        return None
    raw = np.array([x.varValue or 0.0 for x in xs])
    approx = form.value(raw)  # from values printed with 8 significant digits
    reported = solver.reported_objective
    if reported is not None:
        tol = 1e-6 * (1.0 + float(np.abs(form.objective) @ np.abs(raw)))
        for value in (reported + form.constant, reported):  # pulp writes no objective constant to CBC
            if abs(value - approx) <= tol:
                return float(value)
    return approx


__all__ = ["BACKENDS", "BackendUnavailableError", "CBC_INSTALL_HINT", "HIGHS_INSTALL_HINT", "LinearForm", "MilpResult",
           "OutOfTime", "TRANSLATED_KINDS", "available_backends", "check_solve_options", "linear_form", "lp_bound",
           "require_backend", "solve_milp", "to_pulp"]
