"""The solve service (``optsched serve``, :mod:`optsched.service`): a real server on a free loopback port,
started and stopped by the tests, asked with a real HTTP client (``urllib.request``)."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest
from helpers import chosen_row_is_given, own_coefficients_round, without_solve_time

import optsched
from optsched.cli import main
from optsched.core.decision import Decision
from optsched.core.errors import ValidationError
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.schemas import load_schema
from optsched.service import ServiceConfig, parse_solve_request

pytest.importorskip("starlette", reason="the service needs the 'serve' extra (starlette)")
pytest.importorskip("uvicorn", reason="the service needs the 'serve' extra (uvicorn)")

#: body cap of the test server (MiB), small enough to test the 413 answer
MAX_BODY_MB = 1


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _serving(*args: str, verbose: bool = False) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``optsched [-v] serve *args`` in a child process on a free loopback port, once it answers ``/health``: (its
    URL, the process), stopped after."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "optsched.cli", *(["-v"] if verbose else []), "serve", "--port",
                             str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if proc.poll() is not None:
                raise RuntimeError(f"optsched serve exited: {proc.stderr.read().decode()}")  # type: ignore[union-attr]
            try:
                with urllib.request.urlopen(url + "/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.1)
        else:
            raise RuntimeError("optsched serve did not answer /health within 30 s")
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """``optsched serve`` shared by the module's tests."""
    with _serving("--max-body-mb", str(MAX_BODY_MB), "--max-time-limit", "60", "--workers", "2") as (url, _):
        yield url


def _call(url: str, body: Any = None, *, raw: bytes | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _cli_error(tmp_path: Path, text: str, *args: str, capsys: Any) -> str:
    path = tmp_path / "round.json"
    path.write_text(text, encoding="utf-8")
    assert main(["solve", str(path), *args]) == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_health_and_schemas(server: str) -> None:
    status, health = _call(server + "/health")
    assert status == 200 and health["status"] == "ok" and health["workers"] == 2
    assert health["methods"]["rubick"] == list(methods_of("rubick"))
    assert _call(server + "/schemas")[1] == {"schemas": ["/schemas/decision", "/schemas/round", "/schemas/perf-params"]}
    for name in ("round", "round.schema.json", "perf-params"):
        status, schema = _call(f"{server}/schemas/{name}")
        assert status == 200 and schema["$schema"].startswith("https://json-schema.org/")
    status, err = _call(server + "/schemas/plan")
    assert status == 404 and err["error"].startswith("optsched: error: unknown schema 'plan'")


@pytest.mark.parametrize("method", methods_of("rubick"))
def test_own_coefficients_round_through_the_service(server: str, method: str) -> None:
    """Must show (issue 16): the round with custom models and its own coefficient table, through the
    service, with every method; the chosen configurations are given rows, and the answer equals
    ``optsched.solve`` in-process."""
    data = own_coefficients_round()
    status, decision = _call(f"{server}/solve?method={method}&time_limit=10", data)
    assert status == 200, decision
    chosen_row_is_given(data, decision)
    local = optsched.solve(optsched.RoundProblem.from_dict(data), method, 10.0)
    assert without_solve_time(Decision.from_dict(decision)) == without_solve_time(local)


def test_envelope_options_and_their_conflicts(server: str) -> None:
    data = own_coefficients_round()
    status, d = _call(server + "/solve", {"round": data, "method": "sia", "time_limit": 5, "seed": 1})
    assert status == 200 and d["method"] == "sia"
    status, err = _call(server + "/solve?method=fifo", {"round": data, "method": "sia"})
    assert status == 400 and err["error"] == ("optsched: error: option 'method' given both in the query and in "
                                              "the body; give it once")
    status, err = _call(server + "/solve?time_limit=600", data)
    assert status == 400 and "exceeds this server's cap of 60 s" in err["error"]
    status, err = _call(server + "/solve", {"round": data, "seed": "one"})
    assert status == 400 and err["error"] == "optsched: error: option 'seed': expected int, got 'one'"


def test_bad_input_gets_400_with_the_clis_line(server: str, tmp_path: Path, capsys: Any) -> None:
    bad_json = '{"kind": "rubick", "cluster": "a800-8x8",'
    status, err = _call(server + "/solve", raw=bad_json.encode())
    assert status == 400
    cli = _cli_error(tmp_path, bad_json, capsys=capsys)
    assert err["error"] == cli.replace(str(tmp_path / "round.json"), "request body")
    data = own_coefficients_round()
    data["coefficients"]["embed-1b"][0]["throughput"] = -1
    status, err = _call(server + "/solve", data)
    assert status == 400
    assert err["error"] == _cli_error(tmp_path, json.dumps(data), capsys=capsys)
    status, err = _call(server + "/solve?method=nope", own_coefficients_round())
    assert status == 400 and err["error"] == _cli_error(tmp_path, json.dumps(own_coefficients_round()), "--method",
                                                        "nope", capsys=capsys)


def test_infeasible_round_is_422_and_oversized_body_413(server: str) -> None:
    # two guaranteed jobs each needing the node's 8 GPUs, no quotas: both admitted, one fits
    data = {"kind": "rubick", "cluster": own_coefficients_round()["cluster"],
            "jobs": [{"name": n, "model": "bert", "requested_gpus": 8, "total_iterations": 10, "guaranteed": True}
                     for n in ("a", "b")]}
    data["cluster"]["nodes"] = data["cluster"]["nodes"][:1]
    status, err = _call(server + "/solve?method=heuristic", data)
    assert status == 422 and "cannot reach its performance guarantee" in err["error"]
    # refused on its Content-Length, before the body is read (the headers alone are sent)
    host, port = server.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/solve")
    conn.putheader("Content-Length", str(MAX_BODY_MB * 2 ** 20 + 1))
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 413 and "exceeds this server's cap" in json.loads(response.read())["error"]
    conn.close()


def test_time_limit_holds_and_concurrent_requests_do_not_mix(server: str) -> None:
    rounds = [generate_rubick_round(8, 8, 40, seed=s).to_dict() for s in range(4)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(lambda r: _call(server + "/solve?method=heuristic", r), rounds))
    for r, (status, d) in zip(rounds, answers):
        assert status == 200
        local = optsched.solve(optsched.RoundProblem.from_dict(r), "heuristic")
        assert without_solve_time(Decision.from_dict(d)) == without_solve_time(local)
    big = generate_rubick_round(24, 8, 100, seed=0).to_dict()
    started = time.perf_counter()
    status, d = _call(server + "/solve?method=exact&time_limit=0.5", big)
    assert status == 200 and d["solve_seconds"] <= 0.5 + 1.5  # the margin of tests/policies/test_time_limit.py
    assert time.perf_counter() - started < 0.5 + 5.0


def test_parse_solve_request_rules() -> None:
    config = ServiceConfig(max_time_limit=10)
    data, options = parse_solve_request(b'{"kind": "rubick"}', {"time_limit": "2.5", "defer_unreachable": "true"},
                                        config)
    assert data == {"kind": "rubick"} and options == {"time_limit": 2.5, "defer_unreachable": True}
    with pytest.raises(ValidationError, match="request body: expected a JSON object"):
        parse_solve_request(b"[1]", {}, config)
    with pytest.raises(ValidationError, match=r"request body: unknown field\(s\) extra; an envelope holds round"):
        parse_solve_request(b'{"round": {}, "extra": 1}', {}, config)
    with pytest.raises(ValidationError, match="option 'defer_unreachable': expected bool, got 'maybe'"):
        parse_solve_request(b'{"kind": "rubick"}', {"defer_unreachable": "maybe"}, config)
    with pytest.raises(ValidationError, match="max_body_bytes must be a positive integer"):
        ServiceConfig(max_body_bytes=0)


def test_partitions_and_seeds_out_of_range_are_400(server: str, tmp_path: Path, capsys: Any) -> None:
    """A partition count above the round's nodes is refused before anything is allocated (it used to grow the
    server until the OOM killer stopped it); seeds CP-SAT or numpy cannot take are refused, not a 500."""
    data = own_coefficients_round()
    nodes = len(data["cluster"]["nodes"])
    for query, rule in ((f"partitions={nodes + 1}", "partitions must be at most the round's number of nodes"),
                        ("partitions=99999999999999999999", "partitions must be at most the round's number of nodes"),
                        ("seed=99999999999999999999", "seed must be an integer in [0, 2**31)"),
                        ("seed=-1&partitions=2", "seed must be an integer in [0, 2**31)")):
        status, err = _call(f"{server}/solve?method=heuristic&{query}", data)
        assert status == 400 and rule in err["error"], (query, err)
        args = [a for kv in query.split("&") for a in (f"--{kv.split('=')[0]}", kv.split("=")[1])]
        assert rule in _cli_error(tmp_path, json.dumps(data), "--method", "heuristic", *args, capsys=capsys)
    status, _ = _call(f"{server}/health")
    assert status == 200


def test_on_invalid_job_skip_through_the_service(server: str) -> None:
    """One bad job does not sink the round: with ``on_invalid_job=skip`` (query or envelope) the job is in
    the decision's ``skipped`` list and the rest is solved; without it the round is a 400 naming the job;
    a round's own field wins over the option."""
    data = generate_rubick_round(2, 8, 6, 1).to_dict()
    data["jobs"].append({**{k: v for k, v in data["jobs"][1].items() if k != "completed_iterations"},
                         "name": "too-big", "requested_gpus": 64})
    status, err = _call(server + "/solve?method=heuristic", data)
    assert status == 400 and "'too-big'" in err["error"] and "no GPU type" in err["error"]
    for status, d in (_call(server + "/solve?method=heuristic&on_invalid_job=skip", data),
                      _call(server + "/solve", {"round": data, "method": "fifo", "on_invalid_job": "skip"})):
        assert status == 200, d
        assert [s["job"] for s in d["skipped"]] == ["too-big"] and "no GPU type" in d["skipped"][0]["reason"]
        assert "too-big" not in {j["job"] for j in d["jobs"]} and len(d["jobs"]) == 6
    status, err = _call(server + "/solve?on_invalid_job=skip", {**data, "on_invalid_job": "error"})
    assert status == 400 and "'too-big'" in err["error"]
    status, err = _call(server + "/solve?on_invalid_job=sometimes", data)
    assert status == 400 and "on_invalid_job" in err["error"]


def test_a_draining_node_through_the_service_and_the_cli(server: str, tmp_path: Path, capsys: Any) -> None:
    """Draining is a normal round: a generated round whose busiest node drains is answered by the service
    and by ``optsched solve`` with no job left on that node (moved: ``reconfigure``, or ``preempt``)."""
    data = generate_rubick_round(4, 8, 12, 2).to_dict()
    busy = max(data["cluster"]["nodes"], key=lambda n: sum(a["placement"].get(n["name"], {}).get("gpus", 0)
                                                              for a in data["running"]))["name"]
    on_it = {a["job"] for a in data["running"] if a["placement"].get(busy, {}).get("gpus", 0) > 0}
    assert on_it
    for node in data["cluster"]["nodes"]:
        if node["name"] == busy:
            node["state"] = "draining"
    path = tmp_path / "drain.json"
    path.write_text(json.dumps(data))
    from optsched.cli import main
    assert main(["solve", str(path), "--time-limit", "10", "--defer-unreachable"]) == 0
    from_cli = json.loads(capsys.readouterr().out)
    status, from_service = _call(server + "/solve?defer_unreachable=true&time_limit=10", data)
    assert status == 200, from_service
    for d in (from_cli, from_service):
        assert all(busy not in (j["placement"] or {}) for j in d["jobs"])
        assert {j["action"] for j in d["jobs"] if j["job"] in on_it} <= {"reconfigure", "preempt"}


def test_deeply_nested_json_is_400_naming_the_rule(server: str) -> None:
    """100,000 nested arrays used to overflow the JSON parser's recursion (HTTP 500 with a RecursionError)."""
    for raw in ("[" * 100_000 + "]" * 100_000, '{"round": ' + "[" * 100_000 + "]" * 100_000 + "}"):
        status, err = _call(server + "/solve", raw=raw.encode())
        assert status == 400 and err["error"].startswith("optsched: error: request body: JSON nested too deeply")


def test_a_repeated_query_parameter_is_400_naming_it(server: str) -> None:
    """``?method=fifo&method=sia`` used to keep the last value silently."""
    status, err = _call(server + "/solve?method=fifo&time_limit=5&method=sia", own_coefficients_round())
    assert status == 400 and err["error"] == ("optsched: error: query: parameter 'method' given 2 times; give it "
                                              "once")
    with pytest.raises(ValidationError, match="query: parameter 'seed' given 2 times; give it once"):
        parse_solve_request(b'{"kind": "rubick"}', [("seed", "1"), ("seed", "2")], ServiceConfig())


def test_serve_on_a_busy_port_is_one_line_before_listening() -> None:
    """``optsched serve`` on a port already in use used to print "listening" and then exit 3 with uvicorn's
    message; now the port is bound first and the error is the CLI's one line (exit 2)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "optsched.cli", "serve", "--port", str(port)],
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "listening" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"optsched: error: cannot listen on 127.0.0.1:{port} (address already in use); pick another "
        "port or stop what uses it"]


def test_a_request_that_cannot_start_in_time_is_503_and_waiting_is_reported() -> None:
    """One worker busy with an exact solve of a 2,000-job round (1.4-2.7 s: it is proven optimal within its 4 s limit):
    a 1 s request sent 0.3 s into it waits past half its limit and gets 503 with Retry-After; a 10 s request waits
    until the busy solve ends, runs, and its 200 reports the wait in X-Optsched-Queued-Seconds."""
    import threading

    with _serving("--workers", "1") as (url, _):
        busy = generate_rubick_round(160, 8, 2000, 0).to_dict()
        small = generate_rubick_round(2, 8, 4, 0).to_dict()
        ended: list[float] = []

        def busy_call() -> None:
            _call(url + "/solve?method=exact&time_limit=4", busy)
            ended.append(time.perf_counter())

        first = threading.Thread(target=busy_call)
        first.start()
        time.sleep(0.3)
        req = urllib.request.Request(url + "/solve?method=heuristic&time_limit=1", data=json.dumps(small).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as late:
            urllib.request.urlopen(req, timeout=60)
        assert late.value.code == 503 and int(late.value.headers["Retry-After"]) >= 1
        assert "waited" in json.loads(late.value.read())["error"]
        first.join()
        second = threading.Thread(target=busy_call)
        second.start()
        time.sleep(0.3)
        req = urllib.request.Request(url + "/solve?method=heuristic&time_limit=10", data=json.dumps(small).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
        sent = time.perf_counter()
        with urllib.request.urlopen(req, timeout=60) as r:
            queued = float(r.headers["X-Optsched-Queued-Seconds"])
            assert r.status == 200
        second.join()
        assert queued >= 0.3 and abs(queued - (ended[-1] - sent)) <= 0.5, (queued, ended[-1] - sent)


def _hang_up_mid_request(url: str, path: str, body: Any, after: float) -> None:
    """POST ``body`` to ``path`` over a raw socket and close the connection ``after`` seconds later, unanswered."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
        time.sleep(after)


def test_a_solve_whose_client_hangs_up_is_cancelled() -> None:
    """Issue 26: a client that hung up on a 20 s exact solve used to keep the only worker for 20 s, so that a later
    2 s request waited and came back 503 (or an empty ``partial``). The solve is cancelled within a moment of the
    hang-up: the later request answers 200 with a real decision within a few seconds."""
    busy = generate_rubick_round(240, 8, 3000, 0).to_dict()  # exact needs about 18 s on it
    small = generate_rubick_round(2, 8, 4, 0).to_dict()
    with _serving("--workers", "1", verbose=True) as (url, proc):
        _hang_up_mid_request(url, "/solve?method=exact&time_limit=20", busy, after=1.5)
        started = time.perf_counter()
        status, d = _call(url + "/solve?method=exact&time_limit=2", small)
        took = time.perf_counter() - started
    assert status == 200 and d["status"] in ("optimal", "feasible"), (status, d.get("status"), d.get("error"))
    assert took < 8.0, took
    log = proc.stderr.read().decode()  # type: ignore[union-attr]
    assert "disconnected" in log and "Traceback" not in log, log


def test_queued_seconds_is_in_the_body_of_a_200_and_of_a_503() -> None:
    """Issue 26: "time spent waiting counts against the request's limit and is reported (``queued_seconds``)". A 200
    used to report it only in a header; the decision now carries it at its top level (beside ``solve_seconds``,
    valid against the decision schema and read back by ``Decision.from_dict``), and a 503 in its body."""
    from schema_check import check

    busy = generate_rubick_round(160, 8, 2000, 0).to_dict()
    small = generate_rubick_round(2, 8, 4, 0).to_dict()
    with _serving("--workers", "1") as (url, _):
        status, d = _call(url + "/solve?method=heuristic&time_limit=5", small)
        assert status == 200 and 0.0 <= d["queued_seconds"] < 1.0 and "solve_seconds" in d
        schema = load_schema("decision")
        assert check(d, schema, schema) == []
        Decision.from_dict(d)
        with concurrent.futures.ThreadPoolExecutor(3) as pool:  # both small requests wait for the busy one
            pool.submit(_call, url + "/solve?method=exact&time_limit=3", busy)
            time.sleep(1.0)
            late = pool.submit(_call, url + "/solve?method=heuristic&time_limit=1", small)
            time.sleep(0.2)
            waited = pool.submit(_call, url + "/solve?method=heuristic&time_limit=8", small)
            (status, late_body), (status_waited, waited_body) = late.result(), waited.result()
    assert status == 503 and late_body["queued_seconds"] >= 0.5 and "waited" in late_body["error"]
    assert status_waited == 200 and waited_body["queued_seconds"] >= 0.5, waited_body.get("queued_seconds")
