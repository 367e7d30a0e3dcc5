"""Kinds register their simulation setups (optsched/sim/setup.py): ``optsched simulate --kind K`` and
``experiments.compare.simulate_kind`` take the default cluster and policies, the kind's own options and
its inputs from the registry; an option the kind would ignore is refused naming it."""

from __future__ import annotations

import pytest

from optsched.core.errors import UnknownNameError, ValidationError
from optsched.experiments.compare import simulate_kind
from optsched.policies.registry import methods_of
from optsched.sim.config import SimConfig
from optsched.sim.setup import SimulationRequest, check_request, simulation_kinds, simulation_setup


def test_the_built_in_kinds_register_their_setups() -> None:
    assert simulation_kinds()[:3] == ("rubick", "crius", "lyra")
    for kind in simulation_kinds():
        setup = simulation_setup(kind)
        assert setup.kind == kind and set(setup.default_policies) <= set(methods_of(kind))
    assert simulation_setup("crius").default_cluster == "crius-sim-1280"
    assert [o.name for o in simulation_setup("lyra").options] == [
        "training", "inference", "usage", "usage_burst", "prediction_error", "prediction_margin", "window_days",
        "window_start", "fungible_load", "elastic_load", "elastic_count", "elastic_on_inference", "offered_load",
        "no_loaning", "scenario", "hetero_efficiency"]
    assert simulation_setup("rubick").policy_extras == {"defer_unreachable_guarantees": True}
    with pytest.raises(UnknownNameError, match="experts"):
        simulation_setup("experts")


@pytest.mark.parametrize("kind, request_, message", [
    ("crius", SimulationRequest(params=("p.json",)), "--kind crius: --params does not apply"),
    ("crius", SimulationRequest(configs="measured", trace_durations="ignore"),
     "--kind crius: --configs, --trace-durations do not apply"),
    ("rubick", SimulationRequest(options={"training": 4}), "--kind rubick: --training does not apply"),
    ("lyra", SimulationRequest(cluster="a800-8x8"), "--kind lyra: --cluster does not apply"),
])
def test_options_a_kind_would_ignore_are_refused(kind: str, request_: SimulationRequest, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        check_request(simulation_setup(kind), request_)


def test_simulate_kind_runs_the_defaults_and_refuses_another_kinds_method() -> None:
    inputs, results = simulate_kind("lyra", SimulationRequest(jobs=12, options={"usage": "none"}), ["lyra", "fifo"],
                                    SimConfig(max_time_s=3 * 3600.0))
    assert list(results) == ["lyra", "fifo"] and "(2 training + 2 inference servers), usage none" in inputs.heading
    assert inputs.run_options("lyra")["round_fields"]["inference_nodes"]
    with pytest.raises(ValidationError, match="--kind crius: rubick is no crius method"):
        simulate_kind("crius", SimulationRequest(jobs=5), ["rubick"])
