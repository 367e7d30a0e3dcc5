"""What Slurm reports, read into a Rubick round (``docs/integration.md``, "Slurm", for the mapping table).

Slurm 22.05's JSON: ``sinfo --json`` (``nodes``: name, ``state``, ``state_flags``, ``gres``, ``features``,
``cpus``, ``real_memory``, ``partitions``) and ``squeue --json`` (``jobs``: ``job_id``, ``job_state``,
``state_reason``, ``tres_per_node``/``tres_per_job``/``tres_per_task``, ``node_count``, ``max_nodes``,
``nodes``, ``gres_detail``, ``account``, ``qos``, ``partition``, ``nice``, ``deadline``, ``submit_time``,
``start_time``, ``restart_cnt``, ``features``, ``comment``). ``scontrol show node`` has no ``--json`` in 22.05.

The rules (one place each):

* **Nodes.** ``state_flags`` with ``DRAIN`` -> ``draining``; state ``down``/``future``/``unknown`` or a flag
  ``DOWN``, ``NOT_RESPONDING``, ``FAIL``, ``POWERED_DOWN``, ``POWERING_DOWN`` -> absent (left out of the round's
  cluster); else ``ready``. Features -> ``labels`` ``{feature: "true"}`` (what a job's ``--constraint`` is
  matched against). GPUs: the node's ``gpu`` GRES; the GPU type is the GRES type (``gpu:a100:8``) or, without
  one, a node feature naming a GPU type; it is matched to the catalogue case-insensitively, exactly or as the
  first part of a catalogue name (``a100`` -> ``A100-40G``), or by the caller's ``gpu_types`` map. A node
  without GPUs is left out.
* **Jobs.** GPUs: ``--gres=gpu[:type]:N`` / ``--gpus-per-node=N`` (``tres_per_node``) is ``N`` per node on
  ``node_count`` nodes; ``--gpus=G`` (``tres_per_job``) is ``G`` in all, on ``node_count`` nodes when ``-N`` was
  given; ``--gpus-per-task=N`` is ``N`` per task. A job that asks for no GPU is not the round's (logged). ``account`` ->
  ``tenant`` (``"default"`` when empty); ``guaranteed``: the comment's, else true when the job's QOS is in
  ``guaranteed_qos`` or its partition in ``guaranteed_partitions``; ``priority``: the comment's, else minus
  the job's ``nice`` (a held job reports Slurm priority 0, so Slurm's computed priority cannot be read for
  the jobs the agent starts; departure named here); ``--deadline`` -> ``deadline``; ``submit_time``;
  ``--constraint=a&b`` -> ``node_selector``
  ``{a: "true", b: "true"}`` (``|``, counts and brackets are refused naming the job); the GRES type ->
  ``gpu_type``. A deadline binds through the job's samples per second, so only a job whose comment names a
  model gets ``deadline`` (with the comment's ``total_iterations``/``completed_iterations``); a fixed gang's
  ``--deadline`` stays Slurm's own (Slurm cancels a job that cannot end by it).
* **Time and restarts** (one rule, :func:`run_seconds`, :func:`checkpoint_age`). Slurm resets a job's
  ``start_time`` each time it starts again after a requeue (measured on 22.05), so a running job's
  ``start_time`` is its *last* start: it is the allocation's ``since`` (what ``min_hold_s`` reads). Its
  run since then, ``run_s``, is Slurm's elapsed time: ``time - start_time``, or ``pre_sus_time + time -
  suspend_time`` after a suspension. ``restart_seconds``: the comment's, else ``ReadOptions.restart_seconds``
  (the agent's ``--restart-seconds``), else none (the round's dimensionless penalties). ``checkpoint_age_s`` of
  a running job: the comment's, else ``run_s`` when the comment says ``"checkpoints": false`` (a preemption
  loses all the work since the last start), else ``run_s mod checkpoint_interval_s`` when it gives one, else
  none. ``round_interval_s`` is ``ReadOptions.round_interval_s`` (the agent's ``--interval``); a job with
  either seconds field needs it (a :class:`ValidationError` naming the option otherwise). ``restart_cnt`` feeds
  no round field: the round prices the restart a decision would cause, and how often the job restarted before
  does not change that price (``docs/integration.md``, "Slurm").
* **The round's clock** is Unix time (seconds): ``time`` is the read's wall clock, and ``submit_time``,
  ``since`` and ``deadline`` keep Slurm's epoch values.
* **Job states.** ``PENDING`` -> queued; ``RUNNING``/``CONFIGURING`` -> running (its placement from
  ``nodes`` and ``gres_detail``); ``COMPLETING`` -> its GPUs are ``occupied`` (outside work) until it leaves
  (``gres_used`` drops before that); every other state is not in the round.
* **What Slurm cannot state** comes from the job's JSON ``--comment`` (:mod:`.comment`). A job without
  a model there is a fixed gang of what it asked Slurm for: ``plan_fixed`` with plan ``{"dp": G}``, ``min_gpus
  = max_gpus = G``, and one own coefficient row (throughput 1, its shape) so no performance model is
  involved; never dropped.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from optsched.core.catalog import GPU_TYPES
from optsched.core.errors import ValidationError
from optsched.core.skip import JobError
from optsched.integrations.slurm.comment import AGENT_PLAN_KEY, DERIVING_KEYS, JobFacts, parse_comment
from optsched.integrations.slurm.hostlist import expand_hostlist

log = logging.getLogger(__name__)

ABSENT_STATES = frozenset({"down", "future", "unknown"})
ABSENT_FLAGS = frozenset({"DOWN", "NOT_RESPONDING", "FAIL", "POWERED_DOWN", "POWERING_DOWN"})
RUNNING_STATES = frozenset({"RUNNING", "CONFIGURING"})
#: held-by-user and held-by-admin reasons of a pending job (``state_reason``)
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
#: iterations of a job whose comment gives none: the round's objective does not read them; a deadline binds
#: only through the comment's ``total_iterations`` (``docs/integration.md``, "Slurm")
DEFAULT_ITERATIONS = 1
#: the fixed gang's own row: one configuration, normalised throughput 1
GANG_THROUGHPUT = 1.0


@dataclass(frozen=True)
class ReadOptions:
    """How the agent reads Slurm into a round: the cluster's bandwidths (Slurm does not know them; defaults
    are the A800 cluster's effective bandwidths of the catalogue, an assumption to override per site), the QOS
    and partitions whose jobs are guaranteed, and extra GRES-type -> catalogue GPU type names."""

    intra_node_gbps: float = 150.0
    inter_node_gbps: float = 80.0
    pcie_gbps: float = 20.0
    guaranteed_qos: frozenset[str] = frozenset()
    guaranteed_partitions: frozenset[str] = frozenset()
    gpu_types: Mapping[str, str] = field(default_factory=dict)
    #: seconds a start, reconfiguration or resume costs a job whose comment gives no ``restart_seconds``
    restart_seconds: float | None = None
    #: the round's ``round_interval_s`` (seconds between the agent's rounds); needed by the seconds fields
    round_interval_s: float | None = None

    def __post_init__(self) -> None:
        for name, option in (("restart_seconds", "--restart-seconds"), ("round_interval_s", "--interval")):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not value >= 0 or value == float("inf")):
                raise ValidationError(f"slurm: {name} ({option}) must be a finite "
                                      f"number >= 0 of seconds, got {value!r}")
        if self.round_interval_s is not None and not self.round_interval_s > 0:
            raise ValidationError(f"slurm: round_interval_s (--interval) must be > 0 seconds, got "
                                  f"{self.round_interval_s!r}")


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``sinfo --json`` reports it (module docstring)."""

    name: str
    state: str  # "ready" | "draining" | "absent"
    gpus: int
    gres_type: str | None
    cpus: int
    memory_mib: int
    features: tuple[str, ...]


@dataclass(frozen=True)
class GpuRequest:
    """A job's GPU request: ``total`` GPUs, ``per_node`` on each of ``nodes`` nodes when fixed per node,
    ``nodes`` the node count when ``-N`` was given, ``gres_type`` when it names one."""

    total: int
    per_node: int | None
    nodes: int | None
    gres_type: str | None


@dataclass(frozen=True)
class SlurmJob:
    """One job as ``squeue --json`` reports it (module docstring)."""

    job_id: str
    name: str
    state: str
    reason: str
    request: GpuRequest | None
    account: str
    qos: str
    partition: str
    nice: int
    deadline: int
    submit_time: int
    start_time: int
    restart_count: int
    features: str
    comment: str
    cpus: int
    nodes: tuple[str, ...]
    gpus_per_node: tuple[int, ...]
    suspend_time: int = 0
    pre_sus_time: int = 0

    @property
    def held(self) -> bool:
        return self.state == "PENDING" and self.reason in HELD_REASONS

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES


@dataclass(frozen=True)
class Snapshot:
    """Nodes and jobs of one read, and its wall-clock time (Unix seconds)."""

    time: float
    nodes: tuple[SlurmNode, ...]
    jobs: tuple[SlurmJob, ...]

    def job(self, job_id: str) -> SlurmJob | None:
        return next((j for j in self.jobs if j.job_id == job_id), None)

    def node(self, name: str) -> SlurmNode | None:
        return next((n for n in self.nodes if n.name == name), None)


_GRES = re.compile(r"^(?:gres[:/])?gpu(?::([A-Za-z0-9_.-]+?))?(?::(\d+))?(?:\(.*\))?$")


def parse_gres(text: str, what: str) -> tuple[str | None, int] | None:
    """``(type or None, count)`` of the ``gpu`` entry of a GRES or TRES string (``gpu:a100:8``,
    ``gres:gpu:4``, ``gres/gpu:a100=2`` is not a 22.05 form); None when it names no GPU. Two GPU entries
    are refused (one GPU type per node and job)."""
    found = []
    for part in re.split(r",(?![^(]*\))", text or ""):
        part = part.strip()
        if not part or part in ("N/A", "(null)"):
            continue
        name = part.split(":", 2)[1] if part.startswith("gres:") else part.split(":", 1)[0]
        if name.split("(")[0] != "gpu":
            continue
        m = _GRES.match(part)
        if not m:
            raise ValidationError(f"slurm: {what}: cannot read the GPU entry {part!r}")
        gtype, count = m.group(1), m.group(2)
        if count is None and gtype is not None and gtype.isdigit():
            gtype, count = None, gtype
        found.append((gtype, int(count) if count is not None else 1))
    if len(found) > 1:
        raise ValidationError(f"slurm: {what}: {len(found)} GPU entries in {text!r}; one GPU type each is supported")
    return found[0] if found else None


def parse_nodes(sinfo: Mapping[str, Any]) -> tuple[SlurmNode, ...]:
    """The nodes of ``sinfo --json`` (one entry per node: 22.05 prints each node once)."""
    out: dict[str, SlurmNode] = {}
    for raw in sinfo.get("nodes", []):
        name = str(raw["name"])
        flags = {str(f).upper() for f in raw.get("state_flags") or ()}
        state = str(raw.get("state", "")).lower()
        if state in ABSENT_STATES or flags & ABSENT_FLAGS:
            kind = "absent"
        elif "DRAIN" in flags or state in ("drained", "draining"):
            kind = "draining"
        else:
            kind = "ready"
        gres = parse_gres(str(raw.get("gres", "")), f"node {name!r} gres")
        features = tuple(f for f in str(raw.get("active_features") or raw.get("features") or "").split(",") if f)
        out[name] = SlurmNode(name, kind, gres[1] if gres else 0, gres[0] if gres else None,
                              int(raw.get("cpus") or 0), int(raw.get("real_memory") or 0), features)
    return tuple(out.values())


def _int(value: Any, default: int = 0) -> int:
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, dict):  # later Slurm versions: {"set": bool, "number": n}
        return int(value.get("number", default)) if value.get("set", True) else default
    return int(value)


def job_request(raw: Mapping[str, Any]) -> GpuRequest | None:
    """A job's GPU request (module docstring, "Jobs"); None when it asks for no GPU."""
    jid = raw.get("job_id")
    nodes = _int(raw.get("node_count"), 1) or 1
    node_given = _int(raw.get("max_nodes")) > 0
    per_node = parse_gres(str(raw.get("tres_per_node") or ""), f"job {jid} tres_per_node")
    if per_node:
        return GpuRequest(per_node[1] * nodes, per_node[1], nodes, per_node[0])
    per_job = parse_gres(str(raw.get("tres_per_job") or ""), f"job {jid} tres_per_job")
    if per_job:
        return GpuRequest(per_job[1], None, nodes if node_given else None, per_job[0])
    per_task = parse_gres(str(raw.get("tres_per_task") or ""), f"job {jid} tres_per_task")
    if per_task:
        tasks = _int(raw.get("tasks"), 1) or 1
        return GpuRequest(per_task[1] * tasks, None, nodes if node_given else None, per_task[0])
    return None


def parse_jobs(squeue: Mapping[str, Any]) -> tuple[SlurmJob, ...]:
    """The jobs of ``squeue --json``."""
    jobs = []
    for raw in squeue.get("jobs", []):
        jid = str(raw["job_id"])
        nodes = expand_hostlist(str(raw.get("nodes") or ""))
        detail = [parse_gres(str(d), f"job {jid} gres_detail") for d in raw.get("gres_detail") or ()]
        per_node = tuple(d[1] if d else 0 for d in detail) if detail else ()
        if nodes and per_node and len(per_node) != len(nodes):
            raise ValidationError(f"slurm: job {jid}: gres_detail has {len(per_node)} entries for {len(nodes)} nodes")
        jobs.append(SlurmJob(
            job_id=jid, name=str(raw.get("name", "")), state=str(raw.get("job_state", "")),
            reason=str(raw.get("state_reason", "")), request=job_request(raw), account=str(raw.get("account") or ""),
            qos=str(raw.get("qos") or ""), partition=str(raw.get("partition") or ""), nice=_int(raw.get("nice")),
            deadline=_int(raw.get("deadline")), submit_time=_int(raw.get("submit_time")),
            start_time=_int(raw.get("start_time")), restart_count=_int(raw.get("restart_cnt")),
            features=str(raw.get("features") or ""), comment=str(raw.get("comment") or ""),
            cpus=_int(raw.get("cpus"), 1), nodes=nodes, gpus_per_node=per_node,
            suspend_time=_int(raw.get("suspend_time")), pre_sus_time=_int(raw.get("pre_sus_time"))))
    return tuple(jobs)


def run_seconds(job: SlurmJob, now: float) -> float:
    """Seconds a running job has run since its last start (Slurm's elapsed time; module docstring, "Time and
    restarts"): ``now - start_time``, or ``pre_sus_time + now - suspend_time`` once it was suspended and resumed."""
    if job.suspend_time and job.suspend_time >= job.start_time:
        return max(0.0, job.pre_sus_time + now - job.suspend_time)
    return max(0.0, now - job.start_time)


def checkpoint_age(facts: JobFacts, run_s: float) -> float | None:
    """A running job's ``checkpoint_age_s`` (module docstring, "Time and restarts"): the comment's, else all of
    ``run_s`` for a job that never checkpoints, else ``run_s`` modulo its checkpoint interval, else None."""
    fields = facts.fields
    if "checkpoint_age_s" in fields:
        return float(fields["checkpoint_age_s"])
    if fields.get("checkpoints") is False:
        return run_s
    if "checkpoint_interval_s" in fields:
        return run_s % float(fields["checkpoint_interval_s"])
    return None


def catalogue_gpu_type(gres_type: str | None, features: tuple[str, ...], aliases: Mapping[str, str],
                       what: str) -> str:
    """The catalogue GPU type of a GRES type (or, without one, of a node feature naming a GPU type)."""
    candidates = [gres_type] if gres_type else list(features)
    for cand in candidates:
        if cand in aliases:
            return aliases[cand]
        low = cand.lower()
        exact = [g for g in GPU_TYPES if g.lower() == low]
        if exact:
            return exact[0]
        prefix = [g for g in GPU_TYPES if g.lower().split("-")[0] == low]
        if len(prefix) == 1:
            return prefix[0]
    raise ValidationError(f"slurm: {what}: GPU type {gres_type or '(none)'!r} (features {list(features)}) is not a "
                          f"catalogue GPU type ({', '.join(GPU_TYPES)}); name it with --gpu-type TYPE=CATALOGUE")


def node_selector(job: SlurmJob) -> dict[str, str]:
    """``--constraint=a&b`` -> ``{a: "true", b: "true"}``; other forms are refused naming the job."""
    text = job.features.strip()
    if not text:
        return {}
    names = [f.strip() for f in text.split("&")]
    if any(not re.fullmatch(r"[A-Za-z0-9_.-]+", n) for n in names):
        raise JobError(job.job_id, f"job {job.job_id}: --constraint {text!r}: only features joined by '&' are read "
                                   "(no '|', counts or brackets)")
    return {n: "true" for n in names}


def _row_shape(req: GpuRequest, node_gpus: int) -> list[int]:
    """The per-node GPUs of a fixed gang's one configuration: its per-node request, else the most even split
    of its total over its ``-N`` nodes, else whole nodes' worth (a remainder on the last)."""
    if req.per_node is not None and req.nodes:
        return [req.per_node] * req.nodes
    if req.nodes:
        base, extra = divmod(req.total, req.nodes)
        return [base + (1 if i < extra else 0) for i in range(req.nodes) if base + (1 if i < extra else 0) > 0]
    full, rest = divmod(req.total, node_gpus)
    return [node_gpus] * full + ([rest] if rest else [])


@dataclass(frozen=True)
class RoundBuild:
    """A round's JSON object (``docs/rounds.md``) from one snapshot, and the jobs left out with why."""

    round: dict[str, Any]
    left_out: tuple[tuple[str, str], ...]
    facts: Mapping[str, JobFacts]


def build_round(snap: Snapshot, options: ReadOptions = ReadOptions()) -> RoundBuild:
    """The Rubick round of a snapshot (module docstring). Jobs whose comment or request cannot be read are
    left out with their error (a running one's GPUs become ``occupied``), never fail the round."""
    nodes = [n for n in snap.nodes if n.state != "absent" and n.gpus > 0]
    types = {n.name: catalogue_gpu_type(n.gres_type, n.features, options.gpu_types, f"node {n.name!r}")
             for n in nodes}
    node_objs = []
    for n in nodes:
        obj: dict[str, Any] = {"name": n.name, "gpu_type": types[n.name], "num_gpus": n.gpus,
                               "num_cpus": max(n.cpus, 1), "memory_gib": max(n.memory_mib / 1024.0, 1.0)}
        if n.features:
            obj["labels"] = {f: "true" for f in n.features}
        if n.state == "draining":
            obj["state"] = "draining"
        node_objs.append(obj)
    used_types = sorted(set(types.values()))
    cluster = {"name": "slurm", "intra_node_gbps": options.intra_node_gbps,
               "inter_node_gbps": options.inter_node_gbps, "pcie_gbps": options.pcie_gbps,
               "gpu_types": [{"name": t, "memory_gib": GPU_TYPES[t].memory_gib, "peak_tflops": GPU_TYPES[t].peak_tflops}
                             for t in used_types],
               "nodes": node_objs}
    by_name = {n.name: n for n in nodes}
    cpus_per_gpu = {n.name: min(8, n.cpus // n.gpus) if n.gpus else 0 for n in nodes}
    jobs: list[dict[str, Any]] = []
    running: list[dict[str, Any]] = []
    occupied: dict[str, dict[str, Any]] = {}
    coefficients: dict[str, list[dict[str, Any]]] = {}
    left_out: list[tuple[str, str]] = []
    facts_of: dict[str, JobFacts] = {}

    def occupy(job: SlurmJob) -> None:
        for node, g in zip(job.nodes, job.gpus_per_node):
            if node in by_name and g:
                share = occupied.setdefault(node, {"gpus": 0, "cpus": 0, "mem_gb": 0.0})
                share["gpus"] += g
                share["cpus"] += g * cpus_per_gpu[node]

    for job in snap.jobs:
        if job.state == "COMPLETING" or (job.running and job.request is None):
            occupy(job)
            continue
        if job.state != "PENDING" and not job.running:
            continue
        if job.request is None:
            left_out.append((job.job_id, "asks for no GPU"))
            continue
        try:
            spec, alloc, rows = _job_objects(job, snap, options, by_name, types, cpus_per_gpu)
        except (JobError, ValidationError) as exc:
            left_out.append((job.job_id, str(exc)))
            if job.running:
                occupy(job)
            continue
        facts_of[job.job_id] = parse_comment(job.job_id, job.comment)
        jobs.append(spec)
        if alloc is not None:
            running.append(alloc)
        if rows:
            coefficients[job.job_id] = rows
    rnd: dict[str, Any] = {"format": "optsched.round/1", "kind": "rubick", "time": float(snap.time),
                           "cluster": cluster, "jobs": jobs, "running": running, "occupied": occupied,
                           "on_invalid_job": "skip"}
    if coefficients:
        rnd["coefficients"] = coefficients
    timed = [j["name"] for j in jobs if "restart_seconds" in j or "checkpoint_age_s" in j]
    if options.round_interval_s is not None:
        rnd["round_interval_s"] = float(options.round_interval_s)
    elif timed:
        raise ValidationError(f"slurm: job(s) {', '.join(timed[:5])} give restart_seconds or a checkpoint age, which "
                              "need the round's round_interval_s: give ReadOptions.round_interval_s (the agent's "
                              "--interval)")
    for job_id, why in left_out:
        log.warning("slurm: job %s left out of the round: %s", job_id, why)
    return RoundBuild(rnd, tuple(left_out), facts_of)


def _job_objects(job: SlurmJob, snap: Snapshot, options: ReadOptions, nodes: Mapping[str, SlurmNode],
                 types: Mapping[str, str], cpus_per_gpu: Mapping[str, int]
                 ) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """The round's job object, running allocation (or None) and own rows of one Slurm job."""
    req = job.request
    assert req is not None
    facts = parse_comment(job.job_id, job.comment)
    selector = node_selector(job)
    gpu_type = None
    if req.gres_type:
        gpu_type = catalogue_gpu_type(req.gres_type, (), options.gpu_types, f"job {job.job_id}")
    spec: dict[str, Any] = {"name": job.job_id, "requested_gpus": req.total,
                            "tenant": job.account or "default", "submit_time": float(job.submit_time)}
    guaranteed = facts.guaranteed
    if guaranteed is None:
        guaranteed = job.qos in options.guaranteed_qos or job.partition in options.guaranteed_partitions
    spec["guaranteed"] = bool(guaranteed)
    priority = facts.fields.get("priority", -job.nice)
    if priority:
        spec["priority"] = int(priority)
    if job.deadline and facts.model is not None:
        spec["deadline"] = float(job.deadline)
    elif job.deadline:
        log.info("slurm: job %s: --deadline left to Slurm (a fixed gang: no model, so no samples/s to bind)",
                 job.job_id)
    if selector:
        spec["node_selector"] = selector
    if gpu_type:
        spec["gpu_type"] = gpu_type
    rows: list[dict[str, Any]] = []
    node_gpus = max((n.gpus for n in nodes.values()), default=8)
    cpg = min(cpus_per_gpu.values(), default=0)
    plan = {"dp": req.total}
    if facts.model is None:  # a fixed gang of what it asked Slurm for
        spec.update({"model": f"slurm-job-{job.job_id}", "total_iterations": DEFAULT_ITERATIONS,
                     "requested_plan": plan, "plan_fixed": True, "min_gpus": req.total, "max_gpus": req.total,
                     "requested_cpus": req.total * cpg})
        shape = _row_shape(req, node_gpus)
        row_types = [gpu_type] if gpu_type else sorted(set(types.values()))
        rows = [{"plan": plan, "gpu_type": t, "gpus_per_node": shape, "throughput": GANG_THROUGHPUT,
                 "cpus": req.total * cpg} for t in row_types]
        if job.running and sorted(job.gpus_per_node, reverse=True) != sorted(shape, reverse=True):
            rows.append({"plan": plan, "gpu_type": types.get(job.nodes[0], row_types[0]),
                         "gpus_per_node": list(job.gpus_per_node), "throughput": GANG_THROUGHPUT,
                         "cpus": req.total * cpg})
    else:
        spec["model"] = facts.model
        spec["total_iterations"] = DEFAULT_ITERATIONS
        if req.nodes is not None and req.per_node is not None and req.nodes == 1:
            spec["max_nodes"] = 1
    for key, value in facts.fields.items():
        if key not in ("priority", *DERIVING_KEYS):
            spec[key] = value
    if "restart_seconds" not in spec and options.restart_seconds is not None:
        spec["restart_seconds"] = float(options.restart_seconds)
    if facts.model is not None and "requested_cpus" not in spec:
        spec["requested_cpus"] = req.total * cpg
    alloc = None
    if job.running:
        missing = [n for n in job.nodes if n not in nodes]
        if missing:
            raise JobError(job.job_id, f"job {job.job_id} runs on node(s) {missing} the round leaves out (absent)")
        run_plan = facts.agent_plan or spec.get("requested_plan") or {"dp": sum(job.gpus_per_node)}
        placement = {n: {"gpus": g, "cpus": g * cpus_per_gpu[n]} for n, g in zip(job.nodes, job.gpus_per_node) if g}
        alloc = {"job": job.job_id, "plan": run_plan, "placement": placement}
        if job.start_time and job.start_time <= snap.time:
            alloc["since"] = float(job.start_time)
            age = checkpoint_age(facts, run_seconds(job, snap.time))
            if age is not None:
                spec["checkpoint_age_s"] = age
    elif "checkpoint_age_s" in spec:  # a queued job loses nothing to a preemption
        del spec["checkpoint_age_s"]
    return spec, alloc, rows


__all__ = ["AGENT_PLAN_KEY", "GpuRequest", "ReadOptions", "RoundBuild", "SlurmJob", "SlurmNode", "Snapshot",
           "build_round", "catalogue_gpu_type", "checkpoint_age", "expand_hostlist", "job_request", "node_selector",
           "parse_gres", "parse_jobs", "parse_nodes", "run_seconds"]
