"""Command-line interface: ``optsched <subcommand> ...``.

Subcommands (one ``_cmd_*`` handler each, registered in :func:`build_parser`):

* ``fit``     fit the 7-parameter iteration-time model to a placements CSV and write its JSON;
* ``predict`` predict the iteration time of every row of a placements CSV with a params JSON;
* ``curves``  print a model's GPU or CPU sensitivity curve on a built-in cluster;
* ``solve``   solve a round file (``docs/rounds.md``) and print the decision as JSON;
* ``gen-round`` write a random but realistic round file;
* ``gap``     measure the heuristic's and the exact solver's gap on round files;
* ``simulate`` replay a trace (or the built-in synthetic one) under several policies and compare them;
* ``serve``   answer rounds over HTTP (:mod:`optsched.service`; extra ``serve``).

Every :class:`~optsched.core.errors.OptschedError` and every usage error ends with one line
``optsched: error: <message>`` on stderr and exit code 2, never a traceback. Results go to stdout
(this module is the only place in the package that writes there, through :func:`_out`); progress
goes to the ``optsched`` logger (``-v`` shows it).

Adding a subcommand: write ``_add_<name>(sub)`` that creates its subparser and calls
``p.set_defaults(handler=_cmd_<name>)``, write ``_cmd_<name>(args) -> int``, and append
``_add_<name>`` to ``_SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import csv
import inspect
import io
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from optsched import __version__
from optsched.core.catalog import GPU_TYPES, get_cluster, get_gpu_type, get_model
from optsched.core.checks import require_seed
from optsched.core.errors import OptschedError, UnknownNameError, ValidationError, one_line
from optsched.core.hardware import Cluster
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.core.jsonio import format_json, parse_json_text, read_json
from optsched.core.plan import ZeroMode
from optsched.core.units import unit_warnings
from optsched.core.pool import gpu_pool
from optsched.perf.cpu_anchor import published_cpu_anchors
from optsched.perf.fitting import MIN_OFFLOAD_SAMPLES, fit, identification
from optsched.perf.iteration_time import PerfParams
from optsched.perf.model_v2 import DEFAULT_FORM, MODEL_FORMS
from optsched.perf.measurements import (Measurement, measured_times, read_placements_csv, read_profile_forward_s,
                                       sample_measurements)
from optsched.perf.performance_model import PerformanceModel

log = logging.getLogger("optsched.cli")

PROG = "optsched"
DEFAULT_CLUSTER = "a800-8x8"
DEFAULT_GPU_TYPE = "A800"


# -- output helpers ------------------------------------------------------------------------------
def _out(text: str) -> None:
    """Write ``text`` (a newline is added when missing) to stdout."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


#: fold a multi-line error (e.g. InfeasibleError's reasons) into one line
_one_line = one_line


def _write_text(path: str | Path, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"{path}: cannot write file ({exc.strerror or exc})") from None


def _check_output_file(path: str | Path | None, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be written as a file: it is a directory, or its
    directory does not exist or is not writable."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise ValidationError(f"{flag} {p}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValidationError(f"{flag} {p}: directory {parent} does not exist")
    if (p.exists() and not os.access(p, os.W_OK)) or not os.access(parent, os.W_OK):
        raise ValidationError(f"{flag} {p}: not writable")


def _check_output_dir(path: str | Path, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be used as an output directory (creating it)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValidationError(f"{flag} {p}: exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"{flag} {p}: cannot create directory ({exc.strerror or exc})") from None
    if not os.access(p, os.W_OK):
        raise ValidationError(f"{flag} {p}: directory not writable")


def _emit_json(data: Any, path: str | None) -> None:
    """Write ``data`` as JSON (:func:`~optsched.core.jsonio.format_json`) to ``path``, or to stdout when no
    path is given."""
    text = format_json(data)
    if path:
        _write_text(path, text)
    else:
        _out(text)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in (header, *rows)]
    return "\n".join(lines) + "\n"


def _placement_code(gpus_per_node: Sequence[int]) -> str:
    """``(4, 2, 2)`` -> ``"422"`` (the measurement files' code); ``"10+2"`` when a count exceeds 9."""
    counts = [int(g) for g in gpus_per_node]
    return "".join(map(str, counts)) if all(g <= 9 for g in counts) else "+".join(map(str, counts))


# -- shared resolution ---------------------------------------------------------------------------
def _cluster(name: str) -> Cluster:
    """A catalogue cluster by name, or a cluster JSON file (``Cluster.to_dict`` format) by path."""
    from optsched.core.catalog import CLUSTERS
    if name in CLUSTERS or not Path(name).suffix:
        return get_cluster(name)
    if not Path(name).is_file():
        raise ValidationError(f"cluster {name!r} is neither a built-in cluster ({', '.join(sorted(CLUSTERS))}) "
                              "nor an existing JSON file")
    data = read_json(name)  # its errors name the file already
    try:
        return Cluster.from_dict(data)
    except ValidationError as exc:
        raise ValidationError(f"{name}: {exc}") from None


def _load_params(path: str | Path) -> PerformanceModel:
    return PerformanceModel.from_dict(read_json(path))


def _policy_models(paths: Sequence[str], cluster: Cluster) -> dict[tuple[str, str], PerformanceModel]:
    """The fitted models of ``--params`` files keyed by (model, GPU type); each must be for a GPU type
    the cluster has, and no (model, GPU type) may come twice."""
    models: dict[tuple[str, str], PerformanceModel] = {}
    types = {n.gpu_type for n in cluster.nodes}
    for path in paths:
        pm = _load_params(path)
        key = (pm.model.name, pm.gpu_type)
        if pm.gpu_type not in types:
            raise ValidationError(f"--params {path}: fitted for GPU type {pm.gpu_type!r}, but cluster {cluster.name!r} "
                                  f"has only {', '.join(sorted(types))}")
        if key in models:
            raise ValidationError(f"--params {path}: a second fitted model for {key[0]!r} on {key[1]!r}")
        models[key] = pm
    return models


def _configs(rows: Sequence[Measurement]) -> list[tuple[Any, tuple[int, ...], float]]:
    return [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]


def sample_rows(rows: Sequence[Measurement], n: int, seed: int) -> list[Measurement]:
    """Draw ``n`` rows reproducibly with ``numpy.random.default_rng(seed)``, in file order, by
    :func:`optsched.perf.measurements.sample_measurements` (at least three ZeRO-Offload rows when
    the file has them, the rest spread over the plan families)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationError(f"--samples must be a positive integer, got {n!r}")
    if n > len(rows):
        raise ValidationError(f"--samples {n} exceeds the {len(rows)} rows of the file")
    return sample_measurements(rows, n, np.random.default_rng(seed), min_offload=MIN_OFFLOAD_SAMPLES)


# -- fit -----------------------------------------------------------------------------------------
def _add_fit(sub: Any) -> None:
    p = sub.add_parser("fit", help="fit the iteration-time model to measured rows",
                       description="Fit the iteration-time model (Morphling's Eq. 1, or model v2 with the placement-"
                                   "shape terms, docs/perf_model.md) to a placements CSV (columns "
                                   "exec_plan,placement,iter_time) and write the params JSON. Only the parameters the "
                                   "rows identify are fitted; the others are held and listed.")
    p.add_argument("--placements", required=True, metavar="CSV", help="measured rows")
    p.add_argument("--model", required=True, metavar="NAME", help="catalogue model name, e.g. bert")
    p.add_argument("--samples", type=int, metavar="N",
                   help="fit on N rows chosen reproducibly: >= 3 ZeRO-Offload rows when the file has them, the other "
                        "plan families round-robin, each row the farthest in placement shape from those chosen "
                        "(default: every row)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the row draw and the fit (0)")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME",
                   help=f"built-in cluster giving the bandwidths ({DEFAULT_CLUSTER})")
    p.add_argument("--gpu-type", default=DEFAULT_GPU_TYPE, metavar="T", help=f"GPU type ({DEFAULT_GPU_TYPE})")
    p.add_argument("--starts", type=int, default=8, metavar="K", help="optimizer starts (8)")
    p.add_argument("--model-form", choices=MODEL_FORMS, default=DEFAULT_FORM,
                   help=f"'eq1': Appendix A alone; 'v2': with the terms the rows identify (default {DEFAULT_FORM})")
    fwd = p.add_mutually_exclusive_group()
    fwd.add_argument("--fwd-s", type=float, metavar="SECONDS",
                     help="profiled forward time of one sample on one GPU: fixed instead of fitted (Appendix A.1)")
    fwd.add_argument("--profile", metavar="DIR",
                     help="read that forward time from profiling runs (config.csv + data.csv, the Rubick artifact's "
                          "profile/<model>/ format)")
    p.add_argument("--out", required=True, metavar="PARAMS.json", help="where to write the fitted model")
    p.set_defaults(handler=_cmd_fit)


def _cmd_fit(args: argparse.Namespace) -> int:
    from optsched.perf.defaults import prior_performance_model

    _check_output_file(args.out)
    model = get_model(args.model)
    cluster = _cluster(args.cluster)
    get_gpu_type(args.gpu_type)
    if args.starts < 1:
        raise ValidationError(f"--starts must be >= 1, got {args.starts}")
    rows = read_placements_csv(args.placements, model, require_iter_time=True)
    used = rows if args.samples is None else sample_rows(rows, args.samples, args.seed)
    _err(f"{PROG} fit: using {len(used)} of {len(rows)} rows: {', '.join(str(r.row) for r in used)}")
    base = prior_performance_model(model, cluster, args.gpu_type)
    fwd_s = args.fwd_s if args.profile is None else read_profile_forward_s(args.profile, model)
    if fwd_s is not None:
        if not fwd_s > 0 or not np.isfinite(fwd_s):
            raise ValidationError(f"--fwd-s must be a positive number of seconds, got {fwd_s}")
        if fwd_s < base.min_fwd_s:
            raise ValidationError(f"forward time {fwd_s:.4g} s per sample is below {base.min_fwd_s:.4g} s, the "
                                  f"forward FLOPs of {model.name} at the peak of one {args.gpu_type}")
        source = f" (from {args.profile})" if args.profile else ""
        _err(f"{PROG} fit: forward time fixed at {fwd_s:.6g} s per sample{source}")
    ident = identification(base, _configs(used), fwd_s=fwd_s, form=args.model_form)
    fitted = fit(base, _configs(used), measured_times(used), fwd_s=fwd_s, seed=args.seed, starts=args.starts,
                 form=args.model_form)
    _write_text(args.out, json.dumps(fitted.to_dict(), indent=2) + "\n")
    n_off = sum(1 for r in used if r.plan.zero is ZeroMode.OFFLOAD)
    _out(f"fitted {model.name} ({args.model_form}) on {args.gpu_type} ({cluster.name}): {len(used)} of {len(rows)} rows "
         f"({n_off} ZeRO-Offload), RMSLE {fitted.rmsle:.4f}")
    identified = set(fitted.identified)
    names = fitted.params.names() if args.model_form == "v2" else PerfParams.EQ1
    body = [(n, f"{getattr(fitted.params, n):.6g}", "fitted" if n in identified else f"held: {ident.reasons[n]}")
            for n in names]
    _out(_table(("parameter", "value", "source"), body))
    if args.model_form == "v2" and "m_zero_offload" in identified:
        for a in published_cpu_anchors(model.name, args.gpu_type):
            slow, fast = a.configs(model)
            _out(f"CPU anchor (a prior, not a row): {a.source}; fitted {a.cpus_from:g} -> {a.cpus_to:g} CPUs per GPU: "
                 f"{fitted.iteration_time(*slow) / fitted.iteration_time(*fast):.3f}x")
    _out(f"identified: {', '.join(fitted.identified) or 'none'}")
    _out(f"held: {', '.join(ident.held) or 'none'}")
    _out(f"wrote {args.out}")
    return 0


# -- predict -------------------------------------------------------------------------------------
def _add_predict(sub: Any) -> None:
    p = sub.add_parser("predict", help="predict iteration times of plans on placements",
                       description="Predict the iteration time and throughput of every exec_plan,placement "
                                   "row of a CSV with a fitted params JSON (other columns are ignored).")
    p.add_argument("--params", required=True, metavar="PARAMS.json", help="output of `optsched fit`")
    p.add_argument("--placements", required=True, metavar="CSV", help="rows with exec_plan,placement")
    p.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the predictions")
    p.set_defaults(handler=_cmd_predict)


def _cmd_predict(args: argparse.Namespace) -> int:
    _check_output_file(args.out)
    perf = _load_params(args.params)
    rows = read_placements_csv(args.placements, perf.model, require_iter_time=False)
    times = perf.iteration_times(_configs(rows))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(("exec_plan", "placement", "predicted_iter_time", "predicted_throughput", "plan"))
    for r, t in zip(rows, times):
        writer.writerow((r.exec_plan, r.placement, f"{float(t):.6g}",
                         f"{perf.model.global_batch / float(t):.6g}", r.plan.label))
    _write_text(args.out, buf.getvalue())
    _out(f"predicted {len(rows)} rows of {perf.model.name} with {args.params}; wrote {args.out}")
    return 0


# -- curves --------------------------------------------------------------------------------------
def _add_curves(sub: Any) -> None:
    p = sub.add_parser("curves", help="print a model's GPU or CPU sensitivity curve",
                       description="Best throughput of a model as a function of its GPUs (or CPUs) on a "
                                   "built-in cluster, with the best plan at each amount.")
    p.add_argument("--model", required=True, metavar="NAME", help="catalogue model name")
    p.add_argument("--cluster", default=DEFAULT_CLUSTER, metavar="NAME", help=f"built-in cluster ({DEFAULT_CLUSTER})")
    p.add_argument("--gpu-type", default=DEFAULT_GPU_TYPE, metavar="T", help=f"GPU type ({DEFAULT_GPU_TYPE})")
    p.add_argument("--cpus-per-gpu", type=int, default=DEFAULT_CPUS_PER_GPU, metavar="C",
                   help=f"CPU cores per GPU on the GPU curve ({DEFAULT_CPUS_PER_GPU})")
    p.add_argument("--max-gpus", type=int, metavar="N",
                   help="GPU curve: largest amount (default: the cluster's GPUs of that type); "
                        "CPU curve: the job's GPUs (default: one node)")
    p.add_argument("--resource", choices=("gpu", "cpu"), default="gpu", help="curve to print (gpu)")
    p.add_argument("--params", metavar="PARAMS.json", help="fitted model (default: built-in parameters)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(handler=_cmd_curves)


def _cmd_curves(args: argparse.Namespace) -> int:
    from optsched.perf.defaults import default_performance_model
    from optsched.perf.sensitivity import cpu_curve, gpu_curve

    get_model(args.model)  # unknown model -> UnknownNameError
    cluster = _cluster(args.cluster)
    types = sorted({n.gpu_type for n in cluster.nodes if n.num_gpus > 0})
    if args.gpu_type not in types:
        if args.gpu_type not in GPU_TYPES and args.gpu_type not in {g.name for g in cluster.gpu_types}:
            raise UnknownNameError("GPU type", args.gpu_type, list(GPU_TYPES))
        raise ValidationError(f"cluster {cluster.name!r} has no {args.gpu_type} GPUs (its GPU types: "
                              f"{', '.join(types)}); pick --gpu-type {types[0]} or another --cluster")
    pool = gpu_pool(cluster, args.gpu_type)
    if args.params:
        perf = _load_params(args.params)
        if perf.model.name != args.model:
            raise ValidationError(f"{args.params} is a model of {perf.model.name!r}, not of {args.model!r}")
    else:
        perf = default_performance_model(args.model, cluster, args.gpu_type)
    per_node, host_mem, total, gpu_type = pool.per_node, pool.host_gib, pool.total, pool.gpu_type
    if args.cpus_per_gpu < 1:
        raise ValidationError(f"--cpus-per-gpu must be >= 1, got {args.cpus_per_gpu}")
    if args.resource == "gpu":
        max_gpus = total if args.max_gpus is None else args.max_gpus
        if not 1 <= max_gpus <= total:
            raise ValidationError(f"--max-gpus must be between 1 and the {total} {args.gpu_type} GPUs of "
                                  f"cluster {cluster.name!r}, got {max_gpus}")
        curve = gpu_curve(perf, max_gpus, per_node, args.cpus_per_gpu, gpu_type, host_mem)
        what = f"{max_gpus} GPUs, {args.cpus_per_gpu} CPUs per GPU"
    else:
        gpus = per_node if args.max_gpus is None else args.max_gpus
        if not 1 <= gpus <= total:
            raise ValidationError(f"--max-gpus must be between 1 and {total}, got {gpus}")
        placement = pool.shape(gpus)
        max_cpus = pool.node_cpus * len(placement)
        curve = cpu_curve(perf, placement, max_cpus, gpu_type, host_mem)
        what = f"placement {_placement_code(placement)}, up to {max_cpus} CPUs"
    points = list(curve.points)
    if args.json:
        doc = {"model": perf.model.name, "cluster": cluster.name, "gpu_type": args.gpu_type,
               "resource": args.resource, "unit": "samples/s",
               "points": [{"amount": pt.amount, "throughput": pt.throughput,
                           "slope": curve.slope(pt.amount) if i + 1 < len(points) else None,
                           "plan": pt.plan.label if pt.plan is not None else None,
                           "gpus_per_node": list(pt.gpus_per_node), "cpus": pt.cpus}
                          for i, pt in enumerate(points)]}
        _out(json.dumps(doc, indent=2))
        return 0
    unit = "GPUs" if args.resource == "gpu" else "CPUs"
    _out(f"# {perf.model.name} {args.resource} curve on {cluster.name} ({args.gpu_type}; {what})")
    body = []
    for i, pt in enumerate(points):
        slope = f"{curve.slope(pt.amount):.4g}" if i + 1 < len(points) else "-"
        plan = pt.plan.label if pt.plan is not None else "(none fits)"
        body.append((str(pt.amount), f"{pt.throughput:.4g}", slope, plan,
                     f"{_placement_code(pt.gpus_per_node)} / {pt.cpus} CPUs"))
    _out(_table((unit, "samples/s", "slope", "best plan", "placement"), body))
    return 0


# -- solve ---------------------------------------------------------------------------------------
def _methods_help() -> str:
    from optsched.policies.registry import describe_methods
    return "; ".join(f"kind {kind}: {', '.join(methods)}" for kind, methods in describe_methods().items())


def _add_solve(sub: Any) -> None:
    from optsched.policies.options import DEFAULT_TIME_LIMIT
    p = sub.add_parser("solve", help="solve a scheduling round file and print the decision as JSON",
                       description="Solve one scheduling round (format: docs/rounds.md) with a method of its kind and "
                                   f"print the decision as JSON. Methods per round kind: {_methods_help()}.")
    p.add_argument("round", metavar="ROUND.json", help="round file, or - to read the round from standard input")
    p.add_argument("--method", default="exact", metavar="METHOD",
                   help="a method of the round's kind (default: exact, the CP-SAT round warm-started by the "
                        f"heuristic); {_methods_help()}")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="S",
                   help=f"wall-clock limit in seconds for reading, table, heuristic and solver (default "
                        f"{DEFAULT_TIME_LIMIT:g}); a method it cuts short answers with status 'partial'")
    p.add_argument("--seed", type=int, default=0, help="solver seed (default 0)")
    p.add_argument("--params", action="append", default=[], metavar="PARAMS.json",
                   help="fitted performance model (from 'optsched fit') replacing the built-in one of its model "
                        "and GPU type; repeatable")
    p.add_argument("--defer-unreachable", action="store_true",
                   help="rubick rounds: defer a guaranteed job whose performance guarantee no node shape can reach "
                        "this round (it waits; named in the decision's message) instead of reporting the round "
                        "infeasible")
    p.add_argument("--backend", default="cpsat", choices=("cpsat", "cbc", "highs"),
                   help="what solves exact formulations: CP-SAT (default), or a MILP through pulp with CBC, or HiGHS "
                        "when highspy is installed")
    p.add_argument("--partitions", type=int, metavar="K",
                   help="solve K parts of the round (nodes and jobs split with --seed) in parallel processes and join "
                        "their decisions (POP-style; faster on large rounds, not optimal)")
    p.add_argument("--out", metavar="FILE", help="write the decision here instead of stdout")
    p.set_defaults(handler=_cmd_solve)


def _cmd_solve(args: argparse.Namespace) -> int:
    from optsched.core.round import RoundProblem
    from optsched.policies.solve import solve
    from optsched.policies.rubick import DEFER
    started = time.perf_counter()  # the time limit covers reading the round too
    _check_output_file(args.out)
    problem = RoundProblem.from_dict(_read_round(args.round))
    for warning in unit_warnings(problem.cluster, problem.jobs):
        _err(f"{PROG}: warning: {warning}")
    models = _policy_models(args.params, problem.cluster)
    extras = {DEFER: True} if args.defer_unreachable else {}
    decision = solve(problem, args.method, args.time_limit, args.seed, perf_models=models or None,
                     clock_start=started, partitions=args.partitions, backend=args.backend, **extras)
    _emit_json(decision.to_dict(), args.out)
    log.info("%s: status %s, objective %.4f", args.method, decision.status, decision.objective)
    return 0


def _read_round(path: str) -> Any:
    """A round file's JSON, or standard input's for ``-``."""
    if path != "-":
        return read_json(path)
    try:
        text = sys.stdin.buffer.read().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"standard input: not UTF-8 text ({exc})") from None
    return parse_json_text(text, "standard input")


# -- serve ---------------------------------------------------------------------------------------
def _add_serve(sub: Any) -> None:
    from optsched.service import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TIME_LIMIT
    p = sub.add_parser("serve", help="answer rounds over HTTP (POST /solve)",
                       description="Run the solve service (docs/integration.md): POST /solve with a round answers "
                                   "the decision; GET /health; GET /schemas/{round,decision,perf-params}. Needs the "
                                   "'serve' extra (starlette, uvicorn).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="threads that solve requests at the same time (default: one per CPU)")
    p.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY_BYTES / 2 ** 20, metavar="MB",
                   help=f"largest request body in MiB ({DEFAULT_MAX_BODY_BYTES / 2 ** 20:g})")
    p.add_argument("--max-time-limit", type=float, default=DEFAULT_MAX_TIME_LIMIT, metavar="S",
                   help=f"largest time limit a request may ask for, seconds ({DEFAULT_MAX_TIME_LIMIT:g})")
    p.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from optsched.service import ServiceConfig, serve
    if not 0 < args.port < 65536:
        raise ValidationError(f"--port must be in 1..65535, got {args.port}")
    if not args.max_body_mb > 0:
        raise ValidationError(f"--max-body-mb must be positive, got {args.max_body_mb}")
    config = ServiceConfig(max_body_bytes=int(args.max_body_mb * 2 ** 20), max_time_limit=args.max_time_limit,
                           workers=args.workers)
    _err(f"{PROG} serve: listening on http://{args.host}:{args.port} (POST /solve, GET /health, GET /schemas)")
    serve(args.host, args.port, config, log_level="info" if args.verbose else "warning")
    return 0


# -- gen-round -----------------------------------------------------------------------------------
#: gen-round flags and the generator keyword each one sets (a kind's generator takes a subset)
_GEN_FLAGS = (("--nodes", "nodes", "number of nodes"), ("--gpus-per-node", "gpus_per_node", "GPUs per node"),
              ("--jobs", "jobs", "number of jobs"))
_GEN_FLAGS += (("--experts", "experts", "number of experts"), ("--devices", "devices", "number of devices"),
               ("--slots", "slots", "expert replicas per device"), ("--tokens", "tokens", "tokens of the batch"),
               ("--moe-layers", "moe_layers", "MoE layers of the backward pass"))
_GEN_FLAGS += (("--servers", "servers", "on-loan inference servers (Lyra kinds)"),
               ("--training", "training", "training servers (Lyra kinds)"),
               ("--reclaim", "reclaim", "servers to reclaim (lyra-reclaim)"))
#: gen-round flags taking a number that need not be whole
_GEN_FLOAT_FLAGS = (("--load", "load", "queued base demand over the GPUs the round may hand out (lyra-allocate, lyra)"),)


def _add_gen_round(sub: Any) -> None:
    from optsched.core.kinds import round_kind, round_kinds
    kinds = round_kinds()
    p = sub.add_parser("gen-round", help="write a random but realistic round file",
                       description="Generate a reproducible random round of a kind. Defaults per kind: "
                                   + "; ".join(f"{k}: {_generator_defaults(round_kind(k).generate)}" for k in kinds))
    p.add_argument("--kind", default="rubick", choices=kinds, help="round kind (default rubick)")
    for flag, _, text in _GEN_FLAGS:
        p.add_argument(flag, type=int, metavar="N", help=f"{text} (default: the kind's)")
    for flag, _, text in _GEN_FLOAT_FLAGS:
        p.add_argument(flag, type=float, metavar="X", help=f"{text} (default: the kind's)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", metavar="FILE", help="write the round here instead of stdout")
    p.set_defaults(handler=_cmd_gen_round)


def _generator_defaults(generate: Callable[..., Any]) -> str:
    return ", ".join(f"{n}={q.default}" for n, q in inspect.signature(generate).parameters.items()
                     if q.default is not inspect.Parameter.empty and n != "seed")


def _cmd_gen_round(args: argparse.Namespace) -> int:
    from optsched.core.kinds import round_kind
    _check_output_file(args.out)
    kind = round_kind(args.kind)
    options: dict[str, Any] = {"seed": args.seed}
    for flag, key, _ in _GEN_FLAGS + _GEN_FLOAT_FLAGS:
        value = getattr(args, key)
        if value is None:
            continue
        if key not in kind.generator_options:
            raise ValidationError(f"gen-round --kind {args.kind} does not take {flag}")
        options[key] = value
    _emit_json(kind.generate(**options).to_dict(), args.out)
    return 0


# -- gap -----------------------------------------------------------------------------------------
_GAP_COLUMNS = ("instance", "kind", "gpus", "jobs", "heuristic_objective", "exact_objective", "bound", "gap",
                "heuristic_gap", "exact_s", "status", "first_warm_s", "gap1_warm_s", "first_cold_s", "gap1_cold_s",
                "lp_bound")


def _add_gap(sub: Any) -> None:
    p = sub.add_parser("gap", help="measure how far the heuristic is from the exact optimum on round files",
                       description="For each round file: the heuristic's and the exact objective, the proven bound and "
                                   "gap, solve time, times to the first solution and to a 1% gap with and without the "
                                   "heuristic's warm start, and an LP-relaxation bound (docs/rounds.md).")
    p.add_argument("rounds", nargs="+", metavar="ROUND.json", help="round files")
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S", help="limit of each exact solve (30)")
    p.add_argument("--seed", type=int, default=0, help="solver seed (0)")
    p.add_argument("--out", metavar="CSV", help="also write the table as CSV")
    p.add_argument("--plots", metavar="DIR", help="write gap_vs_size_<kind>.png and time_vs_size_<kind>.png there (matplotlib)")
    p.set_defaults(handler=_cmd_gap)


def _cmd_gap(args: argparse.Namespace) -> int:
    from optsched.core.round import RoundProblem
    from optsched.experiments.gap import gap_row, plot_study
    _check_output_file(args.out)
    if args.plots:
        _check_output_dir(args.plots, "--plots")
    if not args.time_limit > 0:
        raise ValidationError(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    problems = [(path, RoundProblem.from_dict(read_json(path))) for path in args.rounds]
    rows = [gap_row(problem, time_limit=args.time_limit, seed=args.seed, label=Path(path).name)
            for path, problem in problems]

    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v)
    body = [[fmt(r.get(c)) for c in _GAP_COLUMNS] for r in rows]
    _out(_table(_GAP_COLUMNS, body))
    if args.out:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(_GAP_COLUMNS)
        writer.writerows(body)
        _write_text(args.out, buf.getvalue())
    if args.plots:
        for path in plot_study(rows, args.plots):
            _out(f"wrote {path}")
    return 0


# -- simulate ------------------------------------------------------------------------------------
DEFAULT_SIM_POLICIES = ("rubick", "sia", "synergy", "fifo")
#: what ``optsched simulate --kind crius`` runs by default, and on which cluster
CRIUS_SIM_POLICIES = ("crius", "fcfs", "gandiva", "gavel", "elasticflow")
CRIUS_SIM_CLUSTER = "crius-sim-1280"
#: what ``optsched simulate --kind lyra`` runs by default
LYRA_SIM_POLICIES = ("lyra", "lyra-loan", "fifo")


def _add_simulate(sub: Any) -> None:
    from optsched.policies.options import DEFAULT_TIME_LIMIT
    from optsched.policies.registry import DEFAULT_KIND, methods_of
    from optsched.sim.config import PREEMPT_RESTART_S, RECONFIG_OVERHEAD_S, ROUND_INTERVAL_S
    from optsched.sim.presets import PRESETS
    methods = tuple(dict.fromkeys([*methods_of(DEFAULT_KIND), *methods_of("crius"), *methods_of("lyra")]))
    p = sub.add_parser("simulate", help="replay a trace under several policies and compare them",
                       description="Replay a job trace on a cluster under each policy (same trace, cluster and "
                                   "ground truth), print a comparison table with ratios to the first policy and "
                                   "write summary.json, jobs.csv, timeline.csv (and PNG plots with matplotlib).")
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
    p.set_defaults(handler=_cmd_simulate)


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
    from optsched.sim.config import SimConfig
    from optsched.sim.presets import get_preset
    return get_preset(args.preset or "rubick-paper").config(
        SimConfig(checkpoint_on_preempt=not args.no_checkpoint, checkpoint_interval_s=args.checkpoint_interval,
                  min_round_gap_s=args.min_round_gap, max_time_s=args.max_time, seed=args.seed,
                  trim_overhead_s=args.trim_overhead),
        round_interval_s=args.round_interval, reconfig_overhead_s=args.reconfig_overhead,
        preempt_restart_s=args.preempt_restart, start_overhead_s=args.start_overhead)


def _cmd_simulate(args: argparse.Namespace) -> int:
    from optsched.experiments.compare import comparison_rows, measured_configs, run_policies, write_outputs
    from optsched.sim.trace_speed import trace_speeds
    from optsched.sim.traces import detect_format, load_trace
    _check_output_dir(args.out)
    if args.kind == "crius":
        return _simulate_crius(args)
    if args.kind == "lyra":
        return _simulate_lyra(args)
    policies = args.policy or list(DEFAULT_SIM_POLICIES)
    cluster = _cluster(args.cluster or DEFAULT_CLUSTER)
    truth = _ground_truth(args.ground_truth, cluster)
    models = _policy_models(args.params, cluster)
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
    _out(f"trace {trace.source or trace.name}: {len(trace)} jobs on {cluster.name} ({cluster.total_gpus} GPUs), "
         f"ground truth {truth.describe()}")
    if models:
        _out("policies plan with fitted models: " + ", ".join(f"{m} on {g}" for m, g in sorted(models)))
    if speeds is not None:
        _out("trace durations: " + speeds.describe())
    elif trace.durations:
        _out(f"trace durations: ignored (--trace-durations ignore); {len(trace)} jobs run at the ground truth")
    _out(_table(header, rows))
    shares = {name: r.measured_share for name, r in results.items() if r.measured_share is not None}
    if shares:
        _out("measured share of job-time: " + ", ".join(f"{n} {v:.2f}" for n, v in shares.items())
             + (" (candidates restricted to measured configurations)" if allowed is not None else ""))
    written = write_outputs(results, args.out, config, extra=extra, plots=not args.no_plots)
    _out("wrote " + ", ".join(str(p) for p in written))
    return 0


def _simulate_crius(args: argparse.Namespace) -> int:
    """``optsched simulate --kind crius`` (docs/simulation.md): Crius jobs, the Crius ground truth."""
    from optsched.experiments.compare import run_policies
    from optsched.policies.registry import methods_of
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
    cluster = _cluster(args.cluster or CRIUS_SIM_CLUSTER)
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
    _out(heading)
    _out(_table(header, rows))
    written = write_outputs(results, args.out, config, plots=not args.no_plots)
    _out("wrote " + ", ".join(str(p) for p in written))
    return 0


def _simulate_lyra(args: argparse.Namespace) -> int:
    """``optsched simulate --kind lyra`` (docs/simulation.md): Lyra jobs on training and inference servers,
    capacity loaned by the inference usage series (:mod:`optsched.sim.lyra_setup`)."""
    from optsched.experiments.compare import run_policies
    from optsched.policies.registry import methods_of
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


# -- parser and entry point ----------------------------------------------------------------------
class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """Raise on usage errors instead of exiting, so :func:`main` reports them like any other."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(self.format_usage(), message)


_SUBCOMMANDS: tuple[Callable[[Any], None], ...] = (_add_fit, _add_predict, _add_curves, _add_solve, _add_gen_round,
                                                   _add_gap, _add_simulate, _add_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Optimization engine for deep-learning GPU-cluster scheduling.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress (INFO) to stderr")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _UsageError as exc:
        usage, message = exc.args
        _err(usage.rstrip("\n"))
        _err(f"{PROG}: error: {_one_line(message)}")
        return 2
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("optsched")
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO if args.verbose else logging.WARNING)
    try:
        if getattr(args, "seed", None) is not None:  # every command's --seed feeds CP-SAT or numpy
            require_seed("--seed", args.seed)
        return int(args.handler(args))
    except OptschedError as exc:
        _err(f"{PROG}: error: {_one_line(str(exc))}")
        return 2
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
