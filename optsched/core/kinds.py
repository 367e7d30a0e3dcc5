"""The round-kind registry: one entry per system whose rounds optsched solves (DESIGN.md, "rounds/<kind>").

A kind registers, from its own package under ``optsched/rounds/``, its problem class (a subclass of
:class:`~optsched.core.round.RoundProblem` holding the kind's fields, with JSON parse/write and
validation), its decision payload class (what a decision carries besides the common top level, e.g.
per-job allocations), and its random round generator. Methods (policies) are registered one layer up,
in :mod:`optsched.policies.registry`, keyed by (kind, method). Nothing here imports a kind: a kind
becomes known when its package is imported (``import optsched`` imports every built-in kind).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, Sequence

from optsched.core.errors import UnknownNameError, ValidationError

if TYPE_CHECKING:  # pragma: no cover
    from optsched.core.decision import Decision, DecisionPayload
    from optsched.core.round import RoundProblem


class Split(Protocol):
    """A round split into independent ``parts``; ``left_out`` names the jobs in no part and why,
    ``unhosted`` those of them whose guarantee the split cannot keep (the round is then solved whole)."""

    parts: Sequence["RoundProblem"]
    left_out: Mapping[str, str]
    unhosted: Mapping[str, str]


class Partitioner(Protocol):
    """How a kind's rounds are split into independent parts and the parts' decisions joined again
    (partitioned solving in the manner of POP, :mod:`optsched.policies.partitioned`)."""

    def split(self, problem: "RoundProblem", parts: int, seed: int, perf_models: Any = None,
              deadline: Any = None) -> Split: ...

    def merge(self, problem: "RoundProblem", split: Any, decisions: Sequence["Decision"], *, method: str,
              solve_seconds: float, message: str = "") -> "Decision": ...


@dataclass(frozen=True)
class RoundKind:
    """A registered round kind: its ``name`` (the ``kind`` of round and decision files), ``problem``
    class, decision ``payload`` class, ``generate`` function (keyword arguments, ``seed`` among them,
    returning a problem of the kind), a one-line ``summary`` and, when its rounds can be solved in
    parts, a ``partitioner``."""

    name: str
    problem: type["RoundProblem"]
    payload: type["DecisionPayload"]
    generate: Callable[..., "RoundProblem"]
    summary: str
    partitioner: Partitioner | None = None

    @property
    def generator_options(self) -> tuple[str, ...]:
        """Keyword arguments :attr:`generate` takes (what ``optsched gen-round`` may pass it)."""
        return tuple(p.name for p in inspect.signature(self.generate).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


_KINDS: dict[str, RoundKind] = {}


def register_kind(kind: RoundKind) -> RoundKind:
    """Add ``kind`` to the registry (its problem class must name it in ``KIND``). Registering the same
    entry again is a no-op; another entry under a taken name is a ``ValidationError``."""
    if kind.problem.KIND != kind.name:
        raise ValidationError(f"round kind {kind.name!r}: its problem class {kind.problem.__name__} has KIND "
                              f"{kind.problem.KIND!r}")
    old = _KINDS.get(kind.name)
    if old is not None and old != kind:
        raise ValidationError(f"round kind {kind.name!r} is already registered")
    _KINDS[kind.name] = kind
    return kind


def round_kind(name: str) -> RoundKind:
    """The registered kind ``name`` (``UnknownNameError`` listing the registered ones)."""
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise UnknownNameError("round kind", str(name), list(_KINDS)) from None


def round_kinds() -> tuple[str, ...]:
    """Names of the registered kinds, sorted."""
    return tuple(sorted(_KINDS))


def describe_kinds() -> dict[str, Any]:
    """Kind name -> summary, for help texts."""
    return {name: _KINDS[name].summary for name in round_kinds()}


__all__ = ["Partitioner", "RoundKind", "Split", "describe_kinds", "register_kind", "round_kind", "round_kinds"]
