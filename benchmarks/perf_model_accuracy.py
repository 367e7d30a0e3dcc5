"""Rubick Table 2 experiment: fit Morphling's model on 7 sampled configurations per model, predict
every other measured row, report average and maximum relative error of the iteration time per plan
family (and the in-sample fit on all rows).

    python benchmarks/perf_model_accuracy.py [--seeds 5] [--starts 8] [--floor-starts 4] [--no-profile]

The 7 rows per seed are chosen by ``sample_measurements``' maximin design (three ZeRO-Offload rows
where the file has them, the other families round-robin, each row the farthest in placement shape
from those already chosen); the per-model table also gives the errors of random rows of the same
families, the draw used before the design existed.

Reads ../shared/data/morphling/placements/*.csv (skips cleanly when absent); prints a table and
writes benchmarks/out/perf_model_accuracy.csv. Errors are |pred/meas - 1| on iteration time
(= relative throughput error to first order). With several seeds, each cell is the mean over seeds
of that seed's average (resp. maximum) error, so "max" is a typical worst case, not the worst of all.

Besides the held-out errors it prints, per model, two **floors** that say what any fit could reach:

* ``oracle avg%`` / ``oracle max%``: the smallest average (resp. maximum) error over *all* rows that
  any values of the seven parameters and fwd_s achieve, i.e. a fit that sees every row and
  minimises that very error (``oracle_floor``, a local search). A fit on 7 rows cannot beat it on
  the rows it never saw, except by the luck of which rows are left out.
* ``bound max%``: a lower bound on the maximum error of *any* model whose inputs are the plan, the
  GPU count, the node count and the fewest GPUs on one node (every "bottleneck bandwidth" reading of
  Appendix A, ours and the paper's constant B_inter included): rows of the DP families (3D excluded:
  its TP/PP groups see more of the placement) with equal inputs must get one prediction, and the best
  single prediction for times v_lo <= v_hi is off by (v_hi - v_lo)/(v_hi + v_lo)
  (``identical_input_bound``).

The forward time fwd_s is *profiled*, not fitted (Morphling Appendix A.1): it is read from the
artifact's profiling runs ../shared/data/morphling/profile/<model>/ with
``read_profile_forward_s`` (LLaMA-30B's profile is a copy of LLaMA-7B's, so its fwd_s is fitted);
the seven k's are fitted on the sampled rows only. ``--no-profile`` fits fwd_s as well.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from optsched.core import MODELS, PLAN_FAMILIES, get_cluster
from optsched.perf.defaults import prior_performance_model
from optsched.perf.fitting import fit
from optsched.perf.iteration_time import PerfParams, predict_iteration_time
from optsched.perf.measurements import read_placements_csv, read_profile_forward_s, sample_measurements

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "morphling" / "placements"
PROFILE = DATA.parent / "profile"
OUT = Path(__file__).resolve().parent / "out"
#: profile folder of each model; LLaMA-30B's profile duplicates LLaMA-7B's (artifact defect): not used
PROFILE_DIRS = {"vit": "vit", "roberta": "roberta", "bert": "bert", "t5": "t5", "gpt2": "gpt2",
                "llama7": "llama7b"}


def profiled_fwd_s(name: str, model) -> float | None:
    """The profiled per-sample forward time of ``name`` or None (no usable profile)."""
    folder = PROFILE_DIRS.get(name)
    if folder is None or not (PROFILE / folder).is_dir():
        return None
    return read_profile_forward_s(PROFILE / folder, model)


def identical_input_bound(rows) -> tuple[float, str]:
    """Lower bound on the maximum relative error of any predictor of the DP-family rows that sees
    only (plan code, GPUs, nodes, fewest GPUs on a node); returns it and the pair of rows behind it."""
    groups: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r.plan.family != "3d":
            g = r.gpus_per_node
            groups[(r.exec_plan, sum(g), len(g), min(g))].append(r)
    best, why = 0.0, ""
    for (code, _, _, _), rs in groups.items():
        lo = min(rs, key=lambda r: r.iter_time)
        hi = max(rs, key=lambda r: r.iter_time)
        bound = (hi.iter_time - lo.iter_time) / (hi.iter_time + lo.iter_time)
        if bound > best:
            best = bound
            why = f"{code} {lo.placement} {lo.iter_time:.3f}s vs {hi.placement} {hi.iter_time:.3f}s"
    return best, why


def oracle_floor(model, rows, fwd_s, starts: int, seed: int = 0) -> tuple[float, float]:
    """The smallest average and the smallest maximum relative error of Eq. 1 over all ``rows`` for
    any values of the seven parameters and of fwd_s, even where a profile fixes it. Powell on each
    criterion, first over the parameters the RMSLE fit chose (from that fit and from ``starts``
    log-uniform random points), then with fwd_s free as well, from the best point so far and from
    new random points; Powell never ends above its start, so freeing fwd_s never reports a higher
    floor. A local search: an upper estimate of the true floor, which is what makes "the floor is
    above the target" a conservative statement."""
    configs = [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]
    y = np.array([r.iter_time for r in rows])
    rmsle_fit = fit(model, configs, y, fwd_s=fwd_s, seed=seed, starts=starts, min_samples=1)
    features = rmsle_fit.features(configs)
    names = PerfParams.names()
    rng = np.random.default_rng(seed)

    def search(crit, free: list[str], start: np.ndarray) -> np.ndarray:
        """The best full parameter vector Powell finds for ``crit`` moving only ``free``."""
        idx = np.array([names.index(n) for n in free])
        lo = np.array([max(PerfParams.BOUNDS[n][0], model.min_fwd_s if n == "fwd_s" else 0.0) for n in free])
        hi = np.array([PerfParams.BOUNDS[n][1] for n in free])

        def full(x: np.ndarray) -> np.ndarray:
            v = start.copy()
            v[idx] = np.clip(x, lo, hi)
            return v

        def score(x: np.ndarray) -> float:
            pred = predict_iteration_time(features, PerfParams.from_array(full(x)))
            return float(crit(np.abs(pred / y - 1.0)))

        x_starts = [start[idx]] + [np.exp(rng.uniform(np.log(np.maximum(lo, 1e-4)), np.log(hi)))
                                   for _ in range(starts)]
        best_x, best = start[idx], score(start[idx])
        for x0 in x_starts:
            res = minimize(score, np.clip(x0, lo, hi), method="Powell", bounds=list(zip(lo, hi)),
                           options={"maxfev": 4000, "xtol": 1e-6, "ftol": 1e-9})
            if res.fun < best:
                best_x, best = res.x, float(res.fun)
        return full(best_x)

    floors = []
    for crit in (np.mean, np.max):
        v = search(crit, list(rmsle_fit.identified), rmsle_fit.params.as_array())
        if "fwd_s" not in rmsle_fit.identified:
            v = search(crit, list(rmsle_fit.identified) + ["fwd_s"], v)
        floors.append(float(crit(np.abs(predict_iteration_time(features, PerfParams.from_array(v)) / y - 1.0))))
    return floors[0], floors[1]


def held_out_errors(base, rows, fwd_s, n: int, seeds: int, starts: int, spread: bool
                    ) -> dict[str, list[tuple[float, float]]]:
    """Per family (and "all"): one (average, maximum) error pair per seed of a fit on ``n`` rows
    chosen by ``sample_measurements(spread=spread)`` from ``rows``, on the rows it did not see."""
    per_seed: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for seed in range(seeds):
        sample = sample_measurements(rows, n, np.random.default_rng(seed), spread=spread)
        held = [r for r in rows if r not in sample]
        fitted = fit(base, [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in sample], [r.iter_time for r in sample],
                     fwd_s=fwd_s, seed=seed, starts=starts, min_samples=1)
        pred = fitted.iteration_times([(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in held])
        for fam, e in family_errors(held, pred).items():
            per_seed[fam].append((float(np.mean(e)), float(np.max(e))))
    return per_seed


def family_errors(rows, predicted) -> dict[str, list[float]]:
    errs: dict[str, list[float]] = defaultdict(list)
    for r, p in zip(rows, predicted):
        e = abs(p / r.iter_time - 1.0)
        errs[r.plan.family].append(e)
        errs["all"].append(e)
    return errs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--floor-starts", type=int, default=4, help="random starts of the oracle floors (0: skip them)")
    ap.add_argument("--no-profile", action="store_true", help="fit fwd_s instead of reading the profile")
    args = ap.parse_args(argv)
    if not DATA.is_dir():
        sys.stderr.write(f"skipped: measurement data not found at {DATA}\n")
        return 0
    cluster = get_cluster("a800-8x8")
    fams = [f for f in PLAN_FAMILIES if f != "dp"] + ["all"]
    records = []
    floors = []
    for name, model in MODELS.items():
        rows = read_placements_csv(DATA / f"{name}.csv", model)
        base = prior_performance_model(model, cluster, "A800")
        configs = [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]
        fwd_s = None if args.no_profile else profiled_fwd_s(name, model)
        # in-sample: fit on every row
        y = np.array([r.iter_time for r in rows])
        pred_all = fit(base, configs, y, fwd_s=fwd_s, seed=0, starts=args.starts, min_samples=1).iteration_times(configs)
        ins = family_errors(rows, pred_all)
        # held out: fit on samples, predict the rest (maximin design; a random draw for comparison)
        n = args.samples if len(rows) > args.samples else len(rows) - 1  # llama30: fit on the 5 of 6 it can spare
        per_seed = held_out_errors(base, rows, fwd_s, n, args.seeds, args.starts, spread=True)
        ho_random = held_out_errors(base, rows, fwd_s, n, args.seeds, args.starts, spread=False)["all"]
        bound, why = identical_input_bound(rows)
        o_avg, o_max = oracle_floor(base, rows, fwd_s, args.floor_starts) if args.floor_starts > 0 else (None, None)
        ho_all = per_seed["all"]
        floors.append({
            "model": name, "rows": len(rows),
            "heldout_avg_pct": round(100 * np.mean([a for a, _ in ho_all]), 2),
            "heldout_max_pct": round(100 * np.mean([m for _, m in ho_all]), 2),
            "random_avg_pct": round(100 * np.mean([a for a, _ in ho_random]), 2),
            "random_max_pct": round(100 * np.mean([m for _, m in ho_random]), 2),
            "oracle_avg_pct": None if o_avg is None else round(100 * o_avg, 2),
            "oracle_max_pct": None if o_max is None else round(100 * o_max, 2),
            "bound_max_pct": round(100 * bound, 2), "bound_rows": why})
        for fam in fams:
            if fam not in ins:
                continue
            ho = per_seed.get(fam)
            records.append({
                "model": name, "family": fam, "rows": len(ins[fam]),
                "heldout_avg_pct": round(100 * np.mean([a for a, _ in ho]), 2) if ho else None,
                "heldout_max_pct": round(100 * np.mean([m for _, m in ho]), 2) if ho else None,
                "allrows_avg_pct": round(100 * float(np.mean(ins[fam])), 2),
                "allrows_max_pct": round(100 * float(np.max(ins[fam])), 2)})
    OUT.mkdir(exist_ok=True)
    with (OUT / "perf_model_accuracy.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(records[0]))
        w.writeheader()
        w.writerows(records)
    head = f"{'model':8s} {'family':13s} {'rows':>4s} {'7-sample avg%':>13s} {'max%':>7s} {'all-rows avg%':>13s} {'max%':>7s}"
    lines = [f"held-out errors: {args.seeds} seeds x {args.samples} rows chosen by the maximin design; fwd_s "
             f"{'fitted' if args.no_profile else 'profiled'}; paper Table 2: avg <= 7.4%, max <= 10.4%",
             head, "-" * len(head)]
    for r in records:
        ha = "-" if r["heldout_avg_pct"] is None else f"{r['heldout_avg_pct']:.1f}"
        hm = "-" if r["heldout_max_pct"] is None else f"{r['heldout_max_pct']:.1f}"
        lines.append(f"{r['model']:8s} {r['family']:13s} {r['rows']:4d} {ha:>13s} {hm:>7s} "
                     f"{r['allrows_avg_pct']:13.1f} {r['allrows_max_pct']:7.1f}")
    with (OUT / "perf_model_floors.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(floors[0]))
        w.writeheader()
        w.writerows(floors)
    fhead = (f"{'model':8s} {'held-out avg%':>13s} {'max%':>6s} {'random avg%':>11s} {'max%':>6s} "
             f"{'oracle avg%':>11s} {'max%':>6s} "
             f"{'bound max%':>10s}  target (avg <= 5, max <= 10)")
    lines += ["", "held-out = maximin design (above), random = random rows of the same families; "
              "oracle = best Eq. 1 parameters for that criterion on all rows; bound = any model of "
              "(plan, GPUs, nodes, fewest GPUs on a node)", fhead, "-" * len(fhead)]
    for f in floors:
        oa = "-" if f["oracle_avg_pct"] is None else f"{f['oracle_avg_pct']:.1f}"
        om = "-" if f["oracle_max_pct"] is None else f"{f['oracle_max_pct']:.1f}"
        reach = ("met" if f["heldout_avg_pct"] <= 5 and f["heldout_max_pct"] <= 10 else
                 "out of reach of Eq. 1" if f["oracle_avg_pct"] is not None and (
                     f["oracle_avg_pct"] > 5 or f["oracle_max_pct"] > 10) else "missed")
        lines.append(f"{f['model']:8s} {f['heldout_avg_pct']:13.1f} {f['heldout_max_pct']:6.1f} "
                     f"{f['random_avg_pct']:11.1f} {f['random_max_pct']:6.1f} {oa:>11s} {om:>6s} "
                     f"{f['bound_max_pct']:10.1f}  {reach}" + (f"  ({f['bound_rows']})" if f["bound_max_pct"] > 5 else ""))
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
