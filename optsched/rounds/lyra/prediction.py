"""Predicted running times for Lyra's scheduler (thesis Sec. 3.5.2 and Table 3.9).

Lyra's allocation relies on running times it does not know: "We rely on job's running time information
(minimum running time for elastic jobs), which can be predicted with profiling and ML methods"
(Sec. 3.5.2). Table 3.9 studies the error: "The fraction of incorrect estimation varies from 0% to 60%.
We assume each incorrect prediction has a random error margin within 25%." (caption), "even when there
are 60% wrong predictions (each with at most 25% error)" (Sec. 3.7.4).

:func:`runtime_predictor` reproduces that definition: of the ``n`` jobs, ``round(wrong_share x n)``
drawn without replacement get a wrong prediction, each off by a relative error ``e`` drawn uniformly
from ``[-margin, +margin]`` (predicted running time = true running time x ``(1 + e)``); the others are
predicted exactly. Both draws come from ``numpy.random.default_rng(seed)``. Our readings, where the
text says no more: the error is symmetric and uniform ("a random error margin within 25%"), drawn once
per job (a job keeps its prediction for its whole life), and relative, so it applies to what is left
of the job as well: the scheduler's remaining running time is the true remaining one times ``1 + e``
(for a job that has not started, exactly the predicted running time).

The predictor is the scheduler's knowledge only: the simulator runs every job at the truth
(:mod:`optsched.sim.lyra_truth`). With ``wrong_share`` 0 every prediction is the truth and the
scheduler's decisions are the oracle's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from optsched.core.checks import require_seed
from optsched.core.errors import ValidationError
from optsched.core.job import Job

#: the error margin of a wrong prediction in Table 3.9 ("a random error margin within 25%")
TABLE_3_9_MARGIN = 0.25
#: the shares of wrong predictions Table 3.9 reports ("% Wrong Prediction": 20%, 40%, 60%)
TABLE_3_9_SHARES = (0.2, 0.4, 0.6)
#: the name of the policy option (``PolicyOptions.extras``) that carries a :class:`RuntimePredictor`
PREDICTOR_OPTION = "runtime_predictor"


@dataclass(frozen=True)
class RuntimePredictor:
    """Per job, its predicted running time over the true one (``factors``; a job absent is predicted
    exactly), with the settings it was drawn from (module docstring)."""

    factors: Mapping[str, float] = field(default_factory=dict)
    wrong_share: float = 0.0
    margin: float = TABLE_3_9_MARGIN
    seed: int = 0

    def __post_init__(self) -> None:
        bad = sorted(n for n, f in self.factors.items() if not (isinstance(f, float) and f > 0.0))
        if bad:
            raise ValidationError(f"runtime predictor: the factor of job {bad[0]!r} must be a float > 0")
        object.__setattr__(self, "factors", MappingProxyType(dict(self.factors)))

    def factor(self, job: str) -> float:
        """Predicted over true running time of ``job`` (1.0: predicted exactly)."""
        return self.factors.get(job, 1.0)

    def remaining(self, job: Job) -> float:
        """The remaining work the scheduler believes ``job`` has (training-GPU-seconds): the true
        remaining work times the job's factor (module docstring)."""
        f = self.factors.get(job.name)
        return job.remaining_iterations if f is None else job.remaining_iterations * f

    def describe(self) -> str:
        if not self.factors:
            return "running times predicted exactly (oracle)"
        return (f"{100 * self.wrong_share:g}% of jobs with a wrong running-time prediction, each off by a uniform "
                f"error within +-{100 * self.margin:g}% (seed {self.seed})")


def runtime_predictor(jobs: Sequence[Job], wrong_share: float, margin: float = TABLE_3_9_MARGIN,
                      seed: int = 0) -> RuntimePredictor:
    """The predictor of ``jobs`` with ``wrong_share`` of them mispredicted by up to ``margin`` (module
    docstring)."""
    for name, v in (("wrong_share", wrong_share), ("margin", margin)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0 or v != v:
            raise ValidationError(f"runtime predictor: {name} must lie in [0, 1], got {v!r}")
    if margin >= 1.0:
        raise ValidationError(f"runtime predictor: margin must be below 1 (a running time stays > 0), got {margin}")
    require_seed("runtime_predictor", seed)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValidationError("runtime predictor: job names must be unique")
    rng = np.random.default_rng(seed)
    wrong = int(round(wrong_share * len(names)))
    picked = rng.choice(len(names), size=wrong, replace=False) if wrong else np.zeros(0, dtype=np.int64)
    errors = rng.uniform(-margin, margin, size=wrong)
    return RuntimePredictor({names[int(i)]: float(1.0 + e) for i, e in zip(picked, errors)}, float(wrong_share),
                            float(margin), seed)


__all__ = ["PREDICTOR_OPTION", "RuntimePredictor", "TABLE_3_9_MARGIN", "TABLE_3_9_SHARES", "runtime_predictor"]
