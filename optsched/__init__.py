"""optsched: an optimization engine for deep-learning GPU-cluster scheduling.

Layers (see ``docs/architecture.md``): ``optsched.core`` (vocabulary, base round and decision, the
round-kind registry, the ``Policy`` protocol), ``optsched.perf`` (performance models and coefficient
tables), ``optsched.rounds`` (what each round kind means), ``optsched.heuristics`` (the papers'
algorithms and baselines), ``optsched.formulations`` (exact OR-Tools models of one round),
``optsched.policies`` (table + warm start + solver per (kind, method); :func:`solve`),
``optsched.sim`` (simulator), ``optsched.experiments`` (many policies on one trace).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: names the package offers besides :mod:`optsched.core`'s, and the module of each
_NAMES = {"PolicyOptions": "optsched.policies", "make_policy": "optsched.policies", "solve": "optsched.policies",
          "RubickRound": "optsched.rounds.rubick"}


def __getattr__(name: str) -> Any:
    """The package's names, imported on first use (PEP 562), so that ``import optsched.cli`` or
    ``optsched --version`` does not import the solvers (issue 26, start-up): ``optsched.core``'s names,
    :func:`solve`, :class:`PolicyOptions`, :func:`make_policy` and :class:`RubickRound`. The built-in round
    kinds are registered on first use of the kind registry (:mod:`optsched.core.kinds`)."""
    if name == "__all__":
        core = importlib.import_module("optsched.core")
        return list(core.__all__) + sorted(_NAMES)
    module = _NAMES.get(name)
    if module is not None:
        return getattr(importlib.import_module(module), name)
    core = importlib.import_module("optsched.core")
    if name in core.__all__:
        return getattr(core, name)
    raise AttributeError(f"module 'optsched' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
