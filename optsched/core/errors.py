"""Exceptions raised by optsched.

Every error names the offending item (job, node, model, plan, row) and the rule it broke, so that a
caller can act on it without reading a traceback from deep inside the library.
"""

from __future__ import annotations


class OptschedError(Exception):
    """Base class of every error optsched raises on purpose."""


class ValidationError(OptschedError, ValueError):
    """A value object (cluster, model, plan, job, round file, CSV row) breaks one of its rules."""


class UnknownNameError(ValidationError, KeyError):
    """A name (model, GPU type, cluster, method) is not in the catalogue it was looked up in; ``context``
    says which catalogue when the kind alone does not (e.g. "for round kind 'rubick'")."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...], context: str = "") -> None:
        self.kind = kind
        self.name = name
        self.known = tuple(sorted(known))
        where = f" {context}" if context else ""
        super().__init__(f"unknown {kind} {name!r}{where}; known {kind}s: {', '.join(self.known)}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class PlanInfeasibleError(ValidationError):
    """An execution plan cannot run on the given resources (memory, divisibility, placement)."""


class InfeasibleError(OptschedError):
    """A scheduling round has no feasible decision; ``reasons`` names the jobs/nodes and rules."""

    def __init__(self, message: str, reasons: tuple[str, ...] = ()) -> None:
        self.message = message
        self.reasons = tuple(reasons)
        full = message if not reasons else message + ":\n  - " + "\n  - ".join(reasons)
        super().__init__(full)


def one_line(message: str) -> str:
    """A multi-line error (e.g. :class:`InfeasibleError`'s reasons) folded into one line, as the command
    line and the solve service report it."""
    lines = [ln.strip() for ln in str(message).splitlines() if ln.strip()]
    if not lines:
        return "unknown error"
    head, rest = lines[0], [ln[2:] if ln.startswith("- ") else ln for ln in lines[1:]]
    return head + (" " + "; ".join(rest) if rest else "")
