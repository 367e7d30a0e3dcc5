"""Tenant GPU quotas of a Rubick round, per GPU type (issue 24, item 5): the field's forms, its checks,
its JSON, and the one rule of "does this usage fit this tenant's quotas on this GPU type"
(:class:`QuotaLedger`), which admission (:func:`~optsched.rounds.rubick.admission.admit`, usage = minRes)
and the AntMan baseline (:func:`~optsched.heuristics.baselines.antman.antman_round`, usage = requested
GPUs) both use.

* **Forms.** ``quotas: {tenant: integer | {gpu_type: integer, "*": integer}}``. An integer ``n`` is the
  old form and means ``{"*": n}``: ``n`` GPUs over all GPU types. An object caps the tenant per GPU
  type (a key naming a GPU type of the cluster) and over all types together (``"*"``). Values are
  integers >= 0 (JSON numbers with an integral value such as ``4.0`` are integers,
  :func:`~optsched.core.checks.json_int`). An empty object gives the tenant quota 0 on every type, as
  ``0`` does (it is written back as ``0``).
* **Normal form** (what :class:`~optsched.rounds.rubick.problem.RubickRound` holds, so equal rounds
  compare equal): ``((tenant, value), ...)`` sorted by tenant, where ``value`` is the integer ``n`` for a
  tenant whose quota names no GPU type (``n``, ``{"*": n}`` or ``{}`` -> 0) and the sorted
  ``((key, GPUs), ...)`` pairs of its object otherwise. JSON (:func:`quotas_to_json`) writes the integer
  form for the first (so an old round is written back unchanged) and the object form for the second.
* **Accounting** (:class:`QuotaLedger`). A usage of ``g`` GPUs on GPU type ``t`` counts against the
  tenant's entry for ``t`` (when its object names ``t``) and against ``"*"`` (when given); it fits when
  every entry it counts against keeps ``used + g <= quota``. A type neither named nor covered by
  ``"*"`` has quota 0 for that tenant. A tenant without any entry has quota 0 once the round gives any
  quota; a round without quotas enforces none (every usage fits).
* **Typed tenants.** A tenant is *typed* when its object names a GPU type. Only then does the type a
  usage lies on matter, so admission binds the guarantees of typed tenants' jobs to one type, and
  accounts other tenants' jobs as before issue 24 (minRes over every type, no type bound).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from optsched.core.checks import json_int, require_int, require_name
from optsched.core.errors import ValidationError

#: the key of a tenant's quota over all GPU types together
ANY_TYPE = "*"

#: a tenant's quota in normal form: GPUs over all types, or ``((key, GPUs), ...)`` sorted by key
QuotaValue = int | tuple[tuple[str, int], ...]
#: a round's quotas in normal form: ``((tenant, QuotaValue), ...)`` sorted by tenant
Quotas = tuple[tuple[str, QuotaValue], ...]


def _pairs(value: Any) -> list[tuple[Any, Any]] | None:
    """The ``(key, value)`` pairs of a mapping or of a sequence of pairs; None for anything else."""
    if isinstance(value, Mapping):
        return list(value.items())
    if isinstance(value, (tuple, list)) and all(isinstance(p, (tuple, list)) and len(p) == 2 for p in value):
        return [tuple(p) for p in value]  # type: ignore[misc]
    return None


def normalise_value(tenant: str, value: Any, gpu_types: Iterable[str]) -> QuotaValue:
    """The normal form of ``tenant``'s quota (module docstring), checked: an integer >= 0, or an object
    whose keys are GPU types of the cluster (``gpu_types``) or ``"*"`` and whose values are integers >= 0.
    ``ValidationError`` naming the tenant (and the key) otherwise."""
    owner = f"round: quota of tenant {tenant!r}"
    if not isinstance(value, (Mapping, tuple, list)):
        require_int(owner, "GPUs", value, 0)  # an integer, or the error naming the tenant
        return value
    pairs = _pairs(value)
    if pairs is None:
        raise ValidationError(f"{owner}: an object {{gpu_type: integer, \"*\": integer}} is expected, got {value!r}")
    known = set(gpu_types)
    seen: set[str] = set()
    for key, gpus in pairs:
        if not isinstance(key, str) or (key != ANY_TYPE and key not in known):
            raise ValidationError(f"{owner}: {key!r} is not a GPU type of the cluster (types: "
                                  f"{', '.join(sorted(known)) or 'none'}) nor \"*\" (all GPU types)")
        if key in seen:
            raise ValidationError(f"{owner}: {key!r} is given twice")
        seen.add(key)
        require_int(f"{owner} on {key!r}", "GPUs", gpus, 0)
    if not seen - {ANY_TYPE}:
        return dict(pairs).get(ANY_TYPE, 0)
    return tuple(sorted(pairs))


def normalise_quotas(quotas: Any, gpu_types: Iterable[str]) -> Quotas:
    """The normal form of a round's ``quotas`` (a mapping ``tenant -> value`` or ``(tenant, value)`` pairs),
    every tenant name and value checked (:func:`normalise_value`)."""
    pairs = _pairs(quotas)
    if pairs is None:
        raise ValidationError(f"round: quotas must map tenants to GPUs, got {quotas!r}")
    types = tuple(gpu_types)
    out: dict[str, QuotaValue] = {}
    for tenant, value in pairs:
        require_name("round quota tenant", tenant)
        if tenant in out:
            raise ValidationError(f"round: tenant {tenant!r} has two quotas")
        out[tenant] = normalise_value(tenant, value, types)
    return tuple(sorted(out.items()))


def quotas_from_json(data: Any) -> tuple[tuple[str, Any], ...]:
    """The ``quotas`` member of a round file as ``(tenant, value)`` pairs for the round's constructor (which
    checks them, :func:`normalise_quotas`), with integral JSON numbers made integers at both levels."""
    if not isinstance(data, dict):
        raise ValidationError("round: quotas must be a JSON object")
    out = []
    for tenant, value in data.items():
        if isinstance(value, list):  # pairs are a Python form only; JSON has the object
            raise ValidationError(f"round: quota of tenant {tenant!r}: an integer or an object {{gpu_type: integer, "
                                  f"\"*\": integer}} is expected, got {value!r}")
        if isinstance(value, dict):
            value = {key: json_int(gpus) for key, gpus in value.items()}
        else:
            value = json_int(value)
        out.append((tenant, value))
    return tuple(out)


def quotas_to_json(quotas: Quotas) -> dict[str, Any]:
    """The JSON of normal-form ``quotas``: an integer for a tenant whose quota names no GPU type, an object
    otherwise (module docstring)."""
    return {tenant: value if isinstance(value, int) else dict(value) for tenant, value in quotas}


def entries(value: QuotaValue) -> dict[str, int]:
    """A tenant's quota as ``{key: GPUs}`` (an integer ``n`` is ``{"*": n}``)."""
    return {ANY_TYPE: value} if isinstance(value, int) else dict(value)


@dataclass(frozen=True)
class Shortfall:
    """Why a usage does not fit: the ``entry`` it would exceed (a GPU type, ``"*"``, or None when the
    tenant's quotas neither name the type nor give ``"*"``), its ``quota`` and what is ``used`` of it."""

    entry: str | None
    quota: int
    used: int

    def describe(self, gpu_type: str) -> str:
        """The shortfall in words, naming the entry used up (for a usage on ``gpu_type``)."""
        if self.entry is None:
            return f"no quota on {gpu_type} (the tenant's quotas name neither {gpu_type} nor \"*\")"
        where = f"on {gpu_type}" if self.entry != ANY_TYPE else "over all GPU types (\"*\")"
        if self.quota == 0:
            return f"quota 0 {where}"
        if self.used >= self.quota:
            return f"quota {self.quota} GPUs {where} is used up ({self.used} in use)"
        return f"quota {self.quota} GPUs {where} has only {self.quota - self.used} left ({self.used} in use)"


class QuotaLedger:
    """What each tenant uses of its quotas, entry by entry, and whether one more usage fits (module
    docstring, "Accounting"). Built from a round's normal-form quotas; :meth:`take` records a usage."""

    def __init__(self, quotas: Quotas) -> None:
        #: whether the round enforces quotas at all
        self.enforced = bool(quotas)
        self._entries = {tenant: entries(value) for tenant, value in quotas}
        self._used: dict[str, dict[str, int]] = {}

    def typed(self, tenant: str) -> bool:
        """Whether ``tenant``'s quota names a GPU type (module docstring, "Typed tenants")."""
        return any(key != ANY_TYPE for key in self._entries.get(tenant, ()))

    def has_entry(self, tenant: str) -> bool:
        """Whether the round gives ``tenant`` a quota (without one it has 0 once any quota is given)."""
        return tenant in self._entries

    def used(self, tenant: str, key: str = ANY_TYPE) -> int:
        """GPUs ``tenant`` uses so far on GPU type ``key``, or over all types (``"*"``), whether its quotas
        have that entry or not."""
        return self._used.get(tenant, {}).get(key, 0)

    def _keys(self, tenant: str, gpu_type: str | None) -> list[str]:
        """The entries a usage on ``gpu_type`` counts against (None: a usage of no particular type, which
        counts against ``"*"`` only)."""
        given = self._entries.get(tenant, {})
        return [key for key in (gpu_type, ANY_TYPE) if key is not None and key in given]

    def shortfall(self, tenant: str, gpu_type: str | None, gpus: int) -> Shortfall | None:
        """None when ``gpus`` more GPUs on ``gpu_type`` fit ``tenant``'s quotas, else the first entry they
        exceed (the type's own entry before ``"*"``)."""
        if not self.enforced:
            return None
        given = self._entries.get(tenant, {})
        keys = self._keys(tenant, gpu_type)
        if not keys:
            return None if gpus <= 0 else Shortfall(None, 0, 0)
        for key in keys:
            if self.used(tenant, key) + gpus > given[key]:
                return Shortfall(key, given[key], self.used(tenant, key))
        return None

    def fits(self, tenant: str, gpu_type: str | None, gpus: int) -> bool:
        """Whether ``gpus`` more GPUs on ``gpu_type`` fit ``tenant``'s quotas (:meth:`shortfall` is None)."""
        return self.shortfall(tenant, gpu_type, gpus) is None

    def take(self, tenant: str, gpu_type: str | None, gpus: int) -> None:
        """Record a usage of ``gpus`` GPUs on ``gpu_type`` (None: of no particular type) and over all types,
        whether it fits or not (a running job over a cut quota still uses its GPUs)."""
        used = self._used.setdefault(tenant, {})
        for key in {gpu_type, ANY_TYPE} - {None}:
            used[key] = used.get(key, 0) + gpus  # type: ignore[index]


def quotas_less(quotas: Quotas, usage: Iterable[tuple[str, str, int]]) -> Quotas:
    """``quotas`` less the ``(tenant, gpu_type, GPUs)`` usages, each taken off the entries it counts against
    (:class:`QuotaLedger`; an integer quota is ``"*"``), none below 0: what is left of the quotas for the
    rest of a round once those usages are held (:mod:`optsched.rounds.rubick.holds`)."""
    left = {tenant: entries(value) for tenant, value in quotas}
    for tenant, gpu_type, gpus in usage:
        given = left.get(tenant)
        if given is None:
            continue
        for key in {gpu_type, ANY_TYPE} & set(given):
            given[key] = max(0, given[key] - gpus)
    return tuple((tenant, given[ANY_TYPE] if set(given) == {ANY_TYPE} else tuple(sorted(given.items())))
                 for tenant, given in sorted(left.items()))


__all__ = ["ANY_TYPE", "QuotaLedger", "QuotaValue", "Quotas", "Shortfall", "entries", "normalise_quotas",
           "normalise_value", "quotas_from_json", "quotas_less", "quotas_to_json"]
