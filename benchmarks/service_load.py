"""The solve service under concurrency (issue 26, item 3): a bounded load test over loopback.

    python benchmarks/service_load.py [--clients 1,2,4,8,16] [--workers 2] [--limit 2] [--seconds 15]
                                      [--requests 12] [--hang-ups 2] [--seed 0]

Starts ``optsched serve --workers 2`` (this checkout's code, in a child process, on a free 127.0.0.1 port) and
generates three Rubick rounds (``round_kind('rubick').generate``, seed ``--seed``): small (8 nodes, 40 jobs),
medium (16 nodes, 200 jobs) and large (80 nodes, 1,000 jobs; exact needs more than 2 s on it). Then, for each
number of clients C, C threads each send requests back to back (one HTTP/1.1 connection per request, stdlib
``http.client``), cycling through the six (round, method) pairs of the three rounds and the methods ``exact`` and
``heuristic`` (client i starts at pair i), each with ``time_limit`` ``--limit``, until the client has sent
``--requests`` or ``--seconds`` have passed since the level started (a request in flight then finishes; its
latency is bounded by the service's rules: a request is solved within its limit or refused with 503 once it has
waited half of it). Then the hang-up scenario: ``--hang-ups`` clients each send the large round with ``exact``
and a 20 s limit and close their connection unanswered after 1 s; 0.5 s later one client sends the small round
with ``exact`` and limit ``--limit`` (before the fix of issue 26 it waited for the abandoned solves).

Columns (one row per level, the last row the hang-up scenario):

* ``scenario``: ``load`` (C clients) or ``after N hang-ups`` (the one normal request after N abandoned solves);
* ``clients``: concurrent clients C (1 for the hang-up row: only the normal request is measured);
* ``requests``: requests answered (any HTTP status) in the level;
* ``p50_s``, ``p95_s``: median and 95th percentile of the latency, seconds from sending the request to having
  read the whole answer (nearest-rank percentiles);
* ``http_200``, ``http_503``, ``http_other``: answers per HTTP status (``other``: any other status, or a
  connection error);
* ``optimal``, ``feasible``, ``partial``, ``heuristic``, ``fallback``: the decision statuses among the 200s
  (``fallback``: ``heuristic-fallback``);
* ``empty_partial``: 200s whose decision is ``partial`` with objective 0 or with no job placed (the answer the
  issue says must never come back; a request that cannot be solved in time is a 503);
* ``max_queued_s``: the largest ``queued_seconds`` (the wait for a solver thread) reported by a 200 or a 503.

Writes ``benchmarks/out/service_load.csv``. The default run takes about two minutes (five levels of at most
``--seconds`` plus the time limit, the hang-up scenario and start-up); the server's and the clients' threads share
the machine, so latencies include the clients' own work.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from optsched.core.kinds import round_kind  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

ROOT = Path(__file__).resolve().parent.parent
#: (name, nodes, jobs) of the generated Rubick rounds (module docstring)
ROUNDS = (("small", 8, 40), ("medium", 16, 200), ("large", 80, 1000))
METHODS = ("exact", "heuristic")
#: decision statuses, as columns
STATUSES = ("optimal", "feasible", "partial", "heuristic", "heuristic-fallback")
HEADER = ("scenario", "clients", "requests", "p50_s", "p95_s", "http_200", "http_503", "http_other", "optimal",
          "feasible", "partial", "heuristic", "fallback", "empty_partial", "max_queued_s")
#: seconds of the abandoned solves' limit in the hang-up scenario, and when their clients hang up
HANG_UP_LIMIT_S, HANG_UP_AFTER_S = 20.0, 1.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``optsched serve`` of this checkout in a child process on a free loopback port."""

    def __init__(self, workers: int) -> None:
        self.port = free_port()
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen([sys.executable, "-m", "optsched.cli", "serve", "--port", str(self.port),
                                      "--workers", str(workers)], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for _ in range(600):
            if self.proc.poll() is not None:
                raise RuntimeError(f"optsched serve exited: {self.proc.stderr.read().decode()}")  # type: ignore
            try:
                status, _, _ = request(self.port, "GET", "/health", None, timeout=1.0)
                if status == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("optsched serve did not answer /health within 60 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def request(port: int, method: str, path: str, body: bytes | None, timeout: float = 120.0
            ) -> tuple[int, Any, float]:
    """(HTTP status, the JSON answer, latency in seconds) of one request on a new connection."""
    started = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        answer = conn.getresponse()
        data = answer.read()
    finally:
        conn.close()
    return answer.status, json.loads(data) if data else None, time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (nan when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def empty_partial(decision: dict[str, Any]) -> bool:
    """A ``partial`` decision with objective 0 or no job placed (module docstring)."""
    if decision.get("status") != "partial":
        return False
    placed = any(j.get("placement") for j in decision.get("jobs", []))
    return decision.get("objective") == 0 or not placed


def row(scenario: str, clients: int, results: list[tuple[int, Any, float]]) -> list[object]:
    """The table row of ``results`` ((HTTP status, answer, latency) per request; status 0: no answer)."""
    http_counts = Counter(s for s, _, _ in results)
    oks = [a for s, a, _ in results if s == 200 and isinstance(a, dict)]
    statuses = Counter(a.get("status") for a in oks)
    queued = [a["queued_seconds"] for s, a, _ in results if isinstance(a, dict) and "queued_seconds" in a]
    latencies = [t for _, _, t in results]
    other = len(results) - http_counts[200] - http_counts[503]
    return [scenario, clients, len(results), f"{percentile(latencies, 50):.2f}", f"{percentile(latencies, 95):.2f}",
            http_counts[200], http_counts[503], other, *(statuses[s] for s in STATUSES),
            sum(empty_partial(a) for a in oks), f"{max(queued):.2f}" if queued else "-"]


def pairs(bodies: dict[str, bytes], limit: float) -> list[tuple[str, bytes]]:
    """The (path, body) of every (round, method) pair (module docstring)."""
    return [(f"/solve?method={m}&time_limit={limit:g}", bodies[name]) for name, _, _ in ROUNDS for m in METHODS]


def load_level(port: int, clients: int, work: list[tuple[str, bytes]], seconds: float, per_client: int
               ) -> list[tuple[int, Any, float]]:
    """``clients`` threads sending ``work`` back to back (module docstring); every answer."""
    results: list[tuple[int, Any, float]] = []
    lock = threading.Lock()
    ends = time.perf_counter() + seconds

    def client(i: int) -> None:
        for k in range(per_client):
            if time.perf_counter() >= ends:
                return
            path, body = work[(i + k) % len(work)]
            started = time.perf_counter()
            try:
                answer = request(port, "POST", path, body)
            except OSError:
                answer = (0, None, time.perf_counter() - started)
            with lock:
                results.append(answer)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def hang_up(port: int, body: bytes) -> None:
    """Send ``body`` for an exact solve of :data:`HANG_UP_LIMIT_S` and close the connection unanswered after
    :data:`HANG_UP_AFTER_S`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"POST /solve?method=exact&time_limit={HANG_UP_LIMIT_S:g} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        time.sleep(HANG_UP_AFTER_S)


def hang_up_scenario(port: int, hang_ups: int, heavy: bytes, small: bytes, limit: float
                     ) -> list[tuple[int, Any, float]]:
    """``hang_ups`` abandoned solves, then one normal request (module docstring): its answer."""
    threads = [threading.Thread(target=hang_up, args=(port, heavy)) for _ in range(hang_ups)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.5)
    return [request(port, "POST", f"/solve?method=exact&time_limit={limit:g}", small)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,2,4,8,16", help="comma-separated numbers of concurrent clients")
    ap.add_argument("--workers", type=int, default=2, help="optsched serve --workers")
    ap.add_argument("--limit", type=float, default=2.0, help="time_limit of every request, seconds")
    ap.add_argument("--seconds", type=float, default=15.0, help="seconds each level keeps sending")
    ap.add_argument("--requests", type=int, default=12, help="most requests per client and level")
    ap.add_argument("--hang-ups", type=int, default=2, help="abandoned solves of the hang-up scenario")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    gen = round_kind("rubick").generate
    bodies = {name: json.dumps(gen(seed=args.seed, nodes=n, jobs=j).to_dict()).encode() for name, n, j in ROUNDS}
    heavy = json.dumps(gen(seed=args.seed, nodes=240, jobs=3000).to_dict()).encode()  # exact needs ~18 s
    work = pairs(bodies, args.limit)
    server = Server(args.workers)
    rows: list[list[object]] = []
    try:
        for clients in levels:
            rows.append(row("load", clients, load_level(server.port, clients, work, args.seconds, args.requests)))
        rows.append(row(f"after {args.hang_ups} hang-ups", 1,
                        hang_up_scenario(server.port, args.hang_ups, heavy, bodies["small"], args.limit)))
    finally:
        server.stop()
    sys.stdout.write(f"\noptsched serve --workers {args.workers}; time_limit {args.limit:g} s; rounds "
                     + ", ".join(f"{name} {n} nodes/{j} jobs" for name, n, j in ROUNDS)
                     + f"; methods {', '.join(METHODS)}\n")
    path = emit(HEADER, rows, "service_load.csv")
    sys.stdout.write(f"written to {path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
