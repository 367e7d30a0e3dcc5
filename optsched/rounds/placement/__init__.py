"""The ``placement`` round kind (thesis Sec. 3.5.3): which servers each job's workers go to, given the
workers per job. Files: ``problem.py`` (fields: the counts to place), ``payload.py`` (base and flexible
shares per job, unplaced workers), ``evaluate.py`` (objective: idle servers; feasibility; decision),
``start.py`` (where placing starts), ``generate.py``. Importing this package registers the kind."""

from optsched.core.kinds import RoundKind, register_kind
from optsched.rounds.placement.generate import generate_placement_round
from optsched.rounds.placement.payload import JobPlacement, WorkerPlacement
from optsched.rounds.placement.problem import PlacementRound

KIND = register_kind(RoundKind(
    "placement", PlacementRound, WorkerPlacement, generate_placement_round,
    "workers to servers by best-fit decreasing, elastic on inference servers, base/flexible groups (Lyra Sec. 3.5.3)"))

__all__ = ["JobPlacement", "KIND", "PlacementRound", "WorkerPlacement", "generate_placement_round"]
