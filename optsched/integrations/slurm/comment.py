"""What a job states that Slurm cannot, in its ``--comment``: a JSON object (``docs/integration.md``, "Slurm").

``sbatch --hold --gres=gpu:4 --comment='{"model": "bert", "guaranteed": true}' job.sh``

Keys (each the round's job field of that name, ``docs/rounds.md``): ``model`` (catalogue name or model
object), ``guaranteed``, ``plan_fixed``, ``requested_plan``, ``total_iterations``, ``completed_iterations``,
``min_gpus``, ``max_gpus``, ``max_nodes``, ``min_cpus_per_gpu``, ``requested_cpus``, ``requested_mem_gib``,
``weight``, ``restart_seconds``, ``checkpoint_age_s``, ``priority``; and two that are not round fields but say
how the agent derives ``checkpoint_age_s`` of a running job from its time since its last start (the reader's
``checkpoint_age``): ``checkpoints`` (false: the job never checkpoints, a preemption loses all its work since its
last start) and ``checkpoint_interval_s`` (the job checkpoints every so many seconds of its run). Either conflicts
with a stated ``checkpoint_age_s``, and ``checkpoints: false`` with ``checkpoint_interval_s``. Keys starting
``optsched_`` are the agent's own (:data:`AGENT_WAIT_KEY`: why the job waits; :data:`AGENT_PLAN_KEY`: the plan it
was started or reconfigured with, what the job reads at start); the reader ignores them and the agent rewrites
only them, so the comment stays the user's JSON object plus the agent's keys. An empty comment states nothing; a comment
that is not a JSON object is refused naming the job (the job is left out of the round and stays held).
Every other error names the job and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from optsched.core.skip import JobError

AGENT_PREFIX = "optsched_"
AGENT_WAIT_KEY = "optsched_wait"
AGENT_PLAN_KEY = "optsched_plan"

_BOOL = ("guaranteed", "plan_fixed", "checkpoints")
_INT = ("total_iterations", "min_gpus", "max_gpus", "max_nodes", "min_cpus_per_gpu", "requested_cpus", "priority")
_NUMBER = ("completed_iterations", "requested_mem_gib", "weight", "restart_seconds", "checkpoint_age_s",
           "checkpoint_interval_s")
#: keys that say how the agent derives a round field and are not round fields themselves
DERIVING_KEYS = ("checkpoints", "checkpoint_interval_s")
KEYS = ("model", "requested_plan") + _BOOL + _INT + _NUMBER


@dataclass(frozen=True)
class JobFacts:
    """A job's comment, read: its ``model`` (None: a fixed gang), ``guaranteed`` (None: not stated), the other
    job fields it states, the plan the agent last handed it, and the comment's whole object."""

    model: str | Mapping[str, Any] | None = None
    guaranteed: bool | None = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    agent_plan: Mapping[str, Any] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


def _fail(job_id: str, key: str, rule: str) -> JobError:
    return JobError(job_id, f"job {job_id}: comment field {key!r} {rule}")


def parse_comment(job_id: str, comment: str) -> JobFacts:
    """The facts of one job's comment (module docstring); one :class:`JobError` naming the job and the field."""
    text = (comment or "").strip()
    if not text:
        return JobFacts()
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise JobError(job_id, f"job {job_id}: comment is not JSON ({exc.msg} at character {exc.pos}); "
                               "write a JSON object such as '{\"model\": \"bert\"}'") from None
    if not isinstance(obj, dict):
        raise JobError(job_id, f"job {job_id}: comment must be a JSON object, got {type(obj).__name__}")
    fields: dict[str, Any] = {}
    for key, value in obj.items():
        if key.startswith(AGENT_PREFIX):
            continue
        if key not in KEYS:
            raise _fail(job_id, key, f"is not a field the agent reads ({', '.join(KEYS)})")
        if key in _BOOL and not isinstance(value, bool):
            raise _fail(job_id, key, f"must be true or false, got {value!r}")
        if key in _INT and (isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value)):
            raise _fail(job_id, key, f"must be an integer, got {value!r}")
        if key in _NUMBER and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
            raise _fail(job_id, key, f"must be a number >= 0, got {value!r}")
        if key == "model" and not (isinstance(value, str) and value or isinstance(value, dict)):
            raise _fail(job_id, key, f"must be a catalogue model name or a model object, got {value!r}")
        if key == "requested_plan" and not isinstance(value, dict):
            raise _fail(job_id, key, f"must be a plan object such as {{\"dp\": 4}}, got {value!r}")
        fields[key] = int(value) if key in _INT else value
    if fields.get("checkpoint_interval_s") == 0:
        raise _fail(job_id, "checkpoint_interval_s",
                    "must be > 0 (a job that never checkpoints: \"checkpoints\": false)")
    for key in DERIVING_KEYS:
        if key in fields and "checkpoint_age_s" in fields:
            raise _fail(job_id, key, "conflicts with checkpoint_age_s (state one of them)")
    if fields.get("checkpoints") is False and "checkpoint_interval_s" in fields:
        raise _fail(job_id, "checkpoint_interval_s", "conflicts with \"checkpoints\": false")
    if fields.get("plan_fixed") and "requested_plan" not in fields:
        raise _fail(job_id, "plan_fixed", "needs requested_plan (the one plan the job runs)")
    plan = obj.get(AGENT_PLAN_KEY)
    model = fields.pop("model", None)
    guaranteed = fields.pop("guaranteed", None)
    return JobFacts(model, guaranteed, fields, plan if isinstance(plan, dict) else None, obj)


def with_agent_keys(comment: str, **keys: Any) -> str | None:
    """``comment`` with the agent's keys set (a value None removes the key), compact JSON; None when the
    comment is not a JSON object (the agent then leaves it alone)."""
    text = (comment or "").strip()
    try:
        obj = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    for key, value in keys.items():
        name = AGENT_PREFIX + key
        if value is None:
            obj.pop(name, None)
        else:
            obj[name] = value
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
