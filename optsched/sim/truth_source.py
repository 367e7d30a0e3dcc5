"""What the simulator asks of a ground truth (:mod:`optsched.sim.ground_truth`), as protocols that the
ground truths meet without importing them: the iteration time of a configuration and, optionally,
whether a configuration was measured. They sit below the modules that use them (the event loop
:mod:`optsched.sim.engine`, its ledger :mod:`optsched.sim.ledger` and the trace anchoring
:mod:`optsched.sim.trace_speed`), so none of those imports another for a type."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from optsched.core.errors import ValidationError
from optsched.perf.lookup import ConfigFilter


class IterationTimeSource(Protocol):
    """The part of :class:`~optsched.sim.ground_truth.GroundTruth` the simulator uses."""

    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float: ...


@runtime_checkable
class MeasuredConfigurations(Protocol):
    """A ground truth that can tell whether it answers a configuration from a measurement."""

    def is_measured(self, model: str, plan: Any, gpus_per_node: Sequence[int], gpu_type: str | None = None) -> bool: ...


def measured_configs(ground_truth: object) -> ConfigFilter:
    """The configurations a measured ground truth answers from a measurement (``--configs measured``):
    (model, GPU type, plan, GPUs per node) is allowed when it is a measured key. ``ValidationError``
    for a ground truth without measurements."""
    if not isinstance(ground_truth, MeasuredConfigurations):
        raise ValidationError("measured configurations only: the ground truth must be a measured one "
                              "(--ground-truth measured:DIR or neighbours:DIR)")

    def allowed(model: str, gpu_type: str, plan: Any, gpus_per_node: tuple[int, ...]) -> bool:
        return ground_truth.is_measured(model, plan, gpus_per_node, gpu_type)
    return allowed


__all__ = ["IterationTimeSource", "MeasuredConfigurations", "measured_configs"]
