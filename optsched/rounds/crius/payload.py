"""What a Crius decision carries: per-job allocations (:class:`~optsched.core.decision.JobAllocations`,
so that the simulator and any scheduler that applies allocations apply it unchanged) plus, per running
job, its Cell (:class:`CellInfo`) and the jobs dropped by the deadline-aware objective.

An allocation's plan is the Cell in :func:`~optsched.perf.crius.cell_estimator.cell_plan` form (``pp`` =
stages); the per-stage data x tensor splits a job runs with are not part of an ``ExecutionPlan``, so
they are in ``cells``: the stage GPU counts (Sec. 4.2), the splits Cell-guided tuning chose (Sec. 5.2)
and the best assembled plan's estimate (Sec. 5.1).

JSON (next to the decision's top level and ``jobs``)::

    "cells": [{"job": "j1", "gpu_type": "A40", "gpus": 8, "stages": 2, "stage_gpus": [4, 4],
               "plan": [[4, 1], [2, 2]], "remat": [false, false], "estimate_s": 1.93,
               "iteration_time_s": 1.81}, ...],
    "dropped": ["j7", ...]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from optsched.core.checks import json_int, require_int, require_keys, require_name, require_number
from optsched.core.decision import JobAllocations
from optsched.core.errors import ValidationError


@dataclass(frozen=True)
class CellInfo:
    """The Cell a job runs (module docstring): GPU type, GPUs, stages, GPUs per stage, the tuned
    per-stage (dp, tp) ``plan`` and ``remat`` flags, its ``iteration_time_s`` and the best assembled
    plan's ``estimate_s``."""

    job: str
    gpu_type: str
    gpus: int
    stages: int
    stage_gpus: tuple[int, ...]
    plan: tuple[tuple[int, int], ...]
    remat: tuple[bool, ...]
    estimate_s: float
    iteration_time_s: float

    def __post_init__(self) -> None:
        require_name("Cell of a decision", self.job)
        who = f"Cell of job {self.job!r}"
        require_name(who + " gpu_type", self.gpu_type)
        require_int(who, "gpus", self.gpus, 1)
        require_int(who, "stages", self.stages, 1)
        object.__setattr__(self, "stage_gpus", tuple(self.stage_gpus))
        object.__setattr__(self, "plan", tuple(tuple(p) for p in self.plan))  # type: ignore[misc]
        object.__setattr__(self, "remat", tuple(bool(r) for r in self.remat))
        if len(self.stage_gpus) != self.stages or sum(self.stage_gpus) != self.gpus:
            raise ValidationError(f"{who}: stage_gpus {self.stage_gpus} must be {self.stages} counts summing to "
                                  f"{self.gpus}")
        if self.plan and (len(self.plan) != self.stages
                          or any(len(p) != 2 or p[0] * p[1] != g for p, g in zip(self.plan, self.stage_gpus))):
            raise ValidationError(f"{who}: plan {self.plan} must give each stage a (dp, tp) split of its GPUs")
        for f in ("estimate_s", "iteration_time_s"):
            v = getattr(self, f)
            if v is not None:
                require_number(who, f, v, 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"job": self.job, "gpu_type": self.gpu_type, "gpus": self.gpus, "stages": self.stages,
                "stage_gpus": list(self.stage_gpus), "plan": [list(p) for p in self.plan],
                "remat": list(self.remat), "estimate_s": self.estimate_s, "iteration_time_s": self.iteration_time_s}

    @classmethod
    def from_dict(cls, data: Any) -> "CellInfo":
        require_keys("Cell of a decision", data, ("job", "gpu_type", "gpus", "stages", "stage_gpus", "plan"),
                     ("remat", "estimate_s", "iteration_time_s"))
        return cls(data["job"], data["gpu_type"], json_int(data["gpus"]), json_int(data["stages"]),
                   tuple(map(json_int, data["stage_gpus"])), tuple(tuple(map(json_int, p)) for p in data["plan"]),
                   tuple(data.get("remat", ())), data.get("estimate_s"), data.get("iteration_time_s"))


@dataclass(frozen=True)
class CriusAllocations(JobAllocations):
    """Per-job allocations with the Cells of the running jobs and the dropped jobs (module docstring)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("jobs",), ("cells", "dropped"))

    cells: tuple[CellInfo, ...] = ()
    dropped: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        cells = tuple(self.cells)
        running = {d.job for d in self.jobs if d.allocation is not None}
        seen: set[str] = set()
        for c in cells:
            if not isinstance(c, CellInfo):
                raise ValidationError(f"decision: cells must hold CellInfo objects, got {c!r}")
            if c.job not in running or c.job in seen:
                raise ValidationError(f"decision: Cell of job {c.job!r} must belong to a job that runs, once")
            seen.add(c.job)
        dropped = tuple(self.dropped)
        if any(name in running for name in dropped):
            raise ValidationError("decision: a dropped job cannot run")
        object.__setattr__(self, "cells", cells)
        object.__setattr__(self, "dropped", dropped)

    def cell(self, job: str) -> CellInfo:
        for c in self.cells:
            if c.job == job:
                return c
        raise ValidationError(f"decision: job {job!r} runs no Cell")

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "cells": [c.to_dict() for c in self.cells], "dropped": list(self.dropped)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CriusAllocations":
        base = JobAllocations.from_dict(data)
        cells = data.get("cells", [])
        dropped = data.get("dropped", [])
        if not isinstance(cells, list) or not isinstance(dropped, list):
            raise ValidationError("decision: cells and dropped must be JSON arrays")
        return cls(base.jobs, tuple(CellInfo.from_dict(c) for c in cells), tuple(dropped))


__all__ = ["CellInfo", "CriusAllocations"]
