"""Stage determination (Crius Sec. 4.2, Fig. 7)."""

from __future__ import annotations

import numpy as np
import pytest

from optsched.core.errors import ValidationError
from optsched.perf.crius.models import crius_model
from optsched.perf.crius.op_graph import Operator, OperatorGraph
from optsched.perf.crius.stages import determine_stages, is_power_of_two, round_stage_gpus


def fig7_graph() -> OperatorGraph:
    """Six operators; OP1 has 1/16 and OP2 3/16 of the FLOPs (Fig. 7); the three smallest
    inter-operator communications are after OP2, OP3 and OP5."""
    shares = [1, 3, 4, 2, 2, 4]
    ops = [Operator(f"OP{i + 1}", flops=float(s)) for i, s in enumerate(shares)]
    comm = [5.0, 1.0, 2.0, 6.0, 3.0]
    return OperatorGraph.of("fig7", 16, ops, [(f"OP{i + 1}", f"OP{i + 2}", c) for i, c in enumerate(comm)])


def test_fig7_example() -> None:
    p = determine_stages(fig7_graph(), 8, 4)
    assert p.num_stages == 4 and sum(p.gpus) == 8
    assert p.starts == (0, 2, 3, 5)                        # {OP1, OP2}, {OP3}, {OP4, OP5}, {OP6}
    assert p.shares == pytest.approx((2.0, 2.0, 2.0, 2.0))  # OP1 gets 0.5 GPU, OP2 1.5
    assert p.gpus == (2, 2, 2, 2)
    assert p.cut_bytes == (1.0, 2.0, 3.0)


def test_ties_balance_uniform_layers() -> None:
    p = determine_stages(crius_model("bert-1.3b"), 8, 4)
    assert p.gpus == (2, 2, 2, 2)
    sizes = [len(p.ops_of(s)) for s in range(4)]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("n, s", [(1, 1), (2, 2), (8, 1), (16, 8), (64, 16), (128, 16)])
def test_stage_gpus_are_powers_of_two_summing_to_n(n: int, s: int) -> None:
    for model in ("wresnet-4b", "moe-27b", "bert-6.7b"):
        p = determine_stages(crius_model(model), n, s)
        assert sum(p.gpus) == n and all(is_power_of_two(g) for g in p.gpus) and p.num_stages == s


def test_rounding_follows_shares() -> None:
    assert round_stage_gpus(np.array([6.0, 1.0, 1.0]), 8) == (4, 2, 2)
    assert round_stage_gpus(np.array([7.9, 0.1]), 8) == (4, 4)  # powers of two summing to 8
    assert round_stage_gpus(np.array([1.0]), 16) == (16,)


def test_rules_are_named() -> None:
    g = fig7_graph()
    with pytest.raises(ValidationError, match="6 GPUs is not a power of two"):
        determine_stages(g, 6, 2)
    with pytest.raises(ValidationError, match="at most as many stages"):
        determine_stages(g, 8, 7)
    with pytest.raises(ValidationError, match="at most as many stages"):
        determine_stages(g, 2, 4)
