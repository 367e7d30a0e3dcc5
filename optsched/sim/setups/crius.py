"""Simulations of ``crius`` rounds (docs/simulation.md, "Crius jobs"): jobs of the Crius Table 2 models
drawn as in Crius Sec. 8.1 (a synthetic or Philly-format trace) on the heterogeneous cluster of Crius
Table 1, against the Crius ground truth (its cost model with its own parameters).

Options of the kind (``optsched simulate --kind crius``):

* ``--arrival-rate`` (jobs per hour; synthetic trace): Poisson arrivals at this rate instead of rescaling them
  to ``--load`` (the two exclude each other); the ``crius-paper`` preset sets the rate of Crius Sec. 8.1,
  "two-week traces of 13,000+ jobs" (13,000 / 336 h = 38.7 jobs/h).
* ``--deadline-range LO,HI`` (synthetic trace): every job gets a deadline, submission plus ``lambda x`` its
  duration, ``lambda`` uniform in ``[LO, HI]`` (:func:`~optsched.sim.traces.crius.with_deadlines`), and the
  rounds take the paper's deadline objective (``objective: deadline``, Crius-DDL of Sec. 8.5); summary.json
  then gives each policy's ``deadline_satisfactory_ratio`` (Sec. 8.5, ElasticFlow's metric).
* ``--search-depth D``: the rounds' search depth (default 3, Sec. 8.4: "we set the search depth to 3").
* ``--max-duration H`` (hours): trace durations are clipped at ``H`` hours (default 24, our
  :data:`~optsched.sim.traces.crius.DEFAULT_MAX_DURATION_S`; the paper clips none: its "one-week Philly trace"
  of Fig. 16 keeps every duration). The ``crius-paper`` preset clips at its one-week window (168 h). ``H`` must be
  at least the ten-minute floor (:data:`~optsched.sim.traces.crius.DEFAULT_MIN_DURATION_S`).
"""

from __future__ import annotations

from optsched.core.catalog import resolve_cluster
from optsched.core.errors import ValidationError
from optsched.rounds.crius.problem import DEFAULT_SEARCH_DEPTH
from optsched.sim.crius_truth import CriusGroundTruth
from optsched.sim.setup import (SimulationInputs, SimulationOption, SimulationRequest, SimulationSetup,
                                register_simulation)
from optsched.sim.traces import detect_format
from optsched.sim.traces.crius import DEFAULT_MAX_DURATION_S, DEFAULT_MIN_DURATION_S, crius_philly_trace, \
    crius_synthetic_trace

DEFAULT_CLUSTER = "crius-sim-1280"
DEFAULT_POLICIES = ("crius", "fcfs", "fcfs-backfill", "gandiva", "gavel", "elasticflow")
#: the policies of a deadline simulation (Crius Sec. 8.5 compares Crius-DDL with ElasticFlow)
DEADLINE_POLICIES = ("crius", "elasticflow-ddl", "elasticflow", "gavel", "gandiva", "fcfs-backfill", "fcfs")


def parse_range(text: str) -> tuple[float, float]:
    """``"LO,HI"`` -> (LO, HI), 0 < LO <= HI; ``ValidationError`` naming ``--deadline-range`` otherwise."""
    try:
        lo, hi = (float(x) for x in str(text).split(","))
    except ValueError:
        raise ValidationError(f"--deadline-range must be LO,HI (two numbers), got {text!r}") from None
    if not 0 < lo <= hi:
        raise ValidationError(f"--deadline-range {text!r}: needs 0 < LO <= HI")
    return lo, hi


def max_duration_s(hours: object) -> float:
    """``--max-duration`` (hours) in seconds; ``ValidationError`` naming the option unless it is a number of
    hours at least the ten-minute floor of the durations (:data:`DEFAULT_MIN_DURATION_S`)."""
    floor_h = DEFAULT_MIN_DURATION_S / 3600.0
    if isinstance(hours, bool) or not isinstance(hours, (int, float)) or not hours >= floor_h:
        raise ValidationError(f"--max-duration must be a number of hours >= {floor_h:g} (the ten-minute floor of "
                              f"the trace's durations), got {hours!r}")
    return float(hours) * 3600.0


def build(request: SimulationRequest) -> SimulationInputs:
    """The inputs of a Crius simulation (module docstring)."""
    cluster = resolve_cluster(request.cluster or DEFAULT_CLUSTER)
    truth = CriusGroundTruth(cluster)
    rate = SETUP.option(request, "arrival_rate")
    ddl_text = SETUP.option(request, "deadline_range")
    depth = SETUP.option(request, "search_depth")
    ddl = None if ddl_text is None else parse_range(ddl_text)
    clip = max_duration_s(SETUP.option(request, "max_duration"))
    if request.trace == "synthetic":
        if rate is not None and "load" in request.given():
            raise ValidationError("--kind crius: --arrival-rate and --load exclude each other (the rate sets the load)")
        if rate is not None and not rate > 0:
            raise ValidationError(f"--arrival-rate must be > 0 jobs per hour, got {rate!r}")
        trace = crius_synthetic_trace(cluster, truth, num_jobs=request.jobs, seed=request.seed,
                                      load=None if rate is not None else request.load,
                                      arrival_rate=None if rate is None else rate / 3600.0, deadline_range=ddl,
                                      max_duration=clip)
    elif detect_format(request.trace) == "philly":
        if rate is not None or ddl is not None:
            raise ValidationError("--kind crius: --arrival-rate and --deadline-range apply to the synthetic trace only")
        trace = crius_philly_trace(request.trace, cluster, truth, seed=request.seed, max_jobs=request.max_jobs,
                                   max_duration=clip)
    else:
        raise ValidationError(f"--kind crius: trace {request.trace!r} is not in the Philly format (or use 'synthetic')")
    fields: dict[str, object] = {}
    if ddl is not None:
        fields["objective"] = "deadline"
        fields["past_deadlines"] = "accept"  # deadlines pass while jobs wait: such a job is dropped, not an error
    if depth is not None:
        fields["search_depth"] = int(depth)
    name = trace.source or trace.name
    return SimulationInputs(cluster, tuple(trace.jobs), truth, name,
                            f"trace {name}: {len(trace)} jobs (durations clipped at {clip / 3600:g} h) on "
                            f"{cluster.name} ({cluster.total_gpus} GPUs), "
                            f"ground truth {truth.describe()}"
                            + (f", rounds {', '.join(f'{k}={v}' for k, v in fields.items())}" if fields else ""),
                            runs={"round_fields": fields} if fields else {})


SETUP = register_simulation(SimulationSetup(
    "crius", "jobs of the Crius Table 2 models on a heterogeneous cluster, a synthetic or Philly-format trace, the "
             "Crius ground truth", DEFAULT_POLICIES, DEFAULT_CLUSTER, build,
    reads=("jobs", "load", "max_jobs", "cluster"),
    options=(SimulationOption("arrival_rate", float, None, "synthetic trace: Poisson arrivals, jobs per hour "
                              "(instead of --load)", "R"),
             SimulationOption("deadline_range", str, None, "synthetic trace: deadlines submit + lambda x duration, "
                              "lambda uniform in [LO,HI]; rounds use the deadline objective (Crius Sec. 8.5)",
                              "LO,HI"),
             SimulationOption("search_depth", int, None, f"search depth D of the rounds (default "
                              f"{DEFAULT_SEARCH_DEPTH}, Crius Sec. 8.4)", "D"),
             SimulationOption("max_duration", float, DEFAULT_MAX_DURATION_S / 3600.0,
                              "trace durations clipped at H hours (default 24, ours; the paper clips none; the "
                              "crius-paper preset: 168, its one-week window)", "H"))))

__all__ = ["DEADLINE_POLICIES", "DEFAULT_CLUSTER", "DEFAULT_POLICIES", "SETUP", "build", "max_duration_s",
           "parse_range"]
