"""Simulations of ``lyra`` rounds (docs/simulation.md, "Capacity loaning and elastic jobs"): Lyra jobs
on training and loaned inference servers, loans decided by the inference usage series
(:mod:`optsched.sim.lyra_setup`); each method gets its own events (pool targets, or the capacity
changes of the opportunistic baseline). The scheduler plans on predicted running times
(``--prediction-error``, ``--prediction-margin``: :mod:`optsched.rounds.lyra.prediction`, thesis
Table 3.9) while the jobs run at the truth."""

from __future__ import annotations

from optsched.core.errors import ValidationError
from optsched.rounds.lyra.prediction import PREDICTOR_OPTION, TABLE_3_9_MARGIN, runtime_predictor
from optsched.sim.lyra_setup import lyra_simulation
from optsched.sim.setup import (SimulationInputs, SimulationOption, SimulationRequest, SimulationSetup,
                                register_simulation)
from optsched.sim.traces import detect_format

DEFAULT_POLICIES = ("lyra", "lyra-loan", "fifo")
OPTIONS = (
    SimulationOption("training", int, 2, "8xV100 training servers (2)", "N"),
    SimulationOption("inference", int, 2, "8xT4 inference servers (2)", "N"),
    SimulationOption("usage", str, "synthetic", "inference usage series deciding the loans: synthetic (Fig. 3.1 "
                     "shape), none (no loaning) or a time_s,usage CSV (default synthetic)", "synthetic|none|CSV"),
    SimulationOption("prediction_error", float, 0.0, "share of jobs whose running time the scheduler mispredicts "
                     "(thesis Table 3.9: '% Wrong Prediction'; default 0, the oracle)", "SHARE"),
    SimulationOption("prediction_margin", float, TABLE_3_9_MARGIN, "largest relative error of a wrong prediction, "
                     "drawn uniformly within +-margin (Table 3.9: 'a random error margin within 25%'; default 0.25)",
                     "M"))


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Lyra simulation (module docstring)."""
    if request.trace != "synthetic" and detect_format(request.trace) != "philly":
        raise ValidationError(f"--kind lyra: trace {request.trace!r} is not in the Philly format (or use 'synthetic')")
    training, inference, usage = (SETUP.option(request, n) for n in ("training", "inference", "usage"))
    sim = lyra_simulation(request.trace, training=training, inference=inference, jobs=request.jobs,
                          max_jobs=request.max_jobs, usage=usage, seed=request.seed)
    dropped = sim.describe_dropped()
    share, margin = SETUP.option(request, "prediction_error"), SETUP.option(request, "prediction_margin")
    for flag, v, top in (("--prediction-error", share, 1.0), ("--prediction-margin", margin, 0.999999)):
        if not 0.0 <= v <= top:
            raise ValidationError(f"--kind lyra: {flag} must lie in [0, 1{')' if top < 1 else ']'}, got {v}")
    predictor = runtime_predictor(sim.jobs, share, margin, seed=request.seed)
    return SimulationInputs(sim.cluster, sim.jobs, sim.truth, sim.trace_name,
                            f"trace {sim.trace_name}: {len(sim.jobs)} jobs on {sim.cluster.name} ({training} training "
                            f"+ {inference} inference servers), usage {usage}" + (f" ({dropped})" if dropped else ""),
                            notes=(predictor.describe(),), runs={"policy_extras": {PREDICTOR_OPTION: predictor}},
                            per_method=sim.events)


SETUP = register_simulation(SimulationSetup(
    "lyra", "Lyra jobs on training and loaned inference servers (jobs run at their traces' speed)",
    DEFAULT_POLICIES, None, build, reads=("jobs", "max_jobs"), options=OPTIONS))

__all__ = ["DEFAULT_POLICIES", "OPTIONS", "SETUP", "build"]
