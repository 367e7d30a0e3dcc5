"""A real Slurm for the tests of this directory (issue 28): :class:`~optsched.integrations.slurm.local.LocalSlurm`
started once per session in a temporary directory (munged, slurmctld, 4 slurmd of 8 fake GPUs on loopback ports),
stopped by PID at the end, taking JWTs where slurmrestd and the auth/jwt plugin are installed (``slurmrestd``: one
slurmrestd for the session). Tests that need it skip with one line where Slurm is not installed or cannot start."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from optsched.integrations.slurm.local import LocalSlurm, LocalSlurmError, jwt_missing, missing_binaries

#: node features of the test cluster: two racks
FEATURES = {"n1": "rack1", "n2": "rack1", "n3": "rack2", "n4": "rack2"}


@pytest.fixture(scope="session")
def slurm() -> Iterator[LocalSlurm]:
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm not installed ({', '.join(missing)} missing): Slurm tests skipped")
    if os.geteuid() != 0:
        pytest.skip("Slurm tests need root (fake GPUs by mknod, SlurmUser=root): skipped")
    directory = Path(tempfile.mkdtemp(prefix="optsched-slurm-"))  # short: munge's socket path has a length limit
    try:
        cluster = LocalSlurm(directory, features=FEATURES, jwt=jwt_missing() is None).start()
    except LocalSlurmError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        pytest.skip(f"Slurm cannot start here: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def clean_slurm(slurm: LocalSlurm) -> LocalSlurm:
    """The session's Slurm with no job and every node back in service."""
    slurm.cancel_all()
    for name in slurm.node_names():
        subprocess.run(["scontrol", "update", f"NodeName={name}", "State=RESUME"], env=slurm.env,
                       capture_output=True, check=False)
    slurm.wait_idle()
    return slurm


@pytest.fixture(scope="session")
def slurmrestd(slurm: LocalSlurm) -> tuple[str, str]:
    """slurmrestd of the session's Slurm, run as ``nobody``: its URL and a JWT for ``nobody``."""
    if not slurm.jwt:
        pytest.skip(f"slurmrestd tests skipped: {jwt_missing()}")
    try:
        return slurm.start_slurmrestd("nobody"), slurm.token("nobody")
    except (LocalSlurmError, KeyError) as exc:
        pytest.skip(f"slurmrestd cannot start here: {exc}")
