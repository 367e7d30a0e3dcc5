"""``optsched simulate``: replay a trace (or the built-in synthetic one) under several policies on one
cluster and ground truth, and compare them (``docs/simulation.md``). What a kind simulates (its default
cluster, policies, trace formats, ground truth and own options) comes from its registered setup
(:mod:`optsched.sim.setup`), so ``--kind`` takes every kind that has one."""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from optsched.cli.common import check_output_dir, format_table, out, plots_skipped
from optsched.core.errors import ValidationError
from optsched.policies.options import DEFAULT_TIME_LIMIT
from optsched.policies.registry import DEFAULT_KIND, methods_of
from optsched.sim.config import (PREEMPT_RESTART_S, PROFILING_SCOPES, RECONFIG_OVERHEAD_S, ROUND_INTERVAL_S,
                                 SimConfig)
from optsched.sim.presets import PRESETS, get_preset
from optsched.sim.setup import SimulationRequest, simulation_kinds, simulation_setup


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched simulate``: the common ones, and each simulation kind's own."""
    kinds = simulation_kinds()
    setups = [simulation_setup(k) for k in kinds]
    methods = tuple(dict.fromkeys(m for k in kinds for m in methods_of(k)))
    p.description = ("Replay a job trace on a cluster under each policy (same trace, cluster and ground truth), print "
                     "a comparison table with ratios to the first policy and write summary.json, jobs.csv, "
                     "timeline.csv (and PNG plots with matplotlib).")
    p.add_argument("--trace", default="synthetic", metavar="PATH",
                   help="trace CSV (Rubick workload, Philly or ITP format, told by its header) or 'synthetic' "
                        "(default: a Philly-calibrated synthetic trace)")
    p.add_argument("--jobs", type=int, default=None, metavar="N", help="synthetic trace: number of jobs (120)")
    p.add_argument("--load", type=float, default=None, metavar="L", help="synthetic trace: offered load (1.0)")
    p.add_argument("--max-jobs", type=int, metavar="N", help="Philly/ITP traces: keep the first N jobs")
    p.add_argument("--infeasible-plans", choices=("error", "unset", "skip"), default="error",
                   help="workload traces: a requested plan that cannot run on its request is an error (default), "
                        "is dropped so the scheduler picks the plan ('unset'), or drops the job ('skip')")
    p.add_argument("--seed", type=int, default=0, help="seed of model/plan assignment and of the solvers (0)")
    clusters = "; ".join(f"{s.default_cluster} with --kind {s.kind}" for s in setups[1:] if s.default_cluster)
    p.add_argument("--cluster", default=None, metavar="NAME|PATH",
                   help=f"built-in cluster name or cluster JSON file (default {setups[0].default_cluster}"
                        + (f"; {clusters})" if clusters else ")"))
    defaults = "; ".join(f"with --kind {s.kind}: {' '.join(s.default_policies)}" for s in setups[1:])
    p.add_argument("--policy", nargs="+", action="extend", metavar="NAME", choices=methods,
                   help=f"policies to compare, first is the baseline of the ratios; repeatable, values accumulate "
                        f"(default: {' '.join(setups[0].default_policies)}; {defaults}; known: {', '.join(methods)})")
    p.add_argument("--kind", default=DEFAULT_KIND, choices=kinds,
                   help=f"round kind of the policies (default {DEFAULT_KIND}); "
                        + "; ".join(f"{s.kind}: {s.summary}" for s in setups) + " (docs/simulation.md)")
    for s in setups:
        for opt in s.options:
            p.add_argument("--" + opt.name.replace("_", "-"), dest=opt.name, type=opt.type, default=None,
                           metavar=opt.metavar, help=f"--kind {s.kind}: {opt.help}")
    p.add_argument("--params", action="append", default=[], metavar="PARAMS.json",
                   help="fitted performance model (from 'optsched fit') the policies plan with, replacing the "
                        "built-in one of its model and GPU type; repeatable (the ground truth is separate)")
    p.add_argument("--ground-truth", default="analytical", metavar="SPEC",
                   help="'analytical' (built-in model), 'measured:DIR' (placements CSVs such as "
                        "../shared/data/morphling/placements, a subset of the Rubick artifact's tables; "
                        "calibrated Eq. 1 elsewhere), 'neighbours:DIR' (the same tables; measured-neighbour "
                        "interpolation elsewhere, independent of the policies' model) or "
                        "'params:FILE.json' (fitted parameters as truth) (default analytical)")
    p.add_argument("--trace-durations", choices=("use", "ignore"), default="use",
                   help="workload traces carry each job's duration next to its steps: 'use' (default) runs every "
                        "job at duration/steps at its request and scales its other configurations by the ground "
                        "truth; 'ignore' runs them at the ground truth alone (docs/simulation.md)")
    p.add_argument("--configs", choices=("all", "measured"), default="all",
                   help="candidate configurations of every policy: 'all' (default) or only those the measured "
                        "ground truth contains ('measured', needs --ground-truth measured:DIR or "
                        "neighbours:DIR), so that no decision rests on extrapolation; summary.json then gives each "
                        "policy's measured_share")
    p.add_argument("--preset", metavar="NAME", choices=sorted(PRESETS),
                   help="settings of a published simulator: " + "; ".join(
                       f"{n}: {_preset_text(PRESETS[n])}" for n in sorted(PRESETS))
                   + " (flags given explicitly win; default: rubick-paper's values; a preset of one kind also sets "
                     "that kind's workload and default policies)")
    p.add_argument("--round-interval", type=float, metavar="S",
                   help=f"periodic round interval in seconds ({ROUND_INTERVAL_S:g})")
    p.add_argument("--min-round-gap", type=float, metavar="S",
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
    p.add_argument("--profiling", type=float, default=0.0, metavar="S",
                   help="seconds a new model type is profiled before its jobs reach a round (0 = off; Rubick Sec. "
                        "7.3: 'about 210 seconds' per model; docs/simulation.md, 'Profiling')")
    p.add_argument("--profiling-scope", choices=PROFILING_SCOPES, default="rubick",
                   help="policies that pay --profiling: 'rubick' (Rubick and its variants, default) or 'all'")
    p.add_argument("--no-checkpoint", action="store_true",
                   help="preempted jobs lose the progress since their last periodic checkpoint")
    p.add_argument("--checkpoint-interval", type=float, metavar="S",
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
    text = (f"rounds {rounds}every {v['round_interval_s']:g} s, first start {v['start_overhead_s']:g} s, "
            f"reconfiguration {v['reconfig_overhead_s']:g} s, restart {v['preempt_restart_s']:g} s")
    if preset.kind is not None:
        text += f", --kind {preset.kind} only, workload " + " ".join(f"{k}={w}" for k, w in preset.request.items())
    if preset.policies:
        text += ", policies " + " ".join(preset.policies)
    return text


def _sim_config(args: argparse.Namespace) -> Any:
    """The simulator settings of ``optsched simulate``: the ``--preset`` (default ``rubick-paper``)
    with every option given on the command line overriding it."""
    config = get_preset(args.preset or "rubick-paper").config(
        SimConfig(checkpoint_on_preempt=not args.no_checkpoint, max_time_s=args.max_time, seed=args.seed,
                  trim_overhead_s=args.trim_overhead, profiling_s=args.profiling,
                  profiling_scope=args.profiling_scope),
        round_interval_s=args.round_interval, reconfig_overhead_s=args.reconfig_overhead,
        preempt_restart_s=args.preempt_restart, start_overhead_s=args.start_overhead,
        min_round_gap_s=args.min_round_gap, checkpoint_interval_s=args.checkpoint_interval)
    return replace(config, checkpoint_on_preempt=False) if args.no_checkpoint else config


def _request(args: argparse.Namespace) -> SimulationRequest:
    """The :class:`~optsched.sim.setup.SimulationRequest` of the command's options; a kind's own options
    only where given (so that one given to another kind is named, :func:`~optsched.sim.setup.check_request`).
    A preset of one kind (e.g. ``crius-paper``) fills the workload settings the command line leaves unset: its
    kind must be ``--kind``'s, and its trace settings apply to the synthetic trace only."""
    own = {o.name for k in simulation_kinds() for o in simulation_setup(k).options}
    preset = get_preset(args.preset) if args.preset else None
    wanted: dict[str, Any] = {}
    if preset is not None and preset.kind is not None:
        if preset.kind != args.kind:
            raise ValidationError(f"--preset {preset.name} applies to --kind {preset.kind} only, "
                                  f"not --kind {args.kind}")
        wanted = {k: v for k, v in preset.request.items()
                  if args.trace == "synthetic" or k not in ("trace", "jobs", "load", "arrival_rate")}
    given = {n: getattr(args, n) for n in sorted(own) if getattr(args, n) is not None}
    # --load replaces a preset's arrival rate (the synthetic trace takes one or the other); a usage series other than
    # the synthetic one drops a preset's usage_burst (it shapes the synthetic series only)
    dropped = {"arrival_rate"} if args.load is not None else set()
    if getattr(args, "usage", None) not in (None, "synthetic"):
        dropped.add("usage_burst")
    options = {**{k: v for k, v in wanted.items() if k in own and k not in dropped}, **given}
    jobs = args.jobs if args.jobs is not None else wanted.get("jobs", 120)
    return SimulationRequest(trace=args.trace, jobs=jobs, load=1.0 if args.load is None else args.load,
                             max_jobs=args.max_jobs, infeasible_plans=args.infeasible_plans, seed=args.seed,
                             cluster=args.cluster, ground_truth=args.ground_truth, params=tuple(args.params),
                             configs=args.configs, trace_durations=args.trace_durations, options=options)


def run(args: argparse.Namespace) -> int:
    """Simulate every policy on the trace, print the comparison and write the output files."""
    from optsched.experiments.compare import comparison_rows, simulate_kind, write_outputs
    check_output_dir(args.out)
    config = _sim_config(args)
    policies = args.policy or (get_preset(args.preset).policies if args.preset else ())
    inputs, results = simulate_kind(args.kind, _request(args), policies, config,
                                    time_limit=args.time_limit, progress=not args.no_progress)
    header, rows = comparison_rows(results)
    out(inputs.heading)
    for note in inputs.notes:
        out(note)
    out(format_table(header, rows))
    shares = {name: r.measured_share for name, r in results.items() if r.measured_share is not None}
    if shares:
        restricted = inputs.runs.get("allowed_configs") is not None
        out("measured share of job-time: " + ", ".join(f"{n} {v:.2f}" for n, v in shares.items())
            + (" (candidates restricted to measured configurations)" if restricted else ""))
    extra = {"preset": args.preset, **inputs.summary} if inputs.summary else None
    written = write_outputs(results, args.out, config, extra=extra, plots=not args.no_plots and not plots_skipped(),
                            policy_summary=inputs.policy_summary)
    out("wrote " + ", ".join(str(p) for p in written))
    return 0
