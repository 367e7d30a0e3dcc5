"""``optsched predict``: the iteration time and throughput of every row of a placements CSV under a
fitted params JSON."""

from __future__ import annotations

import argparse
import csv
import io

from optsched.cli.common import check_output_file, out, plan_configs, write_text
from optsched.perf.lookup import load_params
from optsched.perf.measurements import read_placements_csv


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched predict``."""
    p.description = ("Predict the iteration time and throughput of every exec_plan,placement row of a CSV with a "
                     "fitted params JSON (other columns are ignored).")
    p.add_argument("--params", required=True, metavar="PARAMS.json", help="output of `optsched fit`")
    p.add_argument("--placements", required=True, metavar="CSV", help="rows with exec_plan,placement")
    p.add_argument("--out", required=True, metavar="OUT.csv", help="where to write the predictions")


def run(args: argparse.Namespace) -> int:
    """Write one prediction per row to ``--out``."""
    check_output_file(args.out)
    perf = load_params(args.params)
    rows = read_placements_csv(args.placements, perf.model, require_iter_time=False)
    times = perf.iteration_times(plan_configs(rows))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(("exec_plan", "placement", "predicted_iter_time", "predicted_throughput", "plan"))
    for r, t in zip(rows, times):
        writer.writerow((r.exec_plan, r.placement, f"{float(t):.6g}",
                         f"{perf.model.global_batch / float(t):.6g}", r.plan.label))
    write_text(args.out, buf.getvalue())
    out(f"predicted {len(rows)} rows of {perf.model.name} with {args.params}; wrote {args.out}")
    return 0
