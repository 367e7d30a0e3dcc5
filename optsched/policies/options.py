"""The one value every policy factory takes (instead of positional arguments): time limit, seed,
solver workers, the fitted performance models the policy plans with, and kind-specific extras."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from optsched.core.checks import require_seed
from optsched.core.errors import ValidationError
from optsched.formulations.solution import CPSAT_BACKENDS, MILP_BACKENDS
from optsched.perf.lookup import ConfigFilter, FittedModels, PerfSource

#: what may solve an exact formulation: CP-SAT, CP-SAT then HiGHS when it stalls (``switch``), or a MILP through pulp
BACKENDS: tuple[str, ...] = (*CPSAT_BACKENDS, *MILP_BACKENDS)
#: the default ``backend``: each method's own (``switch`` for the exact methods of ``rubick`` and ``crius``, ``cpsat``
#: for every other method; :func:`optsched.policies.registry.make_policy` replaces it with that before building)
AUTO_BACKEND = "auto"

#: seconds a solver-backed policy gets per round unless told otherwise
DEFAULT_TIME_LIMIT = 10.0


@dataclass(frozen=True)
class PolicyOptions:
    """Options of one policy.

    * ``time_limit``: wall-clock seconds for the whole ``decide`` call of a solver-backed policy
      (table, heuristic and solver), > 0;
    * ``seed``: the solver's random seed, in ``[0, 2**31)`` (with ``workers=1`` CP-SAT is reproducible);
    * ``workers``: CP-SAT search workers, >= 1;
    * ``perf_models``: fitted performance models keyed by model name or (model name, GPU type),
      replacing the built-in ones (:class:`~optsched.perf.lookup.PerfSource`);
    * ``extras``: options of the round kind (Rubick: ``defer_unreachable_guarantees``); each kind's
      methods say which they read (:func:`optsched.policies.registry.kind_extras`);
    * ``backend``: what solves the exact formulations: ``"auto"`` (default: ``"switch"`` where a method offers it,
      else ``"cpsat"``); ``"cpsat"``; ``"switch"``, CP-SAT and then, when it stalls, HiGHS
      (:mod:`optsched.formulations.switch`; the ``rubick`` and ``crius`` exact methods);
      ``"cbc"`` or ``"highs"`` (a MILP through pulp, :mod:`optsched.formulations.milp`; HiGHS when ``highspy`` is
      installed);
    * ``clock_start``: the ``time.perf_counter()`` reading the time limit counts from (e.g. when a
      command started, so that parsing counts); None: each ``decide`` call starts its own clock;
    * ``allowed_configs``: which configurations the policy may offer a job
      (:data:`~optsched.perf.lookup.ConfigFilter`, e.g. only measured ones); None: every one.
    """

    time_limit: float = DEFAULT_TIME_LIMIT
    seed: int = 0
    workers: int = 1
    perf_models: FittedModels | None = field(default=None, compare=False)
    extras: Mapping[str, Any] = field(default_factory=dict)
    clock_start: float | None = None
    backend: str = AUTO_BACKEND
    allowed_configs: ConfigFilter | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        tl = self.time_limit
        if isinstance(tl, bool) or not isinstance(tl, (int, float)) or not math.isfinite(tl) or not tl > 0:
            raise ValidationError(f"time_limit must be a positive number of seconds, got {tl!r}")
        object.__setattr__(self, "time_limit", float(tl))
        require_seed("", self.seed)
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValidationError(f"workers must be a positive integer, got {self.workers!r}")
        if not isinstance(self.extras, Mapping) or not all(isinstance(k, str) for k in self.extras):
            raise ValidationError(f"extras must be a mapping of option names to values, got {self.extras!r}")
        object.__setattr__(self, "extras", MappingProxyType(dict(self.extras)))
        if self.backend not in (AUTO_BACKEND, *BACKENDS):
            raise ValidationError(f"unknown backend {self.backend!r}; known: {', '.join((AUTO_BACKEND, *BACKENDS))}")
        if self.clock_start is not None and (isinstance(self.clock_start, bool)
                                             or not isinstance(self.clock_start, (int, float))):
            raise ValidationError(f"clock_start must be a time.perf_counter() reading, got {self.clock_start!r}")

    def extra(self, name: str, default: Any = None) -> Any:
        return self.extras.get(name, default)

    def perf_source(self) -> PerfSource:
        """A fresh :class:`~optsched.perf.lookup.PerfSource` over ``perf_models`` (one per policy)."""
        return PerfSource(self.perf_models, self.allowed_configs)


__all__ = ["AUTO_BACKEND", "BACKENDS", "DEFAULT_TIME_LIMIT", "PolicyOptions"]
