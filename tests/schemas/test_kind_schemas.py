"""The JSON Schemas describe the round and decision files of every registered kind
(optsched/schemas/round.schema.json and decision.schema.json: one ``if``/``then`` branch per kind,
``unevaluatedProperties: false``): generated rounds and the decisions of every method validate, a
round or decision with a field of no kind or of another kind, or with a wrongly typed field, is
rejected by the schema and by the parser alike, and the schema's field lists are the Python classes'
(``FIELD_KEYS``, the payloads' ``KEYS``, the nested value objects)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from optsched.core.decision import _TOP_LEVEL, Decision
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind, round_kinds
from optsched.core.round import _COMMON_OPTIONAL, _COMMON_REQUIRED, RoundProblem
from optsched.perf.crius.op_graph import OPERATOR_FIELDS
from optsched.schemas import load_schema

from kind_decisions import KIND_METHODS, decided, generated
from schema_check import structural_errors

KINDS = round_kinds()


def _branch(schema: dict[str, Any], kind: str) -> dict[str, Any]:
    """The ``then`` of the ``allOf`` branch whose ``if`` names ``kind``."""
    found = [b["then"] for b in schema["allOf"]
             if b["if"]["properties"]["kind"].get("const") == kind or kind in b["if"]["properties"]["kind"].get("enum", ())
             and "else" not in b]
    assert len(found) == 1, kind
    return found[0]


def _properties(schema: dict[str, Any], sub: dict[str, Any]) -> dict[str, Any]:
    """Properties ``sub`` declares, also through its ``allOf`` and ``$ref`` (the shared Lyra fields)."""
    out = dict(sub.get("properties", {}))
    for s in sub.get("allOf", []):
        out.update(_properties(schema, schema["$defs"][s["$ref"].rsplit("/", 1)[1]] if "$ref" in s else s))
    return out


def _validators() -> dict[str, Any] | None:
    try:
        import jsonschema
    except ImportError:  # pragma: no cover - jsonschema is a test dependency
        return None
    return {n: jsonschema.Draft202012Validator(load_schema(n)) for n in ("round", "decision")}


VALIDATORS = _validators()


def _valid(name: str, data: Any) -> bool:
    """Whether ``data`` conforms to schema ``name``; the structural checker and jsonschema must agree."""
    ok = structural_errors(name, data) == []
    if VALIDATORS is not None:
        assert VALIDATORS[name].is_valid(data) == ok, (name, structural_errors(name, data))
    return ok


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value.to_dict()))


# -- the field lists agree with the Python classes ----------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_schema_field_lists_are_the_classes(kind: str) -> None:
    r, d = load_schema("round"), load_schema("decision")
    assert set(r["properties"]) == {*_COMMON_REQUIRED, *_COMMON_OPTIONAL}
    rk = round_kind(kind)
    assert set(_properties(r, _branch(r, kind))) == set(rk.problem.FIELD_KEYS)
    required, optional = rk.payload.KEYS
    branch = _branch(d, kind)
    assert set(_properties(d, branch)) == {*required, *optional}
    assert set(required) <= set(branch["required"])
    assert set(d["properties"]) == set(_TOP_LEVEL)


def test_nested_definitions_are_the_value_objects() -> None:
    from optsched.rounds.experts.problem import ExpertSpec
    from optsched.rounds.moe_comm.problem import AllReduce, StreamOp
    r = load_schema("round")
    defs = r["$defs"]
    assert set(defs["operator"]["properties"]) == {"name", *OPERATOR_FIELDS}
    assert set(defs["expert"]["properties"]) == set(ExpertSpec(1.0).to_dict())
    assert set(defs["computeOp"]["properties"]) == set(StreamOp("a", "compute", ms=1.0).to_dict())
    assert set(defs["allToAllOp"]["properties"]) == set(StreamOp("a", "all-to-all", mb=1.0).to_dict())
    assert set(defs["allReduce"]["properties"]) == set(AllReduce("g", 1.0, "a").to_dict())
    assert set(defs["workerTarget"]["properties"]) == {"workers", "pool"}


# -- generated rounds and every method's decision validate --------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_generated_rounds_validate(kind: str) -> None:
    for seed in (0, 1):
        data = _json(generated(kind, seed))
        assert structural_errors("round", data) == []
        assert _valid("round", data)
        assert RoundProblem.from_dict(data).to_dict() == data


@pytest.mark.parametrize("kind, method", KIND_METHODS)
def test_decisions_of_every_method_validate(kind: str, method: str) -> None:
    data = _json(decided(kind, method, 0))
    assert structural_errors("decision", data) == []
    assert _valid("decision", data)
    assert Decision.from_dict(data).to_dict() == data


# -- what the schema and the parser both reject --------------------------------------------------------
#: per kind, one of its own fields with a value of the wrong type
WRONG_TYPE: dict[str, tuple[str, Any]] = {
    "rubick": ("reconfig_penalty", "high"), "crius": ("search_depth", 1.5), "lyra-reclaim": ("reclaim", "2"),
    "lyra-allocate": ("inference_factor", "half"), "placement": ("workers", []), "lyra": ("inference_nodes", "n0"),
    "experts": ("slots", 2.5), "moe-comm": ("partition_mb", "30"),
    "training-packing": ("offload", "yes")}
#: per kind, a nested field with a value of the wrong type (path, value)
WRONG_NESTED: dict[str, tuple[tuple[Any, ...], Any]] = {
    **{k: (("jobs", 0, "requested_gpus"), "8") for k in ("rubick", "crius", "lyra-reclaim", "lyra-allocate",
                                                         "placement", "lyra")},
    "experts": (("experts", 0, "load"), "heavy"), "moe-comm": (("stream", 0, "ms"), "1"),
    "training-packing": (("candidates", 0, "ffn_ms"), "1")}


def _own_field_of_another_kind(kind: str) -> str:
    mine = set(round_kind(kind).problem.FIELD_KEYS)
    return next(f for k in KINDS for f in round_kind(k).problem.FIELD_KEYS if f not in mine)


def _rejected(data: dict[str, Any]) -> None:
    assert not _valid("round", data)
    with pytest.raises(ValidationError):
        RoundProblem.from_dict(data)


def test_every_kind_has_its_wrongly_typed_fields() -> None:
    assert set(WRONG_TYPE) == set(WRONG_NESTED) == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_rounds_with_unknown_or_wrongly_typed_fields_are_rejected(kind: str) -> None:
    good = _json(generated(kind, 0))
    _rejected({**good, "colour": "red"})
    _rejected({**good, _own_field_of_another_kind(kind): 1})
    field, value = WRONG_TYPE[kind]
    assert field in round_kind(kind).problem.FIELD_KEYS
    _rejected({**good, field: value})
    path, value = WRONG_NESTED[kind]
    bad = json.loads(json.dumps(good))
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    _rejected(bad)


@pytest.mark.parametrize("kind", KINDS)
def test_decisions_with_unknown_fields_are_rejected(kind: str) -> None:
    good = _json(decided(kind, "exact", 0))
    mine = {*round_kind(kind).payload.KEYS[0], *round_kind(kind).payload.KEYS[1]}
    other = next(f for k in KINDS for f in (*round_kind(k).payload.KEYS[0], *round_kind(k).payload.KEYS[1])
                 if f not in mine)
    for bad in ({**good, "colour": "red"}, {**good, other: good.get(other, [])}, {**good, "objective": "high"}):
        assert not _valid("decision", bad)
        with pytest.raises(ValidationError):
            Decision.from_dict(bad)
