"""The ``lyra-reclaim`` round kind (thesis Sec. 3.4): which on-loan inference servers to return so that
the fewest jobs are preempted. Files: ``problem.py`` (fields, JSON), ``payload.py`` (the decision:
servers, preempted jobs, scaled-in workers, collateral GPUs), ``view.py`` (index structures and the
outcome of returning a set of servers), ``generate.py``. Importing this package registers the kind."""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.lyra_reclaim.generate import generate_reclaim_round
from optsched.rounds.lyra_reclaim.payload import ReclaimDecision
from optsched.rounds.lyra_reclaim.problem import LyraReclaimRound
from optsched.rounds.lyra_reclaim.view import ReclaimOutcome, ReclaimView, reclaim_decision

KIND = register_kind(RoundKind(
    "lyra-reclaim", LyraReclaimRound, ReclaimDecision, generate_reclaim_round,
    "return N on-loan inference servers preempting the fewest jobs (Lyra Sec. 3.4)"))

__all__ = ["KIND", "LyraReclaimRound", "ReclaimDecision", "ReclaimOutcome", "ReclaimView", "generate_reclaim_round",
           "reclaim_decision"]
