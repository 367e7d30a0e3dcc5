"""Hardware vocabulary: GPU types, nodes and clusters.

Bandwidths are in GB/s (10^9 bytes per second) and memory in GiB. A cluster has one intra-node
bandwidth (NVLink), one inter-node bandwidth (RDMA) and one host-device bandwidth (PCIe); a GPU type
may override the intra-node bandwidth (e.g. PCIe-only cards such as A10/T4) so that heterogeneous
clusters (Crius) are described by the same objects.

Heterogeneous clusters (Crius Table 1) also say, per GPU type, what links its GPUs inside a node
(``intra_link``: ``"nvlink"`` or ``"pcie"``), which network generation links its nodes
(``inter_link``, e.g. ``"ib-cx5"``) with the node's bandwidth (``inter_node_gbps``, overriding the
cluster's), and the fraction of the dense peak its GPUs achieve on large training kernels
(``efficiency``). All four are optional; :meth:`Cluster.intra_link` and
:meth:`Cluster.inter_bandwidth` answer for types without them (module constants below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from optsched.core.checks import (json_fields, require_int, require_keys, require_name, require_number,
                                  string_pairs)
from optsched.core.errors import UnknownNameError, ValidationError

#: kinds of intra-node GPU-to-GPU links
INTRA_LINKS: tuple[str, ...] = ("nvlink", "pcie")
#: a type without ``intra_link`` counts as NVLink-connected when its intra-node bandwidth reaches this (GB/s)
NVLINK_MIN_GBPS = 50.0


@dataclass(frozen=True)
class GPUType:
    """A GPU model: memory (GiB), dense fp16/bf16 tensor peak (TFLOPs) and, optionally, its own
    intra-node GPU-to-GPU bandwidth (GB/s) when it differs from the cluster's; optionally (module
    docstring) the intra-node link kind, the inter-node link generation and bandwidth of its nodes
    (GB/s per node) and its achieved fraction of the peak (0 < efficiency <= 1)."""

    name: str
    memory_gib: float
    peak_tflops: float
    intra_node_gbps: float | None = None
    intra_link: str | None = None
    inter_link: str | None = None
    inter_node_gbps: float | None = None
    efficiency: float | None = None

    def __post_init__(self) -> None:
        require_name("GPUType", self.name)
        owner = f"GPUType {self.name!r}"
        require_number(owner, "memory_gib", self.memory_gib, 0.0, strict=True)
        require_number(owner, "peak_tflops", self.peak_tflops, 0.0, strict=True)
        for f in ("intra_node_gbps", "inter_node_gbps", "efficiency"):
            if getattr(self, f) is not None:
                require_number(owner, f, getattr(self, f), 0.0, strict=True)
        if self.efficiency is not None and self.efficiency > 1.0:
            raise ValidationError(f"{owner}: efficiency is a fraction of the peak, <= 1, got {self.efficiency}")
        if self.intra_link is not None and self.intra_link not in INTRA_LINKS:
            raise UnknownNameError("intra-node link", str(self.intra_link), INTRA_LINKS, context=f"of {owner}")
        if self.inter_link is not None:
            require_name(owner + " inter_link", self.inter_link)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "memory_gib": self.memory_gib,
                             "peak_tflops": self.peak_tflops}
        for f in _OPTIONAL_GPU_FIELDS:
            if getattr(self, f) is not None:
                d[f] = getattr(self, f)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "GPUType":
        require_keys("GPUType", data, ("name", "memory_gib", "peak_tflops"), _OPTIONAL_GPU_FIELDS)
        return cls(**data)


def _gpu_type_at(index: int, data: Any) -> GPUType:
    """:meth:`GPUType.from_dict` of ``cluster.gpu_types[index]``, its errors naming that item."""
    try:
        return GPUType.from_dict(data)
    except ValidationError as exc:
        raise ValidationError(f"cluster.gpu_types[{index}]: {exc}") from None


#: the optional fields of :class:`GPUType`, written to JSON only when set
_OPTIONAL_GPU_FIELDS = ("intra_node_gbps", "intra_link", "inter_link", "inter_node_gbps", "efficiency")


#: what a node is open to: ``ready`` (any work), ``cordoned`` (no new work: a job holds at most the
#: GPUs it holds there now), ``draining`` (every job must leave)
NODE_STATES = ("ready", "cordoned", "draining")


@dataclass(frozen=True)
class Node:
    """A server: ``num_gpus`` GPUs of one type, ``num_cpus`` CPU cores, ``memory_gib`` host memory;
    ``labels`` (name -> value, what a job's ``node_selector`` matches), ``state``
    (:data:`NODE_STATES`) and ``topology`` (level -> domain, e.g. ``{"rack": "r1", "nvlink": "n1-0"}``:
    what a job's ``topology`` rule groups nodes by), each written to JSON only when set. A round kind that
    does not bind labels
    or states refuses a node that sets them (:attr:`~optsched.core.round.RoundProblem.UNBOUND_NODE_FIELDS`)."""

    name: str
    gpu_type: str
    num_gpus: int
    num_cpus: int
    memory_gib: float
    labels: tuple[tuple[str, str], ...] = ()
    state: str = "ready"
    topology: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if (type(self.name) is str and type(self.gpu_type) is str and type(self.num_gpus) is int
                and type(self.num_cpus) is int and type(self.memory_gib) in (float, int) and self.labels == ()
                and self.topology == () and self.state == "ready" and self.name.strip() and self.gpu_type.strip()
                and self.num_gpus >= 0 and self.num_cpus >= 0 and 0 <= self.memory_gib < math.inf):
            return  # fast path (a plain node; a round has thousands): the checks below would all pass
        require_name("Node", self.name)
        owner = f"node {self.name!r}"
        require_name(owner + " gpu_type", self.gpu_type)
        require_int(owner, "num_gpus", self.num_gpus, 0)
        require_int(owner, "num_cpus", self.num_cpus, 0)
        require_number(owner, "memory_gib", self.memory_gib, 0.0)
        object.__setattr__(self, "labels", string_pairs(owner + " labels", self.labels))
        object.__setattr__(self, "topology", string_pairs(owner + " topology", self.topology))
        if self.state not in NODE_STATES:
            raise UnknownNameError(f"{owner} state", str(self.state), NODE_STATES)

    def label(self, name: str) -> str | None:
        """The value of label ``name`` (None when the node has no such label)."""
        return dict(self.labels).get(name)

    def domain(self, level: str) -> str | None:
        """The node's domain at topology ``level`` (e.g. its rack), None when its topology lacks the level."""
        return dict(self.topology).get(level)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "gpu_type": self.gpu_type, "num_gpus": self.num_gpus,
                             "num_cpus": self.num_cpus, "memory_gib": self.memory_gib}
        if self.labels:
            d["labels"] = dict(self.labels)
        if self.state != "ready":
            d["state"] = self.state
        if self.topology:
            d["topology"] = dict(self.topology)
        return d

    @classmethod
    def from_dict(cls, data: Any) -> "Node":
        """The node of a JSON object. A round holds tens of thousands of plain nodes (the five required members, the
        counts JSON integers): those are built directly, :meth:`__post_init__`'s fast path checking their values."""
        if type(data) is dict and len(data) == 5 and type(data.get("num_gpus")) is int \
                and type(data.get("num_cpus")) is int and "name" in data and "gpu_type" in data \
                and "memory_gib" in data:
            return cls(data["name"], data["gpu_type"], data["num_gpus"], data["num_cpus"], data["memory_gib"])
        require_keys("Node", data, ("name", "gpu_type", "num_gpus", "num_cpus", "memory_gib"),
                     ("labels", "state", "topology"))
        return cls(**json_fields(cls, data))


@dataclass(frozen=True)
class Cluster:
    """A set of nodes with the bandwidths the performance models need.

    ``gpu_types`` holds every GPU type a node refers to; node names are unique.
    """

    name: str
    nodes: tuple[Node, ...]
    gpu_types: tuple[GPUType, ...]
    intra_node_gbps: float
    inter_node_gbps: float
    pcie_gbps: float
    _types: dict[str, GPUType] = field(init=False, repr=False, compare=False)
    _nodes: dict[str, Node] = field(init=False, repr=False, compare=False)
    #: values derived from the (immutable) cluster, computed once (e.g. GPU pools, ``core.pool``)
    memo: dict[Any, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        require_name("Cluster", self.name)
        owner = f"cluster {self.name!r}"
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "gpu_types", tuple(self.gpu_types))
        for f in ("intra_node_gbps", "inter_node_gbps", "pcie_gbps"):
            require_number(owner, f, getattr(self, f), 0.0, strict=True)
        if not self.nodes:
            raise ValidationError(f"{owner}: needs at least one node")
        types: dict[str, GPUType] = {}
        for g in self.gpu_types:
            if not isinstance(g, GPUType):
                raise ValidationError(f"{owner}: gpu_types must hold GPUType objects, got {g!r}")
            if g.name in types:
                raise ValidationError(f"{owner}: GPU type {g.name!r} listed twice")
            types[g.name] = g
        nodes: dict[str, Node] = {}
        for n in self.nodes:
            if not isinstance(n, Node):
                raise ValidationError(f"{owner}: nodes must hold Node objects, got {n!r}")
            if n.name in nodes:
                raise ValidationError(f"{owner}: node name {n.name!r} used twice")
            if n.gpu_type not in types:
                raise ValidationError(
                    f"{owner}: node {n.name!r} has GPU type {n.gpu_type!r}, which is not among the "
                    f"cluster's gpu_types ({', '.join(types) or 'none'})")
            nodes[n.name] = n
        object.__setattr__(self, "_types", types)
        object.__setattr__(self, "_nodes", nodes)
        object.__setattr__(self, "memo", {})

    # -- look-ups -------------------------------------------------------------------------------
    def gpu_type(self, name: str) -> GPUType:
        try:
            return self._types[name]
        except KeyError:
            raise UnknownNameError("GPU type", name, list(self._types)) from None

    def node(self, name: str) -> Node:
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNameError("node", name, list(self._nodes)) from None

    def intra_bandwidth(self, gpu_type: str) -> float:
        """GB/s between two GPUs of ``gpu_type`` in the same node."""
        g = self.gpu_type(gpu_type)
        return g.intra_node_gbps if g.intra_node_gbps is not None else self.intra_node_gbps

    def intra_link(self, gpu_type: str) -> str:
        """Kind of the link between two GPUs of ``gpu_type`` in one node: the type's ``intra_link``, else
        ``"nvlink"`` when its intra-node bandwidth reaches :data:`NVLINK_MIN_GBPS`, else ``"pcie"``."""
        g = self.gpu_type(gpu_type)
        if g.intra_link is not None:
            return g.intra_link
        return "nvlink" if self.intra_bandwidth(gpu_type) >= NVLINK_MIN_GBPS else "pcie"

    def inter_bandwidth(self, gpu_type: str) -> float:
        """GB/s of a node of ``gpu_type`` to the network: the type's ``inter_node_gbps``, else the
        cluster's."""
        g = self.gpu_type(gpu_type)
        return g.inter_node_gbps if g.inter_node_gbps is not None else self.inter_node_gbps

    @property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    def nodes_of_type(self, gpu_type: str) -> tuple[Node, ...]:
        """The nodes of ``gpu_type`` in cluster order (found once per type: rounds ask per row)."""
        key = ("nodes_of_type", gpu_type)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = tuple(n for n in self.nodes if n.gpu_type == gpu_type)
        return found

    @property
    def max_gpus_per_node(self) -> int:
        return max(n.num_gpus for n in self.nodes)

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "intra_node_gbps": self.intra_node_gbps,
                "inter_node_gbps": self.inter_node_gbps, "pcie_gbps": self.pcie_gbps,
                "gpu_types": [g.to_dict() for g in self.gpu_types],
                "nodes": [n.to_dict() for n in self.nodes]}

    @classmethod
    def from_dict(cls, data: Any) -> "Cluster":
        require_keys("Cluster", data, ("name", "nodes", "gpu_types", "intra_node_gbps",
                                       "inter_node_gbps", "pcie_gbps"))
        if not isinstance(data["nodes"], list) or not isinstance(data["gpu_types"], list):
            raise ValidationError("Cluster: 'nodes' and 'gpu_types' must be JSON arrays")
        return cls(name=data["name"],
                   nodes=tuple(Node.from_dict(n) for n in data["nodes"]),
                   gpu_types=tuple(_gpu_type_at(i, g) for i, g in enumerate(data["gpu_types"])),
                   intra_node_gbps=data["intra_node_gbps"], inter_node_gbps=data["inter_node_gbps"],
                   pcie_gbps=data["pcie_gbps"])
