"""Ground truth of Lyra simulations (thesis Sec. 3.7.1): "Job's running time in the simulator is
derived from actual training time in the traces. For elastic jobs, ... inversely proportional to its
resource allocation" — or sub-linear (Sec. 3.7.2). Work is in training-GPU-seconds
(:mod:`optsched.rounds.lyra.jobs`); a worker on an inference server holds ``ceil(gpus_per_worker /
inference_factor)`` GPUs and does a training worker's work (:mod:`optsched.rounds.lyra.problem`).

**Heterogeneous jobs** (Sec. 3.7.1, Advanced and Heterogeneous scenarios: "10% of jobs can use heterogeneous
GPUs with non-ideal performance ... heterogeneous training jobs only achieve at most 70% of the ideal
results"): a job named in ``heterogeneous`` does ``heterogeneous_efficiency`` (default
:data:`HETEROGENEOUS_EFFICIENCY`, 0.7) of that work on inference GPUs, the other GPU type; on training GPUs
it runs at the ideal rate. "At most 70%" is read as the efficiency itself, exactly 0.7 for every such job:
the text gives the bound and no distribution below it, so a draw would be a constant of our own (the
option sets another value). Where the thesis' heterogeneous jobs mix GPU types within one run, ours run on
one pool at a time (a round's rule, :mod:`optsched.rounds.lyra.problem`): the 0.7 applies to the run on
inference servers (:mod:`optsched.sim.lyra_setup`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.rounds.lyra.jobs import SCALINGS, work_rate
from optsched.rounds.lyra.problem import INFERENCE_FACTOR

#: Sec. 3.7.1, Advanced: "heterogeneous training jobs only achieve at most 70% of the ideal results"
HETEROGENEOUS_EFFICIENCY = 0.7


@dataclass(frozen=True)
class LyraGroundTruth:
    """Seconds per unit of work of a job on an allocation (module docstring); ``inference_types``: the
    GPU types of inference servers; ``heterogeneous``: the jobs that run at ``heterogeneous_efficiency`` of
    the ideal rate on them (module docstring)."""

    inference_types: frozenset[str]
    inference_factor: float = INFERENCE_FACTOR
    scaling: str = "linear"
    heterogeneous: frozenset[str] = frozenset()
    heterogeneous_efficiency: float = HETEROGENEOUS_EFFICIENCY

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise ValidationError(f"unknown scaling {self.scaling!r}; known: {', '.join(SCALINGS)}")
        eff = self.heterogeneous_efficiency
        if isinstance(eff, bool) or not isinstance(eff, (int, float)) or not 0.0 < eff <= 1.0:
            raise ValidationError(f"lyra ground truth: heterogeneous_efficiency must lie in (0, 1], got {eff!r}")

    def job_iteration_time(self, job: Job, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                           cpus_per_gpu: float) -> float:
        per_worker = math.ceil(job.gpus_per_worker / self.inference_factor - 1e-9) \
            if gpu_type in self.inference_types else job.gpus_per_worker
        workers = sum(gpus_per_node) / per_worker
        rate = work_rate(job, workers, self.scaling)
        if gpu_type in self.inference_types and job.name in self.heterogeneous:
            rate *= self.heterogeneous_efficiency
        if rate <= 0:
            raise ValidationError(f"job {job.name!r} has no worker on {gpus_per_node} {gpu_type} GPUs")
        return 1.0 / rate

    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float:
        raise ValidationError("the Lyra ground truth needs the job (job_iteration_time)")


__all__ = ["HETEROGENEOUS_EFFICIENCY", "LyraGroundTruth"]
