"""Run several policies on one trace and write what they did: the comparison table with ratios to the
first policy, ``summary.json``, one per-job CSV, the cluster timeline and (when matplotlib is
installed) a JCT CDF and a throughput-over-time plot.

Every policy gets a fresh policy object, the same jobs, cluster, ground truth and settings, so the
comparison is fair (issue 4: "every policy ... runs on the same trace, cluster and ground truth").
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from optsched.core.errors import ValidationError
from optsched.core.events import CapacityChange, PoolTarget
from optsched.core.hardware import Cluster
from optsched.core.job import Job
from optsched.perf.lookup import ConfigFilter, FittedModels
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import DEFAULT_KIND, make_policy, methods_of
from optsched.sim.config import SimConfig
from optsched.sim.engine import Simulator
from optsched.sim.metrics import JobRecord, SimResult
from optsched.sim.setup import (SimulationInputs, SimulationRequest, check_request, simulation_kinds,
                                simulation_setup)
from optsched.sim.truth_source import IterationTimeSource, measured_configs

log = logging.getLogger(__name__)

SUMMARY_FORMAT = "optsched.simulation/1"


def run_policies(cluster: Cluster, jobs: Sequence[Job], ground_truth: IterationTimeSource, policies: Sequence[str],
                 config: SimConfig = SimConfig(), *, round_fields: Mapping[str, Any] | None = None,
                 capacity_changes: Sequence[CapacityChange] = (), time_limit: float = DEFAULT_TIME_LIMIT,
                 trace_name: str = "", progress: bool = False, perf_models: FittedModels | None = None,
                 kind: str = DEFAULT_KIND, time_scale: Mapping[str, float] | None = None,
                 pool_targets: Sequence[PoolTarget] = (),
                 allowed_configs: ConfigFilter | None = None,
                 policy_extras: Mapping[str, Any] | None = None) -> dict[str, SimResult]:
    """Simulate each policy of ``policies`` (method names of round kind ``kind``) on the same input.
    ``round_fields`` go to every round (e.g. a trace's :meth:`~optsched.sim.traces.trace.Trace.round_fields`);
    ``time_limit`` bounds each round of a solver-backed policy. ``perf_models`` are the fitted
    performance models the *policies* plan with (keyed by model name or (model name, GPU type); the
    built-in ones serve the rest); the jobs always advance at ``ground_truth``, times the per-job
    factors of ``time_scale`` where given (e.g. :func:`optsched.sim.trace_speed.trace_speeds`' scales,
    which anchor each job to its trace's own duration). ``allowed_configs`` restricts every policy's
    candidate configurations (e.g. to a measured table's, :func:`measured_configs`). Rubick policies defer a
    guaranteed job whose guarantee no node shape can reach this round instead of failing the round
    (:mod:`optsched.policies.rubick`). ``pool_targets``: servers lent to the rounds over time (Lyra,
    :mod:`optsched.sim.loaning`). ``policy_extras``: options of the kind every policy gets besides the
    setup's own (e.g. Lyra's running-time predictor, :mod:`optsched.rounds.lyra.prediction`)."""
    if not policies:
        raise ValidationError("simulate: give at least one policy")
    dup = sorted({p for p in policies if list(policies).count(p) > 1})
    if dup:
        raise ValidationError(f"simulate: policy {dup[0]!r} listed twice")
    # a simulated round must not fail for one job whose guarantee no node shape reaches this round
    extras = dict(simulation_setup(kind).policy_extras) if kind in simulation_kinds() else {}
    extras.update(policy_extras or {})
    options = PolicyOptions(time_limit=time_limit, seed=config.seed, perf_models=perf_models, extras=extras,
                            allowed_configs=allowed_configs)
    made = {name: make_policy(name, options, kind=kind) for name in policies}
    describe = getattr(ground_truth, "describe", None)
    truth_name = describe() if callable(describe) else type(ground_truth).__name__
    out: dict[str, SimResult] = {}
    for name, policy in made.items():
        log.info("simulating %s on %s (%d jobs)", name, trace_name or "trace", len(jobs))
        sim = Simulator(cluster, jobs, policy, ground_truth, config, round_fields=round_fields,
                        capacity_changes=capacity_changes, trace_name=trace_name, ground_truth_name=truth_name,
                        time_scale=time_scale, pool_targets=pool_targets)
        out[name] = sim.run(progress=progress)
    return out


# -- the comparison table -----------------------------------------------------------------------
def _hours(v: float | None) -> str:
    return "-" if v is None else f"{v / 3600.0:.2f}"


def _ratio(v: float | None, base: float | None) -> str:
    if v is None or base is None or base <= 0:
        return "-"
    return f"{v / base:.2f}x"


def comparison_rows(results: Mapping[str, SimResult]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: JCT average / median / P99, makespan and queuing time in hours with ratios to
    the first policy, counts (reconfigurations, trims, preemptions), GPU utilisation and simulation wall
    time; one extra row per policy for guaranteed and best-effort jobs when the trace has both. A ratio
    column's header says what it divides: e.g. ``avg JCT / rubick's`` is the row's average JCT over the
    first policy's (``rubick``) average JCT of the same jobs (all, guaranteed or best-effort)."""
    summaries = {name: r.summary() for name, r in results.items()}
    first = next(iter(summaries))
    base = summaries[first]
    header = ["policy", "jobs", "avg JCT h", f"avg JCT / {first}'s", "p50 JCT h", "p99 JCT h",
              f"p99 JCT / {first}'s", "makespan h", f"makespan / {first}'s", "avg queue h", "reconfigs", "trims",
              "preempts", "GPU util", "unfinished", "wall s"]
    rows: list[list[str]] = []
    split = any(r["guaranteed"]["finished"] for r in summaries.values()) and \
        any(r["best_effort"]["finished"] for r in summaries.values())
    for name, s in summaries.items():
        util = "-" if s["gpu_utilisation"] is None else f"{100 * s['gpu_utilisation']:.1f}%"
        rows.append([name, "all", _hours(s["avg_jct_s"]), _ratio(s["avg_jct_s"], base["avg_jct_s"]),
                     _hours(s["p50_jct_s"]), _hours(s["p99_jct_s"]), _ratio(s["p99_jct_s"], base["p99_jct_s"]),
                     _hours(s["makespan_s"]), _ratio(s["makespan_s"], base["makespan_s"]), _hours(s["avg_queue_s"]),
                     str(s["reconfigurations"]), str(s["trims"]), str(s["preemptions"]), util, str(s["unfinished"]),
                     f"{s['wall_seconds']:.1f}"])
        if split:
            for part, label in (("guaranteed", "guar."), ("best_effort", "BE")):
                p, b = s[part], base[part]
                rows.append([name, label, _hours(p["avg_jct_s"]), _ratio(p["avg_jct_s"], b["avg_jct_s"]),
                             _hours(p["p50_jct_s"]), _hours(p["p99_jct_s"]), _ratio(p["p99_jct_s"], b["p99_jct_s"]),
                             "", "", _hours(p["avg_queue_s"]), "", "", "", "", str(p["unfinished"]), ""])
    return header, rows


# -- files ---------------------------------------------------------------------------------------
def summary_document(results: Mapping[str, SimResult], config: SimConfig, extra: Mapping[str, Any] | None = None,
                     policy_summary: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None
                     ) -> dict[str, Any]:
    """The content of ``summary.json``: ``{"policies": {NAME: summary}}`` plus the run's context;
    ``policy_summary`` adds to each policy's summary (:attr:`~optsched.sim.setup.SimulationInputs.policy_summary`)."""
    first = next(iter(results.values()))
    doc: dict[str, Any] = {"format": SUMMARY_FORMAT, "trace": first.trace, "cluster": first.cluster,
                           "ground_truth": first.ground_truth,
                           "config": {k: getattr(config, k) for k in config.__dataclass_fields__},
                           "policies": {name: _policy_summary(r, policy_summary) for name, r in results.items()},
                           "messages": {name: list(r.messages) for name, r in results.items() if r.messages}}
    if extra:
        doc.update(extra)
    return doc


def _policy_summary(result: SimResult, more: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None
                    ) -> dict[str, Any]:
    """``result.summary()`` with what ``more`` adds, placed after ``preemption_ratio``."""
    summary = result.summary()
    if more is None:
        return summary
    added = dict(more(summary))
    out: dict[str, Any] = {}
    for key, value in summary.items():
        out[key] = value
        if key == "preemption_ratio":
            out.update(added)
    out.update(added)
    return out


def write_outputs(results: Mapping[str, SimResult], out_dir: str | Path, config: SimConfig,
                  extra: Mapping[str, Any] | None = None, plots: bool = True,
                  policy_summary: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None) -> list[Path]:
    """Write ``summary.json``, ``jobs.csv`` (one row per policy and job), ``timeline.csv`` (the
    cluster after every event) and, when matplotlib imports, ``jct_cdf.png`` and
    ``throughput.png``. Returns the paths written."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"{out}: cannot create output directory ({exc.strerror or exc})") from None
    written = [out / "summary.json", out / "jobs.csv", out / "timeline.csv"]
    document = summary_document(results, config, extra, policy_summary)
    written[0].write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    with written[1].open("w", newline="", encoding="utf-8") as f:
        fields = ["policy"] + list(JobRecord.__dataclass_fields__)
        w = None
        for name, r in results.items():
            for rec in r.jobs:
                row = {"policy": name, **rec.to_row()}
                if w is None:
                    w = csv.DictWriter(f, fieldnames=list(row))
                    w.writeheader()
                w.writerow(row)
        if w is None:
            f.write(",".join(fields) + "\n")
    with written[2].open("w", newline="", encoding="utf-8") as f:
        w2 = csv.writer(f)
        w2.writerow(["policy", "time_s", "busy_gpus", "available_gpus", "running", "queued", "throughput"])
        for name, r in results.items():
            for s in r.samples:
                w2.writerow([name, round(s.time, 3), s.busy_gpus, s.available_gpus, s.running, s.queued,
                             round(s.throughput, 6)])
    if plots:
        written.extend(_plots(results, out))
    return written


def _plots(results: Mapping[str, SimResult], out: Path) -> list[Path]:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.info("matplotlib is not installed; skipping plots (pip install 'optsched[plot]')")
        return []
    paths = [out / "jct_cdf.png", out / "throughput.png"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, r in results.items():
        jct = np.sort([j.jct_s / 3600.0 for j in r.jobs if j.jct_s is not None])
        if jct.size:
            ax.step(jct, np.arange(1, jct.size + 1) / jct.size, where="post", label=name)
    ax.set_xscale("log")
    _save(plt, fig, ax, "JCT (hours)", "fraction of jobs", paths[0])
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, r in results.items():
        t = [s.time / 3600.0 for s in r.samples]
        ax.step(t, [s.throughput for s in r.samples], where="post", label=name)
    _save(plt, fig, ax, "time (hours)", "normalised cluster throughput", paths[1])
    return paths


def _save(plt: Any, fig: Any, ax: Any, xlabel: str, ylabel: str, path: Path) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def simulate_kind(kind: str, request: SimulationRequest, policies: Sequence[str], config: SimConfig = SimConfig(),
                  *, time_limit: float = DEFAULT_TIME_LIMIT, progress: bool = False
                  ) -> tuple[SimulationInputs, dict[str, SimResult]]:
    """Simulate ``policies`` (methods of ``kind``; empty: the kind's defaults) on what ``request``
    asks, through the kind's registered setup (:mod:`optsched.sim.setup`): the request is checked
    (an option the kind would ignore is a ``ValidationError``), the setup builds the inputs, and each
    method runs with the inputs' keyword arguments for it. Returns the inputs and the results in the
    order of ``policies``."""
    setup = simulation_setup(kind)
    check_request(setup, request)
    policies = list(policies) or list(setup.default_policies)
    known = methods_of(kind)
    bad = [p for p in policies if p not in known]
    if bad:
        raise ValidationError(f"--kind {kind}: {', '.join(bad)} is no {kind} method (known: {', '.join(known)})")
    inputs = setup.build(request)
    for option, names in inputs.named_policies.items():
        stray = [n for n in names if n not in policies]
        if stray:
            raise ValidationError(f"--kind {kind}: --{option.replace('_', '-')} names {', '.join(stray)}, not among "
                                  f"the policies run ({', '.join(policies)})")
    results: dict[str, SimResult] = {}
    for method in policies:
        results.update(run_policies(inputs.cluster, inputs.jobs, inputs.truth, [method], config, kind=kind,
                                    time_limit=time_limit, trace_name=inputs.trace_name, progress=progress,
                                    **inputs.run_options(method)))
    return inputs, results


__all__ = ["SUMMARY_FORMAT", "comparison_rows", "measured_configs", "run_policies", "simulate_kind", "summary_document",
           "write_outputs"]
