"""Small validation helpers shared by the value objects: each ``require_*`` raises ``ValidationError``
naming the object, the field and the rule; :func:`json_int` is the rule for integers read from JSON."""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any, Iterable, Mapping

from optsched.core.errors import ValidationError


def require_name(owner: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{owner}: name must be a non-empty string, got {value!r}")


def require_int(owner: str, field: str, value: Any, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{owner}: {field} must be an integer, got {value!r}")
    if value < minimum:
        raise ValidationError(f"{owner}: {field} must be >= {minimum}, got {value}")


def json_int(value: Any) -> Any:
    """The one rule for integers read from JSON: JSON has no integer type, so a number with an integral
    value (``4.0``, or ``13e9``, which Python's ``json`` reads as the float 13000000000.0) is the integer
    it equals and is returned as that ``int``. Every other value (4.5, true, "4", NaN, infinity, null, a
    list) is returned unchanged, so the check that follows (:func:`require_int` in the object's
    constructor, or at the parse site) rejects it naming the field, as before.

    Where it applies: every parser of JSON input (the ``from_dict`` methods of round, decision and
    perf-params objects, a round kind's ``_fields_from_dict``, the solve service's options) passes each
    integer member through it, usually by :func:`json_fields` or :func:`json_ints`. It is not in
    :func:`require_int`, which also guards Python callers (generators, constructors) and does not
    convert: a dataclass built from Python with ``num_gpus=4.0`` is still refused, and a parsed object
    holds ``int`` values only. Converting at ``json.loads`` (a ``parse_float`` hook) would miss callers
    that pass dicts from their own JSON parser to ``from_dict`` and would turn integral values of
    *number* fields into ints too; converting member by member touches integer fields only."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def json_ints(data: Mapping[str, Any], keys: Iterable[str] | None = None) -> dict[str, Any]:
    """A copy of the JSON object ``data`` with :func:`json_int` applied to the members named in ``keys``
    (every member when ``keys`` is None: a map such as ``{tenant: GPUs}``); absent keys are skipped."""
    if keys is None:
        return {k: json_int(v) for k, v in data.items()}
    out = dict(data)
    for k in out.keys() & keys:
        out[k] = json_int(out[k])
    return out


def json_fields(cls: type, data: Any) -> Any:
    """The JSON object ``data`` of the dataclass ``cls`` (its members named as the fields) with
    :func:`json_int` applied to the members whose field is annotated ``int`` or ``int | None``: what a
    ``from_dict`` passes to ``cls(**...)``. Anything but a dict is returned unchanged (the caller's
    :func:`require_keys` rejects it)."""
    if not isinstance(data, dict):
        return data
    return json_ints(data, _int_fields(cls))


@functools.cache
def _int_fields(cls: type) -> frozenset[str]:
    """Fields of the dataclass ``cls`` annotated ``int`` or ``int | None``."""
    hints = typing.get_type_hints(cls)
    out = set()
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        args = set(typing.get_args(hint)) if isinstance(hint, types.UnionType) \
            or typing.get_origin(hint) is typing.Union else {hint}
        if int in args and args <= {int, type(None)}:
            out.add(f.name)
    return frozenset(out)


#: seeds are below this: CP-SAT's ``random_seed`` is a 32-bit signed integer, numpy's generators take no
#: negative seed
SEED_LIMIT = 2 ** 31


def require_seed(owner: str, value: Any) -> None:
    """A random seed must be an integer in ``[0, 2**31)`` (:data:`SEED_LIMIT`): what CP-SAT and numpy take;
    ``owner`` (may be empty) prefixes the message."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ValidationError(f"{owner + ': ' if owner else ''}seed must be an integer in [0, 2**31) (what CP-SAT and numpy take), "
                              f"got {value!r}")


def require_number(owner: str, field: str, value: Any, minimum: float = 0.0,
                   strict: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValidationError(f"{owner}: {field} must be a finite number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        rel = ">" if strict else ">="
        raise ValidationError(f"{owner}: {field} must be {rel} {minimum}, got {value}")


def string_pairs(owner: str, value: Any) -> tuple[tuple[str, str], ...]:
    """A ``{name: value}`` mapping of non-empty strings (a JSON object, a dict or (name, value) pairs)
    as sorted pairs; a ``ValidationError`` naming ``owner`` and the entry otherwise (node labels, a
    job's node selector)."""
    if isinstance(value, (tuple, dict)) and not value:  # the default, once per job and node: no work
        return ()
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = [(k, v) for k, v in items]
    except (TypeError, ValueError):
        raise ValidationError(f"{owner}: expected an object of strings, got {value!r}") from None
    for k, v in pairs:
        if not isinstance(k, str) or not k or not isinstance(v, str):
            raise ValidationError(f"{owner}: {k!r}: {v!r} is not a name and a string value")
    names = [k for k, _ in pairs]
    if len(set(names)) != len(names):
        raise ValidationError(f"{owner}: a name appears twice")
    return tuple(sorted(pairs))


@functools.lru_cache(maxsize=256)
def _key_sets(required: tuple[str, ...], optional: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    return frozenset(required), frozenset(required + optional)


def require_keys(owner: str, data: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """A JSON object must be a dict holding the required keys and nothing unknown."""
    if not isinstance(data, dict):
        raise ValidationError(f"{owner}: expected a JSON object, got {type(data).__name__}")
    needed, known = _key_sets(required, optional)
    keys = data.keys()
    if keys >= needed and keys <= known:
        return  # fast path (set comparisons on the key view): the checks below would find nothing
    missing = [k for k in required if k not in data]
    if missing:
        raise ValidationError(f"{owner}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise ValidationError(f"{owner}: unknown field(s) {', '.join(unknown)}")
