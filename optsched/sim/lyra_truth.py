"""Ground truth of Lyra simulations (thesis Sec. 3.7.1): "Job's running time in the simulator is
derived from actual training time in the traces. For elastic jobs, ... inversely proportional to its
resource allocation" — or sub-linear (Sec. 3.7.2). Work is in training-GPU-seconds
(:mod:`optsched.rounds.lyra.jobs`); a worker on an inference server holds ``ceil(gpus_per_worker /
inference_factor)`` GPUs and does a training worker's work (:mod:`optsched.rounds.lyra.problem`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from optsched.core.errors import ValidationError
from optsched.core.job import Job
from optsched.rounds.lyra.jobs import SCALINGS, work_rate
from optsched.rounds.lyra.problem import INFERENCE_FACTOR


@dataclass(frozen=True)
class LyraGroundTruth:
    """Seconds per unit of work of a job on an allocation (module docstring); ``inference_types``: the
    GPU types of inference servers."""

    inference_types: frozenset[str]
    inference_factor: float = INFERENCE_FACTOR
    scaling: str = "linear"

    def __post_init__(self) -> None:
        if self.scaling not in SCALINGS:
            raise ValidationError(f"unknown scaling {self.scaling!r}; known: {', '.join(SCALINGS)}")

    def job_iteration_time(self, job: Job, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                           cpus_per_gpu: float) -> float:
        per_worker = math.ceil(job.gpus_per_worker / self.inference_factor - 1e-9) \
            if gpu_type in self.inference_types else job.gpus_per_worker
        workers = sum(gpus_per_node) / per_worker
        rate = work_rate(job, workers, self.scaling)
        if rate <= 0:
            raise ValidationError(f"job {job.name!r} has no worker on {gpus_per_node} {gpu_type} GPUs")
        return 1.0 / rate

    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float:
        raise ValidationError("the Lyra ground truth needs the job (job_iteration_time)")


__all__ = ["LyraGroundTruth"]
