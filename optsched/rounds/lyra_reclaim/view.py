"""What a reclaim decision is computed on: the on-loan servers, which jobs hold base and flexible
workers on each, and the outcome of returning a set of servers (thesis Sec. 3.4).

Built once per round in O(running shares). Server and job indices are positions in
:attr:`ReclaimView.servers` (the round's on-loan servers, sorted) and :attr:`ReclaimView.jobs` (the
running jobs with base workers on some on-loan server, the jobs at risk, sorted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from optsched.core.decision import Decision, relative_gap
from optsched.rounds.lyra.problem import LyraRound
from optsched.rounds.lyra_reclaim.payload import ReclaimDecision


@dataclass(frozen=True)
class ReclaimOutcome:
    """Jobs preempted, workers scaled in per elastic job and the collateral GPUs of returning
    ``servers`` (names)."""

    servers: tuple[str, ...]
    preempted: tuple[str, ...]
    scaled_in: tuple[tuple[str, int], ...]
    collateral_gpus: int

    def payload(self) -> ReclaimDecision:
        return ReclaimDecision(self.servers, self.preempted, self.scaled_in, self.collateral_gpus)


class ReclaimView:
    """Index structures of a reclaim round (module docstring).

    * ``base_jobs[s]``: jobs (indices) with base workers on server ``s``;
    * ``job_servers[j]``: on-loan servers holding base workers of job ``j`` (its *span*);
    * ``job_gpus[j]``: GPUs job ``j`` holds per node name, on every node (for collateral damage);
    * ``flex[s]``: flexible GPUs per job name on server ``s``; ``flex_workers[s]``: their workers;
    * ``risk_flex[s]``: flexible workers on ``s`` per job at risk (index); they are scaled in only when
      the job is not preempted; the rest of ``flex_workers[s]`` belongs to jobs that cannot be;
    * ``jobs_on[s]``: names of every job with workers on ``s`` (SCF counts them)."""

    def __init__(self, problem: LyraRound) -> None:
        self.problem = problem
        self.servers: tuple[str, ...] = problem.on_loan
        index = {s: i for i, s in enumerate(self.servers)}
        self.server_index = index
        at_risk: dict[str, set[int]] = {}
        self.flex: list[dict[str, int]] = [{} for _ in self.servers]
        self.flex_workers = [0] * len(self.servers)
        self.jobs_on: list[set[str]] = [set() for _ in self.servers]
        for a in problem.running:
            on_loan = [(index[n], n, share.gpus) for n, share in a.placement.shares if n in index and share.gpus > 0]
            if not on_loan:
                continue
            flexible = problem.flexible_of(a.job)
            for s, n, gpus in on_loan:
                self.jobs_on[s].add(a.job)
                g = flexible.get(n, 0)
                if gpus > g:  # base workers there (problem.base_of)
                    at_risk.setdefault(a.job, set()).add(s)
                if g > 0:
                    self.flex[s][a.job] = g
                    self.flex_workers[s] += g // problem.worker_gpus(problem.job(a.job), n)
        self.jobs: tuple[str, ...] = tuple(sorted(at_risk))
        self.job_index = {j: i for i, j in enumerate(self.jobs)}
        self.job_servers: list[frozenset[int]] = [frozenset(at_risk[j]) for j in self.jobs]
        self.risk_flex: list[dict[int, int]] = [{} for _ in self.servers]
        for s, flex in enumerate(self.flex):
            for job, g in flex.items():
                if job in self.job_index:
                    wg = problem.worker_gpus(problem.job(job), self.servers[s])
                    self.risk_flex[s][self.job_index[job]] = g // wg
        self.base_jobs: list[set[int]] = [set() for _ in self.servers]
        for j, servers in enumerate(self.job_servers):
            for s in servers:
                self.base_jobs[s].add(j)
        self.job_gpus: list[dict[str, int]] = []
        for name in self.jobs:
            cur = problem.current(name)
            assert cur is not None
            self.job_gpus.append({n: s.gpus for n, s in cur.placement.shares})

    def outcome(self, chosen: Iterable[int]) -> ReclaimOutcome:
        """What returning the servers ``chosen`` (indices) does (module docstring of the kind)."""
        picked = list(dict.fromkeys(chosen))
        taken = set(picked)
        names = {self.servers[s] for s in taken}
        preempted = sorted({self.jobs[j] for s in taken for j in self.base_jobs[s]})
        hit = set(preempted)
        scaled: dict[str, int] = {}
        for s in taken:
            for job, g in self.flex[s].items():
                if job not in hit:
                    wg = self.problem.worker_gpus(self.problem.job(job), self.servers[s])
                    scaled[job] = scaled.get(job, 0) + g // wg
        collateral = sum(g for job in preempted for n, g in self.job_gpus[self.job_index[job]].items()
                         if n not in names)
        return ReclaimOutcome(tuple(self.servers[s] for s in picked), tuple(preempted), tuple(sorted(scaled.items())),
                              collateral)

    def kept(self, outcome: ReclaimOutcome) -> int:
        """The round's objective: jobs at risk that keep running (maximised)."""
        return len(self.jobs) - len(outcome.preempted)


def reclaim_decision(view: ReclaimView, chosen: Sequence[int], *, method: str, status: str,
                     solve_seconds: float, bound: float | None = None, heuristic_objective: float | None = None,
                     warm_start: bool = False, message: str = "") -> Decision:
    """The decision of returning ``chosen`` (server indices); objective = jobs at risk kept running. A
    heuristic's decision (status ``heuristic``) reports its own objective as ``heuristic_objective``
    (the rule of :mod:`optsched.core.decision`)."""
    out = view.outcome(chosen)
    obj = float(view.kept(out))
    if status == "heuristic":
        heuristic_objective = obj
    return Decision(view.problem.kind, method, status, obj, out.payload(), bound=bound, gap=relative_gap(bound, obj),
                    solve_seconds=solve_seconds, heuristic_objective=heuristic_objective, warm_start=warm_start,
                    message=message)


__all__ = ["ReclaimOutcome", "ReclaimView", "reclaim_decision"]
