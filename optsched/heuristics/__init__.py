"""Scheduling heuristics that answer a round from its coefficient table (no solver): Rubick's
Algorithm 1 (:func:`optsched.heuristics.rubick.schedule`)."""

from optsched.heuristics.rubick import schedule as rubick_schedule

__all__ = ["rubick_schedule"]
