"""Slurm's client commands (``sinfo``, ``squeue``, ``scontrol``), found the way Slurm's own clients are: on
``PATH``, configured by ``SLURM_CONF`` (or Slurm's default path). Every call is logged with its latency
(logger ``optsched.integrations.slurm.client``, DEBUG; updates at INFO)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Mapping

from optsched.core.errors import OptschedError

log = logging.getLogger(__name__)

#: seconds one client command may take before the agent gives up on it
COMMAND_TIMEOUT_S = 30.0


class SlurmUnavailable(OptschedError):
    """Slurm cannot be reached: a client command is missing, fails to contact the controller or times out."""


class SlurmRejected(OptschedError):
    """Slurm refused one update (its message), e.g. an unknown job or node."""


@dataclass(frozen=True)
class SlurmClient:
    """Runs Slurm's commands; ``slurm_conf`` (else ``$SLURM_CONF``, else Slurm's default) and ``bin_dir``
    (else ``PATH``) say which Slurm."""

    slurm_conf: str | None = None
    bin_dir: str | None = None
    timeout_s: float = COMMAND_TIMEOUT_S

    def _env(self) -> Mapping[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        return env

    def _exe(self, name: str) -> str:
        path = shutil.which(name, path=self.bin_dir) if self.bin_dir else shutil.which(name)
        if path is None:
            raise SlurmUnavailable(f"slurm: the client command {name!r} is not on "
                                   f"{'--slurm-bin ' + self.bin_dir if self.bin_dir else 'PATH'} (install "
                                   "slurm-client, or put Slurm's bin directory on PATH)")
        return path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run one command; its result whatever the exit code (the caller decides), logged with its latency."""
        argv = [self._exe(args[0]), *args[1:]]
        start = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=self._env(), timeout=self.timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise SlurmUnavailable(f"slurm: {' '.join(args)} did not answer within {self.timeout_s:g} s") from None
        log.debug("slurm: %s -> %d in %.1f ms", " ".join(args), proc.returncode, 1000 * (time.perf_counter() - start))
        return proc

    def read_json(self, *args: str) -> dict[str, Any]:
        """The JSON a read command prints (``sinfo --json``, ``squeue --json``); :class:`SlurmUnavailable` when
        it fails (controller down) or prints something else."""
        proc = self.run(*args, "--json")
        if proc.returncode != 0:
            first = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[0]
            raise SlurmUnavailable(f"slurm: {args[0]} --json failed: {first}")
        try:
            data = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise SlurmUnavailable(f"slurm: {args[0]} --json printed no JSON ({exc.msg}); Slurm 21.08 or later "
                                   "is needed") from None
        errors = data.get("errors") or []
        if errors:  # 22.05 exits 0 with {"errors": [...]} when the controller cannot be reached
            said = "; ".join(str(e.get("error", e)) if isinstance(e, dict) else str(e) for e in errors)
            first = (proc.stderr.strip().splitlines() or [""])[-1]
            lead = f"{first}: " if first else ""
            raise SlurmUnavailable(f"slurm: {args[0]} --json failed: {lead}{said} (is slurmctld "
                                   f"up? SLURM_CONF={self._env().get('SLURM_CONF', '(Slurm default)')})")
        return data

    def nodes_json(self) -> dict[str, Any]:
        """``sinfo --json`` (the reads the agent makes; :class:`~.rest.SlurmRestReader` has the same two)."""
        return self.read_json("sinfo")

    def jobs_json(self) -> dict[str, Any]:
        """``squeue --json``."""
        return self.read_json("squeue")

    def scontrol(self, *args: str) -> float:
        """Run ``scontrol ARGS``; its latency in seconds, or :class:`SlurmRejected` with Slurm's message."""
        start = time.perf_counter()
        proc = self.run("scontrol", *args)
        took = time.perf_counter() - start
        if proc.returncode != 0:
            msg = (proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}").splitlines()[0]
            raise SlurmRejected(f"slurm: scontrol {' '.join(args)}: {msg}")
        return took
