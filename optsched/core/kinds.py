"""The round-kind registry: one entry per system whose rounds optsched solves (DESIGN.md, "rounds/<kind>").

A kind registers, from its own package under ``optsched/rounds/``, its problem class (a subclass of
:class:`~optsched.core.round.RoundProblem` holding the kind's fields, with JSON parse/write and
validation), its decision payload class (what a decision carries besides the common top level, e.g.
per-job allocations), and its random round generator. Methods (policies) are registered one layer up,
in :mod:`optsched.policies.registry`, keyed by (kind, method). Nothing here imports a kind: a kind
becomes known when its package is imported (``import optsched`` imports every built-in kind).
"""

from __future__ import annotations

import importlib

import inspect
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Generic, Mapping, Protocol, Sequence, TypeVar, runtime_checkable

from optsched.core.errors import UnknownNameError, ValidationError


class KindProblem(Protocol):
    """What the registry reads of a kind's problem class (a subclass of
    :class:`~optsched.core.round.RoundProblem`): the name of its kind."""

    KIND: ClassVar[str]


@runtime_checkable
class DecisionPayload(Protocol):
    """What a kind's decision carries besides the top level (:class:`~optsched.core.decision.Decision`).
    ``KEYS``: the JSON keys it owns (required first, then optional, as two tuples)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]]

    def to_dict(self) -> dict[str, Any]: ...

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecisionPayload": ...


#: a kind's problem class and its decisions (:class:`~optsched.core.decision.Decision`), as the
#: registry's types name them without importing them
ProblemT = TypeVar("ProblemT", bound=KindProblem)
DecisionT = TypeVar("DecisionT")


class Split(Protocol[ProblemT]):
    """A round split into independent ``parts``; ``left_out`` names the jobs in no part and why,
    ``unhosted`` those of them whose guarantee the split cannot keep (the round is then solved whole)."""

    parts: Sequence[ProblemT]
    left_out: Mapping[str, str]
    unhosted: Mapping[str, str]


class Partitioner(Protocol[ProblemT, DecisionT]):
    """How a kind's rounds are split into independent parts and the parts' decisions joined again
    (partitioned solving in the manner of POP, :mod:`optsched.policies.partitioned`)."""

    def check(self, problem: ProblemT, parts: int) -> None:
        """``ValidationError`` unless ``problem`` can be split into ``parts`` parts (before any work)."""

    def split(self, problem: ProblemT, parts: int, seed: int, perf_models: Any = None,
              deadline: Any = None) -> Split[ProblemT]: ...

    def merge(self, problem: ProblemT, split: Any, decisions: Sequence[DecisionT], *, method: str,
              solve_seconds: float, message: str = "") -> DecisionT: ...


@dataclass(frozen=True)
class RoundKind(Generic[ProblemT]):
    """A registered round kind: its ``name`` (the ``kind`` of round and decision files), ``problem``
    class, decision ``payload`` class, ``generate`` function (keyword arguments, ``seed`` among them,
    returning a problem of the kind), a one-line ``summary`` and, when its rounds can be solved in
    parts, a ``partitioner``."""

    name: str
    problem: type[ProblemT]
    payload: type[DecisionPayload]
    generate: Callable[..., ProblemT]
    summary: str
    partitioner: Partitioner[ProblemT, Any] | None = None

    @property
    def generator_options(self) -> tuple[str, ...]:
        """Keyword arguments :attr:`generate` takes (what ``optsched gen-round`` may pass it)."""
        return tuple(p.name for p in inspect.signature(self.generate).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


_KINDS: dict[str, RoundKind[Any]] = {}


def register_kind(kind: RoundKind[ProblemT]) -> RoundKind[ProblemT]:
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


#: whether the built-in kinds (:mod:`optsched.rounds`) were imported
_BUILT_IN = False


def _built_in() -> None:
    """Register the built-in kinds on first use of the registry (``import optsched.rounds``): the package
    imports nothing on its own (:mod:`optsched`, start-up), so a caller that imports only
    :mod:`optsched.core` still finds them."""
    global _BUILT_IN
    if not _BUILT_IN:
        _BUILT_IN = True
        importlib.import_module("optsched.rounds")


def round_kind(name: str) -> RoundKind[Any]:
    """The registered kind ``name`` (``UnknownNameError`` listing the registered ones); its problem
    class is the kind's subclass of :class:`~optsched.core.round.RoundProblem`."""
    _built_in()
    try:
        return _KINDS[name]
    except (KeyError, TypeError):
        raise UnknownNameError("round kind", str(name), list(_KINDS)) from None


def round_kinds() -> tuple[str, ...]:
    """Names of the registered kinds, sorted."""
    _built_in()
    return tuple(sorted(_KINDS))


def describe_kinds() -> dict[str, Any]:
    """Kind name -> summary, for help texts."""
    return {name: _KINDS[name].summary for name in round_kinds()}


__all__ = ["DecisionPayload", "KindProblem", "Partitioner", "RoundKind", "Split", "describe_kinds", "register_kind",
           "round_kind", "round_kinds"]
