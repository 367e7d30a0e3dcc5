"""What every policy writes into a decision's message, and the deadline of a policy that keeps time back
for assembling its decision: one wording, one rule, for every kind."""

from __future__ import annotations

from typing import Sequence

from optsched.core.deadline import Deadline


def join_notes(*notes: str) -> str:
    """The non-empty ``notes`` joined by ``"; "`` (how every message of a decision is built)."""
    return "; ".join(n for n in notes if n)


def table_cut_note(left_out: Sequence[str], kept: str = "allocation") -> str:
    """The note of a round whose coefficient table the time limit cut short: how many jobs, and the
    first ten, were not considered (running ones keep their ``kept``, queued ones wait); empty when
    none was left out."""
    if not left_out:
        return ""
    names = ", ".join(map(repr, left_out[:10])) + (" ..." if len(left_out) > 10 else "")
    return (f"partial: the time limit ran out while the round's table was built; {len(left_out)} job(s) were "
            f"not considered (running ones keep their {kept}, queued ones wait): {names}")


def finishing_deadline(time_limit: float, clock_start: float | None, jobs: int, seconds_per_job: float) -> Deadline:
    """The deadline of table, heuristic and solver: ``time_limit`` from ``clock_start`` (or now), less
    ``seconds_per_job`` for each of ``jobs`` jobs, kept for assembling and writing the decision."""
    return Deadline.since(time_limit, clock_start).earlier(seconds_per_job * jobs)


__all__ = ["finishing_deadline", "join_notes", "table_cut_note"]
