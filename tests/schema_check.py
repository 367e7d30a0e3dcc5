"""A small JSON Schema (draft 2020-12) checker for the keywords optsched's schemas use, so that the
schema tests run without jsonschema (``tests/core/test_round.py``, ``tests/schemas/``); with jsonschema
installed they also validate with it. :data:`KEYWORDS` lists what it implements; a test asserts that
every keyword the schemas use is among them."""

from __future__ import annotations

import re
from typing import Any, Callable

from optsched.schemas import load_schema

#: keywords :func:`check` implements; every keyword the schemas use must be here
KEYWORDS = {"$schema", "$id", "title", "description", "default", "$defs", "type", "const", "enum", "required",
            "properties", "additionalProperties", "items", "$ref", "oneOf", "allOf", "minimum", "exclusiveMinimum",
            "maximum", "minItems", "maxItems", "minLength", "maxProperties", "propertyNames", "pattern", "if", "then",
            "else", "unevaluatedProperties"}

_TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict), "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    # draft 2020-12: an integer is any number with a zero fractional part (4.0 is one; JSON has no integer type)
    "integer": lambda v: not isinstance(v, bool) and (isinstance(v, int) or isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)}


def used_keywords(schema: Any, out: set[str]) -> set[str]:
    """Keywords used anywhere in ``schema`` (property names under ``properties``/``$defs`` excluded)."""
    if isinstance(schema, dict):
        for k, v in schema.items():
            out.add(k)
            if k in ("properties", "$defs"):
                for sub in v.values():
                    used_keywords(sub, out)
            elif k not in ("enum", "const", "default", "required", "type"):
                used_keywords(v, out)
    elif isinstance(schema, list):
        for s in schema:
            used_keywords(s, out)
    return out


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema["$ref"]
    assert ref.startswith("#/$defs/"), ref
    return root["$defs"][ref[len("#/$defs/"):]]


def _evaluated(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any]) -> set[str]:
    """Properties of ``value`` that ``schema`` evaluates where it succeeds (``properties``,
    ``additionalProperties``, and the subschemas of ``$ref``, ``allOf``, ``oneOf``, ``if``/``then``/``else``
    that apply): what ``unevaluatedProperties`` leaves alone."""
    out = {k for k in value if k in schema.get("properties", {})}
    if "additionalProperties" in schema:
        out |= set(value)
    subs: list[dict[str, Any]] = []
    if "$ref" in schema:
        subs.append(_resolve(schema, root))
    subs += [s for s in schema.get("allOf", []) + schema.get("oneOf", []) if not check(value, s, root)]
    if "if" in schema:
        passed = not check(value, schema["if"], root)
        if passed:
            subs.append(schema["if"])
        branch = schema.get("then" if passed else "else")
        if branch is not None:
            subs.append(branch)
    for s in subs:
        out |= _evaluated(value, s, root)
    return out


def check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str = "$") -> list[str]:
    """Errors of ``value`` against ``schema`` (``root`` holds the ``$defs``), for the keywords in
    :data:`KEYWORDS`; empty when it conforms."""
    errors: list[str] = []
    if "$ref" in schema:
        errors += check(value, _resolve(schema, root), root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return errors + [f"{path}: {value!r} is not of type {types}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} != {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if _TYPES["number"](value):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errors.append(f"{path}: {value} <= {schema['exclusiveMinimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: {value!r} too short")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                errors += check(v, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            errors.append(f"{path}: more than {schema['maxProperties']} properties")
        for k in schema.get("required", []):
            if k not in value:
                errors.append(f"{path}: missing required {k!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, v in value.items():
            if "propertyNames" in schema:
                errors += check(k, schema["propertyNames"], root, f"{path}.<key {k!r}>")
            if k in props:
                errors += check(v, props[k], root, f"{path}.{k}")
            elif extra is False:
                errors.append(f"{path}: unknown property {k!r}")
            elif isinstance(extra, dict):
                errors += check(v, extra, root, f"{path}.{k}")
    for i, sub in enumerate(schema.get("allOf", [])):
        errors += check(value, sub, root, path)
    if "oneOf" in schema:
        passing = sum(not check(value, s, root, path) for s in schema["oneOf"])
        if passing != 1:
            errors.append(f"{path}: {passing} branches of oneOf match, need exactly 1")
    if "if" in schema:
        branch = "then" if not check(value, schema["if"], root, path) else "else"
        if branch in schema:
            errors += check(value, schema[branch], root, path)
    if schema.get("unevaluatedProperties") is False and isinstance(value, dict):
        seen = _evaluated(value, schema, root)
        errors += [f"{path}: unknown property {k!r}" for k in value if k not in seen]
    return errors


def structural_errors(name: str, value: Any) -> list[str]:
    """Errors of ``value`` against the schema ``name`` of :mod:`optsched.schemas`."""
    schema = load_schema(name)
    return check(value, schema, schema)


__all__ = ["KEYWORDS", "check", "structural_errors", "used_keywords"]
