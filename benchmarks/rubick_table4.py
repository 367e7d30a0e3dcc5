"""Rubick Table 4 under the paper's and the artifact's settings, with and without the traces' own
durations, side by side with the paper (issues "Trace-driven cluster simulator" and 17).

    python benchmarks/rubick_table4.py [--traces base bp mt] [--presets rubick-paper rubick-artifact]
                                       [--durations ignore use] [--configs all measured]
                                       [--truths calibrated neighbours] [--profiling S]
                                       [--max-jobs N] [--data ../shared/data/morphling] [--exact]

* base trace: Rubick vs Sia-like, Synergy-like, Rubick-E/R/N;
* bp (best-plan) trace: Rubick vs Sia-like and Synergy-like;
* mt (multi-tenant) trace: Rubick vs AntMan-like, all / guaranteed / best-effort jobs;
* every trace also runs ``fifo-backfill`` (each job at its request, in submit order with
  backfilling): the reference that moves least with the settings, so ``rubick/fifo-backfill``
  shows how much of Rubick's lead each setting makes.

A *setting* is a simulator preset (``optsched.sim.presets``: ``rubick-paper`` = rounds on events and
every 300 s, 78 s reconfiguration, 63 s restart, free first start; ``rubick-artifact`` = rounds only on
a 60 s tick, 260 s for every start, restart and reconfiguration) and whether jobs run at their trace's
own duration (``use``, ``optsched.sim.trace_speed``) or at the ground truth alone (``ignore``), and
whether policies may choose any configuration (``all``) or only those the measured tables contain
(``measured``, issue 11: no decision rests on extrapolation; a job whose request is not measured gets
the nearest measured stand-in, ``optsched.rounds.rubick.table``). Ground
truth (``--truths``, issue 25 item 4): ``calibrated`` = ``MeasuredGroundTruth`` on ``<data>/placements``
(measured rows exactly, calibrated Eq. 1 elsewhere: the model family the policies plan with, so their
choices on unmeasured configurations confirm themselves); ``neighbours`` =
``NeighbourGroundTruth`` on the same tables (measured rows exactly, measured-neighbour interpolation with
a stated pessimism elsewhere, ``optsched.sim.neighbour_truth``), a setting label ending in ``/nb``.
Policies decide from the built-in fitted model under both. ``--profiling S`` (default 0) makes the first
job of each model wait S seconds for its profile under Rubick and its variants (Rubick Sec. 7.3: "about
210 seconds"; ``SimConfig.profiling_s``). ``--max-jobs N`` replays only the first N jobs by submission
(a smaller trace, for a quick run; the paper's numbers are for all 406). The BP trace's five GPT-2 ZeRO-DP jobs on
2 GPUs (rows 74, 110, 170, 212, 339), which our memory model rejects (81.9 GiB per GPU on an 80 GiB
A800), keep no requested plan.

Prints, per setting, every (trace, policy, group) with average and P99 JCT and makespan in hours and their ratios
to Rubick (ours and the paper's; ``avg_ratio_of_paper`` = our average-JCT ratio to Rubick over the paper's;
``off_by_30%`` flags ratios more than 30% away from the paper's), reconfigurations, preemptions, failed rounds,
``measured_share`` (share of job-time on measured configurations: 1 - measured_share is the share that ran on
configurations nobody measured, answered by the truth's extrapolation) and wall seconds; then one matrix of average
JCT and ratio to Rubick per setting next to the paper's (a cell ``0.62 (1.95x =0.75p) m0.55``: 0.62 h, 1.95x
Rubick's, 0.75 of the paper's ratio, 55% of job-time on measured configurations), and the Rubick/FIFO-backfill
ratio per trace and setting. Writes
``benchmarks/out/rubick_table4.csv`` (long format). Exits 0 with a message when the data is absent.
The simulations run one after another (``--exact`` adds the CP-SAT round on the base trace).
"""

from __future__ import annotations

import argparse
import itertools
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.core.catalog import get_cluster  # noqa: E402
from optsched.experiments.compare import measured_configs, run_policies  # noqa: E402
from optsched.sim.ground_truth import MeasuredGroundTruth  # noqa: E402
from optsched.sim.neighbour_truth import NeighbourGroundTruth  # noqa: E402
from optsched.sim.presets import PRESETS, get_preset  # noqa: E402
from optsched.sim.trace_speed import trace_speeds  # noqa: E402
from optsched.sim.traces import Trace, load_workload_csv  # noqa: E402
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
#: the reference policy run on every trace (not in the paper)
REFERENCE = "fifo-backfill"
DURATIONS = ("ignore", "use")
CONFIGS = ("all", "measured")
#: ground truths for unmeasured configurations: calibrated Eq. 1, or measured neighbours (label suffix /nb)
TRUTHS = ("calibrated", "neighbours")


def _h(v: float | None) -> float | None:
    return None if v is None else round(v / 3600.0, 3)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b <= 0 else round(a / b, 2)


def _fmt(v: object) -> str:
    return "-" if v is None else str(v)


def first_jobs(trace: Trace, n: int) -> Trace:
    """The first ``n`` jobs of ``trace`` by submission, with their quotas and durations (a smaller trace)."""
    jobs = trace.jobs[:n]
    kept = {j.name for j in jobs}
    return Trace(trace.name, jobs, trace.quotas, f"{trace.source} (first {len(jobs)} jobs)",
                 tuple(d for d in trace.durations if d.job in kept))


def setting_name(preset: str, durations: str, configs: str = "all", truth: str = "calibrated") -> str:
    """``paper/ignore`` style label of a setting (``/measured`` appended for measured-only, ``/nb`` for the
    measured-neighbour ground truth)."""
    return (f"{preset.removeprefix('rubick-')}/{durations}" + ("/measured" if configs == "measured" else "")
            + ("/nb" if truth == "neighbours" else ""))


def run_setting(trace_name: str, trace, truth, cluster, preset: str, durations: str, policies: list[str],
                time_limit: float, configs: str = "all", profiling_s: float = 0.0) -> tuple[dict, dict | None]:
    """Summaries of every policy on one trace under one setting, and the anchoring counts."""
    config = get_preset(preset).config(profiling_s=profiling_s)
    speeds = trace_speeds(trace, truth, cluster) if durations == "use" else None
    allowed = measured_configs(truth) if configs == "measured" else None
    results = {}
    for policy in policies:  # one at a time: the machine is shared
        results.update(run_policies(cluster, trace.jobs, truth, [policy], config, round_fields=trace.round_fields(),
                                    time_limit=time_limit, trace_name=trace_name, progress=True,
                                    time_scale=None if speeds is None else speeds.scales, allowed_configs=allowed))
    summaries = {p: {**r.summary(), "wall_seconds": r.wall_seconds} for p, r in results.items()}
    return summaries, None if speeds is None else speeds.to_dict()


def table_rows(trace_name: str, setting: str, summaries: dict) -> list[tuple]:
    """One row per (policy, group) of a trace under one setting (long format)."""
    rows = []
    groups = ("all", "guaranteed", "best_effort") if trace_name == "mt" else ("all",)
    for group in groups:
        base = summaries["rubick"] if group == "all" else summaries["rubick"][group]
        pbase = PAPER[trace_name]["rubick"].get(group)
        for policy, s in summaries.items():
            part = s if group == "all" else s[group]
            ours = (_h(part["avg_jct_s"]), _h(part["p99_jct_s"]), _h(s["makespan_s"]) if group == "all" else None)
            ratios = (_ratio(part["avg_jct_s"], base["avg_jct_s"]), _ratio(part["p99_jct_s"], base["p99_jct_s"]),
                      _ratio(s["makespan_s"], summaries["rubick"]["makespan_s"]) if group == "all" else None)
            paper = PAPER[trace_name].get(policy, {}).get(group)
            pratios = (None, None, None) if paper is None or pbase is None else tuple(
                _ratio(a, b) for a, b in zip(paper, pbase))
            off = [lbl for lbl, r, pr in zip(("avg", "p99", "makespan"), ratios, pratios)
                   if r is not None and pr is not None and abs(r / pr - 1) > 0.30]
            of_paper = None if ratios[0] is None or pratios[0] is None or not pratios[0] else ratios[0] / pratios[0]
            rows.append((trace_name, setting, policy, group, part["finished"], *(_fmt(v) for v in ours),
                         *(_fmt(v) for v in ratios), *(_fmt(v) for v in (paper or (None, None, None))),
                         *(_fmt(v) for v in pratios), _fmt(None if of_paper is None else round(of_paper, 2)),
                         " ".join(off) or "-", s["reconfigurations"], s["preemptions"],
                         s["failed_rounds"], _fmt(round(s["measured_share"], 2) if "measured_share" in s else None),
                         round(s["wall_seconds"], 1)))
    return rows


HEADER = ("trace", "setting", "policy", "group", "jobs", "avg_jct_h", "p99_jct_h", "makespan_h", "avg_ratio",
          "p99_ratio", "makespan_ratio", "paper_avg_h", "paper_p99_h", "paper_makespan_h", "paper_avg_ratio",
          "paper_p99_ratio", "paper_makespan_ratio", "avg_ratio_of_paper", "off_by_30%", "reconfigs", "preempts",
          "failed_rounds",
          "measured_share", "wall_s")


def _avg(summary: dict, group: str) -> float | None:
    return summary["avg_jct_s"] if group == "all" else summary[group]["avg_jct_s"]


def matrix(runs: dict[tuple[str, str], dict], settings: list[str]) -> str:
    """Average JCT h (ratio to Rubick, and that ratio over the paper's: ``=0.75p``) and, for all jobs, the measured
    share ``m``, per (trace, policy, group) and setting, next to the paper's; then Rubick/FIFO-backfill average
    JCT per trace and setting."""
    cells: dict[tuple[str, str, str], dict[str, str]] = {}
    for (trace, setting), summaries in runs.items():
        for group in (("all", "guaranteed", "best_effort") if trace == "mt" else ("all",)):
            base = _avg(summaries["rubick"], group)
            paper_base = PAPER[trace]["rubick"][group]
            for policy, s in summaries.items():
                v = _avg(s, group)
                share = s.get("measured_share") if group == "all" else None
                paper = PAPER[trace].get(policy, {}).get(group)
                ours_x, paper_x = _ratio(v, base), None if paper is None else _ratio(paper[0], paper_base[0])
                of = "" if ours_x is None or not paper_x or policy == "rubick" else f" ={ours_x / paper_x:.2f}p"
                cells.setdefault((trace, policy, group), {})[setting] = (
                    f"{_fmt(_h(v))} ({_fmt(ours_x)}x{of})" + ("" if share is None else f" m{share:.2f}"))
    head = ["trace", "policy", "group", "paper", *settings]
    body = []
    for (trace, policy, group), by_setting in cells.items():
        paper = PAPER[trace].get(policy, {}).get(group)
        pbase = PAPER[trace]["rubick"][group]
        body.append([trace, policy, group, "-" if paper is None else f"{paper[0]} ({_ratio(paper[0], pbase[0])}x)",
                     *(by_setting.get(s, "") for s in settings)])
    lead = [["trace", "rubick / fifo-backfill avg JCT", *settings]]
    for trace in dict.fromkeys(t for t, _ in runs):
        lead.append([trace, "", *(_fmt(_ratio(_avg(runs[(trace, s)]["rubick"], "all"),
                                              _avg(runs[(trace, s)][REFERENCE], "all")))
                                  if (trace, s) in runs else "" for s in settings)])
    out = []
    for block in ([head, *body], lead):
        widths = [max(len(str(c)) for c in column) for column in zip(*block)]
        out.append("\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in block))
    return "\n\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", nargs="+", default=list(FILES), choices=list(FILES))
    ap.add_argument("--presets", nargs="+", default=sorted(PRESETS, reverse=True), choices=sorted(PRESETS))
    ap.add_argument("--durations", nargs="+", default=list(DURATIONS), choices=DURATIONS,
                    help="run jobs at the ground truth alone (ignore) and/or at their trace's own duration (use)")
    ap.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=CONFIGS,
                    help="policies choose among all configurations and/or only the measured ones")
    ap.add_argument("--truths", nargs="+", default=["calibrated"], choices=TRUTHS,
                    help="ground truth off the measured rows: calibrated Eq. 1 (default) and/or measured "
                         "neighbours (settings labelled /nb)")
    ap.add_argument("--profiling", type=float, default=0.0, metavar="S",
                    help="seconds the first job of each model waits for its profile under Rubick's policies "
                         "(Rubick Sec. 7.3: about 210; default 0)")
    ap.add_argument("--max-jobs", type=int, default=None, metavar="N",
                    help="replay only the first N jobs of each trace by submission (a smaller trace)")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the morphling data directory")
    ap.add_argument("--exact", action="store_true", help="also run rubick-exact on the base trace")
    ap.add_argument("--time-limit", type=float, default=5.0, help="per-round limit of rubick-exact")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if not (args.data / "placements").is_dir() or not (args.data / "workloads").is_dir():
        sys.stdout.write(f"skipped: {args.data} has no placements/ and workloads/ (the Rubick artifact data)\n")
        return 0
    cluster = get_cluster("a800-8x8")
    calibrated = MeasuredGroundTruth.from_directory(args.data / "placements", cluster)
    truths = {"calibrated": calibrated, "neighbours": NeighbourGroundTruth(calibrated)}
    settings = list(itertools.product(args.presets, args.durations, args.configs, args.truths))
    rows: list[tuple] = []
    runs: dict[tuple[str, str], dict] = {}
    anchoring = []
    for name in args.traces:
        trace = load_workload_csv(args.data / "workloads" / FILES[name], cluster, infeasible_plans="unset")
        if args.max_jobs is not None:
            trace = first_jobs(trace, args.max_jobs)
        policies = list(PAPER[name]) + [REFERENCE]
        if args.exact and name == "base":
            policies.append("rubick-exact")
        for preset, durations, configs, truth_name in settings:
            label = setting_name(preset, durations, configs, truth_name)
            summaries, counts = run_setting(name, trace, truths[truth_name], cluster, preset, durations, policies,
                                            args.time_limit, configs, args.profiling)
            if counts is not None and not any(a[0] == name for a in anchoring):
                anchoring.append((name, counts))
            runs[(name, label)] = summaries
            rows += table_rows(name, label, summaries)
    path = emit(HEADER, rows, "rubick_table4.csv")
    sys.stdout.write("\naverage JCT h (ratio to Rubick) per setting; paper = Rubick Table 4\n\n"
                     + matrix(runs, [setting_name(*s) for s in settings]))
    for name, counts in anchoring:
        sys.stdout.write(f"\n{name}: trace durations anchor {counts['anchored']} of {counts['jobs']} jobs "
                         f"({counts['implausible']} implausible rows left at the ground truth: "
                         f"{counts['implausible_rows']})")
    for truth_name in args.truths:
        sys.stdout.write(f"\n\nground truth {truth_name}: {truths[truth_name].describe()}")
    if "neighbours" in args.truths:
        calls = truths["neighbours"].sources()
        sys.stdout.write("\nneighbours: ground-truth calls by source over all its runs (calls, not job-time): "
                         + ", ".join(f"{k} {v}" for k, v in calls.items()))
    sys.stdout.write(f"\nsettings: preset/trace durations[/measured: measured configurations only][/nb: "
                     f"measured-neighbour ground truth]; m = measured_share: share of job-time (seconds jobs held "
                     f"an allocation) on measured configurations; the rest ran on unmeasured ones, answered by "
                     f"calibrated Eq. 1 (no suffix) or measured neighbours (/nb)\n"
                     f"profiling: {args.profiling:g} s per model under Rubick's policies; trace: "
                     f"{'all jobs' if args.max_jobs is None else f'first {args.max_jobs} jobs by submission'}\n"
                     f"wrote {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
