"""What one read of Slurm costs through the client commands and through slurmrestd (issue 28, the slurmrestd mode).

    python benchmarks/slurm_reads.py [--nodes 4] [--jobs 32] [--reads 20]

A throw-away local Slurm taking JWTs (:class:`optsched.integrations.slurm.local.LocalSlurm` with ``jwt=True``;
needs root, Debian's slurm packages, ``slurmrestd`` and ``slurm-wlm-jwt-plugin``), slurmrestd run as ``nobody``
on a loopback port, ``--jobs`` held jobs of 1, 2, 4 or 8 GPUs in turn. Then ``--reads`` reads of each kind, wall
milliseconds each: ``sinfo --json`` and ``squeue --json`` (:class:`~optsched.integrations.slurm.client.SlurmClient`,
one process each) against ``GET /slurm/v0.0.38/nodes`` and ``/jobs``
(:class:`~optsched.integrations.slurm.rest.SlurmRestReader`, one HTTP request each). Prints median, min and max.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from optsched.integrations.slurm.client import SlurmClient
from optsched.integrations.slurm.local import LocalSlurm
from optsched.integrations.slurm.rest import SlurmRestReader


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--jobs", type=int, default=32)
    p.add_argument("--reads", type=int, default=20)
    args = p.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="osb-"))
    cluster = LocalSlurm(directory, nodes=args.nodes, jwt=True).start()
    try:
        rest = SlurmRestReader(cluster.start_slurmrestd("nobody"), cluster.token("nobody"))
        cli = SlurmClient(slurm_conf=str(cluster.conf))
        for k in range(args.jobs):
            subprocess.run(["sbatch", "--hold", "--parsable", f"--output={directory}/job-%j.out",
                            f"--gres=gpu:{1 << (k % 4)}", "--wrap", "sleep 600"], env=cluster.env,
                           capture_output=True, check=True)
        print(f"| source | read | median ms | min ms | max ms |  ({args.nodes} nodes, {args.jobs} held jobs, "
              f"{args.reads} reads each)")
        print("|---|---|---|---|---|")
        for name, reader in (("CLI", cli), ("slurmrestd", rest)):
            for what, label in (("nodes_json", "nodes"), ("jobs_json", "jobs")):
                took = []
                for _ in range(args.reads):
                    start = time.perf_counter()
                    getattr(reader, what)()
                    took.append(1000 * (time.perf_counter() - start))
                print(f"| {name} | {label} | {statistics.median(took):.1f} | {min(took):.1f} | {max(took):.1f} |")
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
