"""Reading Slurm through slurmrestd (:mod:`optsched.integrations.slurm.rest`). Without Slurm: a local HTTP server
answers with responses captured from this machine's slurmrestd 22.05.8 (``data/slurmrestd_nodes.json``,
``data/slurmrestd_jobs.json``: 2 nodes n1, n2 of 8 GPUs; job 1 held, bert, 2 GPUs; job 2 a fixed gang of 4 GPUs
running on n1 since 1795705910 after one requeue, ``restart_cnt`` 1) and with slurmrestd's error shapes. Against
the session's real Slurm: slurmrestd run as ``nobody`` with a JWT reads exactly what ``sinfo``/``squeue`` read,
and an agent that reads through it and applies with scontrol starts the jobs its decision starts."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from optsched.cli import main
from optsched.core.errors import ValidationError
from optsched.integrations.slurm.agent import AgentOptions, SlurmAgent
from optsched.integrations.slurm.client import SlurmClient, SlurmUnavailable
from optsched.integrations.slurm.reader import ReadOptions, Snapshot, build_round, parse_jobs, parse_nodes
from optsched.integrations.slurm.rest import SlurmRestReader

from slurm_helpers import sbatch

DATA = Path(__file__).parent / "data"
#: a token of the shape ``scontrol token`` prints, for user ``nobody`` (signature not checked by the fake server)
TOKEN = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
         ".eyJleHAiOjE3OTU3MTA3MTcsImlhdCI6MTc5NTcwNzExNywic3VuIjoibm9ib2R5In0.sig")


class _Fake(BaseHTTPRequestHandler):
    """Answers ``GET /slurm/v0.0.38/{nodes,jobs}`` with the server's ``answers[path]`` (status, body)."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        headers = {k.lower(): v for k, v in self.headers.items()}
        self.server.seen.append((self.path, headers))  # type: ignore[attr-defined]
        status, body = self.server.answers.get(self.path, (404, b"{}"))  # type: ignore[attr-defined]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Fake)
    server.seen = []  # type: ignore[attr-defined]
    server.answers = {f"/slurm/v0.0.38/{e}": (200, (DATA / f"slurmrestd_{e}.json").read_bytes())  # type: ignore
                      for e in ("nodes", "jobs")}
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_the_rest_reader_sends_the_jwt_and_reads_the_captured_responses(fake):
    reader = SlurmRestReader(url(fake), TOKEN)
    nodes, jobs = parse_nodes(reader.nodes_json()), parse_jobs(reader.jobs_json())
    assert [(n.name, n.state, n.gpus, n.gres_type) for n in nodes] == [("n1", "ready", 8, "a100"),
                                                                       ("n2", "ready", 8, "a100")]
    by_id = {j.job_id: j for j in jobs}
    assert by_id["1"].held and by_id["1"].request.total == 2 and by_id["1"].comment == '{"model":"bert"}'
    assert (by_id["2"].state, by_id["2"].nodes, by_id["2"].gpus_per_node) == ("RUNNING", ("n1",), (4,))
    assert (by_id["2"].start_time, by_id["2"].restart_count) == (1795705910, 1)
    (path1, head1), (path2, _) = fake.seen
    assert (path1, path2) == ("/slurm/v0.0.38/nodes", "/slurm/v0.0.38/jobs")
    assert head1["x-slurm-user-token"] == TOKEN and head1["x-slurm-user-name"] == "nobody"  # the token's user
    SlurmRestReader(url(fake) + "/", TOKEN, user="alice").jobs_json()
    assert fake.seen[-1][0] == "/slurm/v0.0.38/jobs" and fake.seen[-1][1]["x-slurm-user-name"] == "alice"


def test_an_agent_reading_through_slurmrestd_builds_the_round_traced_by_hand(fake):
    agent = SlurmAgent(options=AgentOptions(read=ReadOptions(restart_seconds=60, round_interval_s=300)),
                       clock=lambda: 1795705930.0, reader=SlurmRestReader(url(fake), TOKEN))
    rnd = agent.build(agent.read()).round
    jobs = {j["name"]: j for j in rnd["jobs"]}
    assert set(jobs) == {"1", "2"} and jobs["1"]["model"] == "bert" and jobs["2"]["plan_fixed"] is True
    # job 2: 4 GPUs on n1, 8 CPUs a GPU (64 CPUs / 8 GPUs), since its last start (after the requeue)
    assert rnd["running"] == [{"job": "2", "plan": {"dp": 4}, "placement": {"n1": {"gpus": 4, "cpus": 32}},
                               "since": 1795705910.0}]
    assert jobs["2"]["restart_seconds"] == 60.0 and "checkpoint_age_s" not in jobs["2"]
    assert agent.solve(agent.build(agent.read())) is not None  # the round is valid


@pytest.mark.parametrize("status, body, match", [
    (500, b'{"meta": {}, "errors": [{"description": "Failed to authenticate", "error_number": 1007}]}',
     "HTTP 500: Failed to authenticate"),
    (200, b'{"meta": {}, "errors": [{"error": "Unable to contact slurm controller"}], "jobs": []}',
     "HTTP 200: Unable to contact slurm controller"),
    (401, b"Authentication failure", r"HTTP 401, no JSON \('Authentication failure'\)"),
])
def test_slurmrestd_errors_are_one_slurm_unavailable_with_its_message(fake, status, body, match):
    fake.answers["/slurm/v0.0.38/jobs"] = (status, body)
    with pytest.raises(SlurmUnavailable, match=rf"^slurm: slurmrestd GET http://127\.0\.0\.1:\d+/slurm/v0\.0\.38/jobs"
                                               rf".*{match}"):
        SlurmRestReader(url(fake), TOKEN).jobs_json()


def test_slurmrestd_not_listening_is_slurm_unavailable(fake):
    address = url(fake)
    fake.shutdown()
    fake.server_close()
    with pytest.raises(SlurmUnavailable, match="failed: .*is slurmrestd up"):
        SlurmRestReader(address, TOKEN, timeout_s=2).nodes_json()


def test_the_reader_refuses_a_missing_token_and_a_non_http_url(monkeypatch):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    with pytest.raises(ValidationError, match=r"no JWT: set SLURM_JWT \(export \$\(scontrol token\)\)"):
        SlurmRestReader.from_env("http://127.0.0.1:6820")
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    assert SlurmRestReader.from_env("http://127.0.0.1:6820").token == TOKEN
    with pytest.raises(ValidationError, match="unix sockets are not supported"):
        SlurmRestReader("unix:/run/slurmrestd.sock", TOKEN)
    with pytest.raises(ValidationError, match=r"names no user \(no 'sun' claim\): give --slurmrestd-user"):
        SlurmRestReader("http://127.0.0.1:6820", "not.a-jwt")
    assert SlurmRestReader("http://127.0.0.1:6820", "not.a-jwt", user="alice").user == "alice"


def test_cli_slurmrestd_without_a_token_is_one_error_line(monkeypatch, capsys):
    monkeypatch.delenv("SLURM_JWT", raising=False)
    assert main(["slurm-agent", "--once", "--slurmrestd", "http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("optsched: error: --slurmrestd: no JWT: set SLURM_JWT") and err.count("\n") == 1
    assert main(["slurm-agent", "--once", "--slurmrestd-user", "alice"]) == 2
    assert "--slurmrestd-user needs --slurmrestd URL" in capsys.readouterr().err


def test_cli_dry_run_reads_through_slurmrestd(fake, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JWT", TOKEN)
    assert main(["slurm-agent", "--once", "--dry-run", "--slurmrestd", url(fake)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {j["name"] for j in printed["round"]["jobs"]} == {"1", "2"}
    assert {p for p, _ in fake.seen} == {"/slurm/v0.0.38/nodes", "/slurm/v0.0.38/jobs"}


# -- against the session's real Slurm ------------------------------------------------------------------------------

def test_slurmrestd_reads_what_sinfo_and_squeue_read_and_the_agent_applies_with_scontrol(clean_slurm, slurmrestd):
    address, token = slurmrestd
    rest = SlurmRestReader(address, token)
    cli = SlurmClient(slurm_conf=str(clean_slurm.conf))
    ids = [sbatch(clean_slurm, "--gres=gpu:2"), sbatch(clean_slurm, "--gres=gpu:4", '--comment={"model":"bert"}')]
    agent = SlurmAgent(cli, AgentOptions(time_limit=5.0), reader=rest)
    report = agent.run_once()
    assert {e["job"]: e["action"] for e in report.decision["jobs"]} == {i: "start" for i in ids}
    assert all(a.applied for a in report.actions)
    assert agent.wait_running(set(ids), timeout_s=20) < 20
    # one running, one held job more: both reads parse to the same nodes and jobs, and the same round
    held = sbatch(clean_slurm, "--gres=gpu:1")
    nodes, jobs = parse_nodes(rest.nodes_json()), parse_jobs(rest.jobs_json())
    assert nodes == parse_nodes(cli.nodes_json()) and jobs == parse_jobs(cli.jobs_json())
    assert {j.job_id for j in jobs if j.state in ("PENDING", "RUNNING")} == {*ids, held}  # earlier tests' are ended
    assert build_round(Snapshot(0.0, nodes, jobs)).round["running"]


def test_a_token_slurmrestd_refuses_is_one_slurm_unavailable(slurmrestd):
    address, token = slurmrestd
    # a wrong signature: slurmrestd passes the token on, slurmctld refuses it, slurmrestd answers 500 (measured)
    with pytest.raises(SlurmUnavailable, match=r"slurmrestd GET .*/jobs: HTTP 500: Failed while looking for jobs"):
        SlurmRestReader(address, token[:-4] + "AAAA").jobs_json()


def test_slurmrestd_runs_as_a_non_root_user(slurm, slurmrestd):
    pid = slurm.pids["slurmrestd"]
    uid = int(next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("Uid:")))
    assert uid != 0
    out = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True).stdout
    assert "-s openapi/v0.0.38" in out and "rest_auth/jwt" in out
