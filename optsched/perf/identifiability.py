"""Which parameters a set of measured rows can identify, and how many rows a fit needs (issue 11:
"fit the parameters the rows identify, hold the rest at their defaults, and say which").

Rules for Eq. 1 (Morphling Appendix A), each from where the parameter enters the formula:

* ``k_bwd``: the backward pass always comes with its forward pass, ``T_fwd (1 + k_bwd)``; only
  gradient checkpointing adds a lone forward (``T_fwd (2 + k_bwd)``). So it is identified when
  ``fwd_s`` is fixed (profiled), or when a GC row is among the rows; otherwise ``fwd_s`` carries the
  whole compute time and ``k_bwd`` is held.
* ``k_sync``: needs a non-Offload row with data parallelism (DP > 1), where the DP all-reduce overlaps
  the backward pass.
* ``k_opt``: needs a non-Offload row (the GPU optimizer step).
* ``k_opt_off`` (the CPU optimizer's speed): needs one ZeRO-Offload row; ``k_off`` and ``k_swap`` (how
  the offload transfers overlap) need three (Appendix A.3, "the test runs should include three using
  this strategy"). Holding the CPU speed at a prior when a file has only one or two Offload rows
  left in a fold costs LLaMA-2-7B 50-70% on its Offload rows in cross-validation.
* ``k_const``: always; ``fwd_s``: unless fixed.

Rules for the terms of model v2 (:mod:`optsched.perf.model_v2`), each needing the contrast that
shows it:

* ``k_odd``: two rows of data-parallel jobs spanning nodes with an odd GPU count on one, and one
  spanning with even counts only.
* ``k_odd_node``: ``k_odd`` identified, three odd rows, and two different largest-node sizes among them.
* ``k_nic``: two rows whose DP collective has an odd count on its thinnest node, and one with an even
  count there.
* ``k_mb``: three different per-GPU micro-batch sizes.
* ``m_<family>``: three rows of that plan family; when ``fwd_s`` is fitted, the family with the most
  rows is the reference and keeps factor 1 (the multipliers and ``fwd_s`` would otherwise only move
  together). Every measured row runs 8 CPUs per GPU, so no row tells how ZeRO-Offload's time splits
  between the CPU optimizer (``k_opt_off``, where CPUs act) and the rest of the family; with
  ``m_zero_offload`` free the fit may put it in the factor, which leaves the model less CPU-sensitive
  than Eq. 1's structure made it. Holding that factor at 1 raises the cross-validated error of BERT
  from 4.5 / 11.6% to 8.4 / 19.8% (T5 6.4 / 16.3 to 10.2 / 25.2), so it stays free.

**Minimum rows** = identified parameters + 1. The v2 terms ask for more: a fit with v2 terms needs at
least twice as many rows as it has free parameters (as many rows to spare as it fits), so a fit on the
six or seven rows of the paper's protocol is exactly Eq. 1's. Terms are held until the rules hold:
first the v2 terms (neutral), in the reverse of the order ``k_odd``, the multipliers (most rows
first), ``k_odd_node``, ``k_mb``, ``k_nic``; then the overlap exponents ``k_swap``, ``k_off``, ``k_sync`` (at their prior values:
they only shape how two known times overlap, and the paper's seven rows for seven parameters leave
no row to check a fit against). When even the remaining Eq. 1 parameters have too few rows,
:func:`identify` raises ``ValidationError`` naming the parameters, the rows needed and what would
identify the held ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from optsched.core.errors import ValidationError
from optsched.core.plan import PLAN_FAMILIES, ExecutionPlan, ZeroMode
from optsched.perf.iteration_time import PerfParams, PlanFeatures
from optsched.perf.model_v2 import FAMILY_MULTIPLIERS, SHAPE_TERMS, check_form

#: ZeRO-Offload rows the three offload-only parameters need (Appendix A.3)
MIN_OFFLOAD_ROWS = 3
OFFLOAD_ONLY = ("k_opt_off", "k_off", "k_swap")
#: rows per free parameter a fit with v2 terms needs (module docstring)
V2_ROWS_PER_PARAMETER = 2
#: Eq. 1 parameters held (in this order) when the rows are one short (module docstring)
OPTIONAL_EQ1 = ("k_swap", "k_off", "k_sync")
#: rows of one family its multiplier needs
MIN_FAMILY_ROWS = 3
#: what identifies each Eq. 1 parameter that can be held (for error messages and the fit report)
NEEDS: dict[str, str] = {
    "k_bwd": "a gc row or a profiled forward time (--fwd-s/--profile)",
    "k_sync": "a non-Offload row with DP > 1",
    "k_opt": "a non-Offload row",
    "k_opt_off": "a zero-offload row", "k_off": f"{MIN_OFFLOAD_ROWS} zero-offload rows",
    "k_swap": f"{MIN_OFFLOAD_ROWS} zero-offload rows",
    "k_odd": "2 rows spanning nodes with an odd GPU count on one, 1 spanning with even counts",
    "k_odd_node": "3 odd-node rows with 2 different largest nodes",
    "k_nic": "2 rows whose DP group has an odd count on its thinnest node, 1 with an even count",
    "k_mb": "3 different per-GPU micro-batch sizes",
    **{m: f"{MIN_FAMILY_ROWS} rows of the family (not the reference one)" for m in FAMILY_MULTIPLIERS.values()},
}


@dataclass(frozen=True)
class Identification:
    """The outcome of :func:`identify`: ``free`` parameters to fit (in ``PerfParams`` order),
    ``held`` ones with why (``reasons``), and the rows the free ones need (``min_rows``)."""

    free: tuple[str, ...]
    held: tuple[str, ...]
    reasons: Mapping[str, str]
    min_rows: int
    #: the multiplier of the reference family (held at 1 because fwd_s is fitted), if any
    reference: str | None = None


def identify(plans: Sequence[ExecutionPlan], features: PlanFeatures, *, fix_fwd: bool, form: str = "eq1",
             min_rows: int | None = None) -> Identification:
    """The parameters ``plans`` (with their ``features``, one per row) identify under ``form`` (module
    docstring); ``min_rows`` raises the minimum (e.g. the paper's seven)."""
    check_form(form)
    n = len(plans)
    if len(features) != n:
        raise ValidationError(f"{n} plans but {len(features)} feature rows")
    eq1 = _eq1_free(plans, fix_fwd)
    reasons = {p: f"needs {NEEDS[p]}" for p in PerfParams.EQ1 if p not in eq1 and p in NEEDS}
    if fix_fwd:
        reasons["fwd_s"] = "fixed (profiled)"
    for p in OPTIONAL_EQ1:
        if p in eq1 and n < len(eq1) + 1:
            eq1.remove(p)
            reasons[p] = f"too few rows for it ({n} rows)"
    need = max(len(eq1) + 1, min_rows or 0)
    if n < need:
        fams = sorted({p.family for p in plans})
        held = "; ".join(f"{p} ({why})" for p, why in reasons.items())
        raise ValidationError(
            f"{n} row(s) of famil{'y' if len(fams) == 1 else 'ies'} {', '.join(fams) or 'none'} cannot fit the "
            f"{len(eq1)} parameters they identify ({', '.join(eq1)}): at least {need} rows are needed "
            f"(parameters + 1). Add rows of these families" + (f"; held: {held}" if held else ""))
    extra: list[str] = []
    reference = None
    if form == "v2":
        extra = _v2_free(plans, features, fix_fwd, reasons)
        reference = next((m for m, why in reasons.items() if why.startswith("the reference family")), None)
        while extra and n < V2_ROWS_PER_PARAMETER * (len(eq1) + len(extra)):
            dropped = extra.pop()
            reasons[dropped] = f"too few rows for it ({n} rows)"
    free = set(eq1) | set(extra)
    names = _all_names(form)
    held = tuple(p for p in names if p not in free)
    for p in held:
        reasons.setdefault(p, f"needs {NEEDS[p]}" if p in NEEDS else "held")
    return Identification(tuple(p for p in names if p in free), held,
                          {p: reasons[p] for p in held}, len(free) + 1, reference)


def _all_names(form: str) -> tuple[str, ...]:
    return PerfParams.names() if form == "v2" else PerfParams.EQ1


def _eq1_free(plans: Sequence[ExecutionPlan], fix_fwd: bool) -> list[str]:
    offload = [p.zero is ZeroMode.OFFLOAD for p in plans]
    out = []
    if fix_fwd or any(p.gc for p in plans):
        out.append("k_bwd")
    if any(p.dp > 1 and not off for p, off in zip(plans, offload)):
        out.append("k_sync")
    if not all(offload):
        out.append("k_opt")
    if sum(offload) >= 1:
        out.append("k_opt_off")
    if sum(offload) >= MIN_OFFLOAD_ROWS:
        out += ["k_off", "k_swap"]
    out.append("k_const")
    if not fix_fwd:
        out.append("fwd_s")
    return out


def _v2_free(plans: Sequence[ExecutionPlan], f: PlanFeatures, fix_fwd: bool, reasons: dict[str, str]) -> list[str]:
    """The identified v2 terms in the priority order of the module docstring."""
    spanning_dp = f.funnel > 0
    odd = (f.odd_span > 0) & spanning_dp
    even = (f.odd_span == 0) & spanning_dp & ~f.offload
    ok = {"k_odd": int(odd.sum()) >= 2 and int(even.sum()) >= 1}
    ok["k_odd_node"] = ok["k_odd"] and int(odd.sum()) >= 3 and len(set(f.largest_node[odd].tolist())) >= 2
    odd_k = f.t_dp_pair < f.t_dp * (1 - 1e-12)
    even_k = spanning_dp & ~odd_k
    ok["k_nic"] = int(odd_k.sum()) >= 2 and int(even_k.sum()) >= 1
    ok["k_mb"] = len(set(np.round(f.mb_rel, 9).tolist())) >= 3
    counts = {fam: int((f.family == i).sum()) for i, fam in enumerate(PLAN_FAMILIES)}
    for fam, n in counts.items():
        if n == 0:
            reasons[FAMILY_MULTIPLIERS[fam]] = "no row of the family (v2: the mean of the fitted factors)"
    families = sorted((fam for fam in PLAN_FAMILIES if counts[fam] >= MIN_FAMILY_ROWS), key=lambda x: -counts[x])
    if not fix_fwd and families:
        reference = families.pop(0)
        reasons[FAMILY_MULTIPLIERS[reference]] = "the reference family (fwd_s is fitted)"
    multipliers = [FAMILY_MULTIPLIERS[fam] for fam in families]
    ordered = (["k_odd"] if ok["k_odd"] else []) + multipliers + [t for t in ("k_odd_node", "k_mb", "k_nic") if ok[t]]
    assert set(ordered) <= set(SHAPE_TERMS) | set(FAMILY_MULTIPLIERS.values())
    return ordered


__all__ = ["MIN_FAMILY_ROWS", "MIN_OFFLOAD_ROWS", "NEEDS", "OFFLOAD_ONLY", "Identification", "identify"]
