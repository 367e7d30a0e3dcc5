"""What one Slurm agent round costs (issue 28, "Must show": per-round latency, read, solve, apply, until RUNNING,
for 32 jobs on 4 and 16 nodes).

    python benchmarks/slurm_round.py [--nodes 4 16] [--jobs 32] [--repeats 3] [--method heuristic]

Per node count: a throw-away local Slurm (:class:`optsched.integrations.slurm.local.LocalSlurm`: munged,
slurmctld and one slurmd per node of 8 fake GPUs, on this machine; needs root and Debian's slurm packages) and,
per repeat, ``--jobs`` held jobs (``sbatch --hold --wrap 'sleep 600'``) of 1, 2, 4 or 8 GPUs in turn, every
third naming a catalogue model in its JSON comment (bert, vit, roberta, t5), the others fixed gangs. Then two
agent rounds (``SlurmAgent.run_once``, the method with ``--time-limit``): round 1 starts from every job held,
round 2 re-reads what round 1 left. Per round, wall seconds of: **read** (``sinfo --json`` + ``squeue --json``
+ building the round), **solve** (``optsched.solve``), **apply** (the re-read and every ``scontrol`` call),
**until RUNNING** (after apply, until ``squeue`` shows every job the round started RUNNING, polled every
0.05 s), and the number of actions applied. Medians over the repeats (the jobs are cancelled between
repeats). Prints one row per (nodes, round).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from optsched.integrations.slurm.agent import AgentOptions, SlurmAgent
from optsched.integrations.slurm.client import SlurmClient
from optsched.integrations.slurm.local import LocalSlurm

MODELS = ("bert", "vit", "roberta", "t5")
SIZES = (1, 2, 4, 8)


def submit(cluster: LocalSlurm, jobs: int) -> None:
    for k in range(jobs):
        args = ["sbatch", "--hold", "--parsable", f"--output={cluster.directory}/job-%j.out",
                f"--gres=gpu:{SIZES[k % len(SIZES)]}"]
        if k % 3 == 0:
            args.append(f'--comment={{"model":"{MODELS[(k // 3) % len(MODELS)]}"}}')
        subprocess.run([*args, "--wrap", "sleep 600"], env=cluster.env, capture_output=True, check=True)


def one_round(agent: SlurmAgent) -> dict[str, float]:
    report = agent.run_once()
    started = {a.job for a in report.actions if a.applied and a.action in ("start", "reconfigure", "release")}
    until = agent.wait_running(started, timeout_s=60) if started else 0.0
    return {"read": report.read_s, "solve": report.solve_s, "apply": report.apply_s, "until_running": until,
            "actions": float(sum(a.applied for a in report.actions)), "started": float(len(started))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--jobs", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--method", default="heuristic")
    ap.add_argument("--time-limit", type=float, default=10.0)
    args = ap.parse_args()
    print("nodes | GPUs | jobs | round | read s | solve s | apply s | until RUNNING s | actions | started")
    for nodes in args.nodes:
        directory = Path(tempfile.mkdtemp(prefix="optsched-slurm-bench-"))
        cluster = LocalSlurm(directory, nodes=nodes).start(timeout=60)
        try:
            agent = SlurmAgent(SlurmClient(slurm_conf=str(cluster.conf)),
                               AgentOptions(method=args.method, time_limit=args.time_limit))
            rows: dict[int, list[dict[str, float]]] = {1: [], 2: []}
            for _ in range(args.repeats):
                cluster.cancel_all()
                submit(cluster, args.jobs)
                rows[1].append(one_round(agent))
                rows[2].append(one_round(agent))
            for rnd, runs in rows.items():
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                print(f"{nodes} | {8 * nodes} | {args.jobs} | {rnd} | {med['read']:.3f} | {med['solve']:.3f} | "
                      f"{med['apply']:.3f} | {med['until_running']:.2f} | {med['actions']:.0f} | {med['started']:.0f}")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
