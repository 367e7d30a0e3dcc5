"""What every policy checks first: that the round it was given is of its kind."""

from __future__ import annotations

from typing import TypeVar

from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem

R = TypeVar("R", bound=RoundProblem)


def round_of(problem: RoundProblem, cls: type[R], policy: str) -> R:
    """``problem`` as a round of ``cls``; a ``ValidationError`` naming ``policy`` and both kinds when it
    is another kind's."""
    if not isinstance(problem, cls):
        raise ValidationError(f"policy {policy!r} solves {cls.KIND} rounds, got a round of kind {problem.kind!r}")
    return problem


__all__ = ["round_of"]
