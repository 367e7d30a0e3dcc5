"""The Slurm agent against a real Slurm (the session's :class:`LocalSlurm`: 4 nodes n1-n4 of 8 fake GPUs, racks
rack1 = n1, n2 and rack2 = n3, n4): held jobs, agent rounds, and every running job where the decision put it
(read back from ``squeue``); a drained node emptied; a preempted job requeued and held; nothing started that the
decision did not start. One test per failure mode: Slurm down, a job vanished between read and apply, an update
Slurm rejects."""

from __future__ import annotations

import json
import logging
import re
import subprocess

from optsched.cli import main
from optsched.integrations.slurm.agent import AgentOptions, SlurmAgent
from optsched.integrations.slurm.client import SlurmClient
from optsched.integrations.slurm.reader import SlurmJob, parse_jobs

from slurm_helpers import sbatch

#: 12 jobs of mixed sizes and comments: fixed gangs (no comment) and jobs naming a catalogue model; 44 GPUs asked
TWELVE = [
    ("--gres=gpu:1",), ("--gres=gpu:2",), ("--gres=gpu:4",), ("--gpus-per-node=2", "-N2"), ("--gres=gpu:8",),
    ("--gres=gpu:2", '--comment={"model":"bert"}'), ("--gres=gpu:4", '--comment={"model":"vit","guaranteed":true}'),
    ("--gres=gpu:1", '--comment={"model":"roberta"}'),
    ("--gres=gpu:4", "--account=team-a", '--comment={"model":"gpt2","priority":1}'), ("--gres=gpu:8",),
    ("--gres=gpu:4", "--constraint=rack2"),
    ("--gres=gpu:2", "-N1", '--comment={"model":"t5","plan_fixed":true,"requested_plan":{"dp":2}}'),
]


def agent_for(cluster, method: str = "heuristic") -> SlurmAgent:
    return SlurmAgent(SlurmClient(slurm_conf=str(cluster.conf)), AgentOptions(method=method, time_limit=5.0))


def squeue(cluster) -> dict[str, SlurmJob]:
    out = subprocess.run(["squeue", "--json"], env=cluster.env, capture_output=True, text=True, check=True).stdout
    return {j.job_id: j for j in parse_jobs(json.loads(out))}


def placed(entry) -> dict[str, int]:
    return {n: int(s["gpus"]) for n, s in (entry.get("placement") or {}).items() if int(s["gpus"]) > 0}


def check_against_decision(agent: SlurmAgent, cluster, decision) -> dict[str, SlurmJob]:
    """Every job the decision runs is RUNNING where it put it (per node when the placement puts the same GPUs on
    each node; else on its nodes with its GPUs in all: Slurm splits ``--gpus``); every other job is not running."""
    runs = {e["job"]: placed(e) for e in decision["jobs"] if e["action"] in ("start", "keep", "reconfigure", "trim")}
    assert agent.wait_running(set(runs), timeout_s=25) < 25
    jobs = squeue(cluster)
    running = {j for j, job in jobs.items() if job.running}
    assert running == set(runs), "running jobs differ from the decision's (nothing else may start)"
    for job_id, want in runs.items():
        got = dict(zip(jobs[job_id].nodes, jobs[job_id].gpus_per_node))
        if len(set(want.values())) == 1:
            assert got == want, f"job {job_id}"
        else:
            assert set(got) == set(want) and sum(got.values()) == sum(want.values()), f"job {job_id}"
    return jobs


def test_twelve_held_jobs_run_where_the_decisions_put_them_and_a_drained_node_is_emptied(clean_slurm):
    ids = [sbatch(clean_slurm, *args) for args in TWELVE]
    agent = agent_for(clean_slurm)
    first = agent.run_once()
    assert sorted(j["name"] for j in first.round["jobs"]) == sorted(ids) and not first.left_out
    actions = {e["action"] for e in first.decision["jobs"]}
    assert "start" in actions and "wait" in actions  # 44 GPUs asked of 32
    jobs = check_against_decision(agent, clean_slurm, first.decision)
    for entry in first.decision["jobs"]:
        if entry["action"] == "wait":  # held, the reason in the comment next to the user's JSON
            job = jobs[entry["job"]]
            assert job.held and "optsched_wait" in json.loads(job.comment)
    # a second round on what Slurm now reports
    second = agent.run_once()
    assert {a["job"] for a in second.round["running"]} == {j for j, job in jobs.items() if job.running}
    jobs = check_against_decision(agent, clean_slurm, second.decision)
    # drain the node that holds the most GPUs; the next round places nothing there and empties it
    load: dict[str, int] = {}
    for job in jobs.values():
        for n, g in zip(job.nodes, job.gpus_per_node):
            load[n] = load.get(n, 0) + g
    node = max(sorted(load), key=load.get)
    subprocess.run(["scontrol", "update", f"NodeName={node}", "State=DRAIN", "Reason=test"], env=clean_slurm.env,
                   check=True)
    third = agent.run_once()
    assert [n.get("state") for n in third.round["cluster"]["nodes"] if n["name"] == node] == ["draining"]
    assert all(node not in placed(e) for e in third.decision["jobs"])
    jobs = check_against_decision(agent, clean_slurm, third.decision)
    assert all(node not in job.nodes for job in jobs.values() if job.running)
    moved = {e["job"]: e["action"] for e in third.decision["jobs"] if e["action"] in ("reconfigure", "preempt")}
    assert moved, f"the jobs on {node} were neither moved nor preempted"


def test_a_preempted_job_is_requeued_and_held(clean_slurm):
    gangs = [sbatch(clean_slurm, "--gres=gpu:8") for _ in range(4)]
    agent = agent_for(clean_slurm)
    check_against_decision(agent, clean_slurm, agent.run_once().decision)
    urgent = sbatch(clean_slurm, "--gres=gpu:8", '--comment={"priority":1}')  # never waits for a lower priority
    report = agent.run_once()
    preempted = [e["job"] for e in report.decision["jobs"] if e["action"] == "preempt"]
    assert len(preempted) == 1 and preempted[0] in gangs
    assert [a.applied for a in report.actions if a.job == preempted[0]] == [True]
    jobs = check_against_decision(agent, clean_slurm, report.decision)
    assert jobs[urgent].running
    victim = jobs[preempted[0]]
    assert victim.held and victim.restart_count == 1


def test_a_job_that_vanished_between_read_and_apply_is_skipped_and_logged(clean_slurm, caplog):
    keep, gone = sbatch(clean_slurm, "--gres=gpu:2"), sbatch(clean_slurm, "--gres=gpu:2")
    agent = agent_for(clean_slurm)
    build = agent.build(agent.read())
    decision = agent.solve(build).to_dict()
    assert {e["job"]: e["action"] for e in decision["jobs"]} == {keep: "start", gone: "start"}
    subprocess.run(["scancel", gone], env=clean_slurm.env, check=True)
    with caplog.at_level(logging.WARNING, logger="optsched.integrations.slurm"):
        records = {r.job: r for r in agent.apply(decision)}
    assert records[keep].applied and not records[gone].applied
    assert records[gone].detail.startswith("vanished between read and apply")  # (now CANCELLED): listed, gone
    assert f"start of job {gone} skipped: job {gone} vanished between read and apply" in caplog.text
    assert agent.wait_running({keep}, timeout_s=20) < 20


def test_an_update_slurm_rejects_is_logged_and_the_round_goes_on(clean_slurm, caplog):
    stuck = sbatch(clean_slurm, "--gres=gpu:8", "--no-requeue")  # Slurm refuses to requeue it
    other, third = sbatch(clean_slurm, "--gres=gpu:4"), sbatch(clean_slurm, "--gres=gpu:4")
    agent = agent_for(clean_slurm)
    agent.apply({"jobs": [{"job": stuck, "action": "start", "placement": {"n1": {"gpus": 8}}, "plan": {"dp": 8}}]})
    assert agent.wait_running({stuck}, timeout_s=20) < 20
    decision = {"jobs": [{"job": stuck, "action": "preempt", "placement": {}},
                         {"job": other, "action": "start", "placement": {"n2": {"gpus": 4}}, "plan": {"dp": 4}},
                         {"job": third, "action": "start", "placement": {"n1": {"gpus": 4}}, "plan": {"dp": 4}}]}
    with caplog.at_level(logging.ERROR, logger="optsched.integrations.slurm"):
        records = {r.job: r for r in agent.apply(decision)}
    assert not records[stuck].applied and "Requested operation is presently disabled" in records[stuck].detail
    assert f"preempt of job {stuck} rejected" in caplog.text
    assert records[other].applied
    # the job that could not be requeued keeps n1's 8 GPUs: the start that counted on them is not applied
    assert not records[third].applied and records[third].detail == "does not fit now: n1 (0 free, 4 asked)"
    assert agent.wait_running({stuck, other}, timeout_s=20) < 20


def test_slurm_down_is_one_error_line_and_exit_code_2(slurm, tmp_path, capsys):
    conf = tmp_path / "slurm.conf"  # the same cluster, its controller on a port nothing listens on
    conf.write_text(re.sub(r"SlurmctldPort=\d+", "SlurmctldPort=9", slurm.conf.read_text()))
    assert main(["slurm-agent", "--once", "--slurm-conf", str(conf)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optsched: error: slurm: sinfo --json failed:") and err.count("\n") == 1
    assert "Traceback" not in err


def test_dry_run_prints_the_round_and_the_decision_and_applies_nothing(clean_slurm, capsys):
    ids = {sbatch(clean_slurm, "--gres=gpu:2"), sbatch(clean_slurm, "--gres=gpu:4", '--comment={"model":"bert"}')}
    assert main(["slurm-agent", "--once", "--dry-run", "--slurm-conf", str(clean_slurm.conf)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {j["name"] for j in printed["round"]["jobs"]} == ids
    assert {e["job"]: e["action"] for e in printed["decision"]["jobs"]} == {i: "start" for i in ids}
    jobs = squeue(clean_slurm)
    assert all(jobs[i].held for i in ids)
