"""MoE scheduling (thesis Ch. 4-5; issue "MoE scheduling"): Lina's expert placement against the uniform
baseline and the exact packing, its two-phase popularity estimation, the communication policies of
one MoE backward pass against the exact schedule, and adaptive gating with curriculum batching.

    python benchmarks/moe.py [--seeds 3] [--batches 4] [--tokens 4096] [--time-limit 2]
                             [--comm-time-limit 5] [--quick]
    python benchmarks/moe.py --thesis [--out DIR] [--seeds 3] [--quick]

1. **Packing** (``moe_packing.csv``, ``moe_packing_summary.csv``): synthetic routing traces
   (:mod:`optsched.perf.moe_routing`) of 12 and 16 experts on as many devices and on half as many (4
   replica slots each); per test batch and sampled layer, the actual loads after the gate make an
   ``experts`` round solved by ``uniform``, ``lina`` (Eq. 4.1 + first-fit decreasing on the actual
   popularity: "Lina w/o estimation") and ``exact``; Lina's two phases (placement on the path-based
   estimate with path length 3, re-placement when the top-2 lists differ) and phase one alone are
   scored on the actual loads too, with the paper's top-1 estimate (``k1``) and with every expert's
   probability (``full``). Per method: device-load imbalance (most loaded device over the mean) and the estimated
   MoE layer time (:class:`optsched.perf.moe_layer_time.MoELayerTime`, batch of ``--tokens`` tokens);
   the gap of Lina to the exact optimum; the phase-two rate.
2. **Communication** (``moe_comm.csv``): step time of the ``fair``, ``priority``, ``defer``,
   ``microop``, ``lina`` and ``exact`` methods of the ``moe-comm`` kind on the Fig. 4.7-shaped pass and
   on random passes of 2 and 4 MoE layers; the exact schedule's status and gap; the gap of Lina's rule
   to the exact step time.
3. **Adaptive gating** (``moe_gating.csv``): for thresholds T, the share of two-expert tokens, the
   expert computation and the expert-load imbalance relative to top-2, and the MoE layer time of
   batches of 16 samples relative to top-2 in random order, in Sec. 5.3.2's cosine order and sorted by
   complexity (:mod:`optsched.perf.adaptive_gating`), with the straggler share of that time.

Timings are not measured here (the models are analytical); solve times are in the CSVs.

``--thesis`` runs, instead, the tables that set the thesis's numbers beside ours and writes them to
``DIR/moe_thesis.csv`` (default ``benchmarks/out/``) with columns ``table,setting,thesis,ours,ratio``
(``ratio`` = ours / thesis, empty where the thesis gives no number). Each table is a function of the
parsed arguments returning rows, listed in :data:`THESIS_TABLES`; today:

* ``estimation`` (:func:`thesis_estimation`, :mod:`optsched.experiments.lina_estimation`): the path-dependent
  synthetic router (:class:`optsched.perf.moe_routing.TypedRouter`, 16 experts, 12 MoE layers, seeds 0..
  ``--seeds``-1), profiled on 64 batches of 2,048 tokens and tested on ``--thesis-batches`` batches; 16
  devices, 4 experts at most per device, top-1 estimate (k = 1), path lengths 1, 3, 6: estimation
  accuracy (both readings of "identical"), phase two's share, without estimation and without fine-tuning
  against Lina, Table 4.5; and the partition sweep of Fig. 4.15 on the ``moe-comm`` kind's Fig. 4.7 pass
  and random 4-layer passes.
* ``4.4`` (:func:`thesis_training`, :func:`optsched.experiments.lina_training.table_4_4`): the training-step
  model on the ``moe-comm`` kind's timeline (24-layer Transformer-XL, 2/4/8/16 experts, fitted to Table
  4.1's baseline rows): step time, backward all-to-all, MoE layer and pipelining-efficiency speedups of Lina
  over the baseline (Figs. 4.10-4.14, Table 4.4; settings of the step speedups contain ``step``), Lina over
  the Tutel-like baseline and Tutel over the baseline (Fig. 4.10's second baseline; no thesis number), and
  the calibration checks.
* ``gating`` (:func:`thesis_gating`, :mod:`optsched.experiments.adaptive_gating_training`): adaptive gating's
  step time per threshold on the MoE layer cost model, every task of Table 5.2 at Sec. 5.4.3's settings
  (Tables 5.1, 5.3, 5.5, 5.6), with the parameters the thesis does not give swept on sentiment analysis.
* ``inference`` (:func:`thesis_inference`, :mod:`optsched.experiments.lina_inference`): Lina's two-phase
  scheduling against the baseline on the estimation study's model at Table 4.1's 4- and 16-expert inference
  time scales (same routers and sizes as ``estimation``, l = 3): median and p95 request and MoE layer time
  reductions (baseline / Lina, Sec. 4.7.3.1, Figs. 4.16-4.18), the headline 1.45x / 1.63x, and the
  baseline / Ideal the thesis implies.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.experiments.lina_estimation import (EstimationStudy, estimation_study,  # noqa: E402
                                                 partition_sweep)
from optsched.heuristics.lina import lina_plan, uniform_plan  # noqa: E402
from optsched.heuristics.moe_comm import POLICIES  # noqa: E402
from optsched.perf.adaptive_gating import (GatingDecision, LayerCost, adaptive_route, batch_time, complexity_vectors,  # noqa: E402
                                           curriculum_order, expert_loads, synthetic_gate_probs)
from optsched.perf.expert_popularity import estimate_popularity, needs_fine_tuning, profile_paths  # noqa: E402
from optsched.perf.moe_layer_time import MoELayerTime  # noqa: E402
from optsched.perf.moe_routing import SyntheticRouter, TypedRouter  # noqa: E402
from optsched.rounds.experts import ExpertSpec, ExpertsRound  # noqa: E402
from optsched.rounds.experts.decision import plan_of  # noqa: E402
from optsched.rounds.experts.generate import lina_cluster  # noqa: E402
from optsched.rounds.experts.plan import ReplicaPlan, device_loads, imbalance, makespan  # noqa: E402
from optsched.rounds.moe_comm import fig47_round, generate_comm_round  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

LAYERS = 12
PATH_LENGTH = 3
#: (experts, devices) of the packing study
PACKING = ((12, 12), (12, 6), (16, 16), (16, 8))
#: layers i whose next layer i+1 is placed (estimated from paths ending at i)
SAMPLED_LAYERS = (2, 5, 8)
#: the estimate's top-k: the paper's (k = 1, top-1 gating in inference) and every expert ("full")
ESTIMATES = (("k1", 1), ("full", 0))
PLACEMENTS = ("uniform", "lina", "exact", *(f"lina-{p}-{e}" for e, _ in ESTIMATES for p in ("2phase", "phase1")))
THRESHOLDS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.4, 1.0)


def _f(v: Any, digits: int = 4) -> str:
    if v is None:
        return "-"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.{digits}g}"
    return str(v)


def _log(msg: str) -> None:
    sys.stderr.write(msg + "\n")
    sys.stderr.flush()


def _round(loads: np.ndarray, devices: int) -> ExpertsRound:
    return ExpertsRound(cluster=lina_cluster(devices), experts=tuple(ExpertSpec(float(w)) for w in loads), slots=4)


# -- 1. packing ---------------------------------------------------------------------------------------
def packing(seeds: int, batches: int, tokens: int, time_limit: float) -> tuple[list[list[str]], list[list[str]]]:
    timer = MoELayerTime()
    rows: list[list[str]] = []
    stats: dict[tuple[int, int, str], dict[str, list[float]]] = {}
    tuned: dict[tuple[int, int, str], list[bool]] = {}
    for experts, devices in PACKING:
        for seed in range(seeds):
            router = SyntheticRouter.create(experts, LAYERS, seed)
            profile = profile_paths(router.sample(16, 1024, seed), PATH_LENGTH)
            test = router.sample(batches, tokens, seed + 1000)
            for b, idx in enumerate(test.batches()):
                top1 = test.top1[idx]
                for layer in SAMPLED_LAYERS:
                    actual = np.bincount(top1[:, layer + 1], minlength=experts).astype(float)
                    r_act = _round(actual, devices)
                    t0 = time.perf_counter()
                    exact = optsched.solve(r_act, method="exact", time_limit=time_limit)
                    exact_s = time.perf_counter() - t0
                    plans: dict[str, ReplicaPlan] = {"uniform": uniform_plan(r_act), "lina": lina_plan(r_act),
                                                     "exact": plan_of(r_act, exact)}
                    fine: dict[str, bool] = {}
                    for tag, k in ESTIMATES:
                        estimate = idx.size * estimate_popularity(profile, top1, layer, k=k or experts)
                        phase1 = lina_plan(_round(estimate, devices))
                        fine[tag] = needs_fine_tuning(estimate, actual, k=1)
                        plans[f"lina-phase1-{tag}"] = phase1
                        plans[f"lina-2phase-{tag}"] = plans["lina"] if fine[tag] else phase1
                        tuned.setdefault((experts, devices, tag), []).append(fine[tag])
                    lb = -exact.bound if exact.bound is not None else None
                    for name in PLACEMENTS:
                        p = plans[name]
                        imb = imbalance(r_act, p, actual)
                        ms = timer.ms(device_loads(r_act, p, actual))
                        span = makespan(r_act, p, actual)
                        s = stats.setdefault((experts, devices, name), {"imb": [], "ms": [], "gap": []})
                        s["imb"].append(imb)
                        s["ms"].append(ms)
                        s["gap"].append(span / -exact.objective - 1.0)
                        rows.append([str(experts), str(devices), str(seed), str(b), str(layer + 1), name, _f(imb),
                                     _f(ms), _f(span), _f(lb), _f(span / lb - 1.0 if lb else None),
                                     exact.status if name == "exact" else "", _f(exact_s) if name == "exact" else "",
                                     str(fine[name.rsplit("-", 1)[1]]) if "2phase" in name else ""])
            _log(f"packing: {experts} experts, {devices} devices, seed {seed} done")
    summary = []
    for experts, devices in PACKING:
        base = np.mean(stats[(experts, devices, "uniform")]["ms"])
        for name in PLACEMENTS:
            s = stats[(experts, devices, name)]
            summary.append([str(experts), str(devices), name, _f(np.mean(s["imb"])), _f(np.percentile(s["imb"], 95)),
                            _f(np.mean(s["ms"])), _f(np.percentile(s["ms"], 95)), _f(base / np.mean(s["ms"])),
                            _f(100 * np.mean(s["gap"])),
                            _f(100 * np.mean(tuned[(experts, devices, name.rsplit("-", 1)[1])]))
                            if "2phase" in name else ""])
    return rows, summary


# -- 2. communication -----------------------------------------------------------------------------------
def communication(seeds: int, time_limit: float) -> list[list[str]]:
    rounds = [("fig4.7", fig47_round())]
    rounds += [(f"random-L{layers}-s{seed}", generate_comm_round(layers, seed)) for layers in (2, 4)
               for seed in range(seeds)]
    methods = (*POLICIES, "exact")
    rows = []
    for label, r in rounds:
        t0 = time.perf_counter()
        d = {m: optsched.solve(r, method=m, time_limit=time_limit) for m in methods}
        wall = time.perf_counter() - t0
        step = {m: -d[m].objective for m in methods}
        rows.append([label, *(_f(step[m]) for m in methods), *(_f(step["fair"] / step[m], 3) for m in methods),
                     d["exact"].status, _f(d["exact"].gap), _f(100 * (step["lina"] / step["exact"] - 1.0)), _f(wall)])
        _log(f"communication: {label} done")
    return rows


# -- 3. adaptive gating -----------------------------------------------------------------------------------
def gating(seed: int, samples: int = 256, tokens: int = 128, experts: int = 16, batch: int = 16) -> list[list[str]]:
    probs = synthetic_gate_probs(samples, tokens, LAYERS, experts, seed)
    cost = LayerCost()
    top2_time = LAYERS * cost.top2_ms * -(-samples // batch)
    random_order = np.random.default_rng(seed).permutation(samples)
    rows = []
    for t in THRESHOLDS:
        d = adaptive_route(probs, t)
        per_layer = [expert_loads(GatingDecision(d.top1[:, :, i], d.top2[:, :, i], d.two[:, :, i], experts))
                     for i in range(LAYERS)]
        imb = float(np.mean([x.max() / x.mean() for x in per_layer]))
        load = float(np.mean([x.max() for x in per_layer]))
        vectors = complexity_vectors(d.two)
        times = {}
        for name, order in (("random", random_order), ("cosine", curriculum_order(vectors)),
                            ("sorted", np.argsort(vectors.sum(axis=1), kind="stable"))):
            total, strag = batch_time(vectors, order, batch, cost)
            times[name] = (total / top2_time, strag / total)
        rows.append([_f(t), _f(d.two_share), _f(d.computation), _f(imb), _f(load / (2 * samples * tokens / experts)),
                     *(_f(times[n][0]) for n in ("random", "cosine", "sorted")),
                     *(_f(100 * times[n][1], 3) for n in ("random", "cosine", "sorted"))])
    return rows


# -- --thesis: the thesis's numbers beside ours --------------------------------------------------------------
#: one row of moe_thesis.csv: table, setting, the thesis's number (None: the text gives none), ours
ThesisRow = tuple[str, str, Optional[float], float]
#: the estimation study's model (Sec. 4.7.1, Table 4.5: "Both models have 16 experts per layer"; Fig. 4.9:
#: "two 12-layer MoE models") and its profiling
THESIS_EXPERTS, THESIS_LAYERS = 16, 12
PROFILE_BATCHES, THESIS_TOKENS = 64, 2048
#: Table 4.5: path length -> model -> (norm. median, norm. p95, fine-tuning %, estimation accuracy %)
TABLE_4_5 = {1: {"Transformer-XL": (1.41, 1.32, 76.5, 31.6), "BERT-Large": (1.34, 1.35, 71.3, 28.3)},
             3: {"Transformer-XL": (1.16, 1.04, 25.7, 60.4), "BERT-Large": (1.07, 1.04, 32.2, 63.5)},
             6: {"Transformer-XL": (1.19, 1.11, 22.5, 71.4), "BERT-Large": (1.09, 1.11, 27.1, 66.0)}}


def _studies(args: argparse.Namespace, length: int) -> list[EstimationStudy]:
    out = []
    for seed in range(args.seeds):
        router = TypedRouter.create(THESIS_EXPERTS, THESIS_LAYERS, seed)
        profile = router.sample(PROFILE_BATCHES, THESIS_TOKENS, seed + 500)
        test = router.sample(args.thesis_batches, THESIS_TOKENS, seed + 1000)
        out.append(estimation_study(profile, test, path_length=length))
        _log(f"estimation: path length {length}, seed {seed} done")
    return out


def _pooled(studies: list[EstimationStudy], rule: str) -> float:
    """Accuracy over every estimated layer of every seed, %."""
    hits = np.concatenate([(s.same_order if rule == "ordered" else s.same_set).ravel() for s in studies])
    return 100.0 * float(np.mean(hits))


def thesis_estimation(args: argparse.Namespace) -> list[ThesisRow]:
    """Table ``estimation`` (module docstring): Sec. 4.7.3.1-4.7.3.2, Table 4.5, Fig. 4.15."""
    rows: list[ThesisRow] = []
    by_length = {length: _studies(args, length) for length in (1, 3, 6)}
    main_ = by_length[3]
    models = ("Transformer-XL", "BERT-Large")
    for rule in ("set", "ordered"):
        for model, thesis in zip(models, (58.41, 54.16)):
            rows.append(("estimation", f"accuracy % (top-2 identical as {rule}), l=3, 16 experts "
                         f"[{model}, Sec. 4.7.3.2]", thesis, _pooled(main_, rule)))
    for rule in ("set", "ordered"):
        rows.append(("estimation", f"phase two runs, % of scheduled layers (top-2 differ as {rule}), l=3 "
                     f"[Sec. 4.7.3.1: 23% on average]", 23.0, 100.0 - _pooled(main_, rule)))
    no_est = 100.0 * float(np.mean([s.worse("no-estimation") for s in main_]))
    no_ft = 100.0 * float(np.mean([s.worse("no-fine-tuning", stat="p95") for s in main_]))
    for model, thesis in zip(models, (24.0, 18.6)):
        rows.append(("estimation", f"without estimation: median inference time over Lina's, % [{model}, Fig. 4.16]",
                     thesis, no_est))
    for model, thesis in zip(models, (26.7, 33.1)):
        rows.append(("estimation", f"without fine-tuning: p95 inference time over Lina's, % [{model}, Fig. 4.16]",
                     thesis, no_ft))
    for length, studies in by_length.items():
        ours = (float(np.mean([s.median("lina") / s.median("ideal") for s in studies])),
                float(np.mean([s.p95("lina") / s.median("ideal") for s in studies])),
                100.0 - _pooled(studies, "set"), _pooled(studies, "set"))
        for model in models:
            for name, thesis, value in zip(("norm. median inference time (Lina / Ideal)",
                                            "norm. p95 inference time (Lina / Ideal median)",
                                            "phase two (fine-tuning) %, set", "estimation accuracy %, set"),
                                           TABLE_4_5[length][model], ours):
                rows.append(("estimation", f"l={length}: {name} [{model}, Table 4.5]", thesis, value))
    comm = [fig47_round(), *(generate_comm_round(4, seed) for seed in range(args.seeds))]
    for mb, ratio in partition_sweep(comm).items():
        if mb != 30.0:
            rows.append(("estimation", f"partition {mb:g} MB: lina step time / 30 MB (moe-comm: the Fig. 4.7 pass and "
                         f"{args.seeds} random passes of 4 MoE layers) [Fig. 4.15: slower beyond 50 MB, no number]",
                         None, ratio))
    return rows


def thesis_training(args: argparse.Namespace) -> list[ThesisRow]:
    """Table ``4.4`` (module docstring): Sec. 4.7.2, Figs. 4.10-4.14, Table 4.4."""
    from optsched.experiments.lina_training import table_4_4
    return table_4_4()


def thesis_gating(args: argparse.Namespace) -> list[ThesisRow]:
    """Table ``gating`` (:mod:`optsched.experiments.adaptive_gating_training`): Tables 5.1, 5.3, 5.5, 5.6 on the
    step model, every task at Sec. 5.4.3's settings, ``--seeds`` seeds of 32 batches (``--quick``: 4 batches, no
    sweeps), and the unknown parameters swept on sentiment analysis."""
    from optsched.experiments.adaptive_gating_training import thesis_rows  # noqa: PLC0415

    quick = getattr(args, "quick", False)
    return thesis_rows(args.seeds, 4 if quick else 32, sweeps=not quick)


def thesis_inference(args: argparse.Namespace) -> list[ThesisRow]:
    """Table ``inference`` (:func:`optsched.experiments.lina_inference.thesis_rows`): Sec. 4.7.3.1, Figs.
    4.16-4.18, ``--seeds`` routers of ``--thesis-batches`` requests per expert count."""
    from optsched.experiments.lina_inference import thesis_rows  # noqa: PLC0415

    return thesis_rows(args.seeds, args.thesis_batches, layers=THESIS_LAYERS, profile_batches=PROFILE_BATCHES,
                       tokens=THESIS_TOKENS)


#: the table builders of --thesis, in output order (other tables of issue 27 are added here)
THESIS_TABLES: list[Callable[[argparse.Namespace], list[ThesisRow]]] = [thesis_estimation, thesis_training,
                                                                       thesis_gating, thesis_inference]


def thesis(args: argparse.Namespace) -> Path:
    """Run :data:`THESIS_TABLES`, print them and write ``moe_thesis.csv`` (module docstring)."""
    out = []
    for build in THESIS_TABLES:
        for table, setting, paper, ours in build(args):
            ratio = ours / paper if paper else None
            out.append([table, setting, _f(paper), _f(ours), _f(ratio)])
    return emit(("table", "setting", "thesis", "ours", "ratio"), out, "moe_thesis.csv", directory=args.out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=4096, help="tokens per inference batch")
    ap.add_argument("--time-limit", type=float, default=2.0, help="exact packing limit per round, s")
    ap.add_argument("--comm-time-limit", type=float, default=5.0, help="exact schedule limit per pass, s")
    ap.add_argument("--quick", action="store_true", help="1 seed, 2 batches, 1 s limits (--thesis: 1 seed, 40 "
                                                        "batches)")
    ap.add_argument("--thesis", action="store_true", help="the thesis's tables beside ours, DIR/moe_thesis.csv")
    ap.add_argument("--out", type=Path, default=None, help="directory of moe_thesis.csv (default benchmarks/out)")
    ap.add_argument("--thesis-batches", type=int, default=200, help="test batches per seed of the estimation study")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.batches, args.time_limit, args.comm_time_limit = 1, 2, 1.0, 1.0
        args.thesis_batches = 40
    t0 = time.perf_counter()
    if args.thesis:
        path = thesis(args)
        sys.stdout.write(f"\nwrote {path}; total {time.perf_counter() - t0:.1f} s\n")
        return 0
    rows, summary = packing(args.seeds, args.batches, args.tokens, args.time_limit)
    emit(("experts", "devices", "seed", "batch", "layer", "method", "imbalance", "layer_ms", "makespan_tokens",
          "lower_bound", "gap_to_bound", "exact_status", "exact_s", "fine_tuned"), rows, "moe_packing.csv")
    emit(("experts", "devices", "method", "mean_imbalance", "p95_imbalance", "mean_layer_ms", "p95_layer_ms",
          "speedup_vs_uniform", "mean_gap_to_exact_%", "phase_two_%"), summary, "moe_packing_summary.csv")
    methods = (*POLICIES, "exact")
    emit(("pass", *(f"{m}_ms" for m in methods), *(f"fair/{m}" for m in methods), "exact_status", "exact_gap",
          "lina_over_exact_%", "wall_s"), communication(args.seeds, args.comm_time_limit), "moe_comm.csv")
    emit(("T", "two_expert_share", "computation_vs_top2", "expert_load_imbalance", "max_expert_load_vs_top2",
          "time_random", "time_cosine", "time_sorted", "straggler_%_random", "straggler_%_cosine",
          "straggler_%_sorted"), gating(0), "moe_gating.csv")
    sys.stdout.write(f"\ntotal {time.perf_counter() - t0:.1f} s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
