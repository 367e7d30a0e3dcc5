"""Time and restarts read from Slurm (``reader.run_seconds``, ``reader.checkpoint_age``, ``ReadOptions``'s
``restart_seconds`` and ``round_interval_s``) on the captured ``data/squeue.json`` (no Slurm needed). The captured
read is at ``NOW`` = 1795704400; jobs 5 and 6 run since their last start 1795704359, so each has run 41 s. Expected
values traced by hand: penalties by ``docs/rounds.md``, "Weights and penalties in seconds" (R = restart_seconds /
round_interval_s, A = checkpoint_age_s / round_interval_s, preemption R + A; default reconfig 0.05, preempt 0.25)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optsched.cli import main
from optsched.core.errors import ValidationError
from optsched.core.round import RoundProblem
from optsched.core.skip import JobError
from optsched.integrations.slurm.comment import parse_comment
from optsched.integrations.slurm.reader import ReadOptions, Snapshot, build_round, parse_jobs, parse_nodes

DATA = Path(__file__).parent / "data"
NOW = 1795704400.0
START = 1795704359  # jobs 5 and 6: Slurm's start_time, reset at each start after a requeue


def snapshot(comments: dict[str, str] | None = None, **job5: int) -> Snapshot:
    """The captured read, with job comments replaced and job 5's fields overridden."""
    squeue = json.loads((DATA / "squeue.json").read_text())
    for raw in squeue["jobs"]:
        jid = str(raw["job_id"])
        if comments and jid in comments:
            raw["comment"] = comments[jid]
        if jid == "5":
            raw.update(job5)
    return Snapshot(NOW, parse_nodes(json.loads((DATA / "sinfo.json").read_text())), parse_jobs(squeue))


def built(snap: Snapshot, **options) -> tuple[dict, dict, dict]:
    rnd = build_round(snap, ReadOptions(**options)).round
    return rnd, {j["name"]: j for j in rnd["jobs"]}, {a["job"]: a for a in rnd["running"]}


def test_since_is_the_last_start_and_no_seconds_field_by_default():
    rnd, jobs, running = built(snapshot())
    assert running["5"]["since"] == running["6"]["since"] == float(START)
    assert not any("restart_seconds" in j or "checkpoint_age_s" in j for j in jobs.values())
    assert "round_interval_s" not in rnd
    penalties = RoundProblem.from_dict(rnd).penalties("5")
    assert (penalties.reconfig, penalties.preempt) == (0.05, 0.25)  # the round's dimensionless penalties


def test_restart_seconds_from_the_comment_else_the_agent_option():
    snap = snapshot({"6": '{"model":"gpt2","restart_seconds":30}'})
    rnd, jobs, _ = built(snap, restart_seconds=78, round_interval_s=300)
    assert rnd["round_interval_s"] == 300.0
    assert [jobs[j]["restart_seconds"] for j in ("6", "5", "1")] == [30, 78.0, 78.0]
    problem = RoundProblem.from_dict(rnd)
    # job 5: R = 78/300 = 0.26; no checkpoint age: A = 0.25 - 0.05 = 0.20; preemption 0.46
    assert problem.penalties("5").reconfig == pytest.approx(0.26)
    assert problem.penalties("5").preempt == pytest.approx(0.46)
    assert problem.penalties("6").reconfig == pytest.approx(0.1)  # 30/300


def test_checkpoint_age_from_the_time_since_the_last_start():
    snap = snapshot({"5": '{"checkpoints":false}', "6": '{"model":"gpt2","checkpoint_interval_s":30}',
                     "1": '{"model":"bert","checkpoints":false}'})
    rnd, jobs, _ = built(snap, restart_seconds=78, round_interval_s=300)
    assert jobs["5"]["checkpoint_age_s"] == 41.0  # never checkpoints: all 41 s since its last start are lost
    assert jobs["6"]["checkpoint_age_s"] == 11.0  # checkpoints every 30 s: 41 mod 30
    assert "checkpoint_age_s" not in jobs["1"]  # queued: a preemption loses nothing
    assert not any(k in j for j in jobs.values() for k in ("checkpoints", "checkpoint_interval_s"))
    problem = RoundProblem.from_dict(rnd)
    assert problem.penalties("5").preempt == pytest.approx((78 + 41) / 300)
    assert problem.penalties("6").preempt == pytest.approx((78 + 11) / 300)


def test_a_stated_checkpoint_age_is_taken_as_is_for_a_running_job():
    _, jobs, _ = built(snapshot({"5": '{"checkpoint_age_s":7}'}), round_interval_s=60)
    assert jobs["5"]["checkpoint_age_s"] == 7.0


def test_run_time_after_a_suspension_is_slurms_elapsed_time():
    # started at START, ran 20 s, suspended, resumed at NOW - 10: it has run 30 s since its last start
    _, jobs, running = built(snapshot({"5": '{"checkpoints":false}'}, suspend_time=int(NOW) - 10, pre_sus_time=20),
                             round_interval_s=60)
    assert jobs["5"]["checkpoint_age_s"] == 30.0 and running["5"]["since"] == float(START)


def test_seconds_fields_without_a_round_interval_are_refused_naming_the_option():
    with pytest.raises(ValidationError, match=r"job\(s\) 5 give restart_seconds.*--interval"):
        build_round(snapshot({"5": '{"checkpoints":false}'}))
    with pytest.raises(ValidationError, match="--interval"):
        build_round(snapshot(), ReadOptions(restart_seconds=10))


@pytest.mark.parametrize("kwargs, match", [({"restart_seconds": -1}, r"restart_seconds \(--restart-seconds\)"),
                                           ({"round_interval_s": 0}, r"round_interval_s \(--interval\) must be > 0"),
                                           ({"restart_seconds": float("inf")}, "finite")])
def test_read_options_refuse_bad_seconds(kwargs, match):
    with pytest.raises(ValidationError, match=match):
        ReadOptions(**kwargs)


def test_cli_refuses_a_negative_restart_cost_before_reading_slurm(capsys):
    assert main(["slurm-agent", "--once", "--restart-seconds", "-5", "--slurm-conf", "/nonexistent"]) == 2
    assert "restart_seconds (--restart-seconds) must be a finite number >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("comment, field, rule", [
    ('{"checkpoints": "no"}', "checkpoints", "must be true or false"),
    ('{"checkpoint_interval_s": 0}', "checkpoint_interval_s", "must be > 0"),
    ('{"checkpoints": false, "checkpoint_age_s": 3}', "checkpoints", "conflicts with checkpoint_age_s"),
    ('{"checkpoints": false, "checkpoint_interval_s": 60}', "checkpoint_interval_s", "conflicts with"),
])
def test_checkpoint_comment_errors_name_the_job_and_the_field(comment, field, rule):
    with pytest.raises(JobError, match=rf"^job 9: comment field '{field}' {rule}"):
        parse_comment("9", comment)
