"""Every generator and trace builder that draws from a seed refuses one CP-SAT or numpy cannot take
(``optsched.core.checks.require_seed``: an integer in [0, 2**31)) with an error naming ``seed``."""

from __future__ import annotations

from typing import Callable

import pytest

from optsched.core import ValidationError, get_cluster
from optsched.rounds.crius import generate_crius_round
from optsched.rounds.experts.generate import generate_experts_round
from optsched.rounds.lyra.generate import lyra_state
from optsched.rounds.moe_comm.generate import generate_comm_round
from optsched.rounds.placement.generate import generate_placement_round
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.training_packing import generate_packing_round
from optsched.sim.loaning import synthetic_usage
from optsched.sim.traces import synthetic_trace
from optsched.sim.traces.lyra import synthetic_rows

GENERATORS: dict[str, Callable[[int], object]] = {
    "rubick": lambda s: generate_rubick_round(2, 8, 4, s),
    "crius": lambda s: generate_crius_round(3, s),
    "experts": lambda s: generate_experts_round(8, 4, s),
    "moe-comm": lambda s: generate_comm_round(1, s),
    "training-packing": lambda s: generate_packing_round(4, s),
    "lyra": lambda s: lyra_state(s, 4, 4, 6, 0.6, 0.3, "lyra-allocate"),
    "placement": lambda s: generate_placement_round(seed=s),
    "synthetic trace": lambda s: synthetic_trace(get_cluster("a800-8x8"), num_jobs=5, seed=s),
    "lyra trace": lambda s: synthetic_rows(5, seed=s),
    "inference usage": lambda s: synthetic_usage(1.0, seed=s),
}


@pytest.mark.parametrize("name", sorted(GENERATORS))
@pytest.mark.parametrize("seed", [-1, 2 ** 31, 1.5, True])
def test_bad_seeds_are_refused_naming_the_seed(name: str, seed: object) -> None:
    with pytest.raises(ValidationError, match="seed"):
        GENERATORS[name](seed)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(GENERATORS))
def test_the_largest_seed_is_taken(name: str) -> None:
    GENERATORS[name](2 ** 31 - 1)
