"""Fit the built-in default parameters (optsched/perf/defaults.py) on the public Rubick measurements.

    python benchmarks/fit_default_params.py [--model-form v2|eq1] [--starts 12]

Reads ../shared/data/morphling/placements/*.csv (skips cleanly when absent), fits every catalogue
model on the A800 8x8 cluster on every row (model v2 by default: its odd-node term explains the
multi-node ViT rows that Eq. 1 alone had to leave out) and prints the ``DEFAULT_PARAMS`` entries to
paste, plus a CSV of the fit quality under benchmarks/out/. fwd_s is fixed to the profiled forward
time where the artifact has a usable profile (see ``profiled_fwd_s`` in perf_model_accuracy.py; the
numbers are printed for ``PROFILED_FWD_S`` too) and fitted otherwise. With ``--model-form eq1`` the
ViT fit keeps only its single-node and ZeRO-Offload rows, as the Eq. 1 defaults did. v2 fits use the
published CPU anchors (``optsched.perf.cpu_anchor``: Rubick Fig. 7 for LLaMA-2-7B) as priors. Each
line ends with the fit's ZeRO-Offload speed-up on one GPU from 8 to 16 CPUs (the CPU sensitivity the
rows cannot show; ``docs/perf_model.md``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

from optsched.core import MODELS, ZeroMode, get_cluster
from optsched.core.plan import offload_runs_with_gc, parse_plan_code
from optsched.perf.defaults import prior_performance_model
from optsched.perf.fitting import fit
from optsched.perf.iteration_time import PerfParams
from optsched.perf.measurements import read_placements_csv

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_model_accuracy import profiled_fwd_s  # noqa: E402

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "morphling" / "placements"
OUT = Path(__file__).resolve().parent / "out"


def rows_for_defaults(name: str, rows: list, form: str = "v2") -> list:
    """Every row; under Eq. 1, ViT's single-node and ZeRO-Offload rows only (module docstring)."""
    if name != "vit" or form == "v2":
        return rows
    return [r for r in rows if len(r.gpus_per_node) == 1 or r.plan.zero is ZeroMode.OFFLOAD]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model-form", choices=("v2", "eq1"), default="v2")
    ap.add_argument("--starts", type=int, default=12)
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        sys.stderr.write(f"skipped: measurement data not found at {DATA}\n")
        return 0
    cluster = get_cluster("a800-8x8")
    OUT.mkdir(exist_ok=True)
    lines, table, profiled = [], [], {}
    for name, model in MODELS.items():
        rows = rows_for_defaults(name, read_placements_csv(DATA / f"{name}.csv", model), args.model_form)
        base = prior_performance_model(model, cluster, "A800")
        configs = [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]
        y = np.array([r.iter_time for r in rows])
        fwd_s = profiled_fwd_s(name, model)
        if fwd_s is not None:
            profiled[name] = fwd_s
        fitted = fit(base, configs, y, fwd_s=fwd_s, seed=0, starts=args.starts, form=args.model_form)
        params, err = fitted.params, fitted.rmsle
        neutral = PerfParams()
        values = ", ".join(f"{k}={v:.6g}" for k, v in params.to_dict().items()
                           if k in PerfParams.EQ1 or v != getattr(neutral, k))
        plan = parse_plan_code("zero-offload", 1, model.global_batch, offload_gc=offload_runs_with_gc(model))
        gain = fitted.throughput(plan, (1,), 16.0) / fitted.throughput(plan, (1,), 8.0)
        lines.append(f'    "{name}": PerfParams({values}),  # RMSLE {err:.3f} on {len(rows)} rows; '
                     f'ZeRO-Offload 1 GPU 8->16 CPUs {gain:.2f}x')
        table.append({"model": name, "rows": len(rows), "rmsle": round(err, 4), "offload_gain_8_to_16_cpus": round(gain, 3),
                      **params.to_dict()})
    sys.stdout.write("PROFILED_FWD_S = {" + ", ".join(f'"{k}": {v:.6g}' for k, v in profiled.items()) + "}\n")
    sys.stdout.write("\n".join(lines) + "\n")
    with (OUT / "default_params.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
