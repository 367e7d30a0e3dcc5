"""JSON Schemas (draft 2020-12) of optsched's file formats, shipped as package data.

* ``round``: a scheduling round, ``optsched.round/1`` (:meth:`optsched.core.round.RoundProblem.from_dict`);
* ``decision``: the answer to a round, ``optsched.decision/1`` (:meth:`optsched.core.decision.Decision.to_dict`);
* ``perf-params``: a fitted performance model, ``optsched.perf-params/1`` (written by ``optsched fit``,
  read by ``--params`` and a round's ``perf_params``; :meth:`optsched.perf.performance_model.PerformanceModel.to_dict`).
  The round schema holds a copy of it as ``$defs/perfParams``.

The schemas document the formats and let other tools validate files; optsched itself validates with
its own parsers, which also check the rules a schema cannot state (unique job names, node
capacities, ...; see each schema's ``description``). ``docs/rounds.md`` describes both formats.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from optsched.core.errors import UnknownNameError

#: names accepted by :func:`load_schema`
SCHEMA_NAMES: tuple[str, ...] = ("decision", "round", "perf-params")


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``name`` (one of :data:`SCHEMA_NAMES`) as a fresh dict (callers may modify it).
    Raises ``UnknownNameError`` for another name."""
    if name not in SCHEMA_NAMES:
        raise UnknownNameError("schema", str(name), SCHEMA_NAMES)
    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


__all__ = ["SCHEMA_NAMES", "load_schema"]
