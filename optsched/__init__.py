"""optsched: an optimization engine for deep-learning GPU-cluster scheduling.

Layers (see DESIGN.md): ``optsched.core`` (vocabulary), ``optsched.perf`` (performance models and
coefficient tables), ``optsched.formulations`` (exact OR-Tools models of one round),
``optsched.scheduling`` (round tables, admission, scoring, and :func:`solve`),
``optsched.heuristics`` (the papers' algorithms and baselines), ``optsched.sim`` (simulator).
"""

from optsched.core import *  # noqa: F401,F403
from optsched.core import __all__ as _core_all
from optsched.core.round import Decision, JobDecision, RoundProblem
from optsched.scheduling.solve import solve

__version__ = "0.1.0"
__all__ = list(_core_all) + ["Decision", "JobDecision", "RoundProblem", "solve"]
