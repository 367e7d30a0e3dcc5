"""Execution plans (Rubick Sec. 3; Morphling Appendix A) and the measurement plan codes.

A plan is DP/TP/PP sizes ``(dp, tp, pp)`` with ``dp*tp*pp`` GPUs, the PP micro-batch count ``m``, the
ZeRO mode (none, ZeRO-DP = ZeRO stage 2, ZeRO-Offload = stage 2 with optimizer states and update on
the CPU), gradient-accumulation steps ``a`` and gradient checkpointing on/off.

Rules checked on construction (each error names the rule):
  * ZeRO modes are data-parallel strategies: they require ``tp == pp == 1``;
  * micro-batches only exist with pipelining: ``pp == 1`` requires ``micro_batches == 1``;
  * PP micro-batching and GA are not combined (PP already splits the batch): ``pp > 1`` requires
    ``ga_steps == 1``.
Batch divisibility (``b % (dp*a*m) == 0``) depends on the model and is checked by
:func:`check_plan_for_model`.

Plan codes of the measurement files (``../shared/data/README.md``): ``ga``, ``gc``, ``zero-dp``,
``zero-offload`` (all data-parallel over every GPU of the placement), and a three-digit ``PTD`` code
(PP, TP, DP sizes). We add ``dp`` for plain data parallelism. The files do not record the GA steps
of a ``ga`` row nor the micro-batches of a PP row; :func:`parse_plan_code` documents our choice.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Any

from optsched.core.checks import json_fields, require_int, require_keys
from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec


class ZeroMode(str, enum.Enum):
    NONE = "none"
    DP = "zero-dp"
    OFFLOAD = "zero-offload"


#: the plan families of the Rubick evaluation (Table 2 rows); ``dp`` is plain data parallelism
PLAN_FAMILIES = ("dp", "ga", "gc", "zero-dp", "zero-offload", "3d")


@dataclass(frozen=True)
class ExecutionPlan:
    dp: int
    tp: int = 1
    pp: int = 1
    micro_batches: int = 1
    zero: ZeroMode = ZeroMode.NONE
    ga_steps: int = 1
    gc: bool = False

    def __post_init__(self) -> None:
        owner = "ExecutionPlan"
        for f in ("dp", "tp", "pp", "micro_batches", "ga_steps"):
            require_int(owner, f, getattr(self, f), 1)
        if not isinstance(self.gc, bool):
            raise ValidationError(f"{owner}: gc must be true or false, got {self.gc!r}")
        try:
            object.__setattr__(self, "zero", ZeroMode(self.zero))
        except ValueError:
            raise ValidationError(
                f"{owner}: zero must be one of {[z.value for z in ZeroMode]}, got {self.zero!r}") from None
        if self.zero is not ZeroMode.NONE and (self.tp > 1 or self.pp > 1):
            raise ValidationError(f"{owner} {self.label}: ZeRO modes are data-parallel only (tp = pp = 1)")
        if self.pp == 1 and self.micro_batches != 1:
            raise ValidationError(f"{owner} {self.label}: micro_batches > 1 needs pipeline parallelism (pp > 1)")
        if self.pp > 1 and self.ga_steps != 1:
            raise ValidationError(f"{owner} {self.label}: gradient accumulation is not combined with pp > 1")

    @property
    def num_gpus(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def is_3d(self) -> bool:
        return self.tp > 1 or self.pp > 1

    @property
    def family(self) -> str:
        """One of :data:`PLAN_FAMILIES`: ``3d`` when TP or PP is used, else the ZeRO mode, else
        ``gc``/``ga``/``dp`` (GC wins over GA when both are on)."""
        if self.is_3d:
            return "3d"
        if self.zero is not ZeroMode.NONE:
            return self.zero.value
        if self.gc:
            return "gc"
        if self.ga_steps > 1:
            return "ga"
        return "dp"

    @functools.cached_property
    def label(self) -> str:
        """Human-readable, unique description, e.g. ``3d(pp=2,tp=4,dp=8,m=4)`` or
        ``zero-offload(dp=4,a=2,gc)``; computed once per plan."""
        parts = [f"pp={self.pp}", f"tp={self.tp}"] if self.is_3d else []
        parts.append(f"dp={self.dp}")
        if self.pp > 1:
            parts.append(f"m={self.micro_batches}")
        if self.ga_steps > 1:
            parts.append(f"a={self.ga_steps}")
        if self.gc:
            parts.append("gc")
        return f"{self.family}({','.join(parts)})"

    def micro_batch_size(self, global_batch: int) -> float:
        """Samples one GPU processes per forward pass: b / (dp * a * m)."""
        return global_batch / (self.dp * self.ga_steps * self.micro_batches)

    def to_dict(self) -> dict[str, Any]:
        return {"dp": self.dp, "tp": self.tp, "pp": self.pp, "micro_batches": self.micro_batches,
                "zero": self.zero.value, "ga_steps": self.ga_steps, "gc": self.gc}

    @classmethod
    def from_dict(cls, data: Any) -> "ExecutionPlan":
        require_keys("ExecutionPlan", data, ("dp",), ("tp", "pp", "micro_batches", "zero", "ga_steps", "gc"))
        try:   # each value with its type: True, 1 and 1.0 are equal keys, but only some of them are valid
            key = tuple([(k, type(v), v) for k, v in data.items()])  # members in the object's order: another
            hash(key)                                                # order is another key, for the same plan
        except TypeError:   # a member that is no JSON scalar: the constructor names it
            return cls(**json_fields(cls, data))
        return _plan_of(key)


@functools.lru_cache(maxsize=4096)
def _plan_of(items: tuple[tuple[str, type, Any], ...]) -> ExecutionPlan:
    """The plan of a JSON object's (member, type, value) triples, made once per distinct object (a round names
    a few plans for thousands of jobs and allocations; plans are immutable, so equal ones may be one object)."""
    return ExecutionPlan(**json_fields(ExecutionPlan, {k: v for k, _, v in items}))


def check_plan_for_model(plan: ExecutionPlan, model: ModelSpec) -> None:
    """Rules that depend on the model: the global batch splits evenly into ``dp*a*m`` micro-batches,
    TP divides the attention heads, PP does not exceed the layers."""
    b = model.global_batch
    if b % (plan.dp * plan.ga_steps * plan.micro_batches):
        raise ValidationError(
            f"plan {plan.label} for model {model.name!r}: global batch {b} is not divisible by "
            f"dp*ga_steps*micro_batches = {plan.dp * plan.ga_steps * plan.micro_batches}")
    if model.num_heads % plan.tp:
        raise ValidationError(
            f"plan {plan.label} for model {model.name!r}: tp={plan.tp} does not divide the "
            f"{model.num_heads} attention heads")
    if plan.pp > model.layers:
        raise ValidationError(
            f"plan {plan.label} for model {model.name!r}: pp={plan.pp} exceeds the {model.layers} layers")


#: GA steps assumed for a measurement row with code ``ga`` (the files do not record them)
DEFAULT_GA_STEPS = 2


#: PP micro-batches assumed for a measurement row with a ``PTD`` code (the files do not record them)
DEFAULT_PP_MICRO_BATCHES = 1


def offload_runs_with_gc(model: ModelSpec) -> bool:
    """Whether a measured ``zero-offload`` row of ``model`` ran with GC: Rubick Table 2 lists
    "ZeRO-Offload+GC" for the models of >= 1B parameters (T5, GPT-2, LLaMA) and plain ZeRO-Offload
    for the smaller ones."""
    return model.num_params >= 1_000_000_000


def parse_plan_code(code: str, num_gpus: int, global_batch: int,
                    ga_steps: int = DEFAULT_GA_STEPS,
                    pp_micro_batches: int = DEFAULT_PP_MICRO_BATCHES,
                    offload_gc: bool = False) -> ExecutionPlan:
    """Turn a measurement plan code into an :class:`ExecutionPlan` on ``num_gpus`` GPUs.

    * ``dp``, ``gc``, ``zero-dp``, ``zero-offload``: data parallelism over all GPUs (dp = num_gpus);
      ``zero-offload`` turns on gradient checkpointing when ``offload_gc`` is true (Rubick Table 2
      runs "ZeRO-Offload+GC" for models of 1B parameters and more; the files do not record GC, see
      :func:`offload_runs_with_gc`).
    * ``ga``: DP with ``ga_steps`` accumulation steps (default 2, the smallest real accumulation);
      when the per-GPU batch b/dp is not divisible by it, the largest divisor of b/dp not above
      ``ga_steps`` is used (1 when b/dp = 1, which is then plain DP).
    * three digits ``PTD``: PP, TP, DP sizes; their product must equal ``num_gpus``. PP runs with
      ``pp_micro_batches`` micro-batches, default 1: the Rubick measurements are consistent with
      one micro-batch only (GPT-2 ``151``..``651`` all take ~1.05 s, T5 ``411`` on four nodes is
      3.2x slower than ``141`` on one, which Appendix A's T_fwd gives for m = 1 and not for m = b/dp).
      The plan enumerator also offers m = b/dp, the usual 1F1B setting.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValidationError(f"plan code must be a non-empty string, got {code!r}")
    code = code.strip().lower()
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
        raise ValidationError(f"plan code {code!r}: number of GPUs must be a positive integer, got {num_gpus!r}")
    if code in ("dp", "ga", "gc", "zero-dp", "zero-offload"):
        d = num_gpus
        if global_batch % d:
            raise ValidationError(
                f"plan code {code!r} on {d} GPUs: global batch {global_batch} is not divisible by dp={d}")
        if code == "ga":
            per_gpu = global_batch // d
            a = max(x for x in range(1, ga_steps + 1) if per_gpu % x == 0)
            return ExecutionPlan(dp=d, ga_steps=a)
        if code == "gc":
            return ExecutionPlan(dp=d, gc=True)
        if code == "dp":
            return ExecutionPlan(dp=d)
        return ExecutionPlan(dp=d, zero=ZeroMode(code), gc=offload_gc and code == "zero-offload")
    if len(code) == 3 and code.isdigit():
        p, t, d = (int(c) for c in code)
        if 0 in (p, t, d):
            raise ValidationError(f"plan code {code!r}: PP, TP and DP sizes must be >= 1")
        if p * t * d != num_gpus:
            raise ValidationError(
                f"plan code {code!r} (pp={p}, tp={t}, dp={d}) needs {p * t * d} GPUs but the "
                f"placement has {num_gpus}")
        if global_batch % d:
            raise ValidationError(
                f"plan code {code!r}: global batch {global_batch} is not divisible by dp={d}")
        return ExecutionPlan(dp=d, tp=t, pp=p, micro_batches=pp_micro_batches)
    raise ValidationError(
        f"unknown plan code {code!r}: expected dp, ga, gc, zero-dp, zero-offload or three digits "
        f"PTD (PP, TP, DP sizes)")


def plan_code(plan: ExecutionPlan) -> str:
    """Inverse of :func:`parse_plan_code` where one exists (``PTD`` needs single-digit sizes)."""
    if plan.is_3d:
        if max(plan.pp, plan.tp, plan.dp) > 9:
            return plan.label
        return f"{plan.pp}{plan.tp}{plan.dp}"
    return plan.family
