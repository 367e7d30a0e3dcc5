"""Published CPU-scaling measurements of ZeRO-Offload, used as priors when fitting model v2.

Every row of the public measurements (``../shared/data/morphling/placements``) runs with the same
CPU cores per GPU (:data:`~optsched.perf.measurements.MEASURED_CPUS_PER_GPU`), so the rows cannot
say how much of a ZeRO-Offload iteration is the CPU optimizer step (Morphling Appendix A.2:
``T_opt = k_opt_off P / (d c)``) and how much is GPU work: that split is what makes a job faster
with more CPUs, and what Rubick's CPU dimension and Synergy's CPU tuning schedule on. The one
published measurement of it is Rubick Sec. 7.2, Fig. 7: LLaMA-2-7B trained with ZeRO-Offload on one
A800 gets "1.7x speedup by allocating more CPUs to accelerate the parameter updates" when the CPUs
are doubled.

A :class:`CpuAnchor` is such a measurement: a plan on one node's GPUs whose iteration is ``speedup``
times shorter with ``cpus_to`` CPU cores per GPU than with ``cpus_from``. It is a *prior*, not a
fitted row: :func:`optsched.perf.fitting.fit` (model v2) frees the GPU-side factor of ZeRO-Offload
(``m_zero_offload``, otherwise tied to the ZeRO-DP factor, :mod:`optsched.perf.model_v2`) and adds
the anchor's log speed-up error to the residuals with the weight of all rows together, so the fit
meets it while the rows keep deciding everything else; the reported RMSLE is on the rows only.

Choice (the paper gives the ratio, not the CPU counts): the doubling starts from the CPUs per GPU
the measurement rows ran with, 8 (the 406-job trace asks for 8 per GPU), so the anchor reads
"8 -> 16 cores per GPU: 1.7x".
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, offload_runs_with_gc, parse_plan_code
from optsched.perf.measurements import MEASURED_CPUS_PER_GPU


@dataclass(frozen=True)
class CpuAnchor:
    """``plan_code`` on ``gpus`` GPUs of one node of ``gpu_type`` runs ``speedup`` times faster per
    iteration with ``cpus_to`` CPU cores per GPU than with ``cpus_from`` (``source`` says where this
    was measured)."""

    model: str
    gpu_type: str
    speedup: float
    source: str
    plan_code: str = "zero-offload"
    gpus: int = 1
    cpus_from: float = MEASURED_CPUS_PER_GPU
    cpus_to: float = 2 * MEASURED_CPUS_PER_GPU

    def __post_init__(self) -> None:
        if not self.gpus >= 1:
            raise ValidationError(f"CPU anchor of {self.model!r}: gpus must be >= 1, got {self.gpus}")
        if not 0 < self.cpus_from < self.cpus_to:
            raise ValidationError(f"CPU anchor of {self.model!r}: needs 0 < cpus_from < cpus_to, got "
                                  f"{self.cpus_from} and {self.cpus_to}")
        if not 1.0 < self.speedup <= self.cpus_to / self.cpus_from:
            raise ValidationError(f"CPU anchor of {self.model!r}: speedup must be in (1, {self.cpus_to / self.cpus_from:g}] "
                                  f"(more CPUs cannot slow a job, nor speed it up more than they are more), "
                                  f"got {self.speedup}")

    def plan(self, model: ModelSpec) -> ExecutionPlan:
        """The anchor's plan for ``model`` (ZeRO-Offload with GC for >= 1B parameters, as the
        measured rows run)."""
        return parse_plan_code(self.plan_code, self.gpus, model.global_batch, offload_gc=offload_runs_with_gc(model))

    def configs(self, model: ModelSpec) -> tuple[tuple[ExecutionPlan, tuple[int, ...], float],
                                                 tuple[ExecutionPlan, tuple[int, ...], float]]:
        """The two configurations compared: (plan, one node's GPUs, cpus_from) and (..., cpus_to)."""
        plan = self.plan(model)
        return (plan, (self.gpus,), float(self.cpus_from)), (plan, (self.gpus,), float(self.cpus_to))


#: the published measurements (model, GPU type): Rubick Fig. 7, the only one we know of
PUBLISHED_CPU_ANCHORS: tuple[CpuAnchor, ...] = (
    CpuAnchor("llama7", "A800", speedup=1.7,
              source="Rubick (Sec. 7.2, Fig. 7): LLaMA-2-7B, ZeRO-Offload on 1 A800, 2x CPUs -> 1.7x"),
)


def published_cpu_anchors(model_name: str, gpu_type: str) -> tuple[CpuAnchor, ...]:
    """The published anchors of ``model_name`` on ``gpu_type`` (empty when there is none)."""
    return tuple(a for a in PUBLISHED_CPU_ANCHORS if a.model == model_name and a.gpu_type == gpu_type)


__all__ = ["CpuAnchor", "PUBLISHED_CPU_ANCHORS", "published_cpu_anchors"]
