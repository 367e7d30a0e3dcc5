"""Measured iteration times in the placements CSV format of the Rubick artifact.

Columns ``exec_plan,placement`` are required; ``iter_time`` (seconds per iteration) is required for
fitting and optional for prediction; other columns are carried along untouched. Plan and placement
codes are those of ``../shared/data/README.md`` (see :func:`optsched.core.parse_plan_code` and
:func:`optsched.core.parse_placement_code`). Every malformed row raises ``ValidationError`` naming
the file, the row number (1 = first data row after the header) and the rule.

:func:`read_profile_forward_s` reads the forward time of a model from the profiling runs of the Rubick
artifact (``profile/<model>/{config,data}.csv``), the quantity Morphling Appendix A.1 takes from a
profiler instead of fitting it.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from optsched.core.allocation import parse_placement_code
from optsched.core.csvio import open_csv
from optsched.core.job import DEFAULT_CPUS_PER_GPU
from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, offload_runs_with_gc, parse_plan_code

#: CPU cores per GPU assumed for measured rows, which do not record them (the 406-job trace asks
#: for 8 per GPU, :data:`~optsched.core.job.DEFAULT_CPUS_PER_GPU`). It only scales k_opt_off, so
#: predictions of rows measured alike do not depend on it.
MEASURED_CPUS_PER_GPU = float(DEFAULT_CPUS_PER_GPU)


@dataclass(frozen=True)
class Measurement:
    """One row: a plan on a placement, with its measured iteration time when present."""

    row: int
    exec_plan: str
    placement: str
    plan: ExecutionPlan
    gpus_per_node: tuple[int, ...]
    iter_time: float | None
    cpus_per_gpu: float = MEASURED_CPUS_PER_GPU
    extra: tuple[tuple[str, str], ...] = ()


def read_placements_csv(path: str | Path, model: ModelSpec, require_iter_time: bool = True) -> list[Measurement]:
    """Read and validate a placements CSV for ``model``."""
    p = Path(path)
    with open_csv(p) as handle:
        reader = csv.DictReader(handle)
        header = [h.strip() for h in (reader.fieldnames or [])]
        needed = ["exec_plan", "placement"] + (["iter_time"] if require_iter_time else [])
        missing = [c for c in needed if c not in header]
        if missing:
            raise ValidationError(f"{p}: missing column(s) {', '.join(missing)}; header is {header}")
        reader.fieldnames = header
        rows = []
        for i, raw in enumerate(reader, start=1):
            if raw is None or all((v is None or not str(v).strip()) for v in raw.values()):
                continue  # blank line
            if None in raw:
                raise ValidationError(f"{p} row {i}: more fields than the header has columns")
            rows.append(_parse_row(p, i, raw, model, require_iter_time))
    if not rows:
        raise ValidationError(f"{p}: no data rows")
    return rows


def _parse_row(p: Path, i: int, raw: dict[str, str | None], model: ModelSpec,
               require_iter_time: bool) -> Measurement:
    where = f"{p} row {i}"
    code = (raw.get("exec_plan") or "").strip()
    place = (raw.get("placement") or "").strip()
    try:
        gpn = parse_placement_code(place)
        plan = parse_plan_code(code, sum(gpn), model.global_batch, offload_gc=offload_runs_with_gc(model))
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None
    it_text = (raw.get("iter_time") or "").strip()
    iter_time: float | None = None
    if require_iter_time:  # prediction never reads the measured columns
        try:
            iter_time = float(it_text)
        except ValueError:
            raise ValidationError(f"{where}: iter_time {it_text!r} is not a number") from None
        if not math.isfinite(iter_time) or iter_time <= 0:
            raise ValidationError(f"{where}: iter_time must be a positive number of seconds, got {it_text}")
    extra = tuple((k, v or "") for k, v in raw.items()
                  if k not in ("exec_plan", "placement", "iter_time"))
    return Measurement(i, code, place, plan, gpn, iter_time, extra=extra)


def measured_times(rows: Sequence[Measurement]) -> list[float]:
    """The iteration times of rows that all have one (raises otherwise, naming the row)."""
    out = []
    for r in rows:
        if r.iter_time is None:
            raise ValidationError(f"row {r.row}: no iter_time to fit on")
        out.append(r.iter_time)
    return out


def sample_measurements(rows: Sequence[Measurement], n: int, rng: "np.random.Generator",
                        min_offload: int = 3, spread: bool = True) -> list[Measurement]:
    """Choose ``n`` profiling rows the way Morphling Sec. 4.3 asks for them, returned in file order.

    *Which families*: at least ``min_offload`` ZeRO-Offload rows when the file has them (to identify
    k_opt_off, k_off, k_swap); the other slots go to the other plan families round-robin, so every
    family the file holds is seen once before any is seen twice; ZeRO-Offload fills what is left.

    *Which rows* (the paper is silent): with ``spread`` (default), a maximin design. The first slot
    takes a random row of its family; every later slot takes the row of its family farthest from
    the rows chosen so far (:func:`placement_shape`: log2 of GPUs, nodes, fewest GPUs on a node, TP
    and PP, and whether the job spans nodes), ties broken at random. Spreading the samples over
    placement shapes identifies the communication terms better than a random draw. On the public
    measurements it lowers the held-out average error on six of the seven models and the maximum on
    six (RoBERTa's average and LLaMA-7B's maximum rise); ``benchmarks/perf_model_accuracy.py``
    prints both. With ``spread=False``, a random row of the family."""
    if n > len(rows):
        raise ValidationError(f"cannot sample {n} rows from {len(rows)}")
    by_family: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_family.setdefault(r.plan.family, []).append(i)
    for fam in by_family:
        by_family[fam] = [int(i) for i in rng.permutation(by_family[fam])]
    order = {fam: list(idx) for fam, idx in by_family.items()}  # random order within each family
    chosen: list[int] = []
    offload = by_family.pop("zero-offload", [])
    chosen += offload[:min(min_offload, n, len(offload))]
    rest = offload[len(chosen):]
    families = sorted(by_family)
    while len(chosen) < n and any(by_family[f] for f in families):
        for f in families:
            if by_family[f] and len(chosen) < n:
                chosen.append(by_family[f].pop())
    while len(chosen) < n and rest:
        chosen.append(rest.pop())
    if spread:
        chosen = _maximin(rows, [rows[i].plan.family for i in chosen], order)
    return [rows[i] for i in sorted(chosen)]


def placement_shape(row: Measurement) -> np.ndarray:
    """Where a row sits in configuration space for :func:`sample_measurements`' maximin design."""
    g = row.gpus_per_node
    return np.array([math.log2(sum(g)), float(len(g) > 1), math.log2(len(g)), math.log2(min(g)),
                     math.log2(row.plan.tp), math.log2(row.plan.pp)])


def _maximin(rows: Sequence[Measurement], slots: Sequence[str], order: dict[str, list[int]]) -> list[int]:
    """One row per slot (a family): the first is the family's first row in ``order``, each later one
    the row of its family farthest from those chosen (first in ``order`` on ties)."""
    shape = {i: placement_shape(rows[i]) for idx in order.values() for i in idx}
    chosen: list[int] = []
    for fam in slots:
        candidates = [i for i in order[fam] if i not in chosen]
        if not chosen:
            chosen.append(candidates[0])
            continue
        far = [min(float(np.linalg.norm(shape[i] - shape[j])) for j in chosen) for i in candidates]
        chosen.append(candidates[int(np.argmax(far))])
    return chosen


def _read_bom_csv(path: Path) -> list[dict[str, str]]:
    with open_csv(path) as handle:
        reader = csv.DictReader(handle)
        reader.fieldnames = [h.strip() for h in (reader.fieldnames or [])]
        return [r for r in reader if r and any((v or "").strip() for v in r.values() if isinstance(v, str))]


def read_profile_forward_s(directory: str | Path, model: ModelSpec) -> float:
    """Profiled forward time of one sample through the whole ``model`` on one GPU, seconds: the
    ``fwd_s`` of :class:`optsched.perf.iteration_time.PerfParams` (Appendix A.1 scales it linearly
    to the per-GPU micro-batch).

    ``directory`` holds ``config.csv`` (``nodes,gpus,...,is_tp,is_pp``) and ``data.csv``
    (``forward_time,...,strategy``, forward time in milliseconds), paired line by line (the files
    start with a UTF-8 BOM). Choices where the paper and the files are silent:

    * every profiling run is data-parallel over ``nodes * gpus`` GPUs, so a GPU processes
      ``b / (nodes * gpus)`` samples with b the catalogue global batch of ``model`` (the files'
      ``batch_size`` column reads 1 for most models, which contradicts their iteration times);
      runs with ``is_tp`` or ``is_pp`` set are skipped;
    * the first digit of ``strategy`` multiplies the forward pass (README: GC recomputes it), so
      the per-sample time is ``forward_time / (digit * samples per GPU)``;
    * the result is the **median** over runs, which ignores an isolated misrecorded run (T5's
      profile has one 4 ms forward among 54-423 ms ones).
    """
    d = Path(directory)
    cfg = _read_bom_csv(d / "config.csv")
    dat = _read_bom_csv(d / "data.csv")
    if len(cfg) != len(dat):
        raise ValidationError(f"{d}: config.csv has {len(cfg)} rows but data.csv has {len(dat)}")
    per_sample = []
    for i, (c, x) in enumerate(zip(cfg, dat), start=1):
        where = f"{d} row {i}"
        try:
            gpus = int(c["nodes"]) * int(c["gpus"])
            tp_pp = int(c.get("is_tp") or 0) or int(c.get("is_pp") or 0)
            fwd_ms = float(x["forward_time"])
            strategy = (x.get("strategy") or "1").strip()
        except (KeyError, TypeError, ValueError) as exc:
            raise ValidationError(f"{where}: cannot read nodes/gpus/is_tp/is_pp/forward_time ({exc})") from None
        if tp_pp:
            continue
        mult = int(strategy[0]) if strategy[:1].isdigit() and strategy[0] != "0" else 1
        if gpus < 1 or not math.isfinite(fwd_ms) or fwd_ms <= 0:
            raise ValidationError(f"{where}: needs >= 1 GPU and a positive forward_time, got {gpus} GPUs, {fwd_ms} ms")
        per_sample.append(fwd_ms / 1e3 / (mult * model.global_batch / gpus))
    if not per_sample:
        raise ValidationError(f"{d}: no data-parallel profiling run to read a forward time from")
    return float(np.median(per_sample))
