"""The Slurm agent: read nodes and jobs, solve a Rubick round, apply the decision (``docs/integration.md``,
"Slurm", for what the agent owns and its failure modes).

**The agent owns starts.** Jobs are submitted held (``sbatch --hold``); a job starts only when a decision
starts it. Per decision entry (``optsched.decision/1``, ``jobs``):

* ``start``: ``scontrol update JobId=J NumNodes=k-k ReqNodeList=<nodes> Gres=gpu:g TresPerJob= StartTime=now
  Comment=<comment + optsched_plan>`` when the placement puts the same ``g`` GPUs on each of its ``k`` nodes,
  else ``TresPerJob=gres:gpu:G Gres=`` (G in all: one ``--gres`` cannot ask different counts per node, so
  Slurm splits G over the nodes; departure: the split may differ from the decision's, the next read sees
  Slurm's), then ``scontrol release J``.
* ``preempt``: ``scontrol requeuehold J`` (back to pending, held).
* ``reconfigure``: ``requeuehold``, the update of a start (the new plan in the comment's ``optsched_plan``,
  what the job reads when it starts again), then, once the job has left ``COMPLETING``, ``StartTime=now``
  (a requeued job is otherwise held back 120 s) and ``release``.
* ``wait``: the job stays held (a pending job not held is held), and the comment's ``optsched_wait`` says why.
* ``keep``, ``trim``: nothing (the agent sets GPUs and nodes; CPUs and memory stay what the job asked of
  Slurm).

**Nothing is applied that does not fit what Slurm reports now**: after solving, the agent reads Slurm again
and applies an entry only when its job is still in the state the decision assumed (a start: pending; a
preempt or reconfigure: running) and, for a start or reconfigure, every node of the placement is still there,
not draining, and has the GPUs free (its GPUs less those of jobs running or completing there, less those this
round already gave, plus those of jobs this round preempts or reconfigures away). Every other entry is skipped
and logged. A job that vanished between read and apply is skipped and logged; an update Slurm rejects is
logged and the round goes on. Every action is logged (logger ``optsched.integrations.slurm.agent``) with its
latency.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from optsched.core.decision import Decision
from optsched.core.round import RoundProblem
from optsched.integrations.slurm.client import SlurmClient, SlurmRejected
from optsched.integrations.slurm.comment import with_agent_keys
from optsched.integrations.slurm.reader import (ReadOptions, RoundBuild, Snapshot, build_round, parse_jobs,
                                                parse_nodes)
from optsched.policies.solve import solve

log = logging.getLogger(__name__)

#: job states of a job still there (a cancelled or finished job is listed for ``MinJobAge`` seconds: gone)
LIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD",
                         "RESIZING", "SIGNALING", "STAGE_OUT"})
#: seconds a reconfigured job may take to leave COMPLETING before the agent leaves it held for the next round
REQUEUE_WAIT_S = 15.0


@dataclass(frozen=True)
class AgentOptions:
    """Method, time limit and seed of each round's solve, and how Slurm is read."""

    method: str = "heuristic"
    time_limit: float = 10.0
    seed: int = 0
    read: ReadOptions = field(default_factory=ReadOptions)
    requeue_wait_s: float = REQUEUE_WAIT_S


@dataclass(frozen=True)
class ActionRecord:
    """One decision entry and what became of it: ``applied`` or why not (``detail``), and its latency."""

    job: str
    action: str
    applied: bool
    detail: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "action": self.action, "applied": self.applied, "detail": self.detail,
                "seconds": round(self.seconds, 6)}


@dataclass(frozen=True)
class RoundReport:
    """One agent round: the round and decision JSON, the actions, the jobs left out and the time of each phase
    (seconds: ``read`` = sinfo + squeue + building the round, ``solve`` = the solve call, ``apply`` = re-read
    and every scontrol call)."""

    round: dict[str, Any]
    decision: dict[str, Any] | None
    actions: tuple[ActionRecord, ...]
    left_out: tuple[tuple[str, str], ...]
    read_s: float
    solve_s: float
    apply_s: float

    def summary(self) -> dict[str, Any]:
        return {"time": self.round["time"], "jobs": len(self.round["jobs"]),
                "read_s": round(self.read_s, 4), "solve_s": round(self.solve_s, 4), "apply_s": round(self.apply_s, 4),
                "actions": [a.to_dict() for a in self.actions],
                "left_out": [{"job": j, "why": w} for j, w in self.left_out]}


def _placement_args(placement: dict[str, dict[str, Any]]) -> list[str]:
    """The scontrol update arguments that put a job on ``placement`` (module docstring, ``start``)."""
    parts = {n: int(s["gpus"]) for n, s in placement.items() if int(s.get("gpus", 0)) > 0}
    nodes = sorted(parts)
    args = [f"NumNodes={len(nodes)}-{len(nodes)}", f"ReqNodeList={','.join(nodes)}"]
    counts = set(parts.values())
    if len(counts) == 1:
        args += [f"Gres=gpu:{counts.pop()}", "TresPerJob="]
    else:
        args += [f"TresPerJob=gres:gpu:{sum(parts.values())}", "Gres="]
    return args


class SlurmReads(Protocol):
    """Where the agent reads nodes and jobs: the client commands (:class:`SlurmClient`) or slurmrestd
    (:class:`~.rest.SlurmRestReader`); both return what ``sinfo --json`` and ``squeue --json`` print."""

    def nodes_json(self) -> dict[str, Any]: ...

    def jobs_json(self) -> dict[str, Any]: ...


class SlurmAgent:
    """Reads Slurm (``reader``: slurmrestd, else the ``client``'s commands), solves a Rubick round, applies the
    decision with the ``client``'s ``scontrol`` (module docstring)."""

    def __init__(self, client: SlurmClient | None = None, options: AgentOptions | None = None,
                 clock: Callable[[], float] = time.time, reader: SlurmReads | None = None) -> None:
        self.client = client or SlurmClient()
        self.options = options or AgentOptions()
        self.clock = clock
        self.reader: SlurmReads = reader or self.client

    # -- reading ---------------------------------------------------------------------------------------------
    def read(self) -> Snapshot:
        """One read of Slurm's nodes and jobs (:class:`~.client.SlurmUnavailable` when it cannot be reached)."""
        nodes = parse_nodes(self.reader.nodes_json())
        jobs = parse_jobs(self.reader.jobs_json())
        return Snapshot(self.clock(), nodes, jobs)

    def build(self, snap: Snapshot) -> RoundBuild:
        return build_round(snap, self.options.read)

    def solve(self, build: RoundBuild) -> Decision | None:
        """The decision of the round (None when it has no job)."""
        if not build.round["jobs"]:
            return None
        problem = RoundProblem.from_dict(build.round)
        return solve(problem, self.options.method, self.options.time_limit, self.options.seed)

    # -- one round -------------------------------------------------------------------------------------------
    def run_once(self, dry_run: bool = False) -> RoundReport:
        """Read, solve and (unless ``dry_run``) apply one round."""
        t0 = time.perf_counter()
        snap = self.read()
        build = self.build(snap)
        t1 = time.perf_counter()
        decision = self.solve(build)
        t2 = time.perf_counter()
        actions: tuple[ActionRecord, ...] = ()
        if decision is not None and not dry_run:
            actions = tuple(self.apply(decision.to_dict()))
        t3 = time.perf_counter()
        log.info("slurm: round of %d jobs: read %.3f s, solve %.3f s, apply %.3f s, %d actions applied",
                 len(build.round["jobs"]), t1 - t0, t2 - t1, t3 - t2, sum(a.applied for a in actions))
        return RoundReport(build.round, decision.to_dict() if decision is not None else None, actions,
                           build.left_out, t1 - t0, t2 - t1, t3 - t2)

    # -- applying --------------------------------------------------------------------------------------------
    def apply(self, decision: dict[str, Any]) -> list[ActionRecord]:
        """Apply a decision's entries that fit what Slurm reports now (module docstring)."""
        now = self.read()
        entries = list(decision.get("jobs", []))
        leaving = {e["job"] for e in entries if e["action"] in ("preempt", "reconfigure")}
        free: dict[str, int] = {}
        for node in now.nodes:
            if node.state == "ready":
                free[node.name] = node.gpus
        for job in now.jobs:
            if (job.running and job.job_id not in leaving) or job.state == "COMPLETING":
                for n, g in zip(job.nodes, job.gpus_per_node):
                    if n in free:
                        free[n] -= g
        records: list[ActionRecord] = []
        order = {"preempt": 0, "reconfigure": 1, "start": 2, "wait": 3}
        requeued: list[tuple[str, dict[str, Any]]] = []
        for entry in sorted(entries, key=lambda e: order.get(e["action"], 4)):
            job_id, action = str(entry["job"]), entry["action"]
            if action in ("keep", "trim"):
                continue
            job = now.job(job_id)
            start = time.perf_counter()
            if job is None or job.state not in LIVE_STATES:
                records.append(self._skip(job_id, action, "vanished between read and apply"
                                          + (f" (now {job.state})" if job is not None else ""), start))
                continue
            try:
                if action == "preempt":
                    if not job.running:
                        records.append(self._skip(job_id, action, f"is {job.state}, not running", start))
                        continue
                    self.client.scontrol("requeuehold", job_id)
                    records.append(self._done(job_id, action, "requeued and held", start))
                elif action in ("start", "reconfigure"):
                    want_running = action == "reconfigure"
                    if job.running != want_running or (not want_running and job.state != "PENDING"):
                        records.append(self._skip(job_id, action, f"is {job.state}", start))
                        continue
                    placement = entry.get("placement") or {}
                    misfit = [f"{n} ({'not ready' if n not in free else f'{free[n]} free'}, {int(s['gpus'])} asked)"
                              for n, s in placement.items() if int(s["gpus"]) > free.get(n, -1)]
                    if misfit:
                        records.append(self._skip(job_id, action, "does not fit now: " + ", ".join(misfit), start))
                        continue
                    comment = with_agent_keys(job.comment, plan=entry.get("plan"), wait=None)
                    update = ["update", f"JobId={job_id}", *_placement_args(placement)]
                    if comment is not None:
                        update.append(f"Comment={comment}")
                    if action == "reconfigure":
                        self.client.scontrol("requeuehold", job_id)
                    for n, s in placement.items():
                        free[n] -= int(s["gpus"])
                    if action == "reconfigure":
                        self.client.scontrol(*update)
                        requeued.append((job_id, entry))
                        records.append(self._done(job_id, action, f"requeued onto {_where(placement)}", start))
                    else:
                        self.client.scontrol(*update, "StartTime=now")
                        self.client.scontrol("release", job_id)
                        records.append(self._done(job_id, action, f"released onto {_where(placement)}", start))
                elif action == "wait":
                    if job.state != "PENDING":
                        records.append(self._skip(job_id, action, f"is {job.state}, not pending", start))
                        continue
                    if not job.held:
                        self.client.scontrol("hold", job_id)
                    reason = entry.get("reason") or "waits (optsched round)"
                    comment = with_agent_keys(job.comment, wait=reason)
                    if comment is not None and comment != job.comment:
                        self.client.scontrol("update", f"JobId={job_id}", f"Comment={comment}")
                    records.append(self._done(job_id, action, f"held: {reason}", start))
            except SlurmRejected as exc:
                log.error("slurm: %s of job %s rejected: %s", action, job_id, exc)
                if action in ("preempt", "reconfigure") and job.running and not job.held:
                    still = {j.job_id: j for j in parse_jobs(self.reader.jobs_json())}.get(job_id)
                    if still is not None and still.running:  # it keeps its GPUs: later starts must not count them
                        for n, g in zip(job.nodes, job.gpus_per_node):
                            if n in free:
                                free[n] -= g
                records.append(ActionRecord(job_id, action, False, f"rejected: {exc}", time.perf_counter() - start))
        if requeued:
            records.extend(self._finish_requeues(requeued))
        return records

    def _finish_requeues(self, requeued: list[tuple[str, dict[str, Any]]]) -> list[ActionRecord]:
        """Release each reconfigured job once it has left COMPLETING (``StartTime=now`` first)."""
        waiting = {j for j, _ in requeued}
        records = []
        deadline = time.perf_counter() + self.options.requeue_wait_s
        while waiting and time.perf_counter() < deadline:
            jobs = {j.job_id: j for j in parse_jobs(self.reader.jobs_json())}
            for job_id in sorted(waiting):
                job = jobs.get(job_id)
                start = time.perf_counter()
                if job is None:
                    waiting.discard(job_id)
                    records.append(self._skip(job_id, "release", "vanished while requeued", start))
                elif job.state == "PENDING":
                    waiting.discard(job_id)
                    try:
                        self.client.scontrol("update", f"JobId={job_id}", "StartTime=now")
                        self.client.scontrol("release", job_id)
                        records.append(self._done(job_id, "release", "released after requeue", start))
                    except SlurmRejected as exc:
                        log.error("slurm: release of job %s rejected: %s", job_id, exc)
                        records.append(ActionRecord(job_id, "release", False, f"rejected: {exc}",
                                                    time.perf_counter() - start))
            if waiting:
                time.sleep(0.1)
        for job_id in sorted(waiting):
            log.warning("slurm: job %s still completing after %.0f s: left held for the next round", job_id,
                        self.options.requeue_wait_s)
            records.append(ActionRecord(job_id, "release", False, "still completing: left held", 0.0))
        return records

    @staticmethod
    def _skip(job_id: str, action: str, why: str, start: float) -> ActionRecord:
        log.warning("slurm: %s of job %s skipped: job %s %s", action, job_id, job_id, why)
        return ActionRecord(job_id, action, False, why, time.perf_counter() - start)

    @staticmethod
    def _done(job_id: str, action: str, what: str, start: float) -> ActionRecord:
        took = time.perf_counter() - start
        log.info("slurm: %s job %s: %s (%.1f ms)", action, job_id, what, 1000 * took)
        return ActionRecord(job_id, action, True, what, took)

    def wait_running(self, job_ids: set[str], timeout_s: float = 30.0) -> float:
        """Seconds until every job of ``job_ids`` is RUNNING (polled every 0.05 s); ``inf`` on timeout."""
        start = time.perf_counter()
        while time.perf_counter() - start < timeout_s:
            jobs = {j.job_id: j for j in parse_jobs(self.reader.jobs_json())}
            if all(jobs.get(j) is not None and jobs[j].running for j in job_ids):
                return time.perf_counter() - start
            time.sleep(0.05)
        return float("inf")


def _where(placement: dict[str, dict[str, Any]]) -> str:
    return ",".join(f"{n}:{int(s['gpus'])}" for n, s in sorted(placement.items()) if int(s["gpus"]) > 0)
