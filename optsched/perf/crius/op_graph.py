"""Operator graphs: a training job as Crius's estimator sees it (Crius Sec. 4.2 and 5.1).

An :class:`OperatorGraph` is a networkx ``DiGraph`` of operators (nodes) and the tensors between them
(edges), with the model's global batch. Each operator carries, **per sample of the batch**:

* ``flops``: forward FLOPs (a training step costs three times that: forward + backward);
* ``params``: parameters it owns (each costs 16 bytes in mixed-precision Adam training: fp16 weights
  and gradients, fp32 master weights and two moments);
* ``act_bytes``: activation bytes kept for the backward pass that tensor parallelism shards, and
  ``act_replicated_bytes`` the ones every tensor-parallel rank keeps whole (layer-norm inputs,
  residuals);
* the communication operators tensor parallelism adds: ``tp_allreduces`` all-reduces of
  ``tp_allreduce_bytes`` each (Megatron-style layers: two in the forward, two in the backward pass)
  and ``tp_alltoalls`` all-to-alls of ``tp_alltoall_bytes`` each (expert parallelism of MoE layers);
* ``kernels``: kernel launches of one forward + backward pass (a fixed cost per micro-batch);
* ``max_tp``: the largest tensor-parallel degree it splits into (attention heads, experts), None for
  no limit; ``shardable``: the fraction of its FLOPs tensor parallelism splits (the rest is repeated
  on every rank).

An edge ``u -> v`` carries ``bytes`` per sample (the activation forwarded, and its gradient sent
back). The operators' **order** is a topological order of the graph (networkx's lexicographical
topological sort keyed by the order the operators were added, so a graph whose operators are listed in
a topological order keeps that order); the **boundary** after position ``i`` is crossed by every edge
from an operator at position <= i to one after it, and its bytes are their sum. Stage cuts
(:mod:`optsched.perf.crius.stages`) are chosen among these boundaries.

**Validation** (each error names the graph and the item): at least one operator; unique, non-empty
operator names; every number finite and >= 0 (``flops`` > 0 for at least one operator); counts and
``max_tp`` integers (``max_tp`` >= 1); ``shardable`` in [0, 1]; every edge between known operators,
no self-loop; no cycle (the error names one); the graph weakly connected (the error names an
operator not connected to the first); the global batch an integer >= 1.

JSON (:meth:`OperatorGraph.to_dict` / :meth:`OperatorGraph.from_dict`)::

    {"name": "my-model", "global_batch": 256,
     "operators": [{"name": "embed", "flops": 1.0e9, "params": 3.1e7, "act_bytes": 2.0e6, ...}, ...],
     "edges": [{"src": "embed", "dst": "layer0", "bytes": 2.0e6}, ...]}

Operator fields other than ``name`` default to 0 (``max_tp`` to None, ``shardable`` to 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from optsched.core.checks import json_fields, json_int, require_int, require_keys, require_name, require_number
from optsched.core.errors import ValidationError

if TYPE_CHECKING:
    import networkx as nx


def _nx() -> Any:
    """networkx, imported on first use (0.16 s: solving a round of another kind, or reading a Crius round
    of catalogue models, does not need it)."""
    import networkx

    return networkx


#: bytes of training state per parameter in mixed-precision Adam (fp16 weight and gradient, fp32 master
#: weight and two moments)
STATE_BYTES_PER_PARAM = 16.0
#: bytes of one gradient element exchanged by data parallelism (fp16)
GRAD_BYTES_PER_PARAM = 2.0
#: a training step costs this many forward passes (forward + backward)
TRAIN_FLOPS_FACTOR = 3.0

_NUMBER_FIELDS = ("flops", "params", "act_bytes", "act_replicated_bytes", "tp_allreduce_bytes", "tp_alltoall_bytes")
_COUNT_FIELDS = ("tp_allreduces", "tp_alltoalls", "kernels")
OPERATOR_FIELDS = (*_NUMBER_FIELDS, *_COUNT_FIELDS, "max_tp", "shardable")


@dataclass(frozen=True)
class Operator:
    """One operator of a graph (module docstring for the fields)."""

    name: str
    flops: float = 0.0
    params: float = 0.0
    act_bytes: float = 0.0
    act_replicated_bytes: float = 0.0
    tp_allreduce_bytes: float = 0.0
    tp_alltoall_bytes: float = 0.0
    tp_allreduces: int = 0
    tp_alltoalls: int = 0
    kernels: int = 0
    max_tp: int | None = None
    shardable: float = 1.0

    def check(self, owner: str) -> None:
        """``ValidationError`` naming ``owner`` and this operator when a field breaks its rule."""
        require_name(f"{owner}: operator", self.name)
        who = f"{owner}: operator {self.name!r}"
        for f in _NUMBER_FIELDS:
            require_number(who, f, getattr(self, f), 0.0)
        for f in _COUNT_FIELDS:
            require_int(who, f, getattr(self, f), 0)
        if self.max_tp is not None:
            require_int(who, "max_tp", self.max_tp, 1)
        require_number(who, "shardable", self.shardable, 0.0)
        if self.shardable > 1.0:
            raise ValidationError(f"{who}: shardable is a fraction of the FLOPs, <= 1, got {self.shardable}")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        for f in OPERATOR_FIELDS:
            v = getattr(self, f)
            if v != getattr(Operator, f):
                d[f] = v
        return d

    @classmethod
    def from_dict(cls, data: Any, owner: str) -> "Operator":
        require_keys(f"{owner}: operator", data, ("name",), OPERATOR_FIELDS)
        return cls(**json_fields(cls, data))


@dataclass(frozen=True, eq=False)
class OperatorGraph:
    """A model as operators and tensors (module docstring). Build it with :meth:`of` (operators and
    edges) or :meth:`from_networkx`; ``graph`` is the networkx ``DiGraph`` (node attribute ``op``: the
    :class:`Operator`, edge attribute ``bytes``)."""

    name: str
    global_batch: int
    graph: nx.DiGraph = field(repr=False)

    def __post_init__(self) -> None:
        require_name("operator graph", self.name)
        owner = f"operator graph {self.name!r}"
        require_int(owner, "global_batch", self.global_batch, 1)
        g = self.graph
        if not isinstance(g, _nx().DiGraph):
            raise ValidationError(f"{owner}: graph must be a networkx DiGraph, got {type(g).__name__}")
        if g.number_of_nodes() == 0:
            raise ValidationError(f"{owner}: needs at least one operator")
        for name, data in g.nodes(data=True):
            op = data.get("op")
            if not isinstance(op, Operator) or op.name != name:
                raise ValidationError(f"{owner}: node {name!r} must carry its Operator (attribute 'op' with that name)")
            op.check(owner)
        for u, v, data in g.edges(data=True):
            if u == v:
                raise ValidationError(f"{owner}: edge {u!r} -> {v!r} is a self-loop")
            require_number(f"{owner}: edge {u!r} -> {v!r}", "bytes", data.get("bytes"), 0.0)
        if not _nx().is_directed_acyclic_graph(g):
            cycle = " -> ".join(str(u) for u, _ in _nx().find_cycle(g))
            raise ValidationError(f"{owner}: the operators form a cycle ({cycle}); an operator graph is acyclic")
        if not _nx().is_weakly_connected(g):
            first = next(iter(g.nodes))
            reach = _nx().node_connected_component(g.to_undirected(as_view=True), first)
            lost = next(n for n in g.nodes if n not in reach)
            raise ValidationError(f"{owner}: operator {lost!r} is not connected to {first!r}; an operator graph is "
                                  "one connected model")
        if not any(g.nodes[n]["op"].flops > 0 for n in g.nodes):
            raise ValidationError(f"{owner}: no operator has FLOPs > 0")

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def of(cls, name: str, global_batch: int, operators: Sequence[Operator],
           edges: Sequence[tuple[str, str, float]]) -> "OperatorGraph":
        """A graph of ``operators`` (in this order, which should be topological) and ``(src, dst,
        bytes per sample)`` edges."""
        owner = f"operator graph {name!r}"
        g = _nx().DiGraph()
        for op in operators:
            if not isinstance(op, Operator):
                raise ValidationError(f"{owner}: operators must be Operator objects, got {op!r}")
            require_name(f"{owner}: operator", op.name)  # a string before it is looked up (a list is unhashable)
            if op.name in g:
                raise ValidationError(f"{owner}: operator name {op.name!r} used twice")
            g.add_node(op.name, op=op)
        for e in edges:
            if not isinstance(e, (tuple, list)) or len(e) != 3:
                raise ValidationError(f"{owner}: an edge is (src, dst, bytes), got {e!r}")
            u, v, b = e
            for end in (u, v):
                if not isinstance(end, str) or end not in g:
                    raise ValidationError(f"{owner}: edge {u!r} -> {v!r} names unknown operator {end!r}")
            if g.has_edge(u, v):
                raise ValidationError(f"{owner}: edge {u!r} -> {v!r} listed twice")
            g.add_edge(u, v, bytes=b)
        return cls(name, global_batch, g)

    @classmethod
    def from_networkx(cls, name: str, global_batch: int, graph: nx.DiGraph) -> "OperatorGraph":
        """A graph from a networkx ``DiGraph`` whose nodes carry the :class:`Operator` fields as
        attributes (or an ``op`` attribute) and whose edges carry ``bytes``."""
        if not isinstance(graph, _nx().DiGraph):
            raise ValidationError(f"operator graph {name!r}: expected a networkx DiGraph, got {type(graph).__name__}")
        ops = []
        for n, data in graph.nodes(data=True):
            if isinstance(data.get("op"), Operator):
                ops.append(data["op"])
            else:
                ops.append(Operator.from_dict({"name": n, **{k: v for k, v in data.items() if k != "name"}},
                                              f"operator graph {name!r}"))
        return cls.of(name, global_batch, ops, [(u, v, d.get("bytes")) for u, v, d in graph.edges(data=True)])

    # -- derived arrays (in topological order) -------------------------------------------------
    @cached_property
    def order(self) -> tuple[str, ...]:
        """Operator names in topological order (ties: the order they were added)."""
        position = {n: i for i, n in enumerate(self.graph.nodes)}
        return tuple(_nx().lexicographical_topological_sort(self.graph, key=position.__getitem__))

    @property
    def operators(self) -> tuple[Operator, ...]:
        return tuple(self.graph.nodes[n]["op"] for n in self.order)

    def __len__(self) -> int:
        return self.graph.number_of_nodes()

    def column(self, field_name: str) -> np.ndarray:
        """The operators' ``field_name`` as a float array in topological order (``max_tp`` None -> inf)."""
        return self._columns[field_name]

    @cached_property
    def _columns(self) -> Mapping[str, np.ndarray]:
        ops = self.operators
        cols = {f: np.array([float(getattr(o, f)) for o in ops]) for f in (*_NUMBER_FIELDS, *_COUNT_FIELDS, "shardable")}
        cols["max_tp"] = np.array([np.inf if o.max_tp is None else float(o.max_tp) for o in ops])
        for a in cols.values():
            a.flags.writeable = False
        return cols

    @cached_property
    def input_bytes(self) -> np.ndarray:
        """Bytes per sample flowing into each operator (sum of its in-edges), in topological order: what
        gradient checkpointing keeps of an operator."""
        pos = {n: i for i, n in enumerate(self.order)}
        out = np.zeros(len(self.order))
        for _, v, d in self.graph.edges(data=True):
            out[pos[v]] += d["bytes"]
        out.flags.writeable = False
        return out

    @cached_property
    def boundary_bytes(self) -> np.ndarray:
        """Bytes per sample crossing the boundary after each position ``0 .. n-2`` (module docstring)."""
        pos = {n: i for i, n in enumerate(self.order)}
        delta = np.zeros(len(self.order) + 1)
        for u, v, d in self.graph.edges(data=True):
            delta[pos[u]] += d["bytes"]
            delta[pos[v]] -= d["bytes"]
        out = np.cumsum(delta)[:-2].copy() if len(self.order) > 1 else np.zeros(0)
        out.flags.writeable = False
        return out

    @property
    def total_params(self) -> float:
        return float(self.column("params").sum())

    @property
    def total_flops(self) -> float:
        """Forward FLOPs per sample of the whole model."""
        return float(self.column("flops").sum())

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "global_batch": self.global_batch,
                "operators": [o.to_dict() for o in self.operators],
                "edges": [{"src": u, "dst": v, "bytes": d["bytes"]} for u, v, d in self.graph.edges(data=True)]}

    @classmethod
    def from_dict(cls, data: Any, name: str | None = None) -> "OperatorGraph":
        """Parse the JSON form (module docstring); ``name`` overrides (or supplies) the graph's name."""
        if not isinstance(data, dict):
            raise ValidationError(f"operator graph {name!r}: expected a JSON object, got {type(data).__name__}")
        owner = f"operator graph {name or data.get('name')!r}"
        require_keys(owner, data, ("global_batch", "operators", "edges"), ("name",))
        gname = name or data.get("name")
        if gname is None:
            raise ValidationError(f"{owner}: missing field(s) name")
        if not isinstance(data["operators"], list) or not isinstance(data["edges"], list):
            raise ValidationError(f"{owner}: operators and edges must be JSON arrays")
        ops = [Operator.from_dict(o, owner) for o in data["operators"]]
        edges = []
        for e in data["edges"]:
            require_keys(f"{owner}: edge", e, ("src", "dst", "bytes"))
            edges.append((e["src"], e["dst"], e["bytes"]))
        return cls.of(gname, json_int(data["global_batch"]), ops, edges)


__all__ = ["GRAD_BYTES_PER_PARAM", "OPERATOR_FIELDS", "Operator", "OperatorGraph", "STATE_BYTES_PER_PARAM",
           "TRAIN_FLOPS_FACTOR"]
