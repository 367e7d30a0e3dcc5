"""Simulations of ``crius`` rounds (docs/simulation.md, "Crius jobs"): jobs of the Crius Table 2 models
drawn as in Crius Sec. 8.1 (a synthetic or Philly-format trace) on the heterogeneous cluster of Crius
Table 1, against the Crius ground truth (its cost model with its own parameters)."""

from __future__ import annotations

from optsched.core.catalog import resolve_cluster
from optsched.core.errors import ValidationError
from optsched.sim.crius_truth import CriusGroundTruth
from optsched.sim.setup import SimulationInputs, SimulationRequest, SimulationSetup, register_simulation
from optsched.sim.traces import detect_format
from optsched.sim.traces.crius import crius_philly_trace, crius_synthetic_trace

DEFAULT_CLUSTER = "crius-sim-1280"
DEFAULT_POLICIES = ("crius", "fcfs", "gandiva", "gavel", "elasticflow")


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Crius simulation (module docstring)."""
    cluster = resolve_cluster(request.cluster or DEFAULT_CLUSTER)
    truth = CriusGroundTruth(cluster)
    if request.trace == "synthetic":
        trace = crius_synthetic_trace(cluster, truth, num_jobs=request.jobs, seed=request.seed, load=request.load)
    elif detect_format(request.trace) == "philly":
        trace = crius_philly_trace(request.trace, cluster, truth, seed=request.seed, max_jobs=request.max_jobs)
    else:
        raise ValidationError(f"--kind crius: trace {request.trace!r} is not in the Philly format (or use 'synthetic')")
    name = trace.source or trace.name
    return SimulationInputs(cluster, tuple(trace.jobs), truth, name,
                            f"trace {name}: {len(trace)} jobs on {cluster.name} ({cluster.total_gpus} GPUs), "
                            f"ground truth {truth.describe()}")


SETUP = register_simulation(SimulationSetup(
    "crius", "jobs of the Crius Table 2 models on a heterogeneous cluster, a synthetic or Philly-format trace, the "
             "Crius ground truth", DEFAULT_POLICIES, DEFAULT_CLUSTER, build,
    reads=("jobs", "load", "max_jobs", "cluster")))

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_POLICIES", "SETUP", "build"]
