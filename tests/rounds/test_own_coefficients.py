"""Self-contained rounds (issue 16): custom model objects, fitted parameters carried in the round, and the
caller's own coefficient rows (``optsched.core.coefficient_rows``, ``optsched.rounds.rubick.own_rows``)."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
from helpers import REPO_ROOT, chosen_row_is_given, own_coefficients_round

import optsched
from optsched.core.catalog import MODELS, a800_cluster
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.job import Job
from optsched.core.round import RoundProblem
from optsched.perf.defaults import default_performance_model, prior_performance_model
from optsched.perf.lookup import PerfSource, prediction_source
from optsched.policies.registry import methods_of
from optsched.rounds.rubick import own_rows
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.baseline_tables import request_table, sia_table, synergy_table
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table
from optsched.schemas import load_schema

ALL_METHODS = methods_of("rubick")


def _round(data: dict[str, Any] | None = None) -> RubickRound:
    problem = RoundProblem.from_dict(data or own_coefficients_round())
    assert isinstance(problem, RubickRound)
    return problem


def test_round_with_own_models_and_rows_round_trips_and_validates_against_the_schema() -> None:
    data = own_coefficients_round()
    problem = _round(data)
    assert [m.name for m in problem.own_models] == ["my-13b", "my-1b"]
    assert problem.job("finetune-13b").model == "my-13b"
    out = problem.to_dict()
    assert out["jobs"][1]["model"] == out["jobs"][0]["model"] == data["jobs"][0]["model"]  # written as objects
    assert RoundProblem.from_dict(json.loads(json.dumps(out))) == problem
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, load_schema("round"))
    jsonschema.validate(out, load_schema("round"))


@pytest.mark.parametrize("method", ALL_METHODS)
def test_every_method_picks_one_of_the_given_rows(method: str) -> None:
    """Must show (issue 16): a round with custom model objects and its own coefficient table, no catalogue
    model and no params file, solved by every method; each chosen configuration is a given row."""
    data = own_coefficients_round()
    problem = _round(data)
    assert not {j.model for j in problem.jobs} & set(MODELS)
    decision = optsched.solve(problem, method, time_limit=10.0)
    out = decision.to_dict()
    chosen_row_is_given(data, out)
    assert decision.job("pretrain-13b").action == "keep"  # a guaranteed running job on its request
    assert "prior" not in decision.message  # no performance model was asked
    for d in decision.jobs:  # normalised against the fastest request row
        ref = {"pretrain-13b": 5.0, "finetune-13b": 2.4, "embed-1b": 40.0}[d.job]
        assert d.normalised == pytest.approx(d.throughput / ref)


def test_exact_reaches_the_brute_force_optimum_of_the_given_rows() -> None:
    # gpu-1 (8 GPUs) is free: embed-1b on dp=8 (140/40 = 3.5) beats finetune 4 GPUs + embed 4 GPUs
    # (1 + 76/40 = 2.9) and every other split; pretrain-13b is kept (1.0)
    d = optsched.solve(_round(), "exact", time_limit=10.0)
    assert d.status == "optimal"
    assert d.objective == pytest.approx(4.5)
    assert d.job("embed-1b").allocation.plan.dp == 8


def test_baselines_choose_among_the_given_rows_by_their_rule() -> None:
    problem = _round()
    fifo = request_table(problem)
    for name, expected in (("finetune-13b", {(4,)}), ("embed-1b", {(2,)})):
        assert {fifo.gpus_per_node[r] for r in fifo.configs_of(name)} == expected
    sy = synergy_table(problem)  # the request's plan and shape at every given CPU count
    assert sorted(int(sy.table.cpus[r]) for r in sy.options["pretrain-13b"]) == [32, 64]
    sia = sia_table(problem)  # the request's plan at every given DP size
    assert sorted(int(sia.table.gpus[r]) for r in sia.options["embed-1b"]) == [2, 4, 8]
    assert all(sia.table.plans[r].zero.value == "none" for r in sia.options["embed-1b"])
    e = build_round_table(problem, fixed_resources=True)
    assert {e.plans[r].zero.value for r in e.configs_of("embed-1b")} == {"none", "zero-dp"}
    r_table = build_round_table(problem, fixed_plan=True)
    assert sorted(int(r_table.gpus[r]) for r in r_table.configs_of("embed-1b")) == [2, 4, 8]


def test_reference_is_the_fastest_request_row_within_the_requested_cpus() -> None:
    data = own_coefficients_round()
    # a faster row on the requested GPUs but with more CPUs than requested is not the request
    data["coefficients"]["embed-1b"].append({"plan": {"dp": 2}, "gpu_type": "A800", "gpus_per_node": [2],
                                             "cpus": 24, "mem_gib": 64, "throughput": 45.0})
    problem = _round(data)
    table = build_round_table(problem)
    assert table.reference_throughput[table.index_of("embed-1b")] == 40.0
    assert table.reference_throughput[table.index_of("finetune-13b")] == 2.4  # 0 CPUs requested: 8 per GPU
    assert admit(problem, table).protected == {"pretrain-13b": 8, "embed-1b": 2}


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as e:
        _round(data).to_dict()
        build_round_table(_round(data))
    return str(e.value)


@pytest.mark.parametrize("change, message", [
    (lambda d: d["coefficients"]["embed-1b"][0].update(gpus_per_node=[4]),
     r"coefficients\['embed-1b'\]\[0\]: .*plan dp\(dp=2\) uses 2 GPUs but gpus_per_node \[4\] holds 4"),
    (lambda d: d["coefficients"]["embed-1b"][1].update(gpu_type="H100"),
     r"coefficients\['embed-1b'\]\[1\]: unknown GPU type 'H100'"),
    (lambda d: d["coefficients"]["embed-1b"][2].update(throughput=0),
     r"coefficients\['embed-1b'\]\[2\]: .*throughput must be > 0"),
    (lambda d: d["coefficients"].update(ghost=[]), r"job 'ghost' is not among the round's jobs"),
    (lambda d: d["coefficients"].update({"embed-1b": []}), r"coefficients\['embed-1b'\]: needs at least one row"),
    (lambda d: d["coefficients"]["embed-1b"].append(dict(d["coefficients"]["embed-1b"][0], throughput=1.0)),
     r"coefficients\['embed-1b'\]\[4\]: the same configuration as coefficients\['embed-1b'\]\[0\]"),
    (lambda d: d["coefficients"]["embed-1b"][3].update(gpus_per_node=[2, 2, 2, 2], plan={"dp": 8}),
     r"coefficients\['embed-1b'\]\[3\]: 4 parts \[2, 2, 2, 2\] but cluster 'lab-2x8' has 2 node"),
    (lambda d: d["coefficients"]["embed-1b"][3].update(cpus=200),
     r"coefficients\['embed-1b'\]\[3\]: its largest part .* fits no A800 node"),
    (lambda d: d["coefficients"]["embed-1b"][0].update(plan={"dp": 2, "ga_steps": 3}),
     r"coefficients\['embed-1b'\]\[0\]: plan .* global batch 128 is not divisible"),
    (lambda d: d["coefficients"]["embed-1b"][0].update(extra=1), r"coefficients\['embed-1b'\]\[0\]: .*unknown field"),
    (lambda d: d["jobs"][2]["model"].update(hidden=4096) or d["jobs"][2]["model"].update(name="bert"),
     r"model object 'bert' shadows the catalogue model of that name with another shape \(num_params"),
    (lambda d: d["jobs"][1].update(model=dict(d["jobs"][0]["model"], layers=48)),
     r"jobs\[1\]: model object 'my-13b' differs from an earlier job's object .*layers 40 vs 48"),
])
def test_bad_rows_and_models_get_errors_naming_job_and_row(change: Any, message: str) -> None:
    data = own_coefficients_round()
    change(data)
    assert re.search(message, _error(data)), _error(data)


def test_a_job_without_a_request_row_or_with_an_unknown_running_configuration_is_an_error() -> None:
    data = own_coefficients_round()
    data["coefficients"]["embed-1b"] = [r for r in data["coefficients"]["embed-1b"] if r["gpus_per_node"] != [2]]
    with pytest.raises(ValidationError, match=r"job 'embed-1b': none of its 2 coefficient row\(s\) is its request "
                                              r"\(2 GPUs, at most 16 CPUs\); add a row for the request"):
        build_round_table(_round(data))
    data = own_coefficients_round()
    data["running"][0]["placement"]["gpu-0"]["cpus"] = 48
    with pytest.raises(ValidationError, match=r"job 'pretrain-13b': its running configuration \(plan .* with 48 "
                                              r"CPUs\) is none of its coefficient rows; add the row"):
        optsched.solve(_round(data), "heuristic")
    with pytest.raises(ValidationError) as info:
        optsched.solve(_round(data), "heuristic")
    row = str(info.value).split("add the row ", 1)[1].replace("<its samples/s>", "1.0")
    assert json.loads(row)["cpus"] == 48  # the suggested row is valid JSON, to paste into the round


def test_a_kept_job_keeps_the_cpus_and_memory_it_holds() -> None:
    data = own_coefficients_round()
    data["running"][0]["placement"]["gpu-0"]["mem_gb"] = 300  # more than its row says
    d = optsched.solve(_round(data), "exact", time_limit=10.0)
    assert d.job("pretrain-13b").action == "keep"
    assert d.job("pretrain-13b").allocation.placement.to_dict() == {"gpu-0": {"gpus": 8, "cpus": 64, "mem_gb": 300}}


def test_custom_model_without_rows_uses_round_params_or_the_named_prior() -> None:
    data = own_coefficients_round()
    del data["coefficients"]["finetune-13b"]
    problem = _round(data)
    d = optsched.solve(problem, "heuristic")
    assert "model 'my-13b' on A800: no fitted parameters (round perf_params or --params), predicted by the unfitted " \
           "prior" in d.message
    spec = problem.model_spec("my-13b")
    fitted = prior_performance_model(spec, problem.cluster, "A800")
    fitted = fitted.with_params(fitted.params.replace(k_const=0.5))
    data["perf_params"] = [fitted.to_dict()]
    with_params = _round(data)
    assert with_params.perf_params == (fitted,)
    assert prediction_source("my-13b", "A800", None, with_params.own_models, with_params.perf_params) == "round"
    d2 = optsched.solve(with_params, "heuristic")
    assert "prior" not in d2.message
    table = build_round_table(with_params)
    r = int(table.configs_of("finetune-13b")[0])
    assert table.throughput[r] == pytest.approx(fitted.throughput(table.plans[r], table.gpus_per_node[r],
                                                                  int(table.cpus[r]) / int(table.gpus[r])))
    # the same parameters from the caller are fine; different ones are a conflict
    optsched.solve(with_params, "heuristic", perf_models={("my-13b", "A800"): fitted})
    other = fitted.with_params(fitted.params.replace(k_const=0.9))
    with pytest.raises(ValidationError, match=r"perf_params\[0\]: the round carries parameters for 'my-13b' on A800 "
                                              r"and the caller gave different ones"):
        optsched.solve(with_params, "heuristic", perf_models={("my-13b", "A800"): other})


def test_round_params_must_match_the_round_and_its_cluster() -> None:
    data = own_coefficients_round()
    pm = default_performance_model("bert").to_dict()
    data["perf_params"] = [pm, pm]
    with pytest.raises(ValidationError, match=r"perf_params\[1\] \('bert' on A800\): a second set of parameters"):
        _round(data)
    data["perf_params"] = [dict(pm, gpu_type="T4")]
    with pytest.raises(ValidationError, match=r"perf_params\[0\] \('bert' on T4\): fitted for a GPU type the cluster"):
        _round(data)
    data["perf_params"] = [dict(pm, model=dict(pm["model"], layers=12))]
    with pytest.raises(ValidationError, match=r"its model object differs from the round's model 'bert'"):
        _round(data)
    data["perf_params"] = [dict(pm, format="x")]
    with pytest.raises(ValidationError, match=r"round: perf_params\[0\]: perf params file: unsupported format"):
        _round(data)


def test_unknown_model_error_says_how_to_define_it() -> None:
    problem = RubickRound(a800_cluster(1, 8), (Job("x", "my-13b", 2, 100),))
    with pytest.raises(UnknownNameError, match=r"unknown model 'my-13b' \(not in the catalogue: give the job's model "
                                               r"as an object .*perf_params, or optsched solve --params\)"):
        optsched.solve(problem, "heuristic")


def test_gpu_type_outside_the_catalogue_is_named_in_the_message() -> None:
    data = own_coefficients_round()
    data["cluster"]["gpu_types"].append({"name": "H100", "memory_gib": 80.0, "peak_tflops": 989.0})
    data["cluster"]["nodes"].append({"name": "h-0", "gpu_type": "H100", "num_gpus": 8, "num_cpus": 96,
                                     "memory_gib": 1024.0})
    data["jobs"].append({"name": "bert-h", "model": "bert", "requested_gpus": 2, "total_iterations": 100,
                         "gpu_type": "H100"})
    d = optsched.solve(_round(data), "heuristic")
    assert "GPU type 'H100' is not in the catalogue: the built-in A800 parameters of bert are used with the " \
           "forward time scaled by peak TFLOPs (312 -> 989) and the cluster's bandwidths for H100" in d.message
    assert d.job("bert-h").action == "start"


def test_rounds_without_own_models_keep_one_lookup_so_table_caches_stay_warm() -> None:
    from optsched.rounds.rubick.generate import generate_rubick_round
    source = PerfSource()
    plain = generate_rubick_round(2, 8, 6, seed=0)
    assert source.lookup_for(plain.cluster) is source.lookup_for(plain.cluster) is source.lookup(plain.cluster)
    own = _round()
    assert source.lookup_for(own.cluster, own.own_models, own.perf_params) is \
        source.lookup_for(own.cluster, own.own_models, own.perf_params)


def test_partitioned_solving_carries_models_and_rows() -> None:
    data = own_coefficients_round()
    d = optsched.solve(_round(data), "heuristic", partitions=2)
    out = d.to_dict()
    # pretrain-13b's 2-node row cannot be in a 1-node part; the others keep their rows
    chosen_row_is_given(data, out)


def test_worked_example_of_the_integration_docs_solves() -> None:
    """docs/integration.md's worked example (the ```json block after "Worked example") is a valid round that
    solves with every method, each picking one of its given rows."""
    text = (REPO_ROOT / "docs" / "integration.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- worked-example -->\s*```json\n(.*?)```", text, re.S)
    assert block, "docs/integration.md lost its worked example"
    data = json.loads(block.group(1))
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(data, load_schema("round"))
    for method in ALL_METHODS:
        chosen_row_is_given(data, optsched.solve(_round(copy.deepcopy(data)), method, time_limit=10.0).to_dict())


def test_request_rows_rules() -> None:
    problem = _round()
    job = problem.job("pretrain-13b")
    rows = problem.own_rows("pretrain-13b")
    assert own_rows.request_rows(problem, job, rows) == {"A800": 0}
    assert own_rows.current_index(problem, job, rows) == 0
    assert own_rows.synergy_rows(problem, job, rows) == [0, 1]
    assert own_rows.sia_rows(problem, job, rows) == [0, 1]  # a 3D request without a DP row: not scaled
    embed = problem.job("embed-1b")
    assert own_rows.sia_rows(problem, embed, problem.own_rows("embed-1b")) == [0, 2, 3]
    assert own_rows.same_family(rows[0].plan, rows[2].plan)


def test_perf_params_schema_is_the_rounds_copy_and_fits_what_fit_writes() -> None:
    standalone, in_round = load_schema("perf-params"), load_schema("round")["$defs"]["perfParams"]
    assert {k: v for k, v in standalone.items() if k not in ("$schema", "$id", "$defs")} == in_round
    assert standalone["$defs"]["model"] == load_schema("round")["$defs"]["model"]
    jsonschema = pytest.importorskip("jsonschema")
    written = default_performance_model("gpt2").to_dict()
    jsonschema.validate(written, standalone)
    data = own_coefficients_round()
    data["perf_params"] = [written]
    jsonschema.validate(data, load_schema("round"))


def test_a_job_with_own_rows_needs_no_model_shape() -> None:
    """With its own rows no performance model is asked, so the model may be a bare label."""
    data = own_coefficients_round()
    data["jobs"][2]["model"] = "vendor-embedder-v3"
    for method in ALL_METHODS:
        chosen_row_is_given(data, optsched.solve(_round(copy.deepcopy(data)), method, time_limit=10.0).to_dict())
