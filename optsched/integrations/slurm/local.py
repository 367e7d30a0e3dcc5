"""A throw-away Slurm on this machine, in one directory, for tests and measurements (issue 28).

Debian's slurm-wlm 22.05 is built with ``MULTIPLE_SLURMD``: several slurmd daemons on one host, one per node
(``slurmd -N nK``), each on its own loopback port. :class:`LocalSlurm` writes into ``directory``: a munge key and
socket (``munged`` run with its own key, socket, pid and log files), ``slurm.conf`` (controller and node ports
chosen free, ``SlurmdParameters=config_overrides`` so a node may declare more CPUs than the host has,
``SchedulerParameters=batch_sched_delay=0`` so a released job starts within about a second, ``MinJobAge=2`` so
finished jobs leave ``squeue`` soon), ``gres.conf`` (``AutoDetect=off``; the fake GPUs are character devices
``mknod dev/gpuK c 1 3``: Slurm refuses plain files), and the state, spool and log directories. It starts
munged, slurmctld and one slurmd per node, waits until every node is idle, and :meth:`stop` cancels every job
and stops the daemons by the PIDs in their pid files. Needs root (mknod, SlurmUser=root).

With ``jwt=True`` the controller also takes JWTs (``AuthAltTypes=auth/jwt``, a key file ``jwt.key``):
:meth:`token` gives one (``scontrol token``) and :meth:`start_slurmrestd` runs slurmrestd on a free loopback
port as a non-root user (slurmrestd refuses root and SlurmUser), ``SLURM_JWT=daemon``, ``-a rest_auth/jwt -s
openapi/v0.0.38`` (no slurmdbd here: the default plugin set would fail on its dbv0.0.38 part).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from optsched.core.errors import OptschedError

BINARIES = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch", "scancel")


class LocalSlurmError(OptschedError):
    """The local Slurm cannot be started (why, in one line)."""


def missing_binaries() -> list[str]:
    """The Slurm and munge commands not found on PATH (munged, slurmctld and slurmd are in /usr/sbin)."""
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    return [b for b in BINARIES if shutil.which(b, path=path) is None]


#: where Slurm's plugin directory holds auth/jwt (Debian's multiarch directory, then the upstream defaults)
JWT_PLUGIN_GLOBS = ("/usr/lib/*/slurm-wlm/auth_jwt.so", "/usr/lib*/slurm/auth_jwt.so",
                    "/usr/local/lib*/slurm/auth_jwt.so")


def jwt_missing() -> str | None:
    """Why the local Slurm cannot serve slurmrestd with JWTs here (None: it can): slurmrestd or the auth/jwt
    plugin (Debian's ``slurm-wlm-jwt-plugin``) missing."""
    path = os.environ.get("PATH", "") + os.pathsep + "/usr/sbin" + os.pathsep + "/sbin"
    if shutil.which("slurmrestd", path=path) is None:
        return "slurmrestd not installed"
    if not any(glob.glob(p) for p in JWT_PLUGIN_GLOBS):
        return "Slurm's auth/jwt plugin (auth_jwt.so) not installed"
    return None


def _free_ports(n: int) -> list[int]:
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


@dataclass
class LocalSlurm:
    """``nodes`` nodes ``n1``.. of ``gpus`` fake GPUs (GRES type ``gpu_type``), ``cpus`` CPUs and ``memory_mib``
    each, in ``directory`` (module docstring). ``env``: what a client needs (``SLURM_CONF``, ``PATH``)."""

    directory: Path
    nodes: int = 4
    gpus: int = 8
    gpu_type: str = "a100"
    cpus: int = 64
    memory_mib: int = 256000
    features: dict[str, str] = field(default_factory=dict)
    jwt: bool = False
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.directory / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["SLURM_CONF"] = str(self.conf)
        return env

    def node_names(self) -> list[str]:
        return [f"n{k}" for k in range(1, self.nodes + 1)]

    def _write(self) -> None:
        d = self.directory
        for sub in ("state", "spool", "log", "dev", "munge"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d / "munge", 0o700)
        key = d / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        for k in range(self.gpus):
            dev = d / "dev" / f"gpu{k}"
            if not dev.exists():
                os.mknod(dev, 0o666 | 0o020000, os.makedev(1, 3))
        ctld, *node_ports = _free_ports(1 + self.nodes)
        host = socket.gethostname().split(".")[0]
        lines = [
            "ClusterName=optsched", f"SlurmctldHost={host}(127.0.0.1)", f"SlurmctldPort={ctld}",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d}/munge/munge.sock",
            "SlurmUser=root", "SlurmdUser=root", f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd.%n.log",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "MpiDefault=none", "ReturnToService=2",
            "SchedulerType=sched/backfill", "SchedulerParameters=batch_sched_delay=0", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", "GresTypes=gpu", "SlurmdParameters=config_overrides",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "MinJobAge=2", "SlurmctldTimeout=30", "SlurmdTimeout=30",
            "KillWait=1", "MessageTimeout=5",
        ]
        for name, port in zip(self.node_names(), node_ports):
            feats = self.features.get(name, "")
            lines.append(f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={port} CPUs={self.cpus} "
                         f"RealMemory={self.memory_mib} Gres=gpu:{self.gpu_type}:{self.gpus}"
                         + (f" Feature={feats}" if feats else "") + " State=UNKNOWN")
        lines.append("PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        if self.jwt:  # tokens for slurmrestd (``scontrol token``); munge stays the daemons' own authentication
            jwt_key = d / "jwt.key"
            jwt_key.write_bytes(os.urandom(32))
            os.chmod(jwt_key, 0o600)
            lines += ["AuthAltTypes=auth/jwt", f"AuthAltParameters=jwt_key={jwt_key}"]
        self.conf.write_text("\n".join(lines) + "\n")
        (d / "gres.conf").write_text(f"AutoDetect=off\nNodeName=n[1-{self.nodes}] Name=gpu Type={self.gpu_type} "
                                     f"File={d}/dev/gpu[0-{self.gpus - 1}]\n")

    def token(self, user: str = "nobody", lifespan_s: int = 3600) -> str:
        """A JWT for ``user`` (``scontrol token``; needs ``jwt=True``)."""
        proc = subprocess.run(["scontrol", "token", f"username={user}", f"lifespan={lifespan_s}"], env=self.env,
                              capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0 or "=" not in proc.stdout:
            msg = (proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}").splitlines()[-1]
            raise LocalSlurmError(f"local slurm: scontrol token failed: {msg}")
        return proc.stdout.strip().split("=", 1)[1]

    def start_slurmrestd(self, user: str = "nobody", timeout: float = 10.0) -> str:
        """Run slurmrestd as ``user`` on a free loopback port (module docstring); its URL once it answers."""
        if not self.jwt:
            raise LocalSlurmError("local slurm: slurmrestd needs jwt=True")
        port = _free_ports(1)[0]
        account = pwd.getpwnam(user)
        os.chmod(self.directory, 0o755)  # slurmrestd, as ``user``, reads slurm.conf (the keys stay private)
        exe = shutil.which("slurmrestd", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or "slurmrestd"
        log = open(self.directory / "log" / "slurmrestd.log", "wb")
        proc = subprocess.Popen([exe, "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38", f"127.0.0.1:{port}"],
                                env=dict(self.env, SLURM_JWT="daemon"), stdout=log, stderr=subprocess.STDOUT,
                                user=account.pw_uid, group=account.pw_gid, start_new_session=True)
        log.close()
        self.pids["slurmrestd"] = proc.pid
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if proc.poll() is not None:
                self.pids.pop("slurmrestd", None)
                tail = (self.directory / "log" / "slurmrestd.log").read_text(errors="replace").strip().splitlines()
                raise LocalSlurmError(f"local slurm: slurmrestd exited ({proc.returncode}): "
                                      f"{tail[-1] if tail else 'no output'}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.02)
        self._kill(["slurmrestd"])
        raise LocalSlurmError(f"local slurm: slurmrestd not listening after {timeout:g} s")

    def _run(self, *argv: str) -> None:
        proc = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            msg = (proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}").splitlines()[-1]
            raise LocalSlurmError(f"local slurm: {' '.join(argv[:2])} failed: {msg}")

    def _pid(self, path: Path, timeout: float = 5.0) -> int:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                text = path.read_text().strip()
                if text:
                    return int(text)
            except (FileNotFoundError, ValueError):
                pass
            time.sleep(0.02)
        raise LocalSlurmError(f"local slurm: no pid file {path} after {timeout:g} s")

    def start(self, timeout: float = 20.0) -> "LocalSlurm":
        """Write the configuration, start munged, slurmctld and the slurmd's, wait until every node is idle."""
        missing = missing_binaries()
        if missing:
            raise LocalSlurmError(f"local slurm: not installed ({', '.join(missing)} missing)")
        if os.geteuid() != 0:
            raise LocalSlurmError("local slurm: needs root (mknod of fake GPUs, SlurmUser=root)")
        self._write()
        d = self.directory

        def sbin(name: str) -> str:
            return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin") or name

        try:
            self._run(sbin("munged"), f"--key-file={d}/munge/munge.key", f"--socket={d}/munge/munge.sock",
                      f"--pid-file={d}/munge/munged.pid", f"--log-file={d}/munge/munged.log",
                      f"--seed-file={d}/munge/seed", "-f")
            self.pids["munged"] = self._pid(d / "munge" / "munged.pid")
            self._run(sbin("slurmctld"), "-i")
            self.pids["slurmctld"] = self._pid(d / "slurmctld.pid")
            for name in self.node_names():
                self._run(sbin("slurmd"), "-N", name)
                self.pids[f"slurmd.{name}"] = self._pid(d / f"slurmd.{name}.pid")
            self.wait_idle(timeout)
        except Exception:
            self.stop()
            raise
        return self

    def wait_idle(self, timeout: float = 20.0) -> None:
        """Until ``sinfo`` reports every node idle; :class:`LocalSlurmError` naming the log otherwise."""
        end = time.monotonic() + timeout
        last = ""
        while time.monotonic() < end:
            proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True,
                                  timeout=10, check=False)
            last = proc.stdout.strip() or proc.stderr.strip()
            states = [line.split()[1] for line in proc.stdout.splitlines() if len(line.split()) == 2]
            if proc.returncode == 0 and len(states) == self.nodes and all(s == "idle" for s in states):
                return
            time.sleep(0.1)
        raise LocalSlurmError(f"local slurm: nodes not idle after {timeout:g} s ({last!r}); logs in "
                              f"{self.directory / 'log'}")

    def cancel_all(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait until ``squeue`` lists none."""
        proc = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True,
                              timeout=10, check=False)
        ids = proc.stdout.split() if proc.returncode == 0 else []
        if ids:
            subprocess.run(["scancel", *ids], env=self.env, capture_output=True, timeout=10, check=False)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            proc = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True, text=True,
                                  timeout=10, check=False)
            if proc.returncode != 0 or not proc.stdout.strip():
                return
            time.sleep(0.1)

    def stop_controller(self) -> None:
        """Stop slurmctld only (a test of "Slurm down")."""
        self._kill(["slurmctld"])

    @staticmethod
    def _alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
        except (FileNotFoundError, IndexError):
            return False

    def _kill(self, names: list[str]) -> None:
        """SIGTERM to each named daemon at once, SIGKILL to those still there after 5 s."""
        pids = [self.pids.pop(n) for n in names if n in self.pids]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5
        while time.monotonic() < end and any(self._alive(p) for p in pids):
            time.sleep(0.02)
        for pid in pids:
            if self._alive(pid):
                os.kill(pid, signal.SIGKILL)
            try:  # reap a child of ours (slurmrestd); the daemons are not
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def stop(self) -> None:
        """Cancel every job, then stop slurmrestd, the slurmd's, slurmctld and munged by their PIDs."""
        if "slurmctld" in self.pids:
            self.cancel_all()
        self._kill(["slurmrestd"])
        self._kill([n for n in self.pids if n.startswith("slurmd.")] + ["slurmctld"])
        self._kill(["munged"])
