"""Small validation helpers shared by the value objects: each raises ``ValidationError`` naming
the object, the field and the rule."""

from __future__ import annotations

import math
from typing import Any

from optsched.core.errors import ValidationError


def require_name(owner: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{owner}: name must be a non-empty string, got {value!r}")


def require_int(owner: str, field: str, value: Any, minimum: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{owner}: {field} must be an integer, got {value!r}")
    if value < minimum:
        raise ValidationError(f"{owner}: {field} must be >= {minimum}, got {value}")


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


def require_keys(owner: str, data: Any, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> None:
    """A JSON object must be a dict holding the required keys and nothing unknown."""
    if not isinstance(data, dict):
        raise ValidationError(f"{owner}: expected a JSON object, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValidationError(f"{owner}: missing field(s) {', '.join(missing)}")
    unknown = sorted(set(data) - set(required) - set(optional))
    if unknown:
        raise ValidationError(f"{owner}: unknown field(s) {', '.join(unknown)}")
