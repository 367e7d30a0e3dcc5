"""A prediction for a GPU type from numbers not fitted on it is named in the decision's message (issue "A
round a real cluster scheduler can state", item 8 "Say what is extrapolated";
:func:`optsched.perf.lookup.prediction_notes`): catalogue models on a catalogue GPU type other than A800
are predicted from the built-in A800 parameters with the forward time scaled by peak TFLOPs, and every
Rubick method says so once per GPU type, naming its models, unless fitted parameters answer for them."""

from __future__ import annotations

import re

import pytest

import optsched
from optsched.core.catalog import GPU_TYPES, a800_cluster
from optsched.core.hardware import Cluster, Node
from optsched.core.job import Job
from optsched.perf.defaults import default_performance_model
from optsched.perf.lookup import notes_needed, prediction_notes
from optsched.rounds.rubick.problem import RubickRound

#: one method of each path: the exact driver, Algorithm 1, a baseline
METHODS = ("exact", "heuristic", "fifo")


def _a100_v100() -> Cluster:
    """The integrator's cluster: A100-40G and V100-32G nodes, nothing fitted on either."""
    nodes = (Node("a100-0", "A100-40G", 4, 64, 512.0), Node("a100-1", "A100-40G", 4, 64, 512.0),
             Node("v100-0", "V100-32G", 8, 128, 1024.0))
    return Cluster("a100-v100", nodes, (GPU_TYPES["A100-40G"], GPU_TYPES["V100-32G"]), intra_node_gbps=150.0,
                   inter_node_gbps=12.5, pcie_gbps=20.0)


JOBS = (Job("bert-0", "bert", 2, 500), Job("bert-1", "bert", 1, 300), Job("vit-0", "vit", 2, 800),
        Job("vit-1", "vit", 1, 400))


def _note(gpu_type: str, models: str, peak: str) -> str:
    return (f"GPU type '{gpu_type}': no fitted parameters for {models} (round perf_params or --params); their "
            f"built-in A800 parameters are used with the forward time scaled by peak TFLOPs (312 -> {peak}) and "
            f"the cluster's bandwidths for {gpu_type}")


@pytest.mark.parametrize("method", METHODS)
def test_catalogue_types_other_than_a800_are_named_with_the_source_of_their_numbers(method: str) -> None:
    decision = optsched.solve(RubickRound(_a100_v100(), JOBS), method, time_limit=10.0)
    assert _note("A100-40G", "bert, vit", "312") in decision.message
    assert _note("V100-32G", "bert, vit", "125") in decision.message
    assert decision.message.count("built-in A800 parameters") == 2  # once per GPU type, not per job


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("where", ("caller", "round"))
def test_fitted_parameters_for_a_pair_leave_only_the_others_named(method: str, where: str) -> None:
    cluster = _a100_v100()
    fitted = default_performance_model("bert", cluster, "V100-32G")  # stands for an optsched fit on V100-32G
    bert_only = tuple(j for j in JOBS if j.model == "bert")
    if where == "round":
        decision = optsched.solve(RubickRound(cluster, bert_only, perf_params=(fitted,)), method, time_limit=10.0)
    else:
        decision = optsched.solve(RubickRound(cluster, bert_only), method, time_limit=10.0,
                                  perf_models={("bert", "V100-32G"): fitted})
    assert _note("A100-40G", "bert", "312") in decision.message
    assert "V100-32G" not in decision.message
    both = optsched.solve(RubickRound(cluster, JOBS), method, time_limit=10.0,
                          perf_models={("bert", "V100-32G"): fitted})
    assert _note("A100-40G", "bert, vit", "312") in both.message
    assert _note("V100-32G", "vit", "125") in both.message


@pytest.mark.parametrize("method", METHODS)
def test_rounds_on_a800_have_no_note(method: str) -> None:
    decision = optsched.solve(RubickRound(a800_cluster(2, 8), JOBS), method, time_limit=10.0)
    assert "GPU type" not in decision.message and "A800 parameters" not in decision.message
    assert not notes_needed({"A800"})


def test_a_mixed_cluster_names_only_its_types_other_than_a800() -> None:
    a800 = a800_cluster(1, 8)
    cluster = Cluster("mixed", (*a800.nodes, Node("v100-0", "V100-32G", 8, 128, 1024.0)),
                      (GPU_TYPES["A800"], GPU_TYPES["V100-32G"]), 150.0, 80.0, 20.0)
    decision = optsched.solve(RubickRound(cluster, JOBS), "heuristic", time_limit=10.0)
    assert re.findall(r"GPU type '([^']+)'", decision.message) == ["V100-32G"]
    pinned = tuple(Job(j.name, j.model, j.requested_gpus, j.total_iterations, gpu_type="A800") for j in JOBS)
    assert "GPU type" not in optsched.solve(RubickRound(cluster, pinned), "heuristic", time_limit=10.0).message


def test_the_note_states_the_scaling_the_built_in_model_applies() -> None:
    """The numbers in the note are the ones :func:`default_performance_model` scales by."""
    cluster = _a100_v100()
    [note] = prediction_notes({("gpt2", "V100-32G")}, cluster)
    ref, on_v100 = default_performance_model("gpt2"), default_performance_model("gpt2", cluster, "V100-32G")
    assert on_v100.params.fwd_s == pytest.approx(ref.params.fwd_s * 312 / 125)
    assert on_v100.params.replace(fwd_s=ref.params.fwd_s) == ref.params  # nothing else is scaled
    assert "(312 -> 125)" in note and "gpt2" in note
