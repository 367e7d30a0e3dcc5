"""optsched: an optimization engine for deep-learning GPU-cluster scheduling.

Layers (see ``docs/architecture.md``): ``optsched.core`` (vocabulary, base round and decision, the
round-kind registry, the ``Policy`` protocol), ``optsched.perf`` (performance models and coefficient
tables), ``optsched.rounds`` (what each round kind means), ``optsched.heuristics`` (the papers'
algorithms and baselines), ``optsched.formulations`` (exact OR-Tools models of one round),
``optsched.policies`` (table + warm start + solver per (kind, method); :func:`solve`),
``optsched.sim`` (simulator), ``optsched.experiments`` (many policies on one trace).
"""

import optsched.rounds  # noqa: F401  (registers the built-in round kinds)
from optsched.core import *  # noqa: F401,F403
from optsched.core import __all__ as _core_all
from optsched.policies import PolicyOptions, make_policy, solve
from optsched.rounds.rubick import RubickRound

__version__ = "0.1.0"
__all__ = list(_core_all) + ["PolicyOptions", "RubickRound", "make_policy", "solve"]
