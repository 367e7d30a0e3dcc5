"""Simulations of ``lyra`` rounds (docs/simulation.md, "Capacity loaning and elastic jobs"): Lyra jobs
on training and loaned inference servers, loans decided by the inference usage series
(:mod:`optsched.sim.lyra_setup`); each method gets its own events (pool targets, or the capacity
changes of the opportunistic baseline). The scheduler plans on predicted running times
(``--prediction-error``, ``--prediction-margin``: :mod:`optsched.rounds.lyra.prediction`, thesis
Table 3.9) while the jobs run at the truth."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from optsched.core.errors import ValidationError
from optsched.rounds.lyra.prediction import PREDICTOR_OPTION, TABLE_3_9_MARGIN, runtime_predictor
from optsched.sim.loaning import median_burst
from optsched.sim.lyra_setup import lyra_simulation
from optsched.sim.lyra_truth import HETEROGENEOUS_EFFICIENCY
from optsched.sim.traces.lyra import SCENARIOS
from optsched.sim.setup import (SimulationInputs, SimulationOption, SimulationRequest, SimulationSetup,
                                register_simulation)
from optsched.sim.traces import detect_format

DEFAULT_POLICIES = ("lyra", "lyra-loan", "fifo")
OPTIONS = (
    SimulationOption("training", int, 2, "8xV100 training servers (2)", "N"),
    SimulationOption("inference", int, 2, "8xT4 inference servers (2)", "N"),
    SimulationOption("usage", str, "synthetic", "inference usage series deciding the loans: synthetic (Fig. 3.1 "
                     "shape), none (no loaning) or a time_s,usage CSV (default synthetic)", "synthetic|none|CSV"),
    SimulationOption("usage_burst", float, None, "the synthetic usage series' median 5-minute change, a share of the "
                     "inference cluster's capacity (thesis Sec. 3.7.1: 'the median inference traffic burst within five "
                     "minutes is ~2%% of the inference cluster capacity'; default: the series as drawn, about 0.3%%)",
                     "SHARE"),
    SimulationOption("prediction_error", float, 0.0, "share of jobs whose running time the scheduler mispredicts "
                     "(thesis Table 3.9: '%% Wrong Prediction'; default 0, the oracle)", "SHARE"),
    SimulationOption("prediction_margin", float, TABLE_3_9_MARGIN, "largest relative error of a wrong prediction, "
                     "drawn uniformly within +-margin (Table 3.9: 'a random error margin within 25%%'; default 0.25)",
                     "M"),
    SimulationOption("window_days", float, None, "a Philly CSV: replay this many days of it from --window-start "
                     "(synthetic: --jobs jobs over this many days); the usage series then starts at the window's "
                     "wall-clock hour (default: the trace's first rows, 12 hours of synthetic jobs)", "DAYS"),
    SimulationOption("window_start", str, "busiest", "with --window-days: 'busiest' (the window with the most jobs "
                     "submitted, from a midnight) or a date YYYY-MM-DD (default busiest)", "busiest|DATE"),
    SimulationOption("fungible_load", float, None, "share of GPU time in fungible jobs (thesis Sec. 3.7.1: '21%% of "
                     "total training load'); with --elastic-load (default: 21%% of jobs, every elastic job fungible)",
                     "SHARE"),
    SimulationOption("elastic_load", float, None, "share of GPU time in elastic jobs (Sec. 3.7.1: '~5%% of all jobs "
                     "accounting for 36%% of total training resources'); with --fungible-load", "SHARE"),
    SimulationOption("elastic_count", float, 0.05, "share of jobs that are elastic (Sec. 3.7.1: '~5%% of all jobs'; "
                     "default 0.05)", "SHARE"),
    SimulationOption("elastic_on_inference", str, "no", "yes: every elastic job may use loaned inference servers, "
                     "as fungible jobs do (thesis Sec. 3.5.3: 'If the job is elastic, we prefer to place it on "
                     "inference servers'); no: only those drawn fungible (default no)", "yes|no"),
    SimulationOption("offered_load", float, None, "size the cluster for this offered load: training servers for the "
                     "jobs' GPU time over the window, inference servers in the thesis' 4,160:3,544 GPU proportion "
                     "(replaces --training/--inference)", "LOAD"),
    SimulationOption("no_loaning", str, "", "comma-separated policies that run with no server lent (Sec. 3.7.1's "
                     "Baseline: 'A FIFO cluster scheduler with no capacity loaning or elastic scaling'); the others "
                     "get the loans (default: every policy gets them)", "POLICY,..."),
    SimulationOption("scenario", str, "basic", "the scenario of thesis Sec. 3.7.1: basic (no heterogeneous job), "
                     "advanced ('On top of Basic, 10%% of jobs can use heterogeneous GPUs with non-ideal performance') "
                     "heterogeneous (no fungible job, the same 10%% heterogeneous) or ideal ('All jobs support scaling "
                     "and heterogeneous training with ideal performance': every job elastic to twice its request and "
                     "allowed on inference servers) (default basic)",
                     "|".join(SCENARIOS)),
    SimulationOption("hetero_efficiency", float, HETEROGENEOUS_EFFICIENCY, "share of the ideal rate a heterogeneous "
                     "job achieves on inference GPUs (Sec. 3.7.1: 'at most 70%% of the ideal results'; default 0.7)",
                     "SHARE"))


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Lyra simulation (module docstring)."""
    if request.trace != "synthetic" and detect_format(request.trace) != "philly":
        raise ValidationError(f"--kind lyra: trace {request.trace!r} is not in the Philly format (or use 'synthetic')")
    training, inference, usage = (SETUP.option(request, n) for n in ("training", "inference", "usage"))
    if "window_start" in request.options and SETUP.option(request, "window_days") is None:
        raise ValidationError("--kind lyra: --window-start needs --window-days (the window's length)")
    if SETUP.option(request, "offered_load") is not None:
        given = [f"--{n}" for n in ("training", "inference") if n in request.options]
        if given:
            raise ValidationError(f"--kind lyra: {' and '.join(given)} cannot be given with --offered-load (it sizes "
                                  "the cluster)")
    sim = lyra_simulation(request.trace, training=training, inference=inference, jobs=request.jobs,
                          max_jobs=request.max_jobs, usage=usage, seed=request.seed,
                          scenario=SETUP.option(request, "scenario"),
                          heterogeneous_efficiency=SETUP.option(request, "hetero_efficiency"),
                          usage_burst=SETUP.option(request, "usage_burst"),
                          elastic_on_inference=SETUP.option(request, "elastic_on_inference"),
                          **{n: SETUP.option(request, n) for n in ("window_days", "window_start", "fungible_load",
                                                                   "elastic_load", "elastic_count", "offered_load")})
    training, inference = sim.cluster_sizes()
    unlent = tuple(sorted({n.strip() for n in SETUP.option(request, "no_loaning").split(",") if n.strip()}))

    def events(method: str) -> dict[str, Any]:
        return sim.events(method, loaning=method not in unlent)

    dropped = sim.describe_dropped()
    burst = None if sim.usage is None else median_burst(sim.usage.values, sim.usage.step_s)
    burst_note = "" if burst is None else f"usage: median 5-minute change {100 * burst:.2f}% of the inference servers"
    share, margin = SETUP.option(request, "prediction_error"), SETUP.option(request, "prediction_margin")
    for flag, v, top in (("--prediction-error", share, 1.0), ("--prediction-margin", margin, 0.999999)):
        if not 0.0 <= v <= top:
            raise ValidationError(f"--kind lyra: {flag} must lie in [0, 1{')' if top < 1 else ']'}, got {v}")
    predictor = runtime_predictor(sim.jobs, share, margin, seed=request.seed)
    def per_server_day(summary: Mapping[str, Any]) -> dict[str, Any]:
        rate = sim.preemptions_per_server_day(summary["preemptions"])
        return {"preemptions_per_inference_server_day": None if rate is None else round(rate, 6)}

    return SimulationInputs(sim.cluster, sim.jobs, sim.truth, sim.trace_name,
                            f"trace {sim.trace_name}: {len(sim.jobs)} jobs on {sim.cluster.name} ({training} training "
                            f"+ {inference} inference servers), usage {usage}" + (f" ({dropped})" if dropped else ""),
                            notes=tuple(n for n in (sim.window and f"window: {sim.window}", sim.sizing,
                                                    burst_note,
                                                    "job mix: " + sim.mix().describe(), sim.describe_elastic(),
                                                    sim.describe_scenario(),
                                                    predictor.describe()) if n),
                            named_policies={"no_loaning": unlent},
                            runs={"policy_extras": {PREDICTOR_OPTION: predictor}}, per_method=events,
                            policy_summary=per_server_day,
                            summary={"window": sim.window, "sizing": sim.sizing or None,
                                     "usage_median_burst": None if burst is None else round(burst, 6),
                                     "job_mix": dataclasses.asdict(sim.mix()),
                                     "elastic_on_inference": sim.elastic_allowed is not None,
                                     "inference_servers": inference, "trace_days": sim.trace_days,
                                     "scenario": {"name": sim.scenario,
                                                  "heterogeneous_jobs": len(sim.truth.heterogeneous),
                                                  "efficiency": sim.truth.heterogeneous_efficiency},
                                     "prediction": {"wrong_share": predictor.wrong_share,
                                                    "margin": predictor.margin,
                                                    "mispredicted_jobs": len(predictor.factors)}})


SETUP = register_simulation(SimulationSetup(
    "lyra", "Lyra jobs on training and loaned inference servers (jobs run at their traces' speed)",
    DEFAULT_POLICIES, None, build, reads=("jobs", "max_jobs"), options=OPTIONS))

__all__ = ["DEFAULT_POLICIES", "OPTIONS", "SETUP", "build"]
