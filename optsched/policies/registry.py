"""Policies keyed by (round kind, method) (:func:`optsched.policies.solve.solve` dispatches on the round's
kind through them).

A kind's package under ``optsched/policies/`` registers each of its methods with
:func:`register_method`: a factory ``PolicyOptions -> Policy``, a one-line summary, the kind
extras it reads, and whether the back end of ``PolicyOptions.backend`` solves it (``uses_backend``: the
exact methods of ``rubick``, ``crius`` and ``experts``; every other method refuses a MILP back end,
:func:`make_policy`, rather than ignore it).
``optsched solve --help`` and ``docs/rounds.md`` list the methods per kind from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.policy import Policy
from optsched.policies.options import PolicyOptions

#: the kind ``make_policy`` and ``optsched simulate`` assume when none is named (the kind of the
#: built-in traces)
DEFAULT_KIND = "rubick"


@dataclass(frozen=True)
class Method:
    """A registered method: its ``kind`` and ``name``, the ``build`` factory, a ``summary``, the
    kind ``extras`` (option names) it reads and whether ``PolicyOptions.backend`` chooses what solves
    it (``uses_backend``)."""

    kind: str
    name: str
    build: Callable[[PolicyOptions], Policy]
    summary: str
    extras: tuple[str, ...] = ()
    uses_backend: bool = False


_METHODS: dict[tuple[str, str], Method] = {}


def register_method(kind: str, name: str, build: Callable[[PolicyOptions], Policy], summary: str,
                    extras: tuple[str, ...] = (), *, uses_backend: bool = False) -> Method:
    """Register ``name`` for rounds of ``kind`` (a registered kind; another entry under a taken
    (kind, name) is a ``ValidationError``); ``uses_backend``: its exact model is solved by the back end
    ``PolicyOptions.backend`` names (CP-SAT, or a MILP through pulp)."""
    round_kind(kind)
    m = Method(kind, name, build, summary, tuple(extras), uses_backend)
    old = _METHODS.get((kind, name))
    if old is not None and old != m:
        raise ValidationError(f"method {name!r} of round kind {kind!r} is already registered")
    _METHODS[(kind, name)] = m
    return m


def methods_of(kind: str) -> tuple[str, ...]:
    """Method names of ``kind``, in registration order (``UnknownNameError`` for an unknown kind)."""
    round_kind(kind)
    return tuple(name for k, name in _METHODS if k == kind)


def method(kind: str, name: str) -> Method:
    """The method ``name`` of ``kind``; ``UnknownNameError`` listing the methods of that kind."""
    m = _METHODS.get((kind, name))
    if m is None:
        known = methods_of(kind)
        raise UnknownNameError("method", str(name), known, context=f"for round kind {kind!r}")
    return m


def kind_extras(kind: str) -> tuple[str, ...]:
    """Every extra option some method of ``kind`` reads, sorted."""
    return tuple(sorted({e for (k, _name), m in _METHODS.items() if k == kind for e in m.extras}))


def backend_methods() -> dict[str, tuple[str, ...]]:
    """Kind -> the methods whose exact model the chosen back end solves (kinds with none left out)."""
    found = {kind: tuple(n for n in methods_of(kind) if _METHODS[(kind, n)].uses_backend) for kind in round_kinds()}
    return {kind: names for kind, names in found.items() if names}


def describe_methods() -> dict[str, dict[str, str]]:
    """Kind -> method -> summary, for help texts and docs."""
    return {kind: {name: _METHODS[(kind, name)].summary for name in methods_of(kind)} for kind in round_kinds()}


def make_policy(method_name: str, options: PolicyOptions | None = None, *, kind: str = DEFAULT_KIND) -> Policy:
    """A fresh policy for ``method_name`` of ``kind`` with ``options`` (defaults when None). Extras that
    no method of the kind reads are a ``ValidationError`` naming them; a method ignores the extras of
    its kind that it does not read. A MILP back end (``cbc``, ``highs``) for a method it does not solve is a
    ``ValidationError`` naming the methods it does (:func:`backend_methods`)."""
    options = options or PolicyOptions()
    if not isinstance(options, PolicyOptions):
        raise ValidationError(f"options must be a PolicyOptions, got {type(options).__name__}")
    m = method(kind, method_name)
    if options.backend != "cpsat" and not m.uses_backend:  # cpsat is the default: no choice made
        users = "; ".join(f"{k}: {', '.join(names)}" for k, names in backend_methods().items())
        raise ValidationError(f"method {method_name!r} of round kind {kind!r} does not use backend "
                              f"{options.backend!r} (it would be ignored); the methods a MILP back end solves: {users}")
    unknown = sorted(set(options.extras) - set(kind_extras(kind)))
    if unknown:
        raise ValidationError(f"unknown option(s) {', '.join(unknown)} for round kind {kind!r}; it takes "
                              f"{', '.join(kind_extras(kind)) or 'none'}")
    return m.build(options)


__all__ = ["DEFAULT_KIND", "Method", "backend_methods", "describe_methods", "kind_extras", "make_policy", "method",
           "methods_of", "register_method"]
