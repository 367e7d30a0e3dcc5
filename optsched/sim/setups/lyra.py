"""Simulations of ``lyra`` rounds (docs/simulation.md, "Capacity loaning and elastic jobs"): Lyra jobs
on training and loaned inference servers, loans decided by the inference usage series
(:mod:`optsched.sim.lyra_setup`); each method gets its own events (pool targets, or the capacity
changes of the opportunistic baseline)."""

from __future__ import annotations

from optsched.core.errors import ValidationError
from optsched.sim.lyra_setup import lyra_simulation
from optsched.sim.setup import (SimulationInputs, SimulationOption, SimulationRequest, SimulationSetup,
                                register_simulation)
from optsched.sim.traces import detect_format

DEFAULT_POLICIES = ("lyra", "lyra-loan", "fifo")
OPTIONS = (
    SimulationOption("training", int, 2, "8xV100 training servers (2)", "N"),
    SimulationOption("inference", int, 2, "8xT4 inference servers (2)", "N"),
    SimulationOption("usage", str, "synthetic", "inference usage series deciding the loans: synthetic (Fig. 3.1 "
                     "shape), none (no loaning) or a time_s,usage CSV (default synthetic)", "synthetic|none|CSV"))


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Lyra simulation (module docstring)."""
    if request.trace != "synthetic" and detect_format(request.trace) != "philly":
        raise ValidationError(f"--kind lyra: trace {request.trace!r} is not in the Philly format (or use 'synthetic')")
    training, inference, usage = (SETUP.option(request, n) for n in ("training", "inference", "usage"))
    sim = lyra_simulation(request.trace, training=training, inference=inference, jobs=request.jobs,
                          max_jobs=request.max_jobs, usage=usage, seed=request.seed)
    dropped = sim.describe_dropped()
    return SimulationInputs(sim.cluster, sim.jobs, sim.truth, sim.trace_name,
                            f"trace {sim.trace_name}: {len(sim.jobs)} jobs on {sim.cluster.name} ({training} training "
                            f"+ {inference} inference servers), usage {usage}" + (f" ({dropped})" if dropped else ""),
                            per_method=sim.events)


SETUP = register_simulation(SimulationSetup(
    "lyra", "Lyra jobs on training and loaned inference servers (jobs run at their traces' speed)",
    DEFAULT_POLICIES, None, build, reads=("jobs", "max_jobs"), options=OPTIONS))

__all__ = ["DEFAULT_POLICIES", "OPTIONS", "SETUP", "build"]
