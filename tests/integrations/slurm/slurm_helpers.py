"""Helpers of the Slurm tests (a module of its own: ``conftest`` is not importable by name from a test)."""

from __future__ import annotations

import subprocess

from optsched.integrations.slurm.local import LocalSlurm


def sbatch(cluster: LocalSlurm, *args: str) -> str:
    """Submit ``sbatch --hold --parsable ARGS --wrap 'sleep 300'`` (its output in the cluster's directory); the job
    id."""
    out = f"--output={cluster.directory}/job-%j.out"
    proc = subprocess.run(["sbatch", "--hold", "--parsable", out, *args, "--wrap", "sleep 300"], env=cluster.env,
                          capture_output=True, text=True, check=True)
    return proc.stdout.strip().split(";")[0]
