"""``optsched slurm-agent``: drive a Slurm cluster (:mod:`optsched.integrations.slurm.agent`; ``docs/integration.md``,
"Slurm"). Every ``--interval`` seconds (or once, ``--once``) it reads Slurm's nodes and jobs, solves the Rubick
round with ``--method`` within ``--time-limit`` and applies the decision (``--dry-run``: prints the round and the
decision, applies nothing). Slurm is found as its own clients find it: ``SLURM_CONF`` (or ``--slurm-conf``) and
the client commands on ``PATH``."""

from __future__ import annotations

import argparse
import json
import logging
import time

from optsched.cli.common import out
from optsched.core.errors import ValidationError
from optsched.integrations.slurm.agent import AgentOptions, SlurmAgent
from optsched.integrations.slurm.client import SlurmClient, SlurmUnavailable
from optsched.integrations.slurm.reader import ReadOptions
from optsched.integrations.slurm.rest import SlurmRestReader

log = logging.getLogger("optsched.cli")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched slurm-agent``."""
    p.description = ("Read Slurm's nodes and jobs (sinfo/squeue --json), solve a Rubick round and apply the decision "
                     "with scontrol: jobs are submitted held (sbatch --hold) and the agent owns their starts. "
                     "docs/integration.md, 'Slurm'.")
    p.add_argument("--interval", type=float, default=60.0, metavar="S",
                   help="seconds between rounds (60); also the round's round_interval_s, the unit of the penalties of "
                        "restart_seconds and checkpoint ages (with --once: the period cron runs the agent at)")
    p.add_argument("--once", action="store_true", help="run one round and exit (cron-style)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the round and the decision as JSON, apply nothing")
    p.add_argument("--method", default="heuristic", help="the rubick method that solves each round (heuristic)")
    p.add_argument("--time-limit", type=float, default=10.0, metavar="S", help="seconds per solve (10)")
    p.add_argument("--seed", type=int, default=0, help="solver seed (0)")
    p.add_argument("--slurm-conf", default=None, metavar="PATH", help="slurm.conf (default: $SLURM_CONF, Slurm's own)")
    p.add_argument("--slurmrestd", default=None, metavar="URL",
                   help="read nodes and jobs from slurmrestd at URL (e.g. http://127.0.0.1:6820; OpenAPI v0.0.38) "
                        "with the JWT in $SLURM_JWT; decisions are still applied with scontrol")
    p.add_argument("--slurmrestd-user", default=None, metavar="NAME",
                   help="the X-SLURM-USER-NAME header (default: the user the JWT names)")
    p.add_argument("--guaranteed-qos", action="append", default=[], metavar="QOS",
                   help="a QOS whose jobs are guaranteed (repeatable); a job's comment overrides")
    p.add_argument("--guaranteed-partition", action="append", default=[], metavar="PARTITION",
                   help="a partition whose jobs are guaranteed (repeatable); a job's comment overrides")
    p.add_argument("--restart-seconds", type=float, default=None, metavar="S",
                   help="seconds a start, reconfiguration or resume costs a job whose comment gives no restart_seconds "
                        "(default: none, the round's dimensionless penalties)")
    p.add_argument("--gpu-type", action="append", default=[], metavar="GRES=TYPE",
                   help="a GRES type (or node feature) -> catalogue GPU type, e.g. h100=A800 (repeatable)")


def _gpu_types(items: list[str]) -> dict[str, str]:
    out_: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise ValidationError(f"--gpu-type {item!r}: expected GRES=TYPE, e.g. h100=A800")
        out_[key] = value
    return out_


def run(args: argparse.Namespace) -> int:
    """One round (``--once``) or rounds every ``--interval`` seconds until interrupted."""
    if not args.interval > 0:
        raise ValidationError(f"--interval must be positive, got {args.interval:g}")
    if not args.time_limit > 0:
        raise ValidationError(f"--time-limit must be positive, got {args.time_limit:g}")
    read = ReadOptions(guaranteed_qos=frozenset(args.guaranteed_qos),
                       guaranteed_partitions=frozenset(args.guaranteed_partition), gpu_types=_gpu_types(args.gpu_type),
                       restart_seconds=args.restart_seconds, round_interval_s=args.interval)
    if args.slurmrestd_user and not args.slurmrestd:
        raise ValidationError("--slurmrestd-user needs --slurmrestd URL")
    rest = SlurmRestReader.from_env(args.slurmrestd, args.slurmrestd_user) if args.slurmrestd else None
    agent = SlurmAgent(SlurmClient(slurm_conf=args.slurm_conf),
                       AgentOptions(method=args.method, time_limit=args.time_limit, seed=args.seed, read=read),
                       reader=rest)
    while True:
        started = time.monotonic()
        try:
            report = agent.run_once(dry_run=args.dry_run)
        except SlurmUnavailable as exc:
            if args.once:
                raise
            log.error("%s; next try in %g s", exc, args.interval)
        else:
            if args.dry_run:
                out(json.dumps({"round": report.round, "decision": report.decision,
                                "left_out": [{"job": j, "why": w} for j, w in report.left_out]}, indent=1))
            else:
                out(json.dumps(report.summary()))
        if args.once:
            return 0
        try:
            time.sleep(max(0.0, args.interval - (time.monotonic() - started)))
        except KeyboardInterrupt:
            return 0
