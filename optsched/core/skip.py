"""Invalid jobs left out of a round instead of failing it (``on_invalid_job``; docs/rounds.md, "Invalid
jobs").

A round says what one job that fails validation does to the round: ``"error"`` (the default) fails the
whole round with that job's one-line error, as before; ``"skip"`` leaves the job out, with the error text
as its reason, and solves the rest. The decision lists the jobs left out in ``skipped``
(:class:`SkippedJob`, ``[{"job": name, "reason": text}]``), common to every kind.

This module holds the vocabulary every layer shares: the modes, the entry of the ``skipped`` list, and
:class:`JobError`, the ``ValidationError`` a check raises when one job (not the round) breaks a rule, so
that a round in ``skip`` mode knows which job to leave out. Which failures are per job and what happens to
a skipped running job's allocation is said where the rule is applied (:mod:`optsched.core.round`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.core.checks import require_keys, require_name
from optsched.core.errors import UnknownNameError, ValidationError

#: what a round does with a job that fails validation
ON_INVALID_JOB: tuple[str, ...] = ("error", "skip")
#: the default mode
DEFAULT_ON_INVALID_JOB = "error"


def check_mode(value: Any, where: str = "on_invalid_job") -> str:
    """``value`` as a mode of :data:`ON_INVALID_JOB` (``UnknownNameError`` otherwise)."""
    if not isinstance(value, str) or value not in ON_INVALID_JOB:
        raise UnknownNameError(where, str(value), ON_INVALID_JOB)
    return value


class JobError(ValidationError):
    """A ``ValidationError`` caused by one job (``job``, its name) rather than by the round: in a round whose
    ``on_invalid_job`` is ``"skip"`` that job is left out; otherwise it fails the round with the same message."""

    def __init__(self, job: str, message: str) -> None:
        super().__init__(message)
        self.job = job


class job_errors:  # noqa: N801 - used as ``with job_errors(name):``, like a function
    """Turn a ``ValidationError`` raised inside the block into a :class:`JobError` of ``job`` (same message;
    a ``JobError`` of another job passes through unchanged). A plain class, not a generator: a round
    enters it once or twice per job, so it must cost next to nothing."""

    __slots__ = ("job",)

    def __init__(self, job: str) -> None:
        self.job = job

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> bool:
        if error is None or isinstance(error, JobError) or not isinstance(error, ValidationError):
            return False
        raise JobError(self.job, str(error)) from None


@dataclass(frozen=True)
class SkippedJob:
    """A job left out of a round (``on_invalid_job: "skip"``): its ``job`` name and the ``reason`` (the error
    text of the rule it broke). JSON: ``{"job": name, "reason": text}``."""

    job: str
    reason: str

    def __post_init__(self) -> None:
        require_name("skipped job", self.job)
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValidationError(f"skipped job {self.job!r}: reason must be a non-empty string")

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "reason": self.reason}

    @classmethod
    def from_dict(cls, data: Any) -> "SkippedJob":
        require_keys("skipped job", data, ("job", "reason"), ())
        return cls(data["job"], data["reason"])


def skipped_from_dict(data: Any, where: str) -> tuple[SkippedJob, ...]:
    """A JSON array of :class:`SkippedJob` objects (``where`` names it in errors); job names unique."""
    if not isinstance(data, list):
        raise ValidationError(f"{where}: skipped must be a JSON array of {{job, reason}} objects")
    out = tuple(SkippedJob.from_dict(s) for s in data)
    check_unique(out, where)
    return out


def check_unique(skipped: tuple[SkippedJob, ...], where: str) -> None:
    """``ValidationError`` when a job is skipped twice."""
    names = [s.job for s in skipped]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValidationError(f"{where}: job(s) {', '.join(map(repr, dup))} skipped twice")


__all__ = ["DEFAULT_ON_INVALID_JOB", "JobError", "ON_INVALID_JOB", "SkippedJob", "check_mode", "check_unique",
           "job_errors", "skipped_from_dict"]
