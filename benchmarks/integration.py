"""What a round costs an external scheduler: ``optsched solve`` as a command (a new process per round) vs a
request to ``optsched serve`` (issue 16, "Must show": CLI call vs service request for the same round,
median of 20).

    python benchmarks/integration.py [--repeats 20] [--methods heuristic exact]

Rounds: the self-contained round of ``docs/integration.md`` (custom models, own coefficients, 3 jobs) and
``gen-round`` rounds of 8x8 GPUs / 40 jobs and 24x8 GPUs / 100 jobs (seed 0). Per (round, method) the
median wall time over ``--repeats`` runs of: the command (``optsched solve ROUND --method M``, process
start to exit), a service request (``POST /solve`` with ``urllib.request`` on a warm local server, send to
answer), and ``optsched.solve`` in this process (parse + solve, the work both do). The service's
per-request overhead is its median minus the in-process one; the command's start-up is its median minus
the in-process one. Prints the table and writes ``benchmarks/out/integration.csv``. Needs the ``serve``
extra; starts and stops its server on a free loopback port.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import optsched  # noqa: E402
from optsched.rounds.rubick.generate import generate_rubick_round  # noqa: E402
from report import emit  # noqa: E402
from service_load import Server  # noqa: E402

from helpers import own_coefficients_round  # noqa: E402  (tests/helpers.py: the docs' worked example)


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        json.loads(r.read())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--methods", nargs="+", default=["heuristic", "exact"])
    args = ap.parse_args(argv)
    rounds = {"own-coefficients-3j": own_coefficients_round(),
              "8x8-40j": generate_rubick_round(8, 8, 40, seed=0).to_dict(),
              "24x8-100j": generate_rubick_round(24, 8, 100, seed=0).to_dict()}
    server = Server(workers=1)  # benchmarks/service_load.py: started once it answers /health
    base = f"http://127.0.0.1:{server.port}"
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for name, data in rounds.items():
                path = Path(tmp) / f"{name}.json"
                path.write_text(json.dumps(data), encoding="utf-8")
                body = json.dumps(data).encode()
                for method in args.methods:
                    cmd = [sys.executable, "-m", "optsched.cli", "solve", str(path), "--method", method,
                           "--out", str(Path(tmp) / "decision.json")]
                    subprocess.run(cmd, check=True)  # warm the file cache
                    cli = _median(lambda: subprocess.run(cmd, check=True), args.repeats)
                    url = f"{base}/solve?method={method}"
                    _post(url, body)
                    service = _median(lambda: _post(url, body), args.repeats)
                    local = _median(lambda: optsched.solve(optsched.RoundProblem.from_dict(data), method),
                                    args.repeats)
                    rows.append((name, method, args.repeats, f"{cli:.3f}", f"{service:.4f}", f"{local:.4f}",
                                 f"{service - local:.4f}", f"{cli - local:.3f}", f"{cli / service:.1f}"))
    finally:
        server.stop()
    emit(("round", "method", "repeats", "cli_median_s", "service_median_s", "in_process_median_s",
          "service_overhead_s", "cli_overhead_s", "cli_over_service"), rows, "integration.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
