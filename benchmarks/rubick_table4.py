"""Rubick Table 4: the three 406-job traces on the 8x8 A800 cluster with the measured tables as ground
truth, every policy of the table, side by side with the paper (issue "Trace-driven cluster simulator",
Must show).

    python benchmarks/rubick_table4.py [--traces base bp mt] [--data ../shared/data/morphling]
                                       [--round-interval 300] [--exact]

* base trace: Rubick vs Sia-like, Synergy-like, Rubick-E/R/N;
* bp (best-plan) trace: Rubick vs Sia-like and Synergy-like;
* mt (multi-tenant) trace: Rubick vs AntMan-like, all / guaranteed / best-effort jobs.

Ground truth: ``MeasuredGroundTruth`` on ``<data>/placements`` (measured rows exactly, calibrated
Eq. 1 elsewhere); policies decide from the built-in fitted model. Prints average and P99 JCT and
makespan in hours with ratios to Rubick for us and for the paper, flags ratios more than 30% away from
the paper's, reports for each policy the share of the configurations it ran that are measured rows
(``measured_share``; the rest are calibrated Eq. 1 extrapolations) and writes
``benchmarks/out/rubick_table4.csv``. The BP trace's five GPT-2 ZeRO-DP jobs on 2 GPUs (rows 74, 110,
170, 212, 339), which our memory model rejects (81.9 GiB per GPU on an 80 GiB A800; the artifact has
no memory model), keep no requested plan: the scheduler picks the best plan for their request. ``--exact`` adds the CP-SAT round
(``rubick-exact``) on the base trace. Exits 0 with a message when the data directory is absent.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.core.catalog import get_cluster  # noqa: E402
from optsched.sim.config import SimConfig  # noqa: E402
from optsched.sim.ground_truth import MeasuredGroundTruth  # noqa: E402
from optsched.experiments.compare import run_policies  # noqa: E402
from optsched.sim.traces import load_workload_csv  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "morphling"

#: Rubick Table 4: (avg JCT h, P99 JCT h, makespan h) per trace, policy and job group.
PAPER: dict[str, dict[str, dict[str, tuple[float, float, float | None]]]] = {
    "base": {"rubick": {"all": (0.96, 7.1, 15.3)}, "sia": {"all": (2.5, 12.2, 18.8)},
             "synergy": {"all": (3.1, 13.5, 21.5)}, "rubick-e": {"all": (2.4, 10.9, 20.2)},
             "rubick-r": {"all": (1.6, 9.9, 19.8)}, "rubick-n": {"all": (3.1, 12.8, 22.0)}},
    "bp": {"rubick": {"all": (0.96, 7.1, 15.3)}, "sia": {"all": (1.8, 9.0, 16.5)},
           "synergy": {"all": (2.3, 10.8, 20.5)}},
    "mt": {"rubick": {"all": (1.1, 11.4, 17.9), "guaranteed": (0.85, 10.9, None), "best_effort": (1.34, 11.8, None)},
           "antman": {"all": (1.75, 13.4, 19.6), "guaranteed": (1.41, 11.7, None), "best_effort": (2.1, 14.1, None)}},
}
FILES = {"base": "workload-base.csv", "bp": "workload-bp.csv", "mt": "workload-mt.csv"}


def _h(v: float | None) -> float | None:
    return None if v is None else round(v / 3600.0, 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 2)


def _fmt(v: object) -> str:
    return "-" if v is None else str(v)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(FILES), choices=list(FILES))
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the morphling data directory")
    ap.add_argument("--round-interval", type=float, default=300.0)
    ap.add_argument("--exact", action="store_true", help="also run rubick-exact on the base trace")
    ap.add_argument("--time-limit", type=float, default=5.0, help="per-round limit of rubick-exact")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not (args.data / "placements").is_dir() or not (args.data / "workloads").is_dir():
        sys.stdout.write(f"skipped: {args.data} has no placements/ and workloads/ (the Rubick artifact data)\n")
        return 0
    cluster = get_cluster("a800-8x8")
    truth = MeasuredGroundTruth.from_directory(args.data / "placements", cluster)
    config = SimConfig(round_interval_s=args.round_interval)
    header = ("trace", "policy", "jobs", "avg_jct_h", "p99_jct_h", "makespan_h", "avg_ratio", "p99_ratio",
              "makespan_ratio", "paper_avg_h", "paper_p99_h", "paper_makespan_h", "paper_avg_ratio",
              "paper_p99_ratio", "paper_makespan_ratio", "off_by_30%", "reconfigs", "preempts", "failed_rounds",
              "measured_share", "wall_s")
    rows = []
    for name in args.traces:
        trace = load_workload_csv(args.data / "workloads" / FILES[name], cluster, infeasible_plans="unset")
        policies = list(PAPER[name])
        if args.exact and name == "base":
            policies.append("rubick-exact")
        results = {}
        measured_share = {}
        for policy in policies:  # one at a time, to count how often each one ran on measured rows
            truth.reset_coverage()
            results.update(run_policies(cluster, trace.jobs, truth, [policy], config, round_fields=trace.round_fields(),
                                        time_limit=args.time_limit, trace_name=name, progress=True))
            measured_share[policy] = round(truth.coverage().measured_fraction, 2)
        summaries = {p: r.summary() for p, r in results.items()}
        groups = ("all", "guaranteed", "best_effort") if name == "mt" else ("all",)
        for group in groups:
            base = summaries["rubick"] if group == "all" else summaries["rubick"][group]
            pbase = PAPER[name]["rubick"].get(group)
            for policy, s in summaries.items():
                part = s if group == "all" else s[group]
                ours = (_h(part["avg_jct_s"]), _h(part["p99_jct_s"]), _h(s["makespan_s"]) if group == "all" else None)
                ratios = (_ratio(part["avg_jct_s"], base["avg_jct_s"]), _ratio(part["p99_jct_s"], base["p99_jct_s"]),
                          _ratio(s["makespan_s"], summaries["rubick"]["makespan_s"]) if group == "all" else None)
                paper = PAPER[name].get(policy, {}).get(group)
                pratios = (None, None, None) if paper is None or pbase is None else tuple(
                    _ratio(a, b) for a, b in zip(paper, pbase))
                off = [lbl for lbl, r, pr in zip(("avg", "p99", "makespan"), ratios, pratios)
                       if r is not None and pr is not None and abs(r / pr - 1) > 0.30]
                label = policy if group == "all" else f"{policy} ({group})"
                rows.append((name, label, part["finished"], *(_fmt(v) for v in ours), *(_fmt(v) for v in ratios),
                             *(_fmt(v) for v in (paper or (None, None, None))), *(_fmt(v) for v in pratios),
                             " ".join(off) or "-", s["reconfigurations"], s["preemptions"], s["failed_rounds"],
                             measured_share[policy],
                             round(results[policy].wall_seconds, 1)))
    path = emit(header, rows, "rubick_table4.csv")
    sys.stdout.write(f"\nground truth: {truth.describe()}\nmeasured_share: fraction of the ground-truth "
                     f"configurations a policy ran that were measured rows (the rest is calibrated Eq. 1)\n"
                     f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
