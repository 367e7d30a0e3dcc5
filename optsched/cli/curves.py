"""``optsched curves``: a model's best throughput as a function of its GPUs (or CPUs) on a built-in
cluster, with the best plan at each amount."""

from __future__ import annotations

import argparse
import json
from typing import Sequence

from optsched.cli.common import DEFAULT_CLUSTER, DEFAULT_GPU_TYPE, format_table, out, resolve_cluster
from optsched.core.catalog import GPU_TYPES, get_model
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.core.pool import gpu_pool
from optsched.perf.defaults import default_performance_model
from optsched.perf.lookup import load_params
from optsched.perf.sensitivity import cpu_curve, gpu_curve


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched curves``."""
    p.description = ("Best throughput of a model as a function of its GPUs (or CPUs) on a built-in cluster, with the "
                     "best plan at each amount.")
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


def placement_code(gpus_per_node: Sequence[int]) -> str:
    """``(4, 2, 2)`` -> ``"422"`` (the measurement files' code); ``"10+2"`` when a count exceeds 9."""
    counts = [int(g) for g in gpus_per_node]
    return "".join(map(str, counts)) if all(g <= 9 for g in counts) else "+".join(map(str, counts))


def run(args: argparse.Namespace) -> int:
    """Print the curve as a table, or as JSON with ``--json``."""
    get_model(args.model)  # unknown model -> UnknownNameError
    cluster = resolve_cluster(args.cluster)
    types = sorted({n.gpu_type for n in cluster.nodes if n.num_gpus > 0})
    if args.gpu_type not in types:
        if args.gpu_type not in GPU_TYPES and args.gpu_type not in {g.name for g in cluster.gpu_types}:
            raise UnknownNameError("GPU type", args.gpu_type, list(GPU_TYPES))
        raise ValidationError(f"cluster {cluster.name!r} has no {args.gpu_type} GPUs (its GPU types: "
                              f"{', '.join(types)}); pick --gpu-type {types[0]} or another --cluster")
    pool = gpu_pool(cluster, args.gpu_type)
    if args.params:
        perf = load_params(args.params)
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
        what = f"placement {placement_code(placement)}, up to {max_cpus} CPUs"
    points = list(curve.points)
    if args.json:
        doc = {"model": perf.model.name, "cluster": cluster.name, "gpu_type": args.gpu_type,
               "resource": args.resource, "unit": "samples/s",
               "points": [{"amount": pt.amount, "throughput": pt.throughput,
                           "slope": curve.slope(pt.amount) if i + 1 < len(points) else None,
                           "plan": pt.plan.label if pt.plan is not None else None,
                           "gpus_per_node": list(pt.gpus_per_node), "cpus": pt.cpus}
                          for i, pt in enumerate(points)]}
        out(json.dumps(doc, indent=2))
        return 0
    unit = "GPUs" if args.resource == "gpu" else "CPUs"
    out(f"# {perf.model.name} {args.resource} curve on {cluster.name} ({args.gpu_type}; {what})")
    body = []
    for i, pt in enumerate(points):
        slope = f"{curve.slope(pt.amount):.4g}" if i + 1 < len(points) else "-"
        plan = pt.plan.label if pt.plan is not None else "(none fits)"
        body.append((str(pt.amount), f"{pt.throughput:.4g}", slope, plan,
                     f"{placement_code(pt.gpus_per_node)} / {pt.cpus} CPUs"))
    out(format_table((unit, "samples/s", "slope", "best plan", "placement"), body))
    return 0
