"""The local Slurm of the tests (:mod:`optsched.integrations.slurm.local`): 4 nodes of 8 fake GPUs that run a
released job where it was asked to run."""

from __future__ import annotations

import json
import subprocess
import time

from optsched.integrations.slurm.local import missing_binaries

from slurm_helpers import sbatch


def test_missing_binaries_names_each_missing_command(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr("shutil.which", lambda name, path=None: None)
    assert missing_binaries() == ["munged", "slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch", "scancel"]


def test_local_slurm_has_four_idle_nodes_of_eight_gpus(clean_slurm):
    nodes = json.loads(subprocess.run(["sinfo", "--json"], env=clean_slurm.env, capture_output=True, text=True,
                                      check=True).stdout)["nodes"]
    assert sorted((n["name"], n["state"], n["gres"], n["features"]) for n in nodes) == [
        ("n1", "idle", "gpu:a100:8", "rack1"), ("n2", "idle", "gpu:a100:8", "rack1"),
        ("n3", "idle", "gpu:a100:8", "rack2"), ("n4", "idle", "gpu:a100:8", "rack2")]


def test_a_held_job_runs_where_it_is_released_to(clean_slurm):
    job = sbatch(clean_slurm, "--gres=gpu:3")
    env = clean_slurm.env
    subprocess.run(["scontrol", "update", f"JobId={job}", "ReqNodeList=n3"], env=env, check=True)
    subprocess.run(["scontrol", "release", job], env=env, check=True)
    end = time.monotonic() + 10
    while time.monotonic() < end:
        out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T %N %b"], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        if out and out[0] == "RUNNING":
            break
        time.sleep(0.1)
    assert out[:2] == ["RUNNING", "n3"]
