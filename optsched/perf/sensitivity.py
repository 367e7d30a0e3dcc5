"""Resource sensitivity curves, slopes and the minimum resource demand (Rubick Sec. 5).

Rubick Sec. 5, "Resource sensitivity curves": a curve shows how a job's throughput varies when one
resource type (GPUs or CPUs) is scaled while the others stay fixed, "only choosing the best execution
plan for each resource amount by enumerating the feasible plans"; the curve "only connects the highest
points along the x-axis that represent the best plans, and remains flat for invalid GPUs or degraded
performance" (Fig. 6). The *slope* is "the throughput change per unit variation in the number of
(pre-)allocated resources"; Algorithm 1 grows the jobs with the highest slopes and shrinks the ones with
the lowest. "Scheduling algorithm design": minRes is "the fewest resources (possibly with a better
execution plan) needed to achieve the performance of the original resource and plan"; it "should not
exceed the original resources in each dimension; if no such demand is found, the original resource and
plan will be used".

Choices where the paper is silent:

* **Packed placement.** A GPU curve needs one placement per GPU count; we use
  :func:`~optsched.core.pool.packed_placement`, which fills whole nodes first (10 GPUs on 8-GPU nodes -> ``(8, 2)``). It
  is the placement with the fewest nodes and the largest groups inside a node, hence the fastest
  placement of that GPU count under Appendix A's bottleneck-bandwidth communication model, and the one
  a consolidating scheduler tries first. minRes uses it for every GPU count below the request and the
  requested placement itself at the requested count.
* **Running maximum.** Where no plan is feasible at an amount, or the best plan there is slower than
  at a smaller amount, the point repeats the previous best point: its throughput *and* its plan,
  placement and CPUs (the job simply does not use the extra resources). Before the first feasible
  amount a point has ``plan=None``, throughput 0, an empty placement and 0 CPUs. Hence curves are
  non-decreasing and slopes are >= 0.
* **Lexicographic minRes.** "Fewest resources" over two dimensions is ordered GPUs first, then CPUs
  (GPUs are the scarce, expensive resource; Algorithm 1 also compares GPU slopes before CPU slopes).
  Every GPU count uses at least one CPU per GPU (``c >= g``) unless the request itself has fewer.
  The search relies on Eq. 1's throughput being non-decreasing in the CPU count (CPUs only shorten
  ZeRO-Offload's ``T_opt``): the smallest GPU count is found with every plan evaluated at the requested
  CPUs, then the smallest CPU count at that GPU count by bisection (checked against an exhaustive
  search in ``tests/test_sensitivity.py``).

Cost (number of performance-model predictions, all made through the vectorised
:meth:`PerformanceModel.throughputs`, one call per curve): a GPU curve makes ``sum_g |plans(g)|``
predictions (at most 42 plans per GPU count, see :func:`~optsched.perf.plans.enumerate_plans`; about
300 for bert up to 64 GPUs); a CPU curve ``|plans| x (max_cpus - min_cpus + 1)``; minRes
``sum_{g <= G} |plans(g)|`` plus ``|plans(g*)|`` per bisection step, ``ceil(log2(C))`` steps for C
requested CPUs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import PlanInfeasibleError, ValidationError
from optsched.core.hardware import GPUType
from optsched.core.plan import ExecutionPlan
from optsched.core.pool import packed_placement
from optsched.perf.memory import memory_violation, require_gpus_per_node
from optsched.perf.performance_model import PerformanceModel
from optsched.perf.plans import enumerate_plans, topology_violation

#: relative tolerance of minRes' "at least the target throughput" test (floating-point noise only)
TARGET_RTOL = 1e-9

RESOURCES = ("gpu", "cpu")


@dataclass(frozen=True)
class CurvePoint:
    """One point of a sensitivity curve: at ``amount`` units of the curve's resource the job reaches
    ``throughput`` samples/s with ``plan`` on ``gpus_per_node`` using ``cpus`` CPUs in total.

    On a flat stretch (no feasible plan, or no better one) plan, placement and CPUs are those of the
    previous best point; ``plan`` is None (throughput 0, placement ``()``, 0 CPUs) before the first
    amount with a feasible plan."""

    amount: int
    throughput: float
    plan: ExecutionPlan | None
    gpus_per_node: tuple[int, ...]
    cpus: int

    def __post_init__(self) -> None:
        require_int("CurvePoint", "amount", self.amount, 0)
        require_number("CurvePoint", "throughput", self.throughput, 0.0)
        require_int("CurvePoint", "cpus", self.cpus, 0)
        object.__setattr__(self, "gpus_per_node", tuple(self.gpus_per_node))
        if self.plan is not None and self.plan.num_gpus != sum(self.gpus_per_node):
            raise ValidationError(
                f"CurvePoint at {self.amount}: plan {self.plan.label} uses {self.plan.num_gpus} GPUs but "
                f"the placement {self.gpus_per_node} holds {sum(self.gpus_per_node)}")

    @property
    def gpus(self) -> int:
        return sum(self.gpus_per_node)


@dataclass(frozen=True)
class SensitivityCurve:
    """A resource sensitivity curve (Rubick Sec. 5, Fig. 6): points with strictly increasing amounts of
    ``resource`` (``"gpu"`` or ``"cpu"``)."""

    resource: str
    points: tuple[CurvePoint, ...]

    def __post_init__(self) -> None:
        if self.resource not in RESOURCES:
            raise ValidationError(f"SensitivityCurve: resource must be 'gpu' or 'cpu', got {self.resource!r}")
        pts = tuple(self.points)
        if not pts:
            raise ValidationError("SensitivityCurve: needs at least one point")
        for a, b in zip(pts, pts[1:]):
            if b.amount <= a.amount:
                raise ValidationError(
                    f"SensitivityCurve ({self.resource}): amounts must increase strictly, got {a.amount} "
                    f"then {b.amount}")
        object.__setattr__(self, "points", pts)

    @property
    def amounts(self) -> np.ndarray:
        return np.array([p.amount for p in self.points], dtype=int)

    @property
    def throughputs(self) -> np.ndarray:
        return np.array([p.throughput for p in self.points], dtype=float)

    def point(self, amount: int) -> CurvePoint:
        """The point at ``amount`` exactly; ``ValidationError`` when the curve has none."""
        for p in self.points:
            if p.amount == amount:
                return p
        raise ValidationError(
            f"SensitivityCurve ({self.resource}): no point at {amount}; amounts run "
            f"{self.points[0].amount}..{self.points[-1].amount}")

    def throughput_at(self, amount: int) -> float:
        """The curve's value at ``amount``: the throughput of the last point at or below it (the job
        does not use extra resources), 0 below the first point."""
        value = 0.0
        for p in self.points:
            if p.amount > amount:
                break
            value = p.throughput
        return value

    def slope(self, amount: int, direction: int = +1) -> float:
        """Throughput change per unit of resource when moving from ``amount`` to the next
        (``direction=+1``) or previous (``-1``) amount on the curve:
        ``(thr[next] - thr[amount]) / (next - amount)``. 0 at the ends (no next point above the last
        one, no previous point below the first one). For ``-1`` this is the loss per unit when
        shrinking, ``(thr[amount] - thr[prev]) / (amount - prev)``, so both are >= 0 on a running-max
        curve. An ``amount`` between points takes the curve's value there (:meth:`throughput_at`)."""
        if direction not in (1, -1):
            raise ValidationError(f"slope: direction must be +1 or -1, got {direction!r}")
        amounts = self.amounts
        here = self.throughput_at(amount)
        if direction > 0:
            idx = int(np.searchsorted(amounts, amount, side="right"))
            if idx >= len(amounts):
                return 0.0
        else:
            idx = int(np.searchsorted(amounts, amount, side="left")) - 1
            if idx < 0:
                return 0.0
        other = self.points[idx]
        return (other.throughput - here) / (other.amount - amount)


# ---------------------------------------------------------------------------------------------------
def _check_gpu_type(perf: PerformanceModel, gpu_type: GPUType) -> None:
    if not isinstance(gpu_type, GPUType):
        raise ValidationError(f"gpu_type must be a GPUType, got {gpu_type!r}")
    if perf.gpu_type != gpu_type.name:
        raise ValidationError(
            f"performance model of {perf.model.name!r} is fitted on {perf.gpu_type} GPUs, not {gpu_type.name}")


def _host(host_mem_gib_per_node: float | None, placement: tuple[int, ...]) -> tuple[float, ...] | None:
    if host_mem_gib_per_node is None:
        return None
    require_number("host_mem_gib_per_node", "value", host_mem_gib_per_node, 0.0)
    return (float(host_mem_gib_per_node),) * len(placement)


def _running_max(amounts: Sequence[int], best: Sequence[tuple[float, ExecutionPlan, tuple[int, ...], int] | None],
                 resource: str) -> SensitivityCurve:
    """Curve points from the best (throughput, plan, placement, cpus) of each amount (None: no plan)."""
    points: list[CurvePoint] = []
    current: tuple[float, ExecutionPlan | None, tuple[int, ...], int] = (0.0, None, (), 0)
    for amount, cand in zip(amounts, best):
        if cand is not None and (current[1] is None or cand[0] > current[0]):
            current = cand
        points.append(CurvePoint(amount, float(current[0]), current[1], current[2], current[3]))
    return SensitivityCurve(resource, tuple(points))


def _best_per_group(throughputs: np.ndarray, groups: Sequence[int], n_groups: int) -> list[int | None]:
    """Index of the highest throughput of each group (the first one on ties), None for empty groups."""
    best: list[int | None] = [None] * n_groups
    for k, grp in enumerate(groups):
        b = best[grp]
        if b is None or throughputs[k] > throughputs[b]:
            best[grp] = k
    return best


def gpu_curve(perf: PerformanceModel, max_gpus: int, gpus_per_node: int, cpus_per_gpu: float,
              gpu_type: GPUType, host_mem_gib_per_node: float | None = None) -> SensitivityCurve:
    """GPU sensitivity curve for g = 1..``max_gpus`` on :func:`packed_placement` (nodes of
    ``gpus_per_node`` GPUs), ``cpus_per_gpu`` CPU cores per GPU (a point's ``cpus`` is
    ``round(g * cpus_per_gpu)``) and, when given, ``host_mem_gib_per_node`` GiB of host memory per node
    for offloaded states.

    Each amount takes the best of :func:`~optsched.perf.plans.enumerate_plans`; the curve is their
    running maximum (module docstring). One vectorised prediction for all (plan, placement) pairs."""
    require_int("gpu_curve", "max_gpus", max_gpus, 1)
    require_int("gpu_curve", "gpus_per_node", gpus_per_node, 1)
    require_number("gpu_curve", "cpus_per_gpu", cpus_per_gpu, 0.0, strict=True)
    _check_gpu_type(perf, gpu_type)
    amounts = list(range(1, max_gpus + 1))
    configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
    groups: list[int] = []
    for i, g in enumerate(amounts):
        placement = packed_placement(g, gpus_per_node)
        for plan in enumerate_plans(perf.model, placement, gpu_type, _host(host_mem_gib_per_node, placement)):
            configs.append((plan, placement, float(cpus_per_gpu)))
            groups.append(i)
    thr = perf.throughputs(configs) if configs else np.zeros(0)
    best = []
    for i, k in enumerate(_best_per_group(thr, groups, len(amounts))):
        if k is None:
            best.append(None)
        else:
            plan, placement, _ = configs[k]
            best.append((float(thr[k]), plan, placement, int(round(amounts[i] * cpus_per_gpu))))
    return _running_max(amounts, best, "gpu")


def cpu_curve(perf: PerformanceModel, gpus_per_node_placement: tuple[int, ...], max_cpus: int,
              gpu_type: GPUType, host_mem_gib_per_node: float | None = None,
              min_cpus: int | None = None) -> SensitivityCurve:
    """CPU sensitivity curve of a job on the fixed placement ``gpus_per_node_placement``: total CPUs
    c = ``min_cpus`` (default max(1, number of GPUs), one per GPU) .. ``max_cpus``, spread evenly
    (``c / G`` cores per GPU worker), best enumerated plan at each c, running maximum. One vectorised
    prediction for all (plan, c) pairs; only ZeRO-Offload plans depend on c (Eq. 1's ``T_opt``)."""
    placement = require_gpus_per_node(gpus_per_node_placement)
    _check_gpu_type(perf, gpu_type)
    n_gpus = sum(placement)
    lo = max(1, n_gpus) if min_cpus is None else min_cpus
    require_int("cpu_curve", "min_cpus", lo, 1)
    require_int("cpu_curve", "max_cpus", max_cpus, lo)
    amounts = list(range(lo, max_cpus + 1))
    plans = enumerate_plans(perf.model, placement, gpu_type, _host(host_mem_gib_per_node, placement))
    configs = [(plan, placement, c / n_gpus) for c in amounts for plan in plans]
    groups = [i for i in range(len(amounts)) for _ in plans]
    thr = perf.throughputs(configs) if configs else np.zeros(0)
    best = []
    for i, k in enumerate(_best_per_group(thr, groups, len(amounts))):
        best.append(None if k is None else (float(thr[k]), configs[k][0], placement, amounts[i]))
    return _running_max(amounts, best, "cpu")


# ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MinRes:
    """A guaranteed job's minimum resource demand (Rubick Sec. 5, Algorithm 1): ``gpus`` GPUs placed as
    ``gpus_per_node``, ``cpus`` CPUs in total, running ``plan`` at ``throughput`` >= ``target`` (the
    throughput of the requested resources and plan). ``reduced`` is False when nothing smaller than
    the request reaches the target and the request itself is returned."""

    gpus: int
    cpus: int
    plan: ExecutionPlan
    gpus_per_node: tuple[int, ...]
    throughput: float
    target: float
    reduced: bool

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "cpus": self.cpus, "plan": self.plan.to_dict(),
                "gpus_per_node": list(self.gpus_per_node), "throughput": self.throughput,
                "target": self.target, "reduced": self.reduced}


def min_res(perf: PerformanceModel, requested_plan: ExecutionPlan | None,
            requested_gpus_per_node: tuple[int, ...], requested_cpus: int, gpus_per_node: int,
            gpu_type: GPUType, host_mem_gib_per_node: float | None = None) -> MinRes:
    """Rubick's minRes: the fewest resources, GPUs first then CPUs, with which some enumerated plan
    reaches the throughput of the request, never above the request in any dimension.

    * target = throughput of ``requested_plan`` on ``requested_gpus_per_node`` with ``requested_cpus``
      CPUs in total; with ``requested_plan=None`` the best enumerated plan there. A requested plan that
      cannot run there (topology, batch divisibility, GPU or host memory), or a request on which no plan
      fits, raises :class:`~optsched.core.errors.PlanInfeasibleError` naming model, plan and reason.
    * candidates: g = 1..G GPUs (G requested) on :func:`packed_placement` (nodes of ``gpus_per_node``
      GPUs), the requested placement when g = G; c = min(g, requested CPUs)..requested CPUs; any plan of
      :func:`~optsched.perf.plans.enumerate_plans`; reaching the target means throughput >=
      target (1 - 1e-9). The result is the lexicographically smallest (g, c) and its fastest plan.
    * when that is the request itself, the requested plan and resources are returned, ``reduced=False``.
    """
    placement = require_gpus_per_node(requested_gpus_per_node)
    require_int("min_res", "requested_cpus", requested_cpus, 1)
    require_int("min_res", "gpus_per_node", gpus_per_node, 1)
    _check_gpu_type(perf, gpu_type)
    model = perf.model
    n_req = sum(placement)
    host_req = _host(host_mem_gib_per_node, placement)

    if requested_plan is not None:
        reason = topology_violation(model, requested_plan, placement)
        if reason is None:
            reason = memory_violation(model, requested_plan, gpu_type, placement, host_req)
        if reason is not None:
            raise PlanInfeasibleError(
                f"minRes: requested plan {requested_plan.label} of model {model.name!r} cannot run on "
                f"placement {placement}: {reason}")
        orig_plan = requested_plan
        target = perf.throughput(requested_plan, placement, requested_cpus / n_req)
    else:
        plans = enumerate_plans(model, placement, gpu_type, host_req)
        if not plans:
            raise PlanInfeasibleError(
                f"minRes: no execution plan of model {model.name!r} fits on placement {placement} of "
                f"{gpu_type.name} GPUs (GPU memory, host memory or batch divisibility)")
        thr = perf.throughputs([(p, placement, requested_cpus / n_req) for p in plans])
        k = int(np.argmax(thr))
        orig_plan, target = plans[k], float(thr[k])
    original = MinRes(n_req, requested_cpus, orig_plan, placement, target, target, False)
    threshold = target * (1.0 - TARGET_RTOL)

    # GPUs: every plan of every g <= G at the most CPUs allowed (throughput is non-decreasing in CPUs)
    c_max = requested_cpus
    per_g: dict[int, tuple[tuple[int, ...], tuple[ExecutionPlan, ...]]] = {}
    configs: list[tuple[ExecutionPlan, tuple[int, ...], float]] = []
    owner: list[int] = []
    for g in range(1, n_req + 1):
        pl = placement if g == n_req else packed_placement(g, gpus_per_node)
        plans_g = enumerate_plans(model, pl, gpu_type, _host(host_mem_gib_per_node, pl))
        per_g[g] = (pl, plans_g)
        configs.extend((p, pl, c_max / g) for p in plans_g)
        owner.extend([g] * len(plans_g))
    if not configs:
        return original
    thr_all = perf.throughputs(configs)
    ok = [owner[k] for k in range(len(configs)) if thr_all[k] >= threshold]
    if not ok:
        return original
    g_min = min(ok)
    pl, plans_g = per_g[g_min]

    def best_at(c: int) -> tuple[float, ExecutionPlan]:
        t = perf.throughputs([(p, pl, c / g_min) for p in plans_g])
        k = int(np.argmax(t))
        return float(t[k]), plans_g[k]

    # CPUs: bisection on the smallest c in [min(g, C), C] whose best plan reaches the target
    lo, hi = min(g_min, c_max), c_max  # the answer lies in [lo, hi]; hi is known to reach the target
    if best_at(lo)[0] >= threshold:
        hi = lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if best_at(mid)[0] >= threshold:
            hi = mid
        else:
            lo = mid
    c_min = hi
    if g_min == n_req and c_min == c_max:
        return original
    thr, plan = best_at(c_min)
    return MinRes(g_min, c_min, plan, pl, thr, target, True)


__all__ = ["CurvePoint", "MinRes", "SensitivityCurve", "TARGET_RTOL", "cpu_curve", "gpu_curve", "min_res"]
