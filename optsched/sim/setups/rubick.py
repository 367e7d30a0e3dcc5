"""Simulations of ``rubick`` rounds (docs/simulation.md): a workload, Philly, ITP or synthetic trace on a
catalogue or JSON cluster, a ground truth by spec (analytical, measured placements, fitted parameters),
the policies planning with fitted models where given, and the traces' own durations where they carry
them (:mod:`optsched.sim.trace_speed`)."""

from __future__ import annotations

import logging
from typing import Any

from optsched.core.catalog import resolve_cluster
from optsched.core.errors import ValidationError
from optsched.perf.lookup import fitted_models
from optsched.rounds.rubick.admission import DEFER_OPTION
from optsched.sim.truth_spec import ground_truth_from_spec
from optsched.sim.setup import (MAX_JOBS_APPLIES, SimulationInputs, SimulationRequest, SimulationSetup,
                                register_simulation)
from optsched.sim.trace_speed import trace_speeds
from optsched.sim.traces import detect_format, load_trace
from optsched.sim.truth_source import measured_configs

log = logging.getLogger(__name__)

#: the cluster and policies of a Rubick simulation unless told otherwise
DEFAULT_CLUSTER = "a800-8x8"
DEFAULT_POLICIES = ("rubick", "sia", "synergy", "fifo")


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Rubick simulation (module docstring)."""
    cluster = resolve_cluster(request.cluster or DEFAULT_CLUSTER)
    try:
        truth = ground_truth_from_spec(request.ground_truth, cluster)
    except ValidationError as exc:
        raise ValidationError(f"--ground-truth: {exc}") from None
    models = fitted_models(request.params, cluster)
    allowed = None
    if request.configs == "measured":
        try:
            allowed = measured_configs(truth)
        except ValidationError as exc:
            raise ValidationError(f"--configs measured: {exc}") from None
    options: dict[str, Any] = {}
    if request.trace == "synthetic":
        options.update(num_jobs=request.jobs, load=request.load)
    elif detect_format(request.trace) == "workload":
        if request.max_jobs is not None:
            raise ValidationError(f"{MAX_JOBS_APPLIES}; a workload trace is replayed whole")
        options["infeasible_plans"] = request.infeasible_plans
    elif request.max_jobs is not None:
        options["max_jobs"] = request.max_jobs
    trace = load_trace(request.trace, cluster, seed=request.seed, iteration_time=truth.iteration_time, **options)
    log.info("trace %s: %d jobs (%s); ground truth %s", trace.name, len(trace), trace.source, truth.describe())
    speeds = trace_speeds(trace, truth, cluster) if request.trace_durations == "use" and trace.durations else None
    notes = []
    if models:
        notes.append("policies plan with fitted models: " + ", ".join(f"{m} on {g}" for m, g in sorted(models)))
    if speeds is not None:
        notes.append("trace durations: " + speeds.describe())
    elif trace.durations:
        notes.append(f"trace durations: ignored (--trace-durations ignore); {len(trace)} jobs run at the ground truth")
    name = trace.source or trace.name
    return SimulationInputs(
        cluster, tuple(trace.jobs), truth, name,
        f"trace {name}: {len(trace)} jobs on {cluster.name} ({cluster.total_gpus} GPUs), ground truth "
        f"{truth.describe()}", tuple(notes),
        runs={"round_fields": trace.round_fields(), "perf_models": models or None,
              "time_scale": None if speeds is None else speeds.scales, "allowed_configs": allowed},
        summary={"configs": request.configs, "trace_durations": None if speeds is None else speeds.to_dict()})


SETUP = register_simulation(SimulationSetup(
    "rubick", "Rubick jobs (the built-in models, a workload, Philly, ITP or synthetic trace) on an A800 or JSON "
              "cluster against a ground truth by spec", DEFAULT_POLICIES, DEFAULT_CLUSTER, build,
    reads=("jobs", "load", "max_jobs", "infeasible_plans", "cluster", "ground_truth", "params", "configs",
           "trace_durations"),
    policy_extras={DEFER_OPTION: True}))

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_POLICIES", "SETUP", "build"]
