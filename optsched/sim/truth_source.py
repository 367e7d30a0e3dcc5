"""What the simulator asks of a ground truth (:mod:`optsched.sim.ground_truth`), as protocols that the
ground truths meet without importing them: the iteration time of a configuration and, optionally,
whether a configuration was measured. They sit below the modules that use them (the event loop
:mod:`optsched.sim.engine`, its ledger :mod:`optsched.sim.ledger` and the trace anchoring
:mod:`optsched.sim.trace_speed`), so none of those imports another for a type."""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable


class IterationTimeSource(Protocol):
    """The part of :class:`~optsched.sim.ground_truth.GroundTruth` the simulator uses."""

    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float: ...


@runtime_checkable
class MeasuredConfigurations(Protocol):
    """A ground truth that can tell whether it answers a configuration from a measurement."""

    def is_measured(self, model: str, plan: Any, gpus_per_node: Sequence[int], gpu_type: str | None = None) -> bool: ...


__all__ = ["IterationTimeSource", "MeasuredConfigurations"]
