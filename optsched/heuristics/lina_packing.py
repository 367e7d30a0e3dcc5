"""Lina's expert packing rule for training (thesis Sec. 4.4.2), as the text reads, on a
:class:`~optsched.perf.training_packing.PackingSetup`.

The rule, verbatim (Sec. 4.4.2): "Lina adopts the following approach: starting with one expert per device,
it iteratively increases the number of experts per device in powers of two, until the FFN computation
exceeds that of the all-to-all micro-op. In case of GPU memory shortage, we adopt DRAM-offloading [126] to
transfer expert parameters that are not currently in use to host memory."

Read as: ``p = 1``; while an FFN micro-op at ``p`` takes no longer than an all-to-all micro-op at ``p``
(the FFN does not yet *exceed* it) and ``2 p`` may be chosen, ``p = 2 p``. The answer is the first ``p``
whose FFN micro-op exceeds its all-to-all micro-op (or the last ``p`` that may be chosen). ``2 p`` may be
chosen when it is a candidate (a power of two dividing the number of experts), within
``max_experts_per_device`` if set (the text sets one for inference only, "the maximum number of experts
packed on a device is 4", Sec. 4.7.1) and, with ``offload=False`` only (ours), within device memory; with
the text's ``offload=True`` memory does not stop the rule, the experts beyond it are offloaded. Which
experts share a device: consecutive experts (ours; the text does not say,
:func:`~optsched.perf.training_packing.consecutive_sets`). The rule does not see the offloading cost or
the token loads; the layer time (:func:`~optsched.perf.training_packing.layer_ms`) charges both.
"""

from __future__ import annotations

from dataclasses import dataclass

from optsched.perf.training_packing import PackingPlan, PackingSetup, consecutive_sets


@dataclass(frozen=True)
class RuleStep:
    """One step of the rule: at ``experts_per_device``, the FFN and all-to-all micro-op times (ms) and
    whether the FFN exceeds the all-to-all."""

    experts_per_device: int
    ffn_micro_ms: float
    a2a_micro_ms: float

    @property
    def ffn_exceeds(self) -> bool:
        return self.ffn_micro_ms > self.a2a_micro_ms


def packing_rule_steps(setup: PackingSetup) -> tuple[RuleStep, ...]:
    """The steps the rule takes (module docstring), the last one being its answer."""
    steps: list[RuleStep] = []
    p = 1
    while True:
        c = setup.candidate(p)
        assert c is not None  # 1 is a candidate (checked by the setup), 2p only when allowed
        steps.append(RuleStep(p, c.ffn_micro_ms, c.a2a_micro_ms))
        if steps[-1].ffn_exceeds or not setup.allowed(2 * p):
            return tuple(steps)
        p *= 2


def packing_rule(setup: PackingSetup) -> PackingPlan:
    """Lina's packing (module docstring): the rule's experts per device, consecutive experts together,
    the experts beyond memory offloaded."""
    p = packing_rule_steps(setup)[-1].experts_per_device
    return PackingPlan(p, consecutive_sets(setup.experts, p), setup.offloaded(p))


__all__ = ["RuleStep", "packing_rule", "packing_rule_steps"]
