"""What the stateful baselines of the Crius evaluation (Gandiva's time-slicing, Gavel's round-based time sharing,
ElasticFlow's admission control; Crius Sec. 8.1) remember between the rounds of one run: a round carries only
the present (jobs, running allocations, time), while these systems act on what each job received so far.

:class:`RoundHistory` is fed every round it schedules (:meth:`RoundHistory.observe`) and keeps, per job name:

* ``held_since``: since when a running job has held its GPUs without interruption (the time of the round that
  started it: a job first seen running at a round started at the round before; the first round counts its
  running jobs from its own time);
* ``service``: seconds it has held GPUs of each type (the time between two rounds is counted to the
  allocation a job holds at the later one, which is the one the earlier round gave it);
* ``last_ran``: the last round time it was seen running;
* ``dropped`` and ``admitted``: ElasticFlow's admission decisions (a dropped job never runs again).

A round time earlier than the last one seen starts the history afresh (a new run).
"""

from __future__ import annotations

from collections import defaultdict

from optsched.rounds.crius.problem import CriusRound


class RoundHistory:
    """Per-job memory of a stateful baseline across the rounds of one run (module docstring)."""

    def __init__(self) -> None:
        self.last_time: float | None = None
        self.held_since: dict[str, float] = {}
        self.service: defaultdict[str, defaultdict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.last_ran: dict[str, float] = {}
        self.dropped: set[str] = set()
        self.admitted: set[str] = set()

    def observe(self, problem: CriusRound) -> None:
        """Account the time since the last round to the jobs running now (module docstring)."""
        now = float(problem.time)
        if self.last_time is not None and now < self.last_time:
            self.__init__()  # type: ignore[misc]  # a new run
        dt = 0.0 if self.last_time is None else now - self.last_time
        start = now if self.last_time is None else self.last_time
        types = {n.name: n.gpu_type for n in problem.cluster.nodes}
        running = set()
        for a in problem.running:
            running.add(a.job)
            gtype = types[a.placement.shares[0][0]]
            self.service[a.job][gtype] += dt
            self.held_since.setdefault(a.job, start)
            self.last_ran[a.job] = now
        for name in [n for n in self.held_since if n not in running]:
            del self.held_since[name]
        self.last_time = now

    def held(self, job: str, now: float) -> float:
        """Seconds ``job`` has held its GPUs without interruption at ``now`` (0: not running)."""
        since = self.held_since.get(job)
        return 0.0 if since is None else now - since


__all__ = ["RoundHistory"]
