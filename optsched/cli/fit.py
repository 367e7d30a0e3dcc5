"""``optsched fit``: fit the 7-parameter iteration-time model (or model v2) to a placements CSV and
write its params JSON; :func:`sample_rows` draws the rows of ``--samples``."""

from __future__ import annotations

import argparse
import json
from typing import Sequence

import numpy as np

from optsched.cli.common import (DEFAULT_CLUSTER, DEFAULT_GPU_TYPE, PROG, check_output_file, err, format_table, out,
                                 plan_configs, resolve_cluster, write_text)
from optsched.core.catalog import get_gpu_type, get_model
from optsched.core.errors import ValidationError
from optsched.core.plan import ZeroMode
from optsched.perf.cpu_anchor import published_cpu_anchors
from optsched.perf.defaults import prior_performance_model
from optsched.perf.fitting import FORWARD_MODES, MIN_OFFLOAD_SAMPLES, fit, identification
from optsched.perf.iteration_time import PerfParams
from optsched.perf.measurements import (Measurement, measured_times, read_placements_csv, read_profile_forward_s,
                                       sample_measurements)
from optsched.perf.model_v2 import DEFAULT_FORM, MODEL_FORMS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched fit``."""
    p.description = ("Fit the iteration-time model (Morphling's Eq. 1, or model v2 with the placement-shape terms, "
                     "docs/perf_model.md) to a placements CSV (columns exec_plan,placement,iter_time) and write the "
                     "params JSON. Only the parameters the rows identify are fitted; the others are held and listed.")
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
    p.add_argument("--forward", choices=FORWARD_MODES, default="eq1",
                   help="v2 without a profiled forward time: 'eq1' takes it from the Eq. 1 stage, where gc rows "
                        "separate forward and backward, and holds it in the v2 stage; 'joint' fits it there with the "
                        "family factors, which scale it (default eq1; docs/perf_model.md)")
    p.add_argument("--out", required=True, metavar="PARAMS.json", help="where to write the fitted model")


def sample_rows(rows: Sequence[Measurement], n: int, seed: int) -> list[Measurement]:
    """Draw ``n`` rows reproducibly with ``numpy.random.default_rng(seed)``, in file order, by
    :func:`optsched.perf.measurements.sample_measurements` (at least three ZeRO-Offload rows when
    the file has them, the rest spread over the plan families)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValidationError(f"--samples must be a positive integer, got {n!r}")
    if n > len(rows):
        raise ValidationError(f"--samples {n} exceeds the {len(rows)} rows of the file")
    return sample_measurements(rows, n, np.random.default_rng(seed), min_offload=MIN_OFFLOAD_SAMPLES)


def run(args: argparse.Namespace) -> int:
    """Fit, write ``--out`` and print the fitted parameters with where each comes from."""
    check_output_file(args.out)
    model = get_model(args.model)
    cluster = resolve_cluster(args.cluster)
    get_gpu_type(args.gpu_type)
    if args.starts < 1:
        raise ValidationError(f"--starts must be >= 1, got {args.starts}")
    rows = read_placements_csv(args.placements, model, require_iter_time=True)
    used = rows if args.samples is None else sample_rows(rows, args.samples, args.seed)
    err(f"{PROG} fit: using {len(used)} of {len(rows)} rows: {', '.join(str(r.row) for r in used)}")
    base = prior_performance_model(model, cluster, args.gpu_type)
    fwd_s = args.fwd_s if args.profile is None else read_profile_forward_s(args.profile, model)
    if fwd_s is not None:
        if not fwd_s > 0 or not np.isfinite(fwd_s):
            raise ValidationError(f"--fwd-s must be a positive number of seconds, got {fwd_s}")
        if fwd_s < base.min_fwd_s:
            raise ValidationError(f"forward time {fwd_s:.4g} s per sample is below {base.min_fwd_s:.4g} s, the "
                                  f"forward FLOPs of {model.name} at the peak of one {args.gpu_type}")
        source = f" (from {args.profile})" if args.profile else ""
        err(f"{PROG} fit: forward time fixed at {fwd_s:.6g} s per sample{source}")
    ident = identification(base, plan_configs(used), fwd_s=fwd_s, form=args.model_form, forward=args.forward)
    fitted = fit(base, plan_configs(used), measured_times(used), fwd_s=fwd_s, seed=args.seed, starts=args.starts,
                 form=args.model_form, forward=args.forward)
    write_text(args.out, json.dumps(fitted.to_dict(), indent=2) + "\n")
    n_off = sum(1 for r in used if r.plan.zero is ZeroMode.OFFLOAD)
    out(f"fitted {model.name} ({args.model_form}) on {args.gpu_type} ({cluster.name}): {len(used)} of {len(rows)} rows "
        f"({n_off} ZeRO-Offload), RMSLE {fitted.rmsle:.4f}")
    identified = set(fitted.identified)
    names = fitted.params.names() if args.model_form == "v2" else PerfParams.EQ1
    staged = fwd_s is None and args.model_form == "v2" and args.forward == "eq1" and not fitted.params.is_eq1
    body = [(n, f"{getattr(fitted.params, n):.6g}",
             ("fitted (Eq. 1 stage, then held)" if staged and n == "fwd_s" else "fitted") if n in identified
             else f"held: {ident.reasons[n]}") for n in names]
    out(format_table(("parameter", "value", "source"), body))
    if args.model_form == "v2" and "m_zero_offload" in identified:
        for a in published_cpu_anchors(model.name, args.gpu_type):
            slow, fast = a.configs(model)
            out(f"CPU anchor (a prior, not a row): {a.source}; fitted {a.cpus_from:g} -> {a.cpus_to:g} CPUs per GPU: "
                f"{fitted.iteration_time(*slow) / fitted.iteration_time(*fast):.3f}x")
    out(f"identified: {', '.join(fitted.identified) or 'none'}")
    out(f"held: {', '.join(ident.held) or 'none'}")
    out(f"wrote {args.out}")
    return 0
