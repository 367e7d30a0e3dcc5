"""Reading Slurm into a Rubick round (:mod:`optsched.integrations.slurm.reader`, :mod:`.comment`, :mod:`.hostlist`)
on JSON captured from this machine's Slurm 22.05 (``data/sinfo.json``, ``data/squeue.json``: 4 nodes of 8 GPUs in
two racks, n4 drained; 8 jobs, 2 running), so these tests run without Slurm. Expected values traced by hand from
the captured files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem
from optsched.core.skip import JobError
from optsched.integrations.slurm.comment import parse_comment, with_agent_keys
from optsched.integrations.slurm.hostlist import expand_hostlist
from optsched.integrations.slurm.reader import (ReadOptions, Snapshot, build_round, catalogue_gpu_type, parse_gres,
                                                parse_jobs, parse_nodes)

DATA = Path(__file__).parent / "data"
NOW = 1795704400.0


def snapshot() -> Snapshot:
    sinfo = json.loads((DATA / "sinfo.json").read_text())
    squeue = json.loads((DATA / "squeue.json").read_text())
    return Snapshot(NOW, parse_nodes(sinfo), parse_jobs(squeue))


def jobs_of(rnd):
    return {j["name"]: j for j in rnd["jobs"]}


def test_hostlists_expand_as_slurm_prints_them():
    assert expand_hostlist("n[2-3]") == ("n2", "n3")
    assert expand_hostlist("gpu[08-10],cpu1") == ("gpu08", "gpu09", "gpu10", "cpu1")
    assert expand_hostlist("n[1,3-4]x") == ("n1x", "n3x", "n4x")
    assert expand_hostlist("") == ()
    with pytest.raises(ValidationError, match="bad range"):
        expand_hostlist("n[a-b]")


def test_gres_strings_of_22_05():
    assert parse_gres("gpu:a100:8", "x") == ("a100", 8)
    assert parse_gres("gres:gpu:4", "x") == (None, 4)
    assert parse_gres("gpu:a100:5(IDX:0-4)", "x") == ("a100", 5)
    assert parse_gres("gres:gpu", "x") == (None, 1)
    assert parse_gres("", "x") is None and parse_gres("N/A", "x") is None
    with pytest.raises(ValidationError, match="2 GPU entries"):
        parse_gres("gpu:a100:4,gpu:v100:4", "node 'n9' gres")


def test_nodes_state_features_and_gpus():
    nodes = {n.name: n for n in snapshot().nodes}
    assert {n: (v.state, v.gpus, v.gres_type, v.features) for n, v in nodes.items()} == {
        "n1": ("ready", 8, "a100", ("rack1",)), "n2": ("ready", 8, "a100", ("rack1",)),
        "n3": ("ready", 8, "a100", ("rack2",)), "n4": ("draining", 8, "a100", ("rack2",))}
    down = parse_nodes({"nodes": [{"name": "m1", "state": "idle", "state_flags": ["NOT_RESPONDING"], "gres": "gpu:8"},
                                  {"name": "m2", "state": "down", "state_flags": [], "gres": "gpu:8"}]})
    assert [n.state for n in down] == ["absent", "absent"]


def test_gpu_type_from_gres_type_feature_or_alias():
    assert catalogue_gpu_type("a100", (), {}, "n") == "A100-40G"
    assert catalogue_gpu_type("A800", (), {}, "n") == "A800"
    assert catalogue_gpu_type(None, ("rack1", "v100"), {}, "n") == "V100-32G"
    assert catalogue_gpu_type("h100", (), {"h100": "A800"}, "n") == "A800"
    with pytest.raises(ValidationError, match="node 'n9'.*'h100'.*--gpu-type"):
        catalogue_gpu_type("h100", (), {}, "node 'n9'")


def test_cluster_of_the_round():
    rnd = build_round(snapshot()).round
    nodes = {n["name"]: n for n in rnd["cluster"]["nodes"]}
    assert nodes["n4"]["state"] == "draining" and "state" not in nodes["n1"]
    assert nodes["n3"]["labels"] == {"rack2": "true"}
    assert {n["gpu_type"] for n in nodes.values()} == {"A100-40G"}
    assert nodes["n1"]["num_gpus"] == 8 and nodes["n1"]["num_cpus"] == 64
    assert rnd["time"] == NOW and rnd["on_invalid_job"] == "skip"


def test_jobs_of_the_round_traced_by_hand():
    build = build_round(snapshot())
    jobs = jobs_of(build.round)
    # 1: --gres=gpu:a100:2 -N1 --account=team-a, comment {"model":"bert","guaranteed":true,"total_iterations":5000}
    assert jobs["1"] == {"name": "1", "requested_gpus": 2, "tenant": "team-a", "submit_time": 1795704357.0,
                         "guaranteed": True, "gpu_type": "A100-40G", "model": "bert", "total_iterations": 5000,
                         "max_nodes": 1, "requested_cpus": 16}
    # 2: --gpus=4 -N2 --account=team-b --deadline=now+2hours, no comment: a fixed gang of 2 + 2, deadline left to Slurm
    assert jobs["2"]["requested_plan"] == {"dp": 4} and jobs["2"]["plan_fixed"] is True
    assert (jobs["2"]["min_gpus"], jobs["2"]["max_gpus"], jobs["2"]["tenant"]) == (4, 4, "team-b")
    assert "deadline" not in jobs["2"]
    assert build.round["coefficients"]["2"] == [{"plan": {"dp": 4}, "gpu_type": "A100-40G", "gpus_per_node": [2, 2],
                                                 "throughput": 1.0, "cpus": 32}]
    # 3: --gres=gpu:1 --constraint=rack2 --nice=5
    assert jobs["3"]["node_selector"] == {"rack2": "true"} and jobs["3"]["priority"] == -5
    assert jobs["3"]["tenant"] == "default"
    # 4: --gpus-per-node=2 -N2, comment {"priority":2}
    assert jobs["4"]["priority"] == 2 and build.round["coefficients"]["4"][0]["gpus_per_node"] == [2, 2]
    # 5 and 6 run: 5 on n1 (8 GPUs, no comment); 6 on n2:5 + n3:1 (--gpus=6 split by Slurm), model gpt2, plan dp 6
    running = {a["job"]: a for a in build.round["running"]}
    assert running["5"] == {"job": "5", "plan": {"dp": 8}, "placement": {"n1": {"gpus": 8, "cpus": 64}},
                            "since": 1795704359.0}
    assert running["6"]["placement"] == {"n2": {"gpus": 5, "cpus": 40}, "n3": {"gpus": 1, "cpus": 8}}
    assert running["6"]["plan"] == {"dp": 6} and jobs["6"]["model"] == "gpt2"
    # 7 asks for no GPU, 8 has a comment field the agent does not read: left out, named
    left = dict(build.left_out)
    assert set(left) == {"7", "8"} and left["7"] == "asks for no GPU"
    assert left["8"].startswith("job 8: comment field 'modle' is not a field the agent reads")


def test_round_is_valid_and_keeps_every_gpu_job():
    problem = RoundProblem.from_dict(build_round(snapshot()).round)
    assert sorted(j.name for j in problem.jobs) == ["1", "2", "3", "4", "5", "6"]
    assert not problem.skipped


def test_guaranteed_from_qos_or_partition():
    rnd = build_round(snapshot(), ReadOptions(guaranteed_partitions=frozenset({"gpu"}))).round
    assert all(j["guaranteed"] for j in rnd["jobs"])
    rnd = build_round(snapshot(), ReadOptions(guaranteed_qos=frozenset({"high"}))).round
    assert [j["name"] for j in rnd["jobs"] if j["guaranteed"]] == ["1"]  # only the comment's


@pytest.mark.parametrize("comment, field", [
    ('{"guaranteed": "yes"}', "guaranteed"), ('{"min_gpus": 1.5}', "min_gpus"), ('{"weight": -1}', "weight"),
    ('{"plan_fixed": true}', "plan_fixed"), ('{"model": 3}', "model"), ('{"requested_plan": 4}', "requested_plan"),
])
def test_comment_errors_name_the_job_and_the_field(comment, field):
    with pytest.raises(JobError, match=rf"^job 42: comment field '{field}'"):
        parse_comment("42", comment)


def test_comment_that_is_not_a_json_object():
    with pytest.raises(JobError, match="job 7: comment is not JSON"):
        parse_comment("7", "train bert")
    with pytest.raises(JobError, match="job 7: comment must be a JSON object, got list"):
        parse_comment("7", "[1]")
    assert parse_comment("7", "").model is None


def test_agent_keys_keep_the_users_comment_parseable():
    user = '{"model":"bert","guaranteed":true}'
    text = with_agent_keys(user, wait="no room", plan={"dp": 4})
    facts = parse_comment("1", text)
    assert (facts.model, facts.guaranteed, facts.agent_plan) == ("bert", True, {"dp": 4})
    assert json.loads(with_agent_keys(text, wait=None, plan=None)) == json.loads(user)
    assert with_agent_keys("not json", wait="x") is None
    assert json.loads(with_agent_keys("", wait="x")) == {"optsched_wait": "x"}
