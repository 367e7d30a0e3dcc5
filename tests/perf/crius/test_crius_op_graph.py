"""Operator graphs (optsched.perf.crius.op_graph) and the Table 2 models generated from their shapes."""

from __future__ import annotations

import json
import re

import networkx as nx
import pytest

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.perf.crius.models import (FAMILY_BATCHES, MODEL_SHAPES, crius_model, crius_model_names,
                                        parse_model_name)
from optsched.perf.crius.op_graph import Operator, OperatorGraph


def _diamond() -> OperatorGraph:
    ops = [Operator("a", flops=1.0), Operator("b", flops=2.0), Operator("c", flops=3.0), Operator("d", flops=4.0)]
    return OperatorGraph.of("diamond", 8, ops, [("a", "b", 10.0), ("a", "c", 5.0), ("b", "d", 1.0), ("c", "d", 2.0),
                                                ("a", "d", 100.0)])


def test_boundary_bytes_count_every_crossing_edge() -> None:
    g = _diamond()
    assert g.order == ("a", "b", "c", "d")
    # after a: a->b, a->c, a->d; after b: a->c, b->d, a->d; after c: b->d, c->d, a->d
    assert list(g.boundary_bytes) == [115.0, 106.0, 103.0]


def test_topological_order_ignores_listing_order() -> None:
    ops = [Operator("late", flops=1.0), Operator("early", flops=1.0)]
    g = OperatorGraph.of("g", 1, ops, [("early", "late", 1.0)])
    assert g.order == ("early", "late")


def test_json_and_networkx_round_trips() -> None:
    g = _diamond()
    back = OperatorGraph.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back.to_dict() == g.to_dict()
    nxg = nx.DiGraph()
    for op in g.operators:
        nxg.add_node(op.name, **{k: v for k, v in op.to_dict().items() if k != "name"})
    for u, v, d in g.graph.edges(data=True):
        nxg.add_edge(u, v, bytes=d["bytes"])
    assert OperatorGraph.from_networkx("diamond", 8, nxg).to_dict() == g.to_dict()


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["edges"].append({"src": "d", "dst": "a", "bytes": 1.0}), "cycle"),
    (lambda d: d["edges"].append({"src": "a", "dst": "zz", "bytes": 1.0}), "unknown operator 'zz'"),
    (lambda d: d["edges"].append({"src": "b", "dst": "b", "bytes": 1.0}), "self-loop"),
    (lambda d: d["operators"][1].update(flops=-1.0), "operator 'b'.*flops"),
    (lambda d: d["operators"][1].update(flops="many"), "operator 'b'.*flops"),
    (lambda d: d["operators"][2].update(shardable=1.5), "operator 'c'.*shardable"),
    (lambda d: d["operators"][2].update(max_tp=0), "operator 'c'.*max_tp"),
    (lambda d: d["operators"][2].update(colour="red"), "unknown field.*colour"),
    (lambda d: d["operators"].append({"name": "lonely", "flops": 1.0}), "'lonely' is not connected"),
    (lambda d: d["operators"].append(dict(d["operators"][0])), "'a' used twice"),
    (lambda d: d.update(global_batch=0), "global_batch"),
    (lambda d: d["edges"][0].update(bytes=-3), "edge 'a' -> 'b'.*bytes"),
    (lambda d: d.pop("operators"), "missing field.*operators"),
    (lambda d: [o.update(flops=0.0) for o in d["operators"]], "no operator has FLOPs"),
])
def test_malformed_graphs_are_named(mutate, match) -> None:
    data = _diamond().to_dict()
    mutate(data)
    with pytest.raises(ValidationError, match=match):
        OperatorGraph.from_dict(data)


def test_empty_graph() -> None:
    with pytest.raises(ValidationError, match="at least one operator"):
        OperatorGraph.of("e", 1, [], [])


@pytest.mark.parametrize("name", list(MODEL_SHAPES))
def test_table2_models_match_their_labels(name: str) -> None:
    g = crius_model(name)
    shape = MODEL_SHAPES[name]
    assert g.total_params == pytest.approx(shape.label_params, rel=0.07)
    assert g.global_batch == FAMILY_BATCHES[shape.family][0]
    assert len(g.boundary_bytes) == len(g) - 1 and (g.boundary_bytes > 0).all()


def test_transformer_layer_follows_megatron() -> None:
    g = crius_model("bert-1.3b@512")
    layer = g.graph.nodes["layer00"]["op"]
    s, h, a = 512, 2048, 32
    assert layer.flops == 24 * s * h * h + 4 * s * s * h
    assert layer.act_bytes + layer.act_replicated_bytes == s * h * (34 + 5 * a * s / h)
    assert g.global_batch == 512 and len(g) == 26


def test_model_names() -> None:
    assert parse_model_name("moe-27b@1024") == ("moe-27b", 1024)
    assert parse_model_name("bert-2.6b") == ("bert-2.6b", 128)
    assert len(crius_model_names(with_batches=True)) == 3 * len(MODEL_SHAPES)
    with pytest.raises(UnknownNameError, match="Crius model 'gpt-9b'"):
        crius_model("gpt-9b")
    with pytest.raises(ValidationError, match="batch '100' is not one of the bert batches"):
        crius_model("bert-1.3b@100")


@pytest.mark.parametrize("bad", [["a"], 5, {"x": 1}])
def test_operator_names_that_are_not_strings_are_named(bad) -> None:
    """A list used to raise TypeError (unhashable, looked up before any check), an int a message about
    something else: both get the name rule, in an operator and at an edge's end."""
    base = {"global_batch": 8, "operators": [{"name": "a", "flops": 1e9}, {"name": "b", "flops": 1e9}],
            "edges": [{"src": "a", "dst": "b", "bytes": 1.0}]}
    with pytest.raises(ValidationError, match=r"operator: name must be a non-empty string, got " + re.escape(repr(bad))):
        OperatorGraph.from_dict({**base, "operators": [{"name": bad, "flops": 1e9}, {"name": "b", "flops": 1e9}]},
                                name="m")
    with pytest.raises(ValidationError, match="names unknown operator"):
        OperatorGraph.from_dict({**base, "edges": [{"src": bad, "dst": "b", "bytes": 1.0}]}, name="m")
