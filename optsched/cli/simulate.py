"""``optsched simulate``: replay a trace (or the built-in synthetic one) under several policies on one
cluster and ground truth, and compare them (``docs/simulation.md``); ``--kind crius`` and ``--kind
lyra`` simulate those systems' jobs."""

from __future__ import annotations

import argparse
from typing import Any

from optsched.cli.common import (DEFAULT_CLUSTER, check_output_dir, format_table, log, out, policy_models,
                                 resolve_cluster)
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.policies.options import DEFAULT_TIME_LIMIT
from optsched.policies.registry import DEFAULT_KIND, methods_of
from optsched.sim.config import PREEMPT_RESTART_S, RECONFIG_OVERHEAD_S, ROUND_INTERVAL_S, SimConfig
from optsched.sim.presets import PRESETS, get_preset

#: what ``optsched simulate`` runs by default
DEFAULT_SIM_POLICIES = ("rubick", "sia", "synergy", "fifo")
#: what ``optsched simulate --kind crius`` runs by default, and on which cluster
CRIUS_SIM_POLICIES = ("crius", "fcfs", "gandiva", "gavel", "elasticflow")
CRIUS_SIM_CLUSTER = "crius-sim-1280"
#: what ``optsched simulate --kind lyra`` runs by default
LYRA_SIM_POLICIES = ("lyra", "lyra-loan", "fifo")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched simulate``."""
    methods = tuple(dict.fromkeys([*methods_of(DEFAULT_KIND), *methods_of("crius"), *methods_of("lyra")]))
    p.description = ("Replay a job trace on a cluster under each policy (same trace, cluster and ground truth), print "
                     "a comparison table with ratios to the first policy and write summary.json, jobs.csv, "
                     "timeline.csv (and PNG plots with matplotlib).")
    p.add_argument("--trace", default="synthetic", metavar="PATH",
                   help="trace CSV (Rubick workload, Philly or ITP format, told by its header) or 'synthetic' "
                        "(default: a Philly-calibrated synthetic trace)")
    p.add_argument("--jobs", type=int, default=120, metavar="N", help="synthetic trace: number of jobs (120)")
    p.add_argument("--load", type=float, default=1.0, metavar="L", help="synthetic trace: offered load (1.0)")
    p.add_argument("--max-jobs", type=int, metavar="N", help="Philly/ITP traces: keep the first N jobs")
    p.add_argument("--infeasible-plans", choices=("error", "unset", "skip"), default="error",
                   help="workload traces: a requested plan that cannot run on its request is an error (default), "
                        "is dropped so the scheduler picks the plan ('unset'), or drops the job ('skip')")
    p.add_argument("--seed", type=int, default=0, help="seed of model/plan assignment and of the solvers (0)")
    p.add_argument("--cluster", default=None, metavar="NAME|PATH",
                   help=f"built-in cluster name or cluster JSON file (default {DEFAULT_CLUSTER}; {CRIUS_SIM_CLUSTER} "
                        "with --kind crius)")
    p.add_argument("--policy", nargs="+", action="extend", metavar="NAME", choices=methods,
                   help=f"policies to compare, first is the baseline of the ratios; repeatable, values accumulate "
                        f"(default: {' '.join(DEFAULT_SIM_POLICIES)}; with --kind crius: "
                        f"{' '.join(CRIUS_SIM_POLICIES)}; known: {', '.join(methods)})")
    p.add_argument("--kind", default=DEFAULT_KIND, choices=(DEFAULT_KIND, "crius", "lyra"),
                   help="round kind of the policies (default rubick); crius: jobs of the Crius Table 2 models on a "
                        "heterogeneous cluster, a synthetic or Philly-format trace, the Crius ground truth "
                        "(docs/simulation.md); lyra: Lyra jobs on training and loaned inference servers")
    p.add_argument("--training", type=int, default=2, metavar="N", help="--kind lyra: 8xV100 training servers (2)")
    p.add_argument("--inference", type=int, default=2, metavar="N", help="--kind lyra: 8xT4 inference servers (2)")
    p.add_argument("--usage", default="synthetic", metavar="synthetic|none|CSV",
                   help="--kind lyra: inference usage series deciding the loans: synthetic (Fig. 3.1 shape), none "
                        "(no loaning) or a time_s,usage CSV (default synthetic)")
    p.add_argument("--params", action="append", default=[], metavar="PARAMS.json",
                   help="fitted performance model (from 'optsched fit') the policies plan with, replacing the "
                        "built-in one of its model and GPU type; repeatable (the ground truth is separate)")
    p.add_argument("--ground-truth", default="analytical", metavar="SPEC",
                   help="'analytical' (built-in model), 'measured:DIR' (placements CSVs such as "
                        "../shared/data/morphling/placements, a subset of the Rubick artifact's tables) or "
                        "'params:FILE.json' (fitted parameters as truth) (default analytical)")
    p.add_argument("--trace-durations", choices=("use", "ignore"), default="use",
                   help="workload traces carry each job's duration next to its steps: 'use' (default) runs every "
                        "job at duration/steps at its request and scales its other configurations by the ground "
                        "truth; 'ignore' runs them at the ground truth alone (docs/simulation.md)")
    p.add_argument("--configs", choices=("all", "measured"), default="all",
                   help="candidate configurations of every policy: 'all' (default) or only those the measured "
                        "ground truth contains ('measured', needs --ground-truth measured:DIR), so that no "
                        "decision rests on extrapolation; summary.json then gives each policy's measured_share")
    p.add_argument("--preset", metavar="NAME", choices=sorted(PRESETS),
                   help="settings of a published simulator: " + "; ".join(
                       f"{n}: {_preset_text(PRESETS[n])}" for n in sorted(PRESETS))
                   + " (flags given explicitly win; default: rubick-paper's values)")
    p.add_argument("--round-interval", type=float, metavar="S",
                   help=f"periodic round interval in seconds ({ROUND_INTERVAL_S:g})")
    p.add_argument("--min-round-gap", type=float, default=0.0, metavar="S",
                   help="rate-limit rounds triggered by arrivals/completions to one per S seconds (0: none)")
    p.add_argument("--reconfig-overhead", type=float, metavar="S",
                   help=f"seconds a reconfiguration costs ({RECONFIG_OVERHEAD_S:g})")
    p.add_argument("--preempt-restart", type=float, metavar="S",
                   help=f"seconds a restart after preemption costs ({PREEMPT_RESTART_S:g})")
    p.add_argument("--start-overhead", type=float, metavar="S",
                   help="seconds a job's first start costs (0: a trace's own times already hold it)")
    p.add_argument("--trim-overhead", type=float, default=0.0, metavar="S",
                   help="seconds a trim costs: a running job whose CPUs or memory change on the same GPUs, applied "
                        "in place without a restart (0)")
    p.add_argument("--no-checkpoint", action="store_true",
                   help="preempted jobs lose the progress since their last periodic checkpoint")
    p.add_argument("--checkpoint-interval", type=float, default=1800.0, metavar="S",
                   help="periodic checkpoint interval with --no-checkpoint (1800)")
    p.add_argument("--max-time", type=float, metavar="S", help="stop the simulation at this time")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help=f"per-round limit of solver-backed policies ({DEFAULT_TIME_LIMIT:g})")
    p.add_argument("--out", default="optsched-sim", metavar="DIR", help="output directory (optsched-sim)")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def _preset_text(preset: Any) -> str:
    v = preset.settings
    rounds = "every arrival/completion and " if v["rounds_on_events"] else "only "
    return (f"rounds {rounds}every {v['round_interval_s']:g} s, first start {v['start_overhead_s']:g} s, "
            f"reconfiguration {v['reconfig_overhead_s']:g} s, restart {v['preempt_restart_s']:g} s")


def _ground_truth(spec: str, cluster: Cluster) -> Any:
    from optsched.sim.ground_truth import AnalyticalGroundTruth, MeasuredGroundTruth
    kind, _, arg = spec.partition(":")
    if kind == "analytical" and not arg:
        return AnalyticalGroundTruth(cluster)
    if kind == "measured" and arg:
        return MeasuredGroundTruth.from_directory(arg, cluster)
    if kind == "params" and arg:
        return AnalyticalGroundTruth.from_params_json(arg, cluster)
    raise ValidationError(f"--ground-truth {spec!r}: expected 'analytical', 'measured:DIR' or 'params:FILE.json'")


def _sim_config(args: argparse.Namespace) -> Any:
    """The simulator settings of ``optsched simulate``: the ``--preset`` (default ``rubick-paper``)
    with every option given on the command line overriding it."""
    return get_preset(args.preset or "rubick-paper").config(
        SimConfig(checkpoint_on_preempt=not args.no_checkpoint, checkpoint_interval_s=args.checkpoint_interval,
                  min_round_gap_s=args.min_round_gap, max_time_s=args.max_time, seed=args.seed,
                  trim_overhead_s=args.trim_overhead),
        round_interval_s=args.round_interval, reconfig_overhead_s=args.reconfig_overhead,
        preempt_restart_s=args.preempt_restart, start_overhead_s=args.start_overhead)


def run(args: argparse.Namespace) -> int:
    """Simulate every policy on the trace, print the comparison and write the output files."""
    from optsched.experiments.compare import comparison_rows, measured_configs, run_policies, write_outputs
    from optsched.sim.trace_speed import trace_speeds
    from optsched.sim.traces import detect_format, load_trace
    check_output_dir(args.out)
    if args.kind == "crius":
        return _simulate_crius(args)
    if args.kind == "lyra":
        return _simulate_lyra(args)
    policies = args.policy or list(DEFAULT_SIM_POLICIES)
    cluster = resolve_cluster(args.cluster or DEFAULT_CLUSTER)
    truth = _ground_truth(args.ground_truth, cluster)
    models = policy_models(args.params, cluster)
    allowed = None
    if args.configs == "measured":
        try:
            allowed = measured_configs(truth)
        except ValidationError as exc:
            raise ValidationError(f"--configs measured: {exc}") from None
    config = _sim_config(args)
    options: dict[str, Any] = {}
    if args.trace == "synthetic":
        options.update(num_jobs=args.jobs, load=args.load)
    elif detect_format(args.trace) == "workload":
        options["infeasible_plans"] = args.infeasible_plans
    elif args.max_jobs is not None:
        options["max_jobs"] = args.max_jobs
    trace = load_trace(args.trace, cluster, seed=args.seed, iteration_time=truth.iteration_time, **options)
    log.info("trace %s: %d jobs (%s); ground truth %s", trace.name, len(trace), trace.source, truth.describe())
    speeds = trace_speeds(trace, truth, cluster) if args.trace_durations == "use" and trace.durations else None
    extra: dict[str, Any] = {"preset": args.preset, "configs": args.configs,
                             "trace_durations": None if speeds is None else speeds.to_dict()}
    results = run_policies(cluster, trace.jobs, truth, policies, config, round_fields=trace.round_fields(),
                           time_limit=args.time_limit, trace_name=trace.source or trace.name,
                           progress=not args.no_progress, perf_models=models or None,
                           time_scale=None if speeds is None else speeds.scales, allowed_configs=allowed)
    header, rows = comparison_rows(results)
    out(f"trace {trace.source or trace.name}: {len(trace)} jobs on {cluster.name} ({cluster.total_gpus} GPUs), "
        f"ground truth {truth.describe()}")
    if models:
        out("policies plan with fitted models: " + ", ".join(f"{m} on {g}" for m, g in sorted(models)))
    if speeds is not None:
        out("trace durations: " + speeds.describe())
    elif trace.durations:
        out(f"trace durations: ignored (--trace-durations ignore); {len(trace)} jobs run at the ground truth")
    out(format_table(header, rows))
    shares = {name: r.measured_share for name, r in results.items() if r.measured_share is not None}
    if shares:
        out("measured share of job-time: " + ", ".join(f"{n} {v:.2f}" for n, v in shares.items())
            + (" (candidates restricted to measured configurations)" if allowed is not None else ""))
    written = write_outputs(results, args.out, config, extra=extra, plots=not args.no_plots)
    out("wrote " + ", ".join(str(p) for p in written))
    return 0


def _simulate_crius(args: argparse.Namespace) -> int:
    """``optsched simulate --kind crius`` (docs/simulation.md): Crius jobs, the Crius ground truth."""
    from optsched.experiments.compare import run_policies
    from optsched.sim.crius_truth import CriusGroundTruth
    from optsched.sim.traces import detect_format
    from optsched.sim.traces.crius import crius_philly_trace, crius_synthetic_trace
    policies = args.policy or list(CRIUS_SIM_POLICIES)
    bad = [p for p in policies if p not in methods_of("crius")]
    if bad:
        raise ValidationError(f"--kind crius: {', '.join(bad)} is no crius method (known: {', '.join(methods_of('crius'))})")
    if args.params:
        raise ValidationError("--params gives Rubick performance models; --kind crius estimates Cells itself")
    if args.ground_truth != "analytical":
        raise ValidationError("--kind crius: the ground truth is the Crius cost model with its own parameters; "
                              "--ground-truth takes only 'analytical'")
    cluster = resolve_cluster(args.cluster or CRIUS_SIM_CLUSTER)
    truth = CriusGroundTruth(cluster)
    config = _sim_config(args)
    if args.trace == "synthetic":
        trace = crius_synthetic_trace(cluster, truth, num_jobs=args.jobs, seed=args.seed, load=args.load)
    elif detect_format(args.trace) == "philly":
        trace = crius_philly_trace(args.trace, cluster, truth, seed=args.seed, max_jobs=args.max_jobs)
    else:
        raise ValidationError(f"--kind crius: trace {args.trace!r} is not in the Philly format (or use 'synthetic')")
    results = run_policies(cluster, trace.jobs, truth, policies, config, time_limit=args.time_limit,
                           trace_name=trace.source or trace.name, progress=not args.no_progress, kind="crius")
    return _comparison(results, f"trace {trace.source or trace.name}: {len(trace)} jobs on {cluster.name} "
                                f"({cluster.total_gpus} GPUs), ground truth {truth.describe()}", config, args)


def _comparison(results: Any, heading: str, config: Any, args: argparse.Namespace) -> int:
    """Print ``heading`` and the comparison table of a simulation's ``results`` and write its files."""
    from optsched.experiments.compare import comparison_rows, write_outputs
    header, rows = comparison_rows(results)
    out(heading)
    out(format_table(header, rows))
    written = write_outputs(results, args.out, config, plots=not args.no_plots)
    out("wrote " + ", ".join(str(p) for p in written))
    return 0


def _simulate_lyra(args: argparse.Namespace) -> int:
    """``optsched simulate --kind lyra`` (docs/simulation.md): Lyra jobs on training and inference servers,
    capacity loaned by the inference usage series (:mod:`optsched.sim.lyra_setup`)."""
    from optsched.experiments.compare import run_policies
    from optsched.sim.lyra_setup import lyra_simulation
    from optsched.sim.traces import detect_format
    policies = args.policy or list(LYRA_SIM_POLICIES)
    bad = [p for p in policies if p not in methods_of("lyra")]
    if bad:
        raise ValidationError(f"--kind lyra: {', '.join(bad)} is no lyra method (known: {', '.join(methods_of('lyra'))})")
    if args.params or args.ground_truth != "analytical" or args.cluster:
        raise ValidationError("--kind lyra: jobs run at their traces' speed on --training and --inference servers; "
                              "--params, --ground-truth and --cluster do not apply")
    if args.trace != "synthetic" and detect_format(args.trace) != "philly":
        raise ValidationError(f"--kind lyra: trace {args.trace!r} is not in the Philly format (or use 'synthetic')")
    setup = lyra_simulation(args.trace, training=args.training, inference=args.inference, jobs=args.jobs,
                            max_jobs=args.max_jobs, usage=args.usage, seed=args.seed)
    config = _sim_config(args)
    results = {}
    for method in policies:
        results.update(run_policies(setup.cluster, setup.jobs, setup.truth, [method], config, time_limit=args.time_limit,
                                    trace_name=setup.trace_name, progress=not args.no_progress, kind="lyra",
                                    **setup.events(method)))
    return _comparison(results, f"trace {setup.trace_name}: {len(setup.jobs)} jobs on {setup.cluster.name} "
                                f"({args.training} training + {args.inference} inference servers), usage {args.usage}",
                       config, args)
