"""Policies keyed by (round kind, method) (:func:`optsched.policies.solve.solve` dispatches on the round's
kind through them).

A kind's package under ``optsched/policies/`` registers each of its methods with
:func:`register_method`: a factory ``PolicyOptions -> Policy``, a one-line summary, the kind
extras it reads, and the back ends of ``PolicyOptions.backend`` that solve it (``backends``: ``cpsat`` alone by
default; the MILP back ends for the exact methods of ``rubick``, ``crius`` and ``experts``, and ``switch``,
CP-SAT then HiGHS after a stall, for those of ``rubick`` and ``crius``); every method refuses a back end it does
not use, :func:`make_policy`, rather than ignore it.
``optsched solve --help`` and ``docs/rounds.md`` list the methods per kind from here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.policy import Policy
from optsched.formulations.solution import MILP_BACKENDS
from optsched.policies.options import AUTO_BACKEND, BACKENDS, PolicyOptions

#: the kind ``make_policy`` and ``optsched simulate`` assume when none is named (the kind of the
#: built-in traces)
DEFAULT_KIND = "rubick"


@dataclass(frozen=True)
class Method:
    """A registered method: its ``kind`` and ``name``, the ``build`` factory, a ``summary``, the
    kind ``extras`` (option names) it reads and the values of ``PolicyOptions.backend`` that solve it
    (``backends``; ``cpsat``, the default, is always one)."""

    kind: str
    name: str
    build: Callable[[PolicyOptions], Policy]
    summary: str
    extras: tuple[str, ...] = ()
    backends: tuple[str, ...] = ("cpsat",)

    @property
    def default_backend(self) -> str:
        """What ``backend="auto"`` means for it: ``switch`` when it offers it, else ``cpsat``."""
        return "switch" if "switch" in self.backends else "cpsat"

    @property
    def uses_backend(self) -> bool:
        """Whether a MILP back end solves its exact model."""
        return any(b in MILP_BACKENDS for b in self.backends)


_METHODS: dict[tuple[str, str], Method] = {}


def register_method(kind: str, name: str, build: Callable[[PolicyOptions], Policy], summary: str,
                    extras: tuple[str, ...] = (), *, backends: tuple[str, ...] = ("cpsat",)) -> Method:
    """Register ``name`` for rounds of ``kind`` (a registered kind; another entry under a taken
    (kind, name) is a ``ValidationError``); ``backends``: the values of ``PolicyOptions.backend`` that solve its
    exact model (:data:`~optsched.policies.options.BACKENDS`; ``cpsat`` is added when missing)."""
    round_kind(kind)
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValidationError(f"method {name!r} of round kind {kind!r}: unknown backend {unknown[0]!r}; known: "
                              f"{', '.join(BACKENDS)}")
    m = Method(kind, name, build, summary, tuple(extras), tuple(dict.fromkeys(("cpsat", *backends))))
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


def backend_methods(backend: str | None = None) -> dict[str, tuple[str, ...]]:
    """Kind -> the methods whose exact model ``backend`` solves (default: a MILP back end; kinds with none left
    out)."""
    def uses(m: Method) -> bool:
        return m.uses_backend if backend is None else backend in m.backends

    found = {kind: tuple(n for n in methods_of(kind) if uses(_METHODS[(kind, n)])) for kind in round_kinds()}
    return {kind: names for kind, names in found.items() if names}


def describe_methods() -> dict[str, dict[str, str]]:
    """Kind -> method -> summary, for help texts and docs."""
    return {kind: {name: _METHODS[(kind, name)].summary for name in methods_of(kind)} for kind in round_kinds()}


def make_policy(method_name: str, options: PolicyOptions | None = None, *, kind: str = DEFAULT_KIND) -> Policy:
    """A fresh policy for ``method_name`` of ``kind`` with ``options`` (defaults when None). Extras that
    no method of the kind reads are a ``ValidationError`` naming them; a method ignores the extras of
    its kind that it does not read. ``backend="auto"`` (the default) becomes the method's
    :attr:`Method.default_backend`; another back end than ``cpsat`` for a method it does not solve is a
    ``ValidationError`` naming the methods it does (:func:`backend_methods`)."""
    options = options or PolicyOptions()
    if not isinstance(options, PolicyOptions):
        raise ValidationError(f"options must be a PolicyOptions, got {type(options).__name__}")
    m = method(kind, method_name)
    if options.backend == AUTO_BACKEND:
        options = replace(options, backend=m.default_backend)
    if options.backend not in m.backends:  # cpsat, the default, is every method's: no choice made
        what = "a MILP back end" if options.backend in MILP_BACKENDS else f"backend {options.backend!r}"
        users = "; ".join(f"{k}: {', '.join(names)}" for k, names in
                          backend_methods(None if options.backend in MILP_BACKENDS else options.backend).items())
        raise ValidationError(f"method {method_name!r} of round kind {kind!r} does not use backend "
                              f"{options.backend!r} (it would be ignored); the methods {what} solves: {users}")
    unknown = sorted(set(options.extras) - set(kind_extras(kind)))
    if unknown:
        raise ValidationError(f"unknown option(s) {', '.join(unknown)} for round kind {kind!r}; it takes "
                              f"{', '.join(kind_extras(kind)) or 'none'}")
    return m.build(options)


__all__ = ["DEFAULT_KIND", "Method", "backend_methods", "describe_methods", "kind_extras", "make_policy", "method",
           "methods_of", "register_method"]
