"""What an experts-round method decides (:class:`ReplicaPlan`: which device hosts which expert, and
which share of the expert's tokens each replica serves) and how it is scored and checked: device loads
and times, the makespan (the round's cost, :mod:`optsched.rounds.experts.problem`), a lower bound on
it, and every rule a plan breaks. One function scores every method, so heuristic and exact plans
compare."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.core.errors import ValidationError
from optsched.rounds.experts.problem import ExpertsRound

#: tolerance of share sums and of the checks
SHARE_TOL = 1e-9


@dataclass(frozen=True, eq=False)
class ReplicaPlan:
    """``hosted[e, d]``: device d hosts a replica of expert e; ``share[e, d]``: the share of expert e's
    tokens that replica serves (0 where not hosted; each expert's shares sum to 1)."""

    hosted: np.ndarray
    share: np.ndarray

    def __post_init__(self) -> None:
        h, s = np.asarray(self.hosted, dtype=bool), np.asarray(self.share, dtype=float)
        if h.shape != s.shape or h.ndim != 2:
            raise ValidationError(f"replica plan: hosted and share must be matrices of one shape, got {h.shape} and "
                                  f"{s.shape}")
        object.__setattr__(self, "hosted", h)
        object.__setattr__(self, "share", s)

    @property
    def replicas(self) -> np.ndarray:
        """Replicas of each expert."""
        return self.hosted.sum(axis=1)

    @classmethod
    def from_devices(cls, problem: ExpertsRound, devices: list[list[tuple[int, float]]]) -> "ReplicaPlan":
        """A plan from, per expert, its (device index, share) pairs."""
        h = np.zeros((problem.num_experts, problem.num_devices), dtype=bool)
        s = np.zeros(h.shape)
        for e, reps in enumerate(devices):
            for d, share in reps:
                h[e, d] = True
                s[e, d] += share
        return cls(h, s)


def device_loads(problem: ExpertsRound, plan: ReplicaPlan, loads: np.ndarray | None = None) -> np.ndarray:
    """Tokens each device serves (``loads``: per-expert tokens, default the round's)."""
    w = problem.loads if loads is None else np.asarray(loads, dtype=float)
    return w @ plan.share


def device_times(problem: ExpertsRound, plan: ReplicaPlan, loads: np.ndarray | None = None) -> np.ndarray:
    """Time of each device: its tokens plus ``replica_cost`` per hosted replica, over its speed."""
    work = device_loads(problem, plan, loads) + problem.replica_cost * plan.hosted.sum(axis=0)
    return work / problem.speeds


def makespan(problem: ExpertsRound, plan: ReplicaPlan, loads: np.ndarray | None = None) -> float:
    """The round's cost: the largest device time (with per-expert ``loads``, default the round's, e.g.
    the actual loads after the gate for a plan made on estimates)."""
    return float(device_times(problem, plan, loads).max())


def imbalance(problem: ExpertsRound, plan: ReplicaPlan, loads: np.ndarray | None = None) -> float:
    """Largest over mean device time (1.0 = perfectly balanced; Lina's goal, Sec. 4.5)."""
    t = device_times(problem, plan, loads)
    return float(t.max() / t.mean()) if t.mean() > 0 else 1.0


def replica_caps(problem: ExpertsRound) -> np.ndarray:
    """The most replicas each expert can have: its ``max_replicas``, and no more than the device slots
    left once every other expert has its ``min_replicas``."""
    lo = problem.min_replicas
    room = problem.num_devices * problem.slots - (lo.sum() - lo)
    return np.minimum(problem.max_replicas, room)


def makespan_bound(loads: np.ndarray, lo: np.ndarray, caps: np.ndarray, cost: float, speeds: np.ndarray) -> float:
    """A makespan no plan beats: all work (tokens plus the cost of the fewest replicas) over the total
    speed, and each expert's work over the summed speed of the ``caps[e]`` fastest devices (its tokens
    run on at most that many)."""
    speed = np.sort(np.asarray(speeds, dtype=float))[::-1]
    cum = np.cumsum(speed)
    total = (loads.sum() + cost * lo.sum()) / cum[-1]
    per_expert = (loads + cost * lo) / cum[np.clip(caps, 1, speed.size) - 1]
    return float(max(total, per_expert.max(initial=0.0)))


def lower_bound(problem: ExpertsRound) -> float:
    """:func:`makespan_bound` of the round (replica caps from :func:`replica_caps`)."""
    return makespan_bound(problem.loads, problem.min_replicas, replica_caps(problem), problem.replica_cost,
                          problem.speeds)


def violations(problem: ExpertsRound, plan: ReplicaPlan) -> list[str]:
    """Every rule ``plan`` breaks (empty: feasible): shape, replica bounds, slots, shares >= 0, only on
    hosting devices and summing to 1 per expert."""
    E, D = problem.num_experts, problem.num_devices
    if plan.hosted.shape != (E, D):
        return [f"plan has shape {plan.hosted.shape}, the round has {E} experts x {D} devices"]
    out: list[str] = []
    reps, lo, hi = plan.replicas, problem.min_replicas, problem.max_replicas
    for e in range(E):
        if not lo[e] <= reps[e] <= hi[e]:
            out.append(f"expert {e}: {reps[e]} replica(s), allowed {lo[e]}-{hi[e]}")
        if np.any(plan.share[e] < -SHARE_TOL):
            out.append(f"expert {e}: a negative share")
        if np.any((plan.share[e] > SHARE_TOL) & ~plan.hosted[e]):
            d = int(np.flatnonzero((plan.share[e] > SHARE_TOL) & ~plan.hosted[e])[0])
            out.append(f"expert {e}: a share on device {problem.devices[d]!r}, which does not host it")
        if abs(plan.share[e].sum() - 1.0) > 1e-6:
            out.append(f"expert {e}: shares sum to {plan.share[e].sum():.9g}, not 1")
    for d in np.flatnonzero(plan.hosted.sum(axis=0) > problem.slots):
        out.append(f"device {problem.devices[d]!r}: {int(plan.hosted[:, d].sum())} replicas, {problem.slots} slots")
    return out


__all__ = ["ReplicaPlan", "SHARE_TOL", "device_loads", "device_times", "imbalance", "lower_bound", "makespan",
           "makespan_bound", "replica_caps", "violations"]
