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
* ``k_opt_off`` (the CPU optimizer's speed): needs one ZeRO-Offload row; ``k_off`` (how the offload
  transfer overlaps the DP exchange) needs three (Appendix A.3, "the test runs should include three
  using this strategy"). Holding the CPU speed at a prior when a file has only one or two Offload
  rows left in a fold costs LLaMA-2-7B 50-70% on its Offload rows in cross-validation.
* ``k_swap`` (how the CPU optimizer step overlaps the PCIe swap) needs three ZeRO-Offload rows at two
  or more CPU counts per GPU: at one count ``T_opt = k_opt_off P/(d c)`` and ``T_off = 4P/(d B_pcie)``
  both scale as 1/d, so ``f_k_swap(T_opt, T_off) = f_k_swap(T_opt d, T_off d) / d`` and the rows fix
  its size but not how it splits into CPU and PCIe time: any k_swap fits them equally well with its
  own k_opt_off, and each choice gives the job another speed-up from more CPUs. Every public row runs
  8 CPUs per GPU, so k_swap is held at its prior there.
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
  rows (ZeRO-Offload excepted) is the reference and keeps factor 1 (the multipliers and ``fwd_s``
  would otherwise only move together).
* ``m_zero_offload`` scales ZeRO-Offload's GPU side only (:mod:`optsched.perf.model_v2`). Rows at one
  CPU count cannot tell that GPU side from the CPU optimizer step (both shrink with d alike), and a
  free factor took the whole step (k_opt_off fitted to about 0: no CPU sensitivity at all). So it is
  *tied*: the geometric mean of the ZeRO-DP factor and, where the Offload rows run with GC, the GC
  factor (ZeRO-Offload is ZeRO-2 with the optimizer on the CPU), of the families among those whose
  factor is fitted or the reference; with none of them, of every fitted factor and the reference's;
  with none at all it stays 1 (Eq. 1's shared GPU side). It is freed (three Offload rows) only by
  Offload rows at two CPU counts per GPU or by a CPU anchor (``anchored``,
  :mod:`optsched.perf.cpu_anchor`), and never when fwd_s is fitted from Offload rows alone.
  Measured: tied and with ``k_cpu_dp``, BERT's cross-validated error is 4.1 / 9.9% (free, main:
  4.5 / 11.6%; held at 1: 8.4 / 19.8%).
* ``k_cpu_dp``: three ZeRO-Offload rows with three different DP sizes.
* ``m_single``: two one-GPU rows of plan families that also have rows on more GPUs (the contrast
  within a family separates the one-GPU factor from the family's own).

**Minimum rows** = identified parameters + 1. The v2 terms ask for more: a fit with v2 terms needs at
least twice as many rows as it has free parameters (as many rows to spare as it fits), so a fit on the
six or seven rows of the paper's protocol is exactly Eq. 1's. Terms are held until the rules hold:
first the v2 terms (neutral), in the reverse of the order ``k_odd``, the multipliers (most rows
first), ``k_cpu_dp``, ``m_single``, ``k_odd_node``, ``k_mb``, ``k_nic``; then the overlap exponents
``k_swap``, ``k_off``, ``k_sync`` (at their prior values: they only shape how two known times
overlap, and the paper's seven rows for seven parameters leave no row to check a fit against). When
even the remaining Eq. 1 parameters have too few rows, :func:`identify` raises ``ValidationError``
naming the parameters, the rows needed and what would identify the held ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    "k_swap": f"{MIN_OFFLOAD_ROWS} zero-offload rows at 2 or more CPU counts per GPU (at one count the rows fix "
              "f_swap(T_opt, T_off), not its split into CPU and PCIe time)",
    "k_odd": "2 rows spanning nodes with an odd GPU count on one, 1 spanning with even counts",
    "k_odd_node": "3 odd-node rows with 2 different largest nodes",
    "k_nic": "2 rows whose DP group has an odd count on its thinnest node, 1 with an even count",
    "k_mb": "3 different per-GPU micro-batch sizes",
    "k_cpu_dp": f"{MIN_OFFLOAD_ROWS} zero-offload rows with 3 different DP sizes",
    "m_single": "2 one-GPU rows of families that also have rows on more GPUs",
    **{m: f"{MIN_FAMILY_ROWS} rows of the family (not the reference one)" for m in FAMILY_MULTIPLIERS.values()},
    "m_zero_offload": f"{MIN_FAMILY_ROWS} zero-offload rows at 2 or more CPU counts per GPU, or a CPU anchor",
}
#: the families whose GPU side ZeRO-Offload shares (ZeRO-2; GC where its rows run with GC)
OFFLOAD_SIBLINGS = ("zero-dp",)
OFFLOAD_GC_SIBLING = "gc"


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
    #: held parameters set to the geometric mean of others (``m_zero_offload``: module docstring)
    tied: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def identify(plans: Sequence[ExecutionPlan], features: PlanFeatures, *, fix_fwd: bool, form: str = "eq1",
             min_rows: int | None = None, anchored: bool = False) -> Identification:
    """The parameters ``plans`` (with their ``features``, one per row) identify under ``form`` (module
    docstring); ``min_rows`` raises the minimum (e.g. the paper's seven); ``anchored``: a CPU anchor
    (:mod:`optsched.perf.cpu_anchor`) comes with the rows (v2: it frees ``m_zero_offload``)."""
    check_form(form)
    n = len(plans)
    if len(features) != n:
        raise ValidationError(f"{n} plans but {len(features)} feature rows")
    eq1 = _eq1_free(plans, features, fix_fwd)
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
    tied: dict[str, tuple[str, ...]] = {}
    if form == "v2":
        extra = _v2_free(plans, features, fix_fwd, reasons, anchored)
        reference = next((m for m, why in reasons.items() if why.startswith("the reference family")), None)
        while extra and n < V2_ROWS_PER_PARAMETER * (len(eq1) + len(extra)):
            dropped = extra.pop()
            reasons[dropped] = f"too few rows for it ({n} rows)"
        tied = _offload_tie(plans, features, set(extra), reference, reasons)
    free = set(eq1) | set(extra)
    names = _all_names(form)
    held = tuple(p for p in names if p not in free)
    for p in held:
        reasons.setdefault(p, f"needs {NEEDS[p]}" if p in NEEDS else "held")
    return Identification(tuple(p for p in names if p in free), held,
                          {p: reasons[p] for p in held}, len(free) + 1, reference, tied)


def _all_names(form: str) -> tuple[str, ...]:
    return PerfParams.names() if form == "v2" else PerfParams.EQ1


def _eq1_free(plans: Sequence[ExecutionPlan], f: PlanFeatures, fix_fwd: bool) -> list[str]:
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
        out.append("k_off")
        if len(set(f.cpus[f.offload].tolist())) >= 2:
            out.append("k_swap")
    out.append("k_const")
    if not fix_fwd:
        out.append("fwd_s")
    return out


def _v2_free(plans: Sequence[ExecutionPlan], f: PlanFeatures, fix_fwd: bool, reasons: dict[str, str],
             anchored: bool) -> list[str]:
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
    offload = f.offload
    ok["k_cpu_dp"] = int(offload.sum()) >= MIN_OFFLOAD_ROWS and len(set(f.dp[offload].tolist())) >= 3
    single = f.single > 0
    contrasted = [i for i in range(len(PLAN_FAMILIES))
                  if ((f.family == i) & single).any() and ((f.family == i) & ~single).any()]
    ok["m_single"] = int((single & np.isin(f.family, contrasted)).sum()) >= 2
    counts = {fam: int((f.family == i).sum()) for i, fam in enumerate(PLAN_FAMILIES)}
    for fam, n in counts.items():
        if n == 0:
            reasons[FAMILY_MULTIPLIERS[fam]] = "no row of the family (v2: the mean of the fitted factors)"
    families = sorted((fam for fam in PLAN_FAMILIES if counts[fam] >= MIN_FAMILY_ROWS), key=lambda x: -counts[x])
    if "zero-offload" in families:
        other_rows = bool((~offload).any())
        if not (anchored or len(set(f.cpus[offload].tolist())) >= 2) or not (fix_fwd or other_rows):
            families.remove("zero-offload")
    candidates = [fam for fam in families if fam != "zero-offload"]
    if not fix_fwd and candidates:
        reference = candidates[0]
        families.remove(reference)
        reasons[FAMILY_MULTIPLIERS[reference]] = "the reference family (fwd_s is fitted)"
    multipliers = [FAMILY_MULTIPLIERS[fam] for fam in families]
    ordered = ((["k_odd"] if ok["k_odd"] else []) + multipliers + (["k_cpu_dp"] if ok["k_cpu_dp"] else [])
               + (["m_single"] if ok["m_single"] else [])
               + [t for t in ("k_odd_node", "k_mb", "k_nic") if ok[t]])
    assert set(ordered) <= set(SHAPE_TERMS) | set(FAMILY_MULTIPLIERS.values())
    return ordered


def _offload_tie(plans: Sequence[ExecutionPlan], f: PlanFeatures, extra: set[str], reference: str | None,
                 reasons: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """``{"m_zero_offload": sources}`` when ZeRO-Offload has rows and its factor is held (module
    docstring), with the reason; else nothing."""
    m_off = FAMILY_MULTIPLIERS["zero-offload"]
    if m_off in extra or not f.offload.any():
        return {}
    known = {m for m in FAMILY_MULTIPLIERS.values() if m in extra} | ({reference} if reference else set())
    siblings = OFFLOAD_SIBLINGS + ((OFFLOAD_GC_SIBLING,) if any(p.gc for p in plans if p.zero is ZeroMode.OFFLOAD) else ())
    sources = tuple(m for m in (FAMILY_MULTIPLIERS[s] for s in siblings) if m in known)
    if not sources:
        sources = tuple(m for m in FAMILY_MULTIPLIERS.values() if m in known)
    if not sources:
        reasons[m_off] = ("held at 1: no fitted family factor to share (Eq. 1's GPU side), and the rows cannot tell "
                          f"ZeRO-Offload's GPU side from its CPU optimizer (needs {NEEDS[m_off]})")
        return {}
    reasons[m_off] = (f"tied to {' x '.join(sources)} (geometric mean): ZeRO-Offload's GPU side is ZeRO-2's, and rows "
                      f"at one CPU count cannot tell it from the CPU optimizer step (needs {NEEDS[m_off]})")
    return {m_off: sources}


__all__ = ["MIN_FAMILY_ROWS", "MIN_OFFLOAD_ROWS", "NEEDS", "OFFLOAD_GC_SIBLING", "OFFLOAD_ONLY", "OFFLOAD_SIBLINGS",
           "Identification", "identify"]
