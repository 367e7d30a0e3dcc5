"""The ``moe-comm`` round (thesis Sec. 4.4, Lina's communication scheduler in MoE training): one
backward pass of a data- and expert-parallel MoE model whose all-to-all and allreduce operations share
one network link, to be scheduled so that the step ends as early as possible.

**The backward pass.** ``stream`` is the computation stream in execution order: compute operations
(``ms`` of GPU time; ``role`` ``"combine"`` for the combine backward that precedes an all-to-all,
``"ffn"`` for the expert FFN between a layer's two all-to-alls, ``"compute"`` otherwise) and
all-to-all operations (``mb`` megabytes sent by each device). An all-to-all is *blocking*: it starts
after the stream element before it and the element after it waits for it (Sec. 4.2.2). ``allreduces``
are the data-parallel gradient allreduces: ``mb`` megabytes released when the compute operation
``after`` ends (gradient ready); they block nothing but the end of the step. The **step time** is
when the last compute operation and the last allreduce have finished (devices wait for allreduce
before the optimiser, Sec. 4.4.1).

**The link.** ``link_gbps`` (default: the cluster's inter-node bandwidth; 1 GB/s moves 1 MB per ms)
carries every communication operation. One operation of ``s`` MB alone takes ``op_overhead_ms + s /
link_gbps`` ms (the overhead is each (micro-)op's launch, partition and concatenation cost, Sec.
4.4.2: 764 us over the micro-ops of Fig. 4.8a). Operations running at the same time share the link
fairly: with ``n`` of them each progresses at ``sharing_efficiency x link / n`` (``sharing_efficiency``
< 1 models the extra contention loss NCCL streams show, Fig. 4.4; default 1, pure fair sharing), the
overhead counted as ``op_overhead_ms x link`` megabytes of work.

**Micro-ops.** Lina partitions tensors into micro-ops of at most ``partition_mb`` megabytes (30 MB in
the paper's evaluation, Sec. 4.7.1), ``ceil(size / partition_mb)`` equal chunks per operation; an
``ffn`` compute operation directly between two all-to-alls can be pipelined with their micro-ops
(:mod:`optsched.rounds.moe_comm.tasks`).

Checked when built (``ValidationError`` naming the operation and rule): no jobs or running allocations,
operation names unique, sizes > 0, durations >= 0, an allreduce's ``after`` names a compute operation
of the stream, at least one compute operation, numbers in range, and at most :data:`MAX_MICRO_OPS`
micro-ops at ``partition_mb`` over all communication operations (the paper's 30 MB gives tens for a
pass; a partition of a fraction of a megabyte gives thousands, which no policy needs and on which
CP-SAT overruns its time limit: about 6 s for a 1 s limit at 2,000 micro-ops).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import require_keys, require_name, require_number
from optsched.core.errors import ValidationError
from optsched.rounds.jobless import JoblessRound

#: Sec. 4.7.1: "a tensor partition size of 30MB"
DEFAULT_PARTITION_MB = 30.0
#: per (micro-)op launch/partition/concatenation overhead, ms
DEFAULT_OP_OVERHEAD_MS = 0.1
#: most micro-ops (all communication operations at ``partition_mb``) a round may have (module docstring)
MAX_MICRO_OPS = 1000
#: compute roles
ROLES = ("compute", "combine", "ffn")
COMPUTE, ALL_TO_ALL = "compute", "all-to-all"


@dataclass(frozen=True)
class StreamOp:
    """One element of the computation stream: a compute operation (``ms``, ``role``) or an all-to-all
    (``mb``)."""

    name: str
    op: str
    ms: float = 0.0
    mb: float = 0.0
    role: str = "compute"

    def check(self) -> None:
        require_name("round stream op", self.name)
        owner = f"round: stream op {self.name!r}"
        if self.op == COMPUTE:
            require_number(owner, "ms", self.ms, 0.0)
            if self.role not in ROLES:
                raise ValidationError(f"{owner}: role must be one of {', '.join(ROLES)}, got {self.role!r}")
        elif self.op == ALL_TO_ALL:
            require_number(owner, "mb", self.mb, 0.0, strict=True)
        else:
            raise ValidationError(f"{owner}: op must be {COMPUTE!r} or {ALL_TO_ALL!r}, got {self.op!r}")

    def to_dict(self) -> dict[str, Any]:
        if self.op == COMPUTE:
            return {"name": self.name, "op": self.op, "ms": self.ms, "role": self.role}
        return {"name": self.name, "op": self.op, "mb": self.mb}

    @classmethod
    def from_dict(cls, data: Any, index: int) -> "StreamOp":
        owner = f"round: stream[{index}]"
        if not isinstance(data, dict) or data.get("op") not in (COMPUTE, ALL_TO_ALL):
            raise ValidationError(f"{owner}: expected an object with op {COMPUTE!r} or {ALL_TO_ALL!r}")
        if data["op"] == COMPUTE:
            require_keys(owner, data, ("name", "op", "ms"), ("role",))
            return cls(data["name"], COMPUTE, ms=data["ms"], role=data.get("role", "compute"))
        require_keys(owner, data, ("name", "op", "mb"))
        return cls(data["name"], ALL_TO_ALL, mb=data["mb"])


@dataclass(frozen=True)
class AllReduce:
    """A gradient allreduce of ``mb`` megabytes released when compute op ``after`` ends."""

    name: str
    mb: float
    after: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mb": self.mb, "after": self.after}

    @classmethod
    def from_dict(cls, data: Any, index: int) -> "AllReduce":
        require_keys(f"round: allreduces[{index}]", data, ("name", "mb", "after"))
        return cls(data["name"], data["mb"], data["after"])


@dataclass(frozen=True)
class MoECommRound(JoblessRound):
    """A moe-comm round (module docstring)."""

    KIND: ClassVar[str] = "moe-comm"
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("stream", "allreduces", "link_gbps", "op_overhead_ms", "partition_mb",
                                             "sharing_efficiency")

    stream: tuple[StreamOp, ...] = ()
    allreduces: tuple[AllReduce, ...] = ()
    link_gbps: float | None = None
    op_overhead_ms: float = DEFAULT_OP_OVERHEAD_MS
    partition_mb: float = DEFAULT_PARTITION_MB
    sharing_efficiency: float = 1.0

    def _check_fields(self) -> None:
        object.__setattr__(self, "stream", tuple(self.stream))
        object.__setattr__(self, "allreduces", tuple(self.allreduces))
        self._require_no_jobs("schedules one backward pass")
        if self.link_gbps is not None:
            require_number("round", "link_gbps", self.link_gbps, 0.0, strict=True)
        require_number("round", "op_overhead_ms", self.op_overhead_ms, 0.0)
        require_number("round", "partition_mb", self.partition_mb, 0.0, strict=True)
        require_number("round", "sharing_efficiency", self.sharing_efficiency, 0.0, strict=True)
        if self.sharing_efficiency > 1.0:
            raise ValidationError(f"round: sharing_efficiency must be <= 1, got {self.sharing_efficiency}")
        names: set[str] = set()
        for op in self.stream:
            if not isinstance(op, StreamOp):
                raise ValidationError(f"round: stream must hold StreamOp objects, got {op!r}")
            op.check()
            if op.name in names:
                raise ValidationError(f"round: operation name {op.name!r} used twice")
            names.add(op.name)
        computes = {op.name for op in self.stream if op.op == COMPUTE}
        if not computes:
            raise ValidationError("round: the stream needs at least one compute operation")
        for ar in self.allreduces:
            if not isinstance(ar, AllReduce):
                raise ValidationError(f"round: allreduces must hold AllReduce objects, got {ar!r}")
            require_name("round allreduce", ar.name)
            require_number(f"round: allreduce {ar.name!r}", "mb", ar.mb, 0.0, strict=True)
            if ar.name in names:
                raise ValidationError(f"round: operation name {ar.name!r} used twice")
            names.add(ar.name)
            if ar.after not in computes:
                raise ValidationError(f"round: allreduce {ar.name!r} comes after {ar.after!r}, which is not a compute "
                                      "operation of the stream")
        sizes = [op.mb for op in self.stream if op.op == ALL_TO_ALL] + [ar.mb for ar in self.allreduces]
        micro_ops = sum(math.ceil(mb / self.partition_mb - 1e-9) for mb in sizes)
        if micro_ops > MAX_MICRO_OPS:
            raise ValidationError(f"round: partition_mb {self.partition_mb:g} splits the communication into {micro_ops} "
                                  f"micro-ops, more than the limit of {MAX_MICRO_OPS}")

    @property
    def bandwidth(self) -> float:
        """The link's bandwidth in MB per ms (= GB/s)."""
        return float(self.link_gbps if self.link_gbps is not None else self.cluster.inter_node_gbps)

    def comm_ms(self, mb: float) -> float:
        """Time of one (micro-)op of ``mb`` MB alone on the link."""
        return self.op_overhead_ms + mb / self.bandwidth

    def _fields_to_dict(self) -> dict[str, Any]:
        return {"stream": [op.to_dict() for op in self.stream], "allreduces": [a.to_dict() for a in self.allreduces],
                "link_gbps": self.link_gbps, "op_overhead_ms": self.op_overhead_ms, "partition_mb": self.partition_mb,
                "sharing_efficiency": self.sharing_efficiency}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        for key in ("stream", "allreduces"):
            if key in data and not isinstance(data[key], list):
                raise ValidationError(f"round: {key} must be a JSON array")
        if "stream" not in data:
            raise ValidationError("round: missing field(s) stream")
        return {"stream": tuple(StreamOp.from_dict(o, i) for i, o in enumerate(data["stream"])),
                "allreduces": tuple(AllReduce.from_dict(a, i) for i, a in enumerate(data.get("allreduces", []))),
                "link_gbps": data.get("link_gbps"), "op_overhead_ms": data.get("op_overhead_ms", DEFAULT_OP_OVERHEAD_MS),
                "partition_mb": data.get("partition_mb", DEFAULT_PARTITION_MB),
                "sharing_efficiency": data.get("sharing_efficiency", 1.0)}


__all__ = ["ALL_TO_ALL", "COMPUTE", "DEFAULT_OP_OVERHEAD_MS", "DEFAULT_PARTITION_MB", "MAX_MICRO_OPS", "ROLES",
           "AllReduce", "MoECommRound", "StreamOp"]
