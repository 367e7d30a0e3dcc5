"""The fields every Lyra round shares (thesis Sec. 3.3-3.5): a cluster of two pools, training servers
and inference servers, and which workers of a running elastic job are flexible.

* **Pools.** ``inference_nodes`` names the cluster's inference servers; every other node is a training
  server. Capacity is loaned by whole servers (Sec. 3.6, "the basic unit of loaning is a physical
  server"): an inference server is **on loan** when work outside the round holds nothing on it and is
  held by inference when ``occupied`` covers it whole; a partial share is an error naming the node,
  unless ``opportunistic`` is set: then there is no loaning and fungible jobs use whatever GPUs of the
  inference servers inference leaves idle, at lower priority (the "Opportunistic Scheduling" baseline of
  Sec. 3.7.1; every inference server with an idle GPU counts as on loan).
* **Normalisation** (Sec. 3.5.2: "the on-loan inference GPUs are normalized relative to training GPUs
  when calculating the resource capacity"). ``inference_factor`` (default :data:`INFERENCE_FACTOR` =
  0.5) is the training GPUs one inference GPU is worth. Default from the testbed of Sec. 3.7.1: a
  32 GB V100 against a 16 GB T4, so a fungible job halves its local batch on T4 and doubles its
  workers to keep its global batch (Sec. 3.2.1); the fp16 tensor peaks agree (65 vs 125 TFLOPs =
  0.52). (Sec. 3.7.5's "three [inference] servers ... equivalent to one training server" suggests
  1/3 on that testbed; set the field to use it.) A worker of ``g`` training GPUs therefore holds
  ``ceil(g / inference_factor)`` inference GPUs (:meth:`LyraRound.worker_gpus`) and does the same work.
* **Jobs** use :mod:`optsched.rounds.lyra.jobs` (workers, elastic range, work in GPU-seconds). A job
  runs on inference servers only when ``fungible`` (Sec. 3.2.1, 21% of jobs), on one pool at a time
  (heterogeneous training is not modelled). A running job holds whole workers on every node; an
  elastic one between ``w_min`` and ``w_max`` of them, an inelastic one exactly its request.
* **Flexible workers.** ``flexible`` maps a running elastic job to the GPUs its *flexible* workers
  hold per node (Sec. 3.5.3: base and flexible demand sit on separate server groups); the others are
  its ``w_min`` base workers. Given, it must account for exactly ``w - w_min`` workers inside the job's
  shares. A running elastic job without an entry counts all its workers as base (the conservative
  reading for reclaiming: scaling it in is not assumed to be free).
* ``scaling``: ``"linear"`` or ``"sublinear"`` (:mod:`optsched.rounds.lyra.jobs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_ints, require_int, require_number
from optsched.core.errors import ValidationError
from optsched.core.job import CONSTRAINT_FIELDS, OBJECTIVE_FIELDS, Job
from optsched.core.round import RoundProblem
from optsched.rounds.lyra.jobs import SCALINGS, base_workers, check_workers, is_elastic, max_workers

#: training GPUs one inference GPU is worth (module docstring)
INFERENCE_FACTOR = 0.5
#: the two pools
TRAINING, INFERENCE = "training", "inference"

FlexibleMap = tuple[tuple[str, tuple[tuple[str, int], ...]], ...]


def _flexible_tuple(value: Any) -> FlexibleMap:
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    for job, shares in items:
        shares = shares.items() if isinstance(shares, Mapping) else shares
        out.append((job, tuple(sorted((str(n), g) for n, g in shares))))
    return tuple(sorted(out))


@dataclass(frozen=True)
class LyraRound(RoundProblem):
    """The common part of the Lyra kinds (module docstring); the kinds subclass it."""

    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("inference_nodes", "inference_factor", "scaling", "flexible",
                                             "opportunistic")
    #: job fields no Lyra method reads: a job that sets one is refused naming it (the hard constraints of
    #: ``rubick`` rounds, deadlines, guarantees, requested CPUs and memory: Lyra accounts GPUs only)
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = (*CONSTRAINT_FIELDS, *OBJECTIVE_FIELDS, "deadline", "guaranteed",
                                                     "requested_cpus", "requested_mem_gib")

    inference_nodes: tuple[str, ...] = ()
    inference_factor: float = INFERENCE_FACTOR
    scaling: str = "linear"
    flexible: FlexibleMap = ()
    opportunistic: bool = False
    _inference: frozenset[str] = field(init=False, repr=False, compare=False)
    _flex: dict[str, dict[str, int]] = field(init=False, repr=False, compare=False)

    def _check_fields(self) -> None:
        require_number("round", "inference_factor", self.inference_factor, 0.0, strict=True)
        if self.inference_factor > 1:
            raise ValidationError(f"round: inference_factor must be in (0, 1], got {self.inference_factor}")
        if self.scaling not in SCALINGS:
            raise ValidationError(f"round: unknown scaling {self.scaling!r}; known: {', '.join(SCALINGS)}")
        if not isinstance(self.opportunistic, bool):
            raise ValidationError("round: opportunistic must be true or false")
        names = tuple(sorted(set(self.inference_nodes)))
        object.__setattr__(self, "inference_nodes", names)
        object.__setattr__(self, "_inference", frozenset(names))
        occupied = self._occupied_by_node
        for n in names:
            node = self._node(n, "inference_nodes")
            occ = occupied.get(n)
            if occ is not None and occ.gpus not in (0, node.num_gpus) and not self.opportunistic:
                raise ValidationError(f"round: inference server {n!r} is held {occ.gpus} of {node.num_gpus} GPUs by "
                                      "inference; capacity is loaned by whole servers (0 or all)")
        for j in self.jobs:
            check_workers(j)
        for a in self.running:
            self._check_running(self.job(a.job), dict(a.placement.gpu_parts))
        flex = _flexible_tuple(self.flexible)
        object.__setattr__(self, "flexible", flex)
        flex_map: dict[str, dict[str, int]] = {}
        for job_name, shares in flex:
            job = self.job(job_name)
            where = f"round: flexible workers of job {job_name!r}"
            cur = self.current(job_name)
            if cur is None or not is_elastic(job):
                raise ValidationError(f"{where}: only a running elastic job has flexible workers")
            held = dict((n, s.gpus) for n, s in cur.placement.shares)
            total = 0
            for node, gpus in shares:
                require_int(where, f"GPUs on node {node!r}", gpus, 0)
                if node not in held:
                    self._node(node, f"flexible workers of job {job_name!r}")
                    raise ValidationError(f"{where}: the job holds nothing on node {node!r}")
                if gpus > held[node] or gpus % self.worker_gpus(job, node):
                    raise ValidationError(f"{where}: {gpus} GPUs on node {node!r} are not whole workers within the "
                                          f"job's {held[node]} there")
                total += gpus // self.worker_gpus(job, node)
            if total != self.workers_of(job_name) - base_workers(job):
                raise ValidationError(f"{where}: {total} flexible workers, but the job runs "
                                      f"{self.workers_of(job_name)} workers with a base of {base_workers(job)}")
            flex_map[job_name] = {n: g for n, g in shares if g > 0}
        object.__setattr__(self, "_flex", flex_map)

    def _check_running(self, job: Job, shares: dict[str, int]) -> None:
        """A running job holds whole workers on one pool, a number within its range (once per running job of a
        round: its pool and worker size are found once, not per node)."""
        on_inference = {n in self._inference for n in shares}
        if len(on_inference) > 1:
            raise ValidationError(f"round: running job {job.name!r} spans training and inference servers; a job "
                                  "runs on one pool")
        pool = INFERENCE if True in on_inference else TRAINING
        if pool == INFERENCE and not job.fungible:
            raise ValidationError(f"round: running job {job.name!r} runs on inference servers but is not fungible")
        wg = self.worker_gpus(job, pool)
        workers = 0
        for n, g in shares.items():
            if g % wg:
                raise ValidationError(f"round: running job {job.name!r} holds {g} GPUs on node {n!r}, not whole "
                                      f"workers of {wg} GPUs")
            workers += g // wg
        lo, hi = base_workers(job), max_workers(job)
        if not lo <= workers <= hi:
            raise ValidationError(f"round: running job {job.name!r} runs {workers} workers; it takes {lo}..{hi}")

    # -- pools and workers ------------------------------------------------------------------------
    def pool(self, node: str) -> str:
        """``"inference"`` or ``"training"``."""
        return INFERENCE if node in self._inference else TRAINING

    @property
    def on_loan(self) -> tuple[str, ...]:
        """Inference servers on loan to training (nothing held on them by inference; with
        ``opportunistic``, some GPU idle), sorted."""
        occupied = dict(self.occupied)
        return tuple(n for n in self.inference_nodes if n not in occupied
                     or occupied[n].gpus < (self.cluster.node(n).num_gpus if self.opportunistic else 1))

    @cached_property
    def training_nodes(self) -> tuple[str, ...]:
        """The servers not of the inference pool (cluster order; made on first use, the round is immutable)."""
        return tuple(n.name for n in self.cluster.nodes if n.name not in self._inference)

    @cached_property
    def usable_nodes(self) -> tuple[str, ...]:
        """Training servers, then on-loan inference servers (cluster order; made on first use)."""
        loan = set(self.on_loan)
        return self.training_nodes + tuple(n.name for n in self.cluster.nodes if n.name in loan)

    def worker_gpus(self, job: Job, node_or_pool: str) -> int:
        """GPUs one worker of ``job`` holds on a node (or pool): ``gpus_per_worker`` on training
        servers, ``ceil(gpus_per_worker / inference_factor)`` on inference ones (module docstring)."""
        pool = node_or_pool if node_or_pool in (TRAINING, INFERENCE) else self.pool(node_or_pool)
        if pool == TRAINING:
            return job.gpus_per_worker
        return math.ceil(job.gpus_per_worker / self.inference_factor - 1e-9)

    def normalised_gpus(self, node: str, gpus: int) -> float:
        """``gpus`` of ``node`` in training GPUs."""
        return gpus * (self.inference_factor if self.pool(node) == INFERENCE else 1.0)

    def workers_of(self, job: str) -> int:
        """Workers the running ``job`` holds (0 when queued)."""
        cur = self.current(job)
        if cur is None:
            return 0
        j = self.job(job)
        return sum(s.gpus // self.worker_gpus(j, n) for n, s in cur.placement.shares)

    def flexible_of(self, job: str) -> dict[str, int]:
        """GPUs per node of the flexible workers of running ``job`` (empty: all base)."""
        return dict(self._flex.get(job, {}))

    def base_of(self, job: str) -> dict[str, int]:
        """GPUs per node of the base workers of running ``job`` (every worker of an inelastic job)."""
        cur = self.current(job)
        if cur is None:
            return {}
        flex = self._flex.get(job, {})
        out = {n: s.gpus - flex.get(n, 0) for n, s in cur.placement.shares}
        return {n: g for n, g in out.items() if g > 0}

    def idle_gpus(self) -> dict[str, int]:
        """GPUs per node that neither a running job nor outside work holds (every node)."""
        occupied = {n: s.gpus for n, s in self.occupied}   # as free(n).gpus counts them, without a share per node
        out = {n.name: n.num_gpus - occupied.get(n.name, 0) for n in self.cluster.nodes}
        for a in self.running:
            for n, s in a.placement.shares:
                out[n] -= s.gpus
        return out

    # -- JSON ---------------------------------------------------------------------------------------
    def _fields_to_dict(self) -> dict[str, Any]:
        out = {"inference_nodes": list(self.inference_nodes), "inference_factor": self.inference_factor,
               "scaling": self.scaling, "flexible": {j: dict(s) for j, s in self.flexible}}
        if self.opportunistic:
            out["opportunistic"] = True
        return out

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(data.get("inference_nodes", []), list):
            raise ValidationError("round: inference_nodes must be a JSON array of node names")
        flex = data.get("flexible", {})
        if not isinstance(flex, dict) or not all(isinstance(v, dict) for v in flex.values()):
            raise ValidationError("round: flexible must be a JSON object {job: {node: GPUs}}")
        return {"inference_nodes": tuple(data.get("inference_nodes", ())),
                "inference_factor": data.get("inference_factor", INFERENCE_FACTOR),
                "scaling": data.get("scaling", "linear"),
                "flexible": _flexible_tuple({job: json_ints(shares) for job, shares in flex.items()}),
                "opportunistic": data.get("opportunistic", False)}


__all__ = ["INFERENCE", "INFERENCE_FACTOR", "LyraRound", "TRAINING"]
