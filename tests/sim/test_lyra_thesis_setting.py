"""Lyra in the thesis' setting (Sec. 3.7.1; ``--preset lyra-thesis``): the job mix by load, trace
windows, sizing the cluster by offered load, the Baseline without loaning, the preset's values and
sources, and the preemption ratio of Table 3.5 (note 2) in ``summary.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_cases import lent_servers_reclaimed

from optsched.cli import main
from optsched.core.errors import ValidationError
from optsched.sim.lyra_setup import size_by_load
from optsched.sim.presets import get_preset
from optsched.sim.traces.lyra import job_mix, lyra_jobs, philly_window, synthetic_rows


def test_job_mix_by_load_reaches_the_thesis_shares() -> None:
    rows = synthetic_rows(3000, seed=2, hours=72.0)
    jobs = lyra_jobs(rows, seed=2, fungible_load=0.21, elastic_load=0.36, elastic_count=0.05)
    mix = job_mix(jobs)
    assert mix.elastic_jobs == pytest.approx(0.05, abs=0.001)
    assert 0.34 <= mix.elastic_load <= 0.36 and 0.20 <= mix.fungible_load <= 0.21
    elastic = [j for j in jobs if j.max_gpus and j.max_gpus > j.min_gpus]
    assert any(not j.fungible for j in elastic) and any(j.fungible for j in elastic)   # drawn independently
    assert lyra_jobs(rows, seed=2, fungible_load=0.21, elastic_load=0.36) == jobs
    with pytest.raises(ValidationError, match="give fungible_load and elastic_load together"):
        lyra_jobs(rows, fungible_load=0.21)
    with pytest.raises(ValidationError, match=r"elastic_load must lie in \[0, 1\], got 1.5"):
        lyra_jobs(rows, fungible_load=0.21, elastic_load=1.5)


def test_philly_window_picks_the_busiest_days(tmp_path: Path) -> None:
    csv = tmp_path / "p.csv"
    lines = ["timestamp,duration,num_gpus"]
    lines += [f"2017-10-01 0{h}:00:00,60,1" for h in range(3)]            # day 1: 3 jobs
    lines += [f"2017-10-02 1{h}:30:00,60,2" for h in range(5)]            # day 2: 5 jobs
    lines += ["2017-10-03 12:00:00,60,1"]                                 # day 3: 1 job
    csv.write_text("\n".join(lines) + "\n")
    w = philly_window(csv, 1)
    assert w.start.day == 2 and len(w.rows) == 5 and w.rows[0][0] == 10 * 3600 + 1800
    w2 = philly_window(csv, 2)
    assert w2.start.day == 1 and len(w2.rows) == 8                       # days 1-2 (8) beat days 2-3 (6)
    w3 = philly_window(csv, 1, "2017-10-03")
    assert len(w3.rows) == 1 and w3.start_hour == 0.0
    with pytest.raises(ValidationError, match="no job submitted in the 1 days from 2017-10-05"):
        philly_window(csv, 1, "2017-10-05")
    with pytest.raises(ValidationError, match="neither 'busiest' nor YYYY-MM-DD"):
        philly_window(csv, 1, "monday")


def test_size_by_load() -> None:
    # 10 days x 86,400 s x 8 GPUs x 41 servers x 0.5 = 141,696,000 GPU-s fits 41 servers, one GPU-second more
    # does not; inference 41 x 4160 / 3544 = 48.1 -> 48 servers
    assert size_by_load(141_696_000.0, 10, 0.5) == (41, 48)
    assert size_by_load(141_696_001.0, 10, 0.5)[0] == 42


def test_preemption_ratio_is_preemptions_over_submissions() -> None:
    # lyra_cases.lent_servers_reclaimed: f and g lose the lent servers at 1800 s, t never does -> 2 / 3
    res, _ = lent_servers_reclaimed()
    s = res.summary()
    assert s["preemptions"] == 2 and s["preemption_ratio"] == pytest.approx(2 / 3, abs=1e-6)


def test_lyra_thesis_preset_values_and_sources() -> None:
    p = get_preset("lyra-thesis")
    assert p.kind == "lyra" and p.policies == ("fifo", "lyra", "lyra-loan")
    assert dict(p.request) == {"window_days": 15.0, "window_start": "busiest", "fungible_load": 0.21,
                               "elastic_load": 0.36, "elastic_count": 0.05, "offered_load": 0.82, "no_loaning": "fifo",
                               "usage_burst": 0.02, "elastic_on_inference": "yes"}
    c = p.config()
    assert (c.preempt_restart_s, c.reconfig_overhead_s, c.checkpoint_on_preempt, c.round_interval_s) == \
        (63.0, 0.0, False, 300.0)
    assert "63 seconds" in p.sources["preempt_restart_s"] and "21% of total" in p.request_sources["fungible_load"]
    assert "median inference traffic burst within five minutes is ~2%" in p.request_sources["usage_burst"]
    assert "If the job is elastic, we prefer to place it on inference" in p.request_sources["elastic_on_inference"]
    assert set(p.sources) == set(p.settings) and set(p.request_sources) == set(p.request) | {"policies"}


def _cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "o"
    code = main(["simulate", "--kind", "lyra", "--preset", "lyra-thesis", "--jobs", "40", "--window-days", "0.5",
                 "--no-plots", "--no-progress", "--out", str(out), *extra])
    text = capsys.readouterr()
    doc = json.loads((out / "summary.json").read_text()) if code == 0 else {}
    return code, doc, text.out + text.err


def test_simulate_lyra_thesis_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, out = _cli(tmp_path, capsys)
    assert code == 0, out
    assert list(doc["policies"]) == ["fifo", "lyra", "lyra-loan"]
    assert doc["preset"] == "lyra-thesis" and doc["window"] == "0.5 days"   # --window-days 0.5 wins over the preset
    assert doc["config"]["preempt_restart_s"] == 63.0 and doc["config"]["checkpoint_on_preempt"] is False
    assert doc["job_mix"]["elastic_jobs"] == pytest.approx(0.05, abs=0.01)
    for name, pol in doc["policies"].items():
        assert pol["preemption_ratio"] == pytest.approx(pol["preemptions"] / pol["jobs"], abs=1e-6)
        assert "avg_queue_s" in pol and "avg_jct_s" in pol
    assert doc["policies"]["fifo"]["preemptions"] == 0   # the Baseline borrows no server
    assert "training servers for an offered load of 0.82" in out


def test_lyra_thesis_preset_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--preset", "lyra-thesis", "--out", str(tmp_path / "x")]) != 0
    assert "--preset lyra-thesis applies to --kind lyra only, not --kind rubick" in capsys.readouterr().err
    code, _, out = _cli(tmp_path, capsys, "--policy", "lyra")
    assert code != 0 and "--no-loaning names fifo, not among the policies run (lyra)" in out
    code, _, out = _cli(tmp_path, capsys, "--training", "3")
    assert code != 0 and "--training cannot be given with --offered-load" in out
    with pytest.raises(ValidationError, match="--window-start needs --window-days"):
        from optsched.experiments.compare import simulate_kind
        from optsched.sim.setup import SimulationRequest
        simulate_kind("lyra", SimulationRequest(jobs=5, options={"window_start": "2017-10-01"}), ["lyra"])
