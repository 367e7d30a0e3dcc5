"""What a deadline admission decides, as a value (:class:`DeadlineAdmission`: who of the jobs with
deadlines is admitted with which minimum share, who is at risk and why, who missed); the rules that
make it and what it binds are :mod:`optsched.rounds.rubick.deadlines`. A module of its own so that
:class:`~optsched.rounds.rubick.admission.Admission` can carry one without importing those rules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple

from optsched.core.errors import ValidationError


class MinShare(NamedTuple):
    """An admitted deadline job's minimum share: ``gpus`` GPUs of ``gpu_type``
    (:mod:`optsched.rounds.rubick.deadlines`, "Rows meeting it")."""

    gpu_type: str
    gpus: int


@dataclass(frozen=True)
class DeadlineAdmission:
    """Who of the jobs with deadlines is admitted (:mod:`optsched.rounds.rubick.deadlines`, "Admission"):
    ``needs`` (job -> the samples/s it needs, every job with a live deadline), ``admitted`` (job -> its
    minimum share, in admission order), ``at_risk`` (job -> why its deadline is not promised) and
    ``missed`` (running jobs whose deadline had passed at the round's time)."""

    needs: Mapping[str, float]
    admitted: Mapping[str, MinShare]
    at_risk: Mapping[str, str]
    missed: tuple[str, ...] = ()

    def demote(self, reasons: Mapping[str, str]) -> "DeadlineAdmission":
        """This admission with the admitted jobs of ``reasons`` (job -> why) moved to ``at_risk``
        (:mod:`optsched.rounds.rubick.deadlines`, "Placement"); ``ValidationError`` for a job that is not
        admitted."""
        unknown = sorted(name for name in reasons if name not in self.admitted)
        if unknown:
            raise ValidationError(f"deadline admission: cannot demote {', '.join(map(repr, unknown))}: not admitted")
        if not reasons:
            return self
        at_risk = dict(self.at_risk)
        at_risk.update(reasons)
        return DeadlineAdmission(self.needs, {n: s for n, s in self.admitted.items() if n not in reasons}, at_risk,
                                 self.missed)


#: no job with a deadline
NO_DEADLINES = DeadlineAdmission({}, {}, {})


__all__ = ["DeadlineAdmission", "MinShare", "NO_DEADLINES"]
