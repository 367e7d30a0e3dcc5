"""``optsched gap``: how far the heuristic is from the exact optimum on round files (the gap study of
``docs/rounds.md``)."""

from __future__ import annotations

import argparse
import csv
import io
from pathlib import Path
from typing import Any

from optsched.cli.common import check_output_dir, check_output_file, format_table, out, plots_skipped, write_text
from optsched.core.errors import ValidationError
from optsched.core.jsonio import read_json
from optsched.core.round import RoundProblem

#: the columns of the table, in order
GAP_COLUMNS = ("instance", "kind", "gpus", "jobs", "heuristic_objective", "exact_objective", "bound", "gap",
               "heuristic_gap", "exact_s", "status", "deferred", "first_warm_s", "gap1_warm_s", "first_cold_s",
               "gap1_cold_s", "lp_bound")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched gap``."""
    p.description = ("For each round file: the heuristic's and the exact objective, the proven bound and gap, solve "
                     "time, times to the first solution and to a 1% gap with and without the heuristic's warm start, "
                     "and an LP-relaxation bound (docs/rounds.md).")
    p.add_argument("rounds", nargs="+", metavar="ROUND.json", help="round files")
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S", help="limit of each exact solve (30)")
    p.add_argument("--seed", type=int, default=0, help="solver seed (0)")
    p.add_argument("--out", metavar="CSV", help="also write the table as CSV")
    p.add_argument("--plots", metavar="DIR",
                   help="write gap_vs_size_<kind>.png and time_vs_size_<kind>.png there (matplotlib)")


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def run(args: argparse.Namespace) -> int:
    """Print the table; also write it as CSV with ``--out`` and plot it with ``--plots``."""
    from optsched.experiments.gap import gap_row, plot_study  # not needed for --help
    check_output_file(args.out)
    if args.plots:
        check_output_dir(args.plots, "--plots")
    if not args.time_limit > 0:
        raise ValidationError(f"--time-limit must be a positive number of seconds, got {args.time_limit}")
    problems = [(path, RoundProblem.from_dict(read_json(path))) for path in args.rounds]
    rows = [gap_row(problem, time_limit=args.time_limit, seed=args.seed, label=Path(path).name)
            for path, problem in problems]
    body = [[_cell(r.get(c)) for c in GAP_COLUMNS] for r in rows]
    out(format_table(GAP_COLUMNS, body))
    for r in rows:  # a round studied with guarantees deferred says so (docs/rounds.md, "Gap studies")
        if r.get("note"):
            out(f"{r['instance']}: {r['note']}")
    if args.out:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(GAP_COLUMNS)
        writer.writerows(body)
        write_text(args.out, buf.getvalue())
    if args.plots and not plots_skipped():
        for path in plot_study(rows, args.plots):
            out(f"wrote {path}")
    return 0
