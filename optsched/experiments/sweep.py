"""Sweeps: many simulations (policy x trace x cluster x seed x settings), one tidy row each, run in
this process, on a local process pool or on Ray -- with the same rows whichever runs them.

* :class:`SweepPoint` is one simulation described by plain values only (names and spec strings, no
  live objects), so it pickles, hashes and crosses process boundaries; :func:`grid` builds the
  cartesian product of several axes.
* :func:`run_point` builds the cluster, ground truth, trace and policy from the point's specs
  *inside* the worker, simulates (:func:`optsched.experiments.compare.run_policies` with one policy)
  and returns one row: the point's fields, the summary metrics of
  :meth:`optsched.sim.metrics.SimResult.summary` and two wall-clock columns (:data:`TIMING_COLUMNS`).
* :func:`run_sweep` runs a list of points with ``runner="local"`` (``concurrent.futures`` process
  pool; ``workers=1`` runs in this process), ``"ray"`` (Ray tasks; ``pip install -e ".[ray]"``) or
  ``"auto"``, and returns the rows in the order of the points.
* :func:`write_csv` writes the rows as one CSV in a stable column order.

Specs (strings, so a point stays a value):

* **trace**: ``"synthetic:N:LOAD"`` -- the built-in Philly-calibrated trace
  (:func:`optsched.sim.traces.synthetic_trace`) with ``N`` jobs at offered load ``LOAD`` -- or the
  path of a trace CSV in any format :func:`optsched.sim.traces.load_trace` reads.
* **cluster**: a catalogue name (:func:`optsched.core.catalog.get_cluster`), e.g. ``a800-8x8``.
* **ground_truth**: ``"analytical"`` (default, :class:`~optsched.sim.ground_truth.AnalyticalGroundTruth`),
  ``"measured:DIR"`` (:meth:`~optsched.sim.ground_truth.MeasuredGroundTruth.from_directory`) or
  ``"params:FILE.json"`` (fitted parameters as truth), as ``optsched simulate --ground-truth``.

Determinism. A point's ``seed`` seeds both the trace (model and plan assignment; the synthetic
trace's draws) and the policy's solver, exactly like ``optsched simulate --seed``. Every metric
column is a function of the point alone, so the rows of a sweep do not depend on the runner, the
number of workers or the order in which workers finish -- except :data:`TIMING_COLUMNS`, which
:func:`comparable` drops. (A solver-backed policy that stops at its per-round ``time_limit`` with a
gap may decide differently on a slower or busier machine; the heuristics and a solver that proves
optimality within the limit do not.)

Choices where nothing else decides:

* Order of :func:`grid`: ``itertools.product(policies, traces, clusters, seeds, *setting axes)``, the
  last axis varying fastest; setting axes in :class:`SweepPoint` field order. A listed value twice on
  one axis is an error (it would run the same point twice).
* A relative trace or ground-truth path is resolved against the current directory before points
  are sent to Ray (whose workers may run elsewhere); the rows keep the path as given.
* A failing point stops the sweep: :class:`SweepPointError` names the point and keeps the cause.
* The local pool starts workers with ``spawn`` (no state inherited from the parent, no ``fork`` of a
  process with solver or Ray threads; the same on every platform); workers log at the parent's
  root log level.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import dataclasses
import importlib.util
import itertools
import logging
import math
import multiprocessing
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.core.catalog import CLUSTERS, get_cluster
from optsched.core.errors import OptschedError, ValidationError
from optsched.experiments.compare import run_policies
from optsched.policies.options import DEFAULT_TIME_LIMIT
from optsched.policies.registry import DEFAULT_KIND, methods_of
from optsched.sim.config import PREEMPT_RESTART_S, RECONFIG_OVERHEAD_S, ROUND_INTERVAL_S, SimConfig
from optsched.sim.ground_truth import parse_ground_truth_spec
from optsched.sim.truth_spec import ground_truth_from_spec
from optsched.sim.progress import Progress

log = logging.getLogger(__name__)

#: the runners :func:`run_sweep` accepts
RUNNERS = ("auto", "local", "ray")
#: what to install for ``runner="ray"``
RAY_INSTALL_HINT = 'pip install -e ".[ray]"'
#: the prefix of a synthetic trace spec (``synthetic:N:LOAD``)
SYNTHETIC_PREFIX = "synthetic"
#: ground-truth specs: ``analytical``, ``measured:DIR``, ``neighbours:DIR``, ``params:FILE.json``
GROUND_TRUTH_KINDS = ("analytical", "measured", "params")

#: metric columns of a row, from :meth:`SimResult.summary` (deterministic given the point)
METRIC_COLUMNS: tuple[str, ...] = ("jobs", "finished", "unfinished", "avg_jct_s", "p50_jct_s", "p99_jct_s",
                                   "avg_queue_s", "makespan_s", "reconfigurations", "trims", "preemptions",
                                   "gpu_utilisation", "avg_throughput", "rounds", "failed_rounds")
#: wall-clock columns of a row (vary from run to run; :func:`comparable` drops them): seconds spent in
#: the policy, and seconds of the whole point in its worker (building the trace included)
TIMING_COLUMNS: tuple[str, ...] = ("policy_seconds", "wall_seconds")


class SweepPointError(OptschedError):
    """A point of a sweep failed: ``point`` is the point, ``reason`` the original error as
    ``"Type: message"`` and ``detail`` its traceback text from the worker (an exception raised in
    another process keeps its message and traceback here, since not every exception pickles)."""

    def __init__(self, point: Any, reason: str, detail: str = "") -> None:
        self.point = point
        self.reason = reason
        self.detail = detail
        super().__init__(f"sweep point {_describe(point)} failed: {reason}")

    @classmethod
    def wrap(cls, point: Any, exc: BaseException) -> "SweepPointError":
        if isinstance(exc, SweepPointError):
            return cls(point, exc.reason, exc.detail)
        detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        return cls(point, f"{type(exc).__name__}: {exc}", detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.point, self.reason, self.detail))


# -- the point -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepPoint:
    """One simulation of a sweep (module docstring): the ``policy`` (a method name of the default
    round kind, e.g. ``rubick``, ``sia``, ``fifo``), the ``trace`` and ``cluster`` specs, the ``seed``
    of trace and solver, the ``ground_truth`` spec, the policy's per-round ``time_limit`` and the
    :class:`~optsched.sim.config.SimConfig` settings. Checked when built: a bad name or spec is a
    ``ValidationError`` naming it (whether a trace file exists is checked by :func:`grid` and
    :func:`run_sweep`, not here)."""

    policy: str
    trace: str
    cluster: str = "a800-8x8"
    seed: int = 0
    ground_truth: str = "analytical"
    time_limit: float = DEFAULT_TIME_LIMIT
    round_interval_s: float = ROUND_INTERVAL_S
    min_round_gap_s: float = 0.0
    max_time_s: float | None = None
    reconfig_overhead_s: float = RECONFIG_OVERHEAD_S
    preempt_restart_s: float = PREEMPT_RESTART_S
    checkpoint_on_preempt: bool = True
    checkpoint_interval_s: float = 1800.0
    rounds_on_events: bool = True

    def __post_init__(self) -> None:
        for name in ("policy", "trace", "cluster", "ground_truth"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"sweep point: {name} must be a non-empty string, got {value!r}")
        methods = methods_of(DEFAULT_KIND)
        if self.policy not in methods:
            raise ValidationError(f"sweep point: unknown policy {self.policy!r}; known policies: "
                                  f"{', '.join(methods)}")
        if self.cluster not in CLUSTERS:
            raise ValidationError(f"sweep point: unknown cluster {self.cluster!r}; known clusters: "
                                  f"{', '.join(sorted(CLUSTERS))}")
        parse_trace_spec(self.trace)
        parse_ground_truth_spec(self.ground_truth)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValidationError(f"sweep point: seed must be an integer >= 0, got {self.seed!r}")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type in ("float", "float | None") and isinstance(v, int) and not isinstance(v, bool):
                object.__setattr__(self, f.name, float(v))
        t = self.time_limit
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or not t > 0:
            raise ValidationError(f"sweep point: time_limit must be a positive number of seconds, got {t!r}")
        self.sim_config()  # the simulator's own checks, naming the setting

    def sim_config(self) -> SimConfig:
        """The simulator settings of this point (``seed`` included)."""
        return SimConfig(round_interval_s=self.round_interval_s, reconfig_overhead_s=self.reconfig_overhead_s,
                         preempt_restart_s=self.preempt_restart_s, checkpoint_on_preempt=self.checkpoint_on_preempt,
                         checkpoint_interval_s=self.checkpoint_interval_s, rounds_on_events=self.rounds_on_events,
                         min_round_gap_s=self.min_round_gap_s, max_time_s=self.max_time_s, seed=self.seed)

    def fields(self) -> dict[str, Any]:
        """The point as the first columns of its row, in field order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: the columns a row starts with: :class:`SweepPoint`'s fields
POINT_COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(SweepPoint))
#: the axes of :func:`grid` that are not settings
_AXES = ("policy", "trace", "cluster", "seed")
#: the settings :func:`grid` takes as keyword arguments
SETTINGS: tuple[str, ...] = tuple(c for c in POINT_COLUMNS if c not in _AXES)


def parse_trace_spec(spec: str) -> tuple[str, dict[str, Any]]:
    """``("synthetic", {"num_jobs": N, "load": LOAD})`` for ``synthetic:N:LOAD``, ``(spec, {})`` for a
    path; ``ValidationError`` naming the spec when a synthetic spec is malformed."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValidationError(f"trace spec must be a non-empty string, got {spec!r}")
    head, sep, _rest = spec.partition(":")
    if head != SYNTHETIC_PREFIX:
        return spec, {}
    parts = spec.split(":")
    expected = f"expected '{SYNTHETIC_PREFIX}:N:LOAD' (N jobs >= 1, offered load > 0, e.g. 'synthetic:60:1.0')"
    if len(parts) != 3:
        raise ValidationError(f"trace spec {spec!r}: {expected}")
    try:
        num_jobs = int(parts[1])
    except ValueError:
        raise ValidationError(f"trace spec {spec!r}: number of jobs {parts[1]!r} is not an integer; "
                              f"{expected}") from None
    try:
        load = float(parts[2])
    except ValueError:
        raise ValidationError(f"trace spec {spec!r}: load {parts[2]!r} is not a number; {expected}") from None
    if num_jobs < 1 or not math.isfinite(load) or load <= 0:
        raise ValidationError(f"trace spec {spec!r}: {expected}")
    return SYNTHETIC_PREFIX, {"num_jobs": num_jobs, "load": load}


#: the ground truth a spec names, on a cluster (one rule for the sweep and ``optsched simulate``)
build_ground_truth = ground_truth_from_spec


def _check_files(point: SweepPoint) -> None:
    """A trace path or a ground-truth file/directory that is not there, named before anything runs."""
    name, _ = parse_trace_spec(point.trace)
    if name != SYNTHETIC_PREFIX and not Path(point.trace).is_file():
        raise ValidationError(f"trace {point.trace!r}: no such file (a trace spec is 'synthetic:N:LOAD' "
                              f"or the path of a trace CSV)")
    kind, arg = parse_ground_truth_spec(point.ground_truth)
    if kind in ("measured", "neighbours") and not Path(arg).is_dir():
        raise ValidationError(f"ground truth {point.ground_truth!r}: {arg} is not a directory")
    if kind == "params" and not Path(arg).is_file():
        raise ValidationError(f"ground truth {point.ground_truth!r}: {arg} is not a file")


def _absolute(point: SweepPoint, base: Path) -> SweepPoint:
    """``point`` with relative trace and ground-truth paths made absolute against ``base``."""
    changes: dict[str, str] = {}
    if parse_trace_spec(point.trace)[0] != SYNTHETIC_PREFIX and not Path(point.trace).is_absolute():
        changes["trace"] = str(base / point.trace)
    kind, arg = parse_ground_truth_spec(point.ground_truth)
    if arg and not Path(arg).is_absolute():
        changes["ground_truth"] = f"{kind}:{base / arg}"
    return dataclasses.replace(point, **changes) if changes else point


# -- the grid ------------------------------------------------------------------------------------
def _axis(name: str, values: Any) -> tuple[Any, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        values = (values,)
    values = tuple(values)
    if not values:
        raise ValidationError(f"grid: {name} is empty")
    seen: set[Any] = set()
    for v in values:
        if v in seen:
            raise ValidationError(f"grid: {name} {v!r} listed twice")
        seen.add(v)
    return values


def grid(*, policies: Sequence[str] | str, traces: Sequence[str] | str, clusters: Sequence[str] | str = "a800-8x8",
         seeds: Sequence[int] | int = 0, **settings: Any) -> list[SweepPoint]:
    """Every combination of ``policies`` x ``traces`` x ``clusters`` x ``seeds`` x the list-valued
    ``settings``, in ``itertools.product`` order (the last axis varies fastest; setting axes in
    :class:`SweepPoint` field order). ``settings`` are :data:`SETTINGS` (``ground_truth``,
    ``time_limit``, ``round_interval_s``, ...): a scalar applies to every point, a list or tuple is
    one more axis. Each axis also takes a single value. Every point is checked (bad names and
    specs, missing files) before the list is returned."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ValidationError(f"grid: unknown setting(s) {', '.join(unknown)}; settings are {', '.join(SETTINGS)}")
    axes: list[tuple[str, tuple[Any, ...]]] = [("policy", _axis("policies", policies)),
                                               ("trace", _axis("traces", traces)),
                                               ("cluster", _axis("clusters", clusters)),
                                               ("seed", _axis("seeds", seeds))]
    for name in SETTINGS:
        if name in settings:
            v = settings[name]
            axes.append((name, _axis(name, v) if isinstance(v, (list, tuple)) else (v,)))
    names = [n for n, _ in axes]
    points = [SweepPoint(**dict(zip(names, combo))) for combo in itertools.product(*(v for _, v in axes))]
    for p in {(p.trace, p.ground_truth): p for p in points}.values():
        _check_files(p)
    return points


# -- one point -----------------------------------------------------------------------------------
def run_point(point: SweepPoint) -> dict[str, Any]:
    """Simulate one point, building everything from its specs in this process, and return its row:
    :data:`POINT_COLUMNS`, :data:`METRIC_COLUMNS`, :data:`TIMING_COLUMNS`, in that order."""
    from optsched.sim.traces import load_trace
    if not isinstance(point, SweepPoint):
        raise ValidationError(f"run_point: expected a SweepPoint, got {type(point).__name__}")
    t0 = time.perf_counter()
    cluster = get_cluster(point.cluster)
    truth = build_ground_truth(point.ground_truth, cluster)
    name, options = parse_trace_spec(point.trace)
    trace = load_trace(name, cluster, seed=point.seed, iteration_time=truth.iteration_time, **options)
    config = point.sim_config()
    result = run_policies(cluster, trace.jobs, truth, [point.policy], config, round_fields=trace.round_fields(),
                          time_limit=point.time_limit, trace_name=trace.source or trace.name)[point.policy]
    summary = result.summary()
    row = point.fields()
    row.update({k: summary[k] for k in METRIC_COLUMNS})
    row["policy_seconds"] = summary["policy_seconds"]
    row["wall_seconds"] = round(time.perf_counter() - t0, 3)
    return row


def comparable(row: Mapping[str, Any]) -> dict[str, Any]:
    """``row`` without its wall-clock columns (:data:`TIMING_COLUMNS`): what two runs of the same point
    agree on."""
    return {k: v for k, v in row.items() if k not in TIMING_COLUMNS}


def _describe(point: Any) -> str:
    if isinstance(point, SweepPoint):
        return (f"(policy={point.policy!r}, trace={point.trace!r}, cluster={point.cluster!r}, seed={point.seed}"
                + "".join(f", {k}={getattr(point, k)!r}" for k in SETTINGS
                          if getattr(point, k) != SweepPoint.__dataclass_fields__[k].default) + ")")
    return repr(point)


# -- runners -------------------------------------------------------------------------------------
def _ray_module() -> Any:
    try:
        import ray
    except ImportError:
        raise ValidationError(f"runner 'ray' needs Ray, which is not installed; install it with "
                              f"{RAY_INSTALL_HINT} (or use runner='local')") from None
    return ray


def resolve_runner(runner: str = "auto") -> str:
    """``"local"`` or ``"ray"`` for ``runner``: ``"auto"`` is Ray when it is importable and either
    already initialised in this process or ``RAY_ADDRESS`` names a cluster, else the local pool.
    ``runner="ray"`` without Ray is a ``ValidationError`` with the install hint."""
    if runner not in RUNNERS:
        raise ValidationError(f"unknown runner {runner!r}; runners: {', '.join(RUNNERS)}")
    if runner == "ray":
        _ray_module()
        return "ray"
    if runner == "local":
        return "local"
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        return "ray"
    if os.environ.get("RAY_ADDRESS") and _importable("ray"):
        return "ray"
    return "local"


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError, AttributeError):  # e.g. sys.modules[name] is None
        return False


def _check_workers(workers: int | None) -> int | None:
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValidationError(f"workers must be a positive integer (or None for all cores), got {workers!r}")
    return workers


def run_sweep(points: Sequence[Any], runner: str = "auto", workers: int | None = None, progress: bool = False,
              *, fn: Callable[[Any], dict[str, Any]] = run_point) -> list[dict[str, Any]]:
    """Run ``fn`` (default :func:`run_point`) on every point and return the rows in the order of
    ``points``, whatever order the workers finish in.

    ``runner``: ``"local"`` -- a ``concurrent.futures.ProcessPoolExecutor`` of ``workers`` processes
    (default ``os.cpu_count()``, never more than there are points); ``workers=1`` runs in this
    process without a pool. ``"ray"`` -- one Ray task per point on the Ray instance this process is
    connected to, else on the cluster of ``RAY_ADDRESS``, else on a local Ray started here (with
    ``workers`` CPUs) and shut down at the end; ``workers`` caps the tasks in flight. ``"auto"``: see
    :func:`resolve_runner`. ``fn`` must be a module-level function (it is pickled) taking a point
    and returning a dict. ``progress`` shows the package's progress bar over points. A failing
    point stops the sweep with :class:`SweepPointError`."""
    points = list(points)
    workers = _check_workers(workers)
    which = resolve_runner(runner)
    for p in {(p.trace, p.ground_truth): p for p in points if isinstance(p, SweepPoint)}.values():
        _check_files(p)
    if not points:
        return []
    bar = Progress(len(points), "sweep", enabled=progress, unit="points")
    t0 = time.perf_counter()
    try:
        if which == "ray":
            rows = _run_ray(points, workers, bar, fn)
        else:
            rows = _run_local(points, workers, bar, fn)
    finally:
        bar.close()
    log.info("sweep: %d points on %s in %.1f s", len(points), which, time.perf_counter() - t0)
    return rows


def _call(fn: Callable[[Any], dict[str, Any]], point: Any) -> dict[str, Any]:
    """``fn(point)``; any failure becomes a (picklable) :class:`SweepPointError` naming the point."""
    try:
        return fn(point)
    except Exception as exc:
        raise SweepPointError.wrap(point, exc) from exc


def _init_worker(level: int) -> None:
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _run_local(points: list[Any], workers: int | None, bar: Progress,
               fn: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    n = min(workers or os.cpu_count() or 1, len(points))
    rows: list[dict[str, Any] | None] = [None] * len(points)
    if n <= 1:
        for i, p in enumerate(points):
            log.debug("sweep point %d/%d: %s", i + 1, len(points), _describe(p))
            rows[i] = _call(fn, p)
            bar.update(i + 1)
        return rows  # type: ignore[return-value]
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx, initializer=_init_worker,
                                initargs=(logging.getLogger().getEffectiveLevel(),)) as pool:
        futures = {pool.submit(_call, fn, p): i for i, p in enumerate(points)}
        done = 0
        try:
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    rows[i] = fut.result()
                except cf.process.BrokenProcessPool as exc:
                    raise OptschedError(
                        "sweep: the local process pool broke (a worker process died: out of memory, a crash, "
                        "or a script that starts a sweep outside an 'if __name__ == \"__main__\":' block, which "
                        "the 'spawn' start method needs)") from exc
                except Exception as exc:
                    raise SweepPointError.wrap(points[i], exc) from exc
                done += 1
                bar.update(done)
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
    return rows  # type: ignore[return-value]


def _ray_task(fn: Callable[[Any], dict[str, Any]], point: Any) -> dict[str, Any]:
    return _call(fn, point)


def _ray_cause(exc: BaseException) -> BaseException:
    """The task's own exception inside Ray's ``RayTaskError`` wrapper (its ``cause``), else ``exc``."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


def _run_ray(points: list[Any], workers: int | None, bar: Progress,
             fn: Callable[[Any], dict[str, Any]]) -> list[dict[str, Any]]:
    ray = _ray_module()
    started = False
    if not ray.is_initialized():
        if os.environ.get("RAY_ADDRESS"):
            log.info("sweep: connecting to the Ray cluster at %s", os.environ["RAY_ADDRESS"])
            ray.init()
        else:
            log.info("sweep: starting a local Ray instance (%s CPUs)", workers or "all")
            ray.init(num_cpus=workers, include_dashboard=False)
        started = True
    try:
        base = Path.cwd()
        sent = [_absolute(p, base) if isinstance(p, SweepPoint) else p for p in points]
        task = ray.remote(num_cpus=1)(_ray_task)
        limit = workers or len(points)
        rows: list[dict[str, Any] | None] = [None] * len(points)
        pending: dict[Any, int] = {}
        next_i = done = 0
        try:
            while done < len(points):
                while next_i < len(points) and len(pending) < limit:
                    pending[task.remote(fn, sent[next_i])] = next_i
                    next_i += 1
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        row = ray.get(ref)
                    except Exception as exc:
                        raise SweepPointError.wrap(points[i], _ray_cause(exc)) from exc
                    if isinstance(points[i], SweepPoint):
                        row.update(points[i].fields())  # the point as given, not with absolute paths
                    rows[i] = row
                    done += 1
                    bar.update(done)
        except BaseException:
            for ref in pending:
                try:
                    ray.cancel(ref)
                except Exception:  # pragma: no cover - best effort
                    pass
            raise
        return rows  # type: ignore[return-value]
    finally:
        if started:
            ray.shutdown()


# -- output --------------------------------------------------------------------------------------
def columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The CSV columns of ``rows``: :data:`POINT_COLUMNS`, :data:`METRIC_COLUMNS` and
    :data:`TIMING_COLUMNS` that occur, then any other key in order of first appearance."""
    seen: dict[str, None] = {}
    for r in rows:
        seen.update(dict.fromkeys(r))
    known = [c for c in (*POINT_COLUMNS, *METRIC_COLUMNS, *TIMING_COLUMNS) if c in seen]
    return known + [c for c in seen if c not in known]


def write_csv(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write ``rows`` to ``path`` as one CSV, one row per point, columns in :func:`columns` order
    (None and missing values as empty cells, booleans as ``true``/``false``). Returns the path."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"{p.parent}: cannot create output directory ({exc.strerror or exc})") from None
    cols = columns(rows)

    def cell(v: Any) -> Any:
        if v is None:
            return ""
        if isinstance(v, bool):
            return "true" if v else "false"
        return v
    with p.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([cell(r.get(c)) for c in cols])
    return p


__all__ = ["GROUND_TRUTH_KINDS", "METRIC_COLUMNS", "POINT_COLUMNS", "RAY_INSTALL_HINT", "RUNNERS", "SETTINGS",
           "SYNTHETIC_PREFIX", "TIMING_COLUMNS", "SweepPoint", "SweepPointError", "build_ground_truth", "columns",
           "comparable", "grid", "parse_ground_truth_spec", "parse_trace_spec", "resolve_runner", "run_point",
           "run_sweep", "write_csv"]
