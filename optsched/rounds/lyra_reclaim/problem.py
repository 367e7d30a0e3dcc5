"""The ``lyra-reclaim`` round (thesis Sec. 3.4): the inference cluster asks ``reclaim`` on-loan servers
back; the round chooses which, so that as few jobs as possible are preempted.

A job is **preempted** when a reclaimed server holds one of its base workers (every worker of an
inelastic job is a base worker); its workers everywhere stop. An elastic job whose reclaimed workers
are all flexible is **scaled in** (it loses those workers and keeps running, Sec. 3.2.2). Fields: the
common Lyra fields (:mod:`optsched.rounds.lyra.problem`) and ``reclaim``, at most the number of
on-loan servers (an error naming both numbers otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_int, require_int
from optsched.core.errors import ValidationError
from optsched.rounds.lyra.problem import LyraRound


@dataclass(frozen=True)
class LyraReclaimRound(LyraRound):
    """A reclaiming round (module docstring)."""

    KIND: ClassVar[str] = "lyra-reclaim"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = LyraRound.FIELD_KEYS + ("reclaim",)

    reclaim: int = 1

    def _check_fields(self) -> None:
        super()._check_fields()
        require_int("round", "reclaim", self.reclaim, 0)
        loan = self.on_loan
        if self.reclaim > len(loan):
            shown = ", ".join(loan[:8]) + (" ..." if len(loan) > 8 else "")
            raise ValidationError(f"round: reclaim asks for {self.reclaim} servers but only {len(loan)} inference "
                                  f"servers are on loan ({shown or 'none'})")

    def _fields_to_dict(self) -> dict[str, Any]:
        return {**super()._fields_to_dict(), "reclaim": self.reclaim}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        if "reclaim" not in data:
            raise ValidationError("round: a lyra-reclaim round needs reclaim (servers to return)")
        return {**super()._fields_from_dict(data), "reclaim": json_int(data["reclaim"])}


__all__ = ["LyraReclaimRound"]
