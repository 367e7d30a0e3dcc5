"""Expert packing for training (thesis Sec. 4.4.2, Sec. 4.6.1): the problem, its plans and their modelled
MoE-layer time. The text's rule is :func:`optsched.heuristics.lina_packing.packing_rule`, the exact
counterpart :func:`optsched.formulations.training_packing.solve_packing`.

The text (Sec. 4.4.2, "Expert packing"): "Ideally, the FFN and all-to-all micro-ops should take a similar
time so that both compute capacity and network bandwidth are fully utilized without any bubbles in the
pipeline. However, we notice that a single FFN micro-op takes much less time than its corresponding
all-to-all micro-op (Figure 4.8b). In Lina, we consider packing multiple experts on each device whenever
possible to maximize the pipelining efficiency. Lina adopts the following approach: starting with one
expert per device, it iteratively increases the number of experts per device in powers of two, until the
FFN computation exceeds that of the all-to-all micro-op. In case of GPU memory shortage, we adopt
DRAM-offloading [126] to transfer expert parameters that are not currently in use to host memory."

**Why not a method of the ``experts`` kind.** That kind (:mod:`optsched.rounds.experts`) is Lina's
*inference* placement (Sec. 4.5): per-expert token loads, replicas with token shares, up to ``slots``
replicas per device, cost the most loaded device's token time. Training packing decides something else:
one number of experts per device ``p`` for every device (a power of two), the all-to-all group that
follows from it, and which experts share a device; its cost is the pipelined all-to-all / FFN time of a
layer and the DRAM offloading that memory forces, none of which an experts round holds (it has no
all-to-all or FFN times, micro-ops or device memory). Stretching the kind would give its rounds fields
that its methods ignore; so training packing is its own problem here, functions over
:class:`PackingSetup`, and its own round kind ``training-packing`` (:mod:`optsched.rounds.training_packing`,
the setup as a round file; methods ``lina``/``heuristic`` and ``exact`` in
:mod:`optsched.policies.training_packing`), whose one round is the decision the text makes once per model,
after "10 training steps" (Sec. 4.6.1).

**The setting** (Sec. 4.7.2: "The number of GPUs is equal to the number of experts per layer"): ``E``
experts on ``E`` devices. With ``p`` experts per device (``p`` divides ``E``) an expert-parallel group of
``g = E / p`` devices holds every expert once and there are ``p`` groups, so every expert has ``p``
replicas, one per group (:mod:`optsched.experiments.lina_training`, "Expert packing"). A plan also says
which experts share a device: a partition of the experts into ``g`` sets of ``p`` (the same in every
group).

**The candidates** (:class:`PackingCandidate`), one per ``p``, are the caller's time model under balanced
load (every expert ``1 / E`` of the tokens): ``a2a_ms`` one all-to-all alone, ``ffn_ms`` the expert FFN of
a device, ``micro_ops`` the all-to-all's micro-ops (Sec. 4.4.2: "we can also partition all-to-all which
provides an opportunity to pipeline the expert FFN"; the FFN is split with it, "the expert can start
computing with a subset of the tokens after one all-to-all micro-op"). So an all-to-all micro-op takes
``a2a_ms / micro_ops`` and an FFN micro-op ``ffn_ms / micro_ops``.

**Layer time** (:func:`layer_ms`; ours, the text gives no formula). Forward pass of one MoE layer with
the FFN pipelined behind the first all-to-all's micro-ops (a two-stage flow shop of ``m`` equal jobs,
``a = a2a_ms / m``, ``f = ffn_ms / m``) and the second all-to-all after it:
``lambda x (a + f + (m - 1) max(a, f) + a2a_ms) + swap_ms x offloaded``, where

* ``lambda`` = the most loaded device's tokens over the balanced share, ``max_S (E / p) sum_{e in S}
  w_e / W`` over the plan's sets (1 under balanced load); the FFN and the all-to-all both scale with it
  (the all-to-all waits for the device that receives the most tokens, Sec. 4.2.2);
* ``offloaded`` = experts per device beyond what fits in memory (:meth:`PackingSetup.resident`), each
  swapped in from host memory once per layer at ``swap_ms`` (ours: the text gives no cost for
  DRAM offloading).

Without an all-to-all (``g = 1``, "pure data parallelism", Sec. 4.7.2.1) the time is ``lambda x ffn_ms``.

**Memory** (Sec. 4.7.2, Table 4.3: "Expert packing would lead to usage increase in GPU memory"): a device
needs ``base_gb + p x expert_gb``; ``memory_gb`` is the device's (40 GB A100s, Sec. 4.7.1). Beyond it the
text offloads (``offload=True``, the default); ``offload=False`` (ours) makes memory a hard limit.

Checked when built (``ValidationError`` naming the field): ``experts`` >= 1; one candidate per ``p`` with
``p`` a power of two dividing ``experts`` and ``p = 1`` present; times finite and >= 0, ``micro_ops`` >= 1;
``loads`` (optional) one per expert, finite, >= 0, not all 0; memory sizes finite, ``memory_gb`` > 0;
``max_experts_per_device`` >= 1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from optsched.core.checks import require_int, require_number
from optsched.core.errors import ValidationError

OWNER = "training packing"


@dataclass(frozen=True)
class PackingCandidate:
    """The balanced-load times with ``experts_per_device`` experts on each device (module docstring)."""

    experts_per_device: int
    a2a_ms: float
    ffn_ms: float
    micro_ops: int = 1

    def check(self, experts: int) -> None:
        owner = f"{OWNER}: candidate {self.experts_per_device!r}"
        require_int(owner, "experts_per_device", self.experts_per_device, 1)
        p = self.experts_per_device
        if p & (p - 1) or experts % p:
            raise ValidationError(f"{owner}: experts_per_device must be a power of two dividing experts {experts} "
                                  f"(Sec. 4.4.2: \"increases the number of experts per device in powers of two\"), "
                                  f"got {p}")
        require_number(owner, "a2a_ms", self.a2a_ms, 0.0)
        require_number(owner, "ffn_ms", self.ffn_ms, 0.0)
        require_int(owner, "micro_ops", self.micro_ops, 1)

    @property
    def a2a_micro_ms(self) -> float:
        """One all-to-all micro-op, ms."""
        return self.a2a_ms / self.micro_ops

    @property
    def ffn_micro_ms(self) -> float:
        """One FFN micro-op (the FFN of one all-to-all micro-op's tokens), ms."""
        return self.ffn_ms / self.micro_ops


@dataclass(frozen=True)
class PackingSetup:
    """A training-packing problem (module docstring)."""

    experts: int
    candidates: tuple[PackingCandidate, ...]
    memory_gb: float = 40.0
    base_gb: float = 0.0
    expert_gb: float = 0.0
    swap_ms: float = 0.0
    offload: bool = True
    loads: tuple[float, ...] | None = None
    max_experts_per_device: int | None = None

    def __post_init__(self) -> None:
        require_int(OWNER, "experts", self.experts, 1)
        object.__setattr__(self, "candidates", tuple(self.candidates))
        seen: set[int] = set()
        for c in self.candidates:
            if not isinstance(c, PackingCandidate):
                raise ValidationError(f"{OWNER}: candidates must hold PackingCandidate objects, got {c!r}")
            c.check(self.experts)
            if c.experts_per_device in seen:
                raise ValidationError(f"{OWNER}: candidates: experts_per_device {c.experts_per_device} given twice")
            seen.add(c.experts_per_device)
        if 1 not in seen:
            raise ValidationError(f"{OWNER}: candidates must include experts_per_device 1 (Sec. 4.4.2: \"starting "
                                  "with one expert per device\")")
        require_number(OWNER, "memory_gb", self.memory_gb, 0.0, strict=True)
        for name in ("base_gb", "expert_gb", "swap_ms"):
            require_number(OWNER, name, getattr(self, name), 0.0)
        if not isinstance(self.offload, bool):
            raise ValidationError(f"{OWNER}: offload must be true or false, got {self.offload!r}")
        if self.max_experts_per_device is not None:
            require_int(OWNER, "max_experts_per_device", self.max_experts_per_device, 1)
        if self.loads is not None:
            object.__setattr__(self, "loads", tuple(self.loads))
            if len(self.loads) != self.experts:
                raise ValidationError(f"{OWNER}: loads must hold one value per expert ({self.experts}), got "
                                      f"{len(self.loads)}")
            for e, w in enumerate(self.loads):
                require_number(f"{OWNER}: expert {e}", "load", w, 0.0)
            if sum(self.loads) <= 0:
                raise ValidationError(f"{OWNER}: loads must not all be 0")
        if not self.offload and self.base_gb + self.expert_gb > self.memory_gb:
            raise ValidationError(f"{OWNER}: base_gb + expert_gb = {self.base_gb + self.expert_gb:g} GB (one expert "
                                  f"per device) exceeds memory_gb {self.memory_gb:g} and offload is false")

    def candidate(self, experts_per_device: int) -> PackingCandidate | None:
        """The candidate of ``experts_per_device`` (None if not given)."""
        return next((c for c in self.candidates if c.experts_per_device == experts_per_device), None)

    @property
    def shares(self) -> np.ndarray:
        """Each expert's share of the tokens (balanced when ``loads`` is None)."""
        if self.loads is None:
            return np.full(self.experts, 1.0 / self.experts)
        w = np.asarray(self.loads, dtype=float)
        return w / w.sum()

    def resident(self) -> int:
        """Experts a device holds in memory, ``floor((memory_gb - base_gb) / expert_gb)`` (all when
        ``expert_gb`` is 0)."""
        if self.expert_gb <= 0:
            return self.experts
        return max(0, int(np.floor((self.memory_gb - self.base_gb) / self.expert_gb + 1e-9)))

    def offloaded(self, experts_per_device: int) -> int:
        """Experts per device kept in host memory (DRAM offloading) at ``experts_per_device``."""
        return max(0, experts_per_device - self.resident())

    def allowed(self, experts_per_device: int) -> bool:
        """Whether ``experts_per_device`` may be chosen: a candidate, within ``max_experts_per_device``, and
        within memory unless ``offload``."""
        if self.candidate(experts_per_device) is None:
            return False
        if self.max_experts_per_device is not None and experts_per_device > self.max_experts_per_device:
            return False
        return self.offload or self.offloaded(experts_per_device) == 0


@dataclass(frozen=True)
class PackingPlan:
    """A packing: ``experts_per_device`` and the sets of experts sharing a device (``g = E / p`` sets of
    ``p``, the same in every group); ``offloaded`` experts per device live in host memory."""

    experts_per_device: int
    sets: tuple[tuple[int, ...], ...]
    offloaded: int = 0


def consecutive_sets(experts: int, experts_per_device: int) -> tuple[tuple[int, ...], ...]:
    """Experts ``0..p-1`` on the first device of a group, ``p..2p-1`` on the second, ... (ours: the text
    does not say which experts are packed together)."""
    p = experts_per_device
    return tuple(tuple(range(k, k + p)) for k in range(0, experts, p))


def check_plan(setup: PackingSetup, plan: PackingPlan) -> list[str]:
    """The rules ``plan`` breaks (empty: feasible): an allowed ``p``, ``E / p`` sets of ``p`` distinct experts
    covering every expert once, the offloaded count the memory implies."""
    broken: list[str] = []
    p = plan.experts_per_device
    if not setup.allowed(p):
        broken.append(f"experts_per_device {p} is not allowed (candidates, max_experts_per_device, memory)")
        return broken
    if len(plan.sets) != setup.experts // p or any(len(s) != p for s in plan.sets):
        broken.append(f"the plan needs {setup.experts // p} sets of {p} experts")
    flat = sorted(e for s in plan.sets for e in s)
    if flat != list(range(setup.experts)):
        broken.append("every expert must be on exactly one device of a group")
    if plan.offloaded != setup.offloaded(p):
        broken.append(f"offloaded {plan.offloaded} differs from the memory's {setup.offloaded(p)}")
    return broken


def imbalance(setup: PackingSetup, sets: Sequence[Sequence[int]], experts_per_device: int) -> float:
    """``lambda``: the most loaded device's tokens over the balanced share (module docstring)."""
    w = setup.shares
    return float(max(w[list(s)].sum() for s in sets) * setup.experts / experts_per_device)


def pipelined_ms(candidate: PackingCandidate) -> float:
    """The balanced layer time without offloading (module docstring, "Layer time")."""
    if candidate.a2a_ms <= 0:
        return candidate.ffn_ms
    m, a, f = candidate.micro_ops, candidate.a2a_micro_ms, candidate.ffn_micro_ms
    return a + f + (m - 1) * max(a, f) + candidate.a2a_ms


def layer_ms(setup: PackingSetup, plan: PackingPlan) -> float:
    """The modelled MoE layer time of ``plan``, ms (module docstring); ``ValidationError`` for a plan that
    breaks a rule."""
    broken = check_plan(setup, plan)
    if broken:
        raise ValidationError(f"{OWNER}: infeasible plan: {'; '.join(broken)}")
    c = setup.candidate(plan.experts_per_device)
    assert c is not None
    lam = imbalance(setup, plan.sets, plan.experts_per_device)
    return lam * pipelined_ms(c) + setup.swap_ms * plan.offloaded


__all__ = ["PackingCandidate", "PackingPlan", "PackingSetup", "check_plan", "consecutive_sets", "imbalance",
           "layer_ms", "pipelined_ms"]
