"""Measured iteration times in the placements CSV format of the Rubick artifact.

Columns ``exec_plan,placement`` are required; ``iter_time`` (seconds per iteration) is required for
fitting and optional for prediction; other columns are carried along untouched. Plan and placement
codes are those of ``../shared/data/README.md`` (see :func:`optsched.core.parse_plan_code` and
:func:`optsched.core.parse_placement_code`). Every malformed row raises ``ValidationError`` naming
the file, the row number (1 = first data row after the header) and the rule.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from optsched.core.allocation import parse_placement_code
from optsched.core.errors import ValidationError
from optsched.core.model import ModelSpec
from optsched.core.plan import ExecutionPlan, offload_runs_with_gc, parse_plan_code

#: CPU cores per GPU assumed for measured rows, which do not record them (the 406-job trace asks
#: for 8 per GPU). It only scales k_opt_off, so predictions of rows measured alike do not depend on it.
MEASURED_CPUS_PER_GPU = 8.0


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
    try:
        handle = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise ValidationError(f"{p}: cannot read file ({exc.strerror or exc})") from None
    with handle:
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
                        min_offload: int = 3) -> list[Measurement]:
    """Draw ``n`` profiling rows the way Morphling Sec. 4.3 asks for them: at least ``min_offload``
    ZeRO-Offload rows when the file has them (to identify k_opt_off, k_off, k_swap), the rest spread
    over the other plan families round-robin (random row within a family), so that every family
    the file holds is seen once before any is seen twice. Returned in file order."""
    if n > len(rows):
        raise ValidationError(f"cannot sample {n} rows from {len(rows)}")
    by_family: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_family.setdefault(r.plan.family, []).append(i)
    for fam in by_family:
        by_family[fam] = list(rng.permutation(by_family[fam]))
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
    return [rows[i] for i in sorted(chosen)]
