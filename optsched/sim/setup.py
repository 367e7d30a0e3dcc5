"""What a round kind registers so that it can be simulated (DESIGN.md, "One driver": the simulation
setup of the per-kind contract): its default cluster and policies, the options of its own, the
extras every policy gets in a simulation, and how a :class:`SimulationRequest` becomes the
simulator's inputs (cluster, jobs, ground truth, round fields and events). ``optsched simulate
--kind K`` and :func:`optsched.experiments.compare.simulate_kind` take everything from here, so a new
kind needs no change in either.

The built-in setups live in :mod:`optsched.sim.setups` (one module per kind) and are registered the
first time the registry is asked (:func:`simulation_setup`, :func:`simulation_kinds`).

**Nothing accepted is ignored**: an option of :class:`SimulationRequest` that a kind does not read
(not in its ``reads``) must keep its default, and a kind option of another kind must not be given;
:func:`check_request` names the option and the kind otherwise.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Callable, Mapping

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.sim.truth_source import IterationTimeSource

#: where ``--max-jobs`` applies (refused elsewhere, never ignored)
MAX_JOBS_APPLIES = "--max-jobs applies to Philly and ITP trace files (it keeps their first N jobs)"
#: the options of a request every kind reads (what to simulate at all)
ALWAYS_READ = ("trace", "seed")


@dataclass(frozen=True)
class SimulationRequest:
    """What is asked of a simulation besides its policies (``optsched simulate``'s options):
    ``trace`` (``"synthetic"`` or a path), ``jobs``/``load`` (the synthetic trace), ``max_jobs``,
    ``infeasible_plans`` (workload traces), ``seed``, ``cluster`` (name or JSON path; None: the kind's
    default), ``ground_truth`` (spec), ``params`` (fitted model files the policies plan with),
    ``configs`` (``all``/``measured``), ``trace_durations`` (``use``/``ignore``), and ``options``:
    the kind's own options by name (:class:`SimulationOption`)."""

    trace: str = "synthetic"
    jobs: int = 120
    load: float = 1.0
    max_jobs: int | None = None
    infeasible_plans: str = "error"
    seed: int = 0
    cluster: str | None = None
    ground_truth: str = "analytical"
    params: tuple[str, ...] = ()
    configs: str = "all"
    trace_durations: str = "use"
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_jobs is not None:
            if isinstance(self.max_jobs, bool) or not isinstance(self.max_jobs, int) or self.max_jobs < 1:
                raise ValidationError(f"--max-jobs must be an integer >= 1, got {self.max_jobs!r}")
            if self.trace == "synthetic":
                raise ValidationError(f"{MAX_JOBS_APPLIES}; the synthetic trace has --jobs N jobs")
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "options", MappingProxyType(dict(self.options)))

    def given(self) -> tuple[str, ...]:
        """The common options that differ from their defaults (what the caller asked for)."""
        default = SimulationRequest()
        return tuple(f.name for f in fields(self)
                     if f.name != "options" and getattr(self, f.name) != getattr(default, f.name))


@dataclass(frozen=True)
class SimulationOption:
    """An option of one kind's simulations: ``name`` (``--name`` on the command line, ``_`` as ``-``),
    its ``type`` (int, float or str), ``default``, ``help`` and ``metavar``."""

    name: str
    type: type
    default: Any
    help: str
    metavar: str = "X"


@dataclass(frozen=True)
class SimulationInputs:
    """What a kind's setup makes of a request: the ``cluster``, ``jobs`` and ground ``truth``, the
    trace's name, the ``heading`` line and ``notes`` a comparison prints before its table, the keyword
    arguments of every run (``runs``: e.g. ``round_fields``, ``perf_models``, ``time_scale``,
    ``allowed_configs``) and of one method's run (``per_method``, e.g. Lyra's loans), and what the
    summary file adds (``summary``, and per policy ``policy_summary``); ``named_policies``: the policies a kind's
    option names (e.g. Lyra's ``no_loaning``), which a simulation checks against those it runs."""

    cluster: Cluster
    jobs: tuple[Job, ...]
    truth: IterationTimeSource
    trace_name: str
    heading: str
    notes: tuple[str, ...] = ()
    runs: Mapping[str, Any] = field(default_factory=dict)
    per_method: Callable[[str], Mapping[str, Any]] | None = None
    summary: Mapping[str, Any] = field(default_factory=dict)
    #: policies an option of the request names (option -> names), each to be among the policies run
    named_policies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: what a policy's entry of ``summary.json`` adds to its summary (given that summary), e.g. Lyra's preemptions
    #: per inference server per day; None: nothing
    policy_summary: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None

    def run_options(self, method: str) -> dict[str, Any]:
        """The keyword arguments of the run of ``method``: :attr:`runs`, then :attr:`per_method`'s."""
        out = dict(self.runs)
        if self.per_method is not None:
            out.update(self.per_method(method))
        return out


@dataclass(frozen=True)
class SimulationSetup:
    """A kind's simulation setup (module docstring): ``kind``, a one-line ``summary``, the
    ``default_policies`` (methods of the kind) and ``default_cluster`` (None: the kind builds its
    own), ``build`` (request -> inputs), the common request options it ``reads`` (besides
    :data:`ALWAYS_READ`), its own ``options`` and the ``policy_extras`` every policy of its
    simulations gets (e.g. Rubick's deferral of unreachable guarantees, so that a round never fails a
    simulation)."""

    kind: str
    summary: str
    default_policies: tuple[str, ...]
    default_cluster: str | None
    build: Callable[[SimulationRequest], SimulationInputs]
    reads: tuple[str, ...] = ()
    options: tuple[SimulationOption, ...] = ()
    policy_extras: Mapping[str, Any] = field(default_factory=dict)

    def option(self, request: SimulationRequest, name: str) -> Any:
        """The value of the kind's own option ``name`` in ``request`` (its default when not given)."""
        for opt in self.options:
            if opt.name == name:
                return request.options.get(name, opt.default)
        raise ValidationError(f"simulation of kind {self.kind!r} has no option {name!r}")


_SETUPS: dict[str, SimulationSetup] = {}
#: the modules that register the built-in setups (imported when the registry is first asked)
BUILTIN = "optsched.sim.setups"


def register_simulation(setup: SimulationSetup) -> SimulationSetup:
    """Register ``setup`` for its kind (again the same: a no-op; another under a taken kind: an error)."""
    old = _SETUPS.get(setup.kind)
    if old is not None and old != setup:
        raise ValidationError(f"round kind {setup.kind!r} already has a simulation setup")
    _SETUPS[setup.kind] = setup
    return setup


def _builtin() -> None:
    importlib.import_module(BUILTIN)


def simulation_kinds() -> tuple[str, ...]:
    """The kinds with a simulation setup, in registration order (the first is the default)."""
    _builtin()
    return tuple(_SETUPS)


def simulation_setup(kind: str) -> SimulationSetup:
    """The setup of ``kind`` (``UnknownNameError`` listing the kinds that have one)."""
    _builtin()
    try:
        return _SETUPS[kind]
    except KeyError:
        raise UnknownNameError("simulation kind", str(kind), list(_SETUPS)) from None


def check_request(setup: SimulationSetup, request: SimulationRequest) -> None:
    """``ValidationError`` naming each option of ``request`` the kind of ``setup`` would ignore
    (module docstring)."""
    unread = [name for name in request.given() if name not in (*ALWAYS_READ, *setup.reads)]
    own = {o.name for o in setup.options}
    unread += sorted(set(request.options) - own)
    if unread:
        flags = ", ".join("--" + n.replace("_", "-") for n in unread)
        verb = "does" if len(unread) == 1 else "do"
        raise ValidationError(f"--kind {setup.kind}: {flags} {verb} not apply to its simulations")


__all__ = ["ALWAYS_READ", "MAX_JOBS_APPLIES", "SimulationInputs",
           "SimulationOption", "SimulationRequest", "SimulationSetup",
           "check_request", "register_simulation", "simulation_kinds", "simulation_setup"]
