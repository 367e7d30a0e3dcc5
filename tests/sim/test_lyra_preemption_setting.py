"""Why the Lyra simulation preempts (issue 25; docs/simulation.md, "Lyra in the thesis' setting"): the inference
usage series' 5-minute burst (thesis Sec. 3.7.1), elastic jobs on inference servers (Sec. 3.5.3) and preemptions
per inference server per day beside the preemption ratio."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from optsched.cli import main
from optsched.core.errors import ValidationError
from optsched.sim.loaning import BURST_TOLERANCE, median_burst, synthetic_usage
from optsched.sim.lyra_setup import lyra_simulation


def test_median_burst_by_hand() -> None:
    # changes 0.1, 0.3, 0.05, 0.2 (absolute): median (0.1 + 0.2) / 2
    assert median_burst([0.5, 0.6, 0.3, 0.35, 0.55]) == pytest.approx(0.15)
    # at a 60 s step the five-minute change is over five points
    assert median_burst(np.arange(20) * 0.01, step_s=60.0) == pytest.approx(0.05)
    assert median_burst([0.4]) == 0.0


@pytest.mark.parametrize("burst", [0.02, 0.05])
def test_the_usage_series_has_the_burst_asked(burst: float) -> None:
    plain = synthetic_usage(9, seed=3, start_hour=5.0)
    assert median_burst(plain.values) < 0.005   # today's series moves about 0.3%
    got = synthetic_usage(9, seed=3, start_hour=5.0, burst=burst)
    assert abs(median_burst(got.values) - burst) <= BURST_TOLERANCE
    assert all(0.0 <= v <= 1.0 for v in got.values)
    # the diurnal shape is kept: the daily means stay those of the plain series
    days = np.array(got.values).reshape(9, -1).mean(1)
    assert np.allclose(days, np.array(plain.values).reshape(9, -1).mean(1), atol=0.01)
    assert synthetic_usage(9, seed=3, start_hour=5.0, burst=burst) == got   # seeded


def test_without_the_option_the_series_is_unchanged() -> None:
    assert synthetic_usage(2, seed=1) == synthetic_usage(2, seed=1, burst=None)
    sim = lyra_simulation("synthetic", jobs=10, seed=1, usage_days=2.0)
    assert sim.usage == synthetic_usage(2.0, seed=1)


@pytest.mark.parametrize("bad", [-0.01, math.nan, 1.5, "0.02", True, math.inf])
def test_a_bad_burst_is_refused_naming_the_option(bad: object) -> None:
    with pytest.raises(ValidationError, match=r"usage_burst \(the median 5-minute change .*\) must be a number in "
                                              r"\[0, 1\]"):
        synthetic_usage(1, burst=bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="usage_burst"):
        lyra_simulation("synthetic", jobs=5, usage_burst=bad)  # type: ignore[arg-type]


def test_a_burst_out_of_reach_is_refused() -> None:
    with pytest.raises(ValidationError, match=r"usage_burst 0.0001: the synthetic series already moves"):
        synthetic_usage(2, burst=0.0001)
    with pytest.raises(ValidationError, match="usage_burst 0.9: noise clipped"):
        synthetic_usage(2, burst=0.9)
    with pytest.raises(ValidationError, match="usage_burst shapes the synthetic usage series only"):
        lyra_simulation("synthetic", jobs=5, usage="none", usage_burst=0.02)


def _cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    out = tmp_path / "o"
    code = main(["simulate", "--kind", "lyra", "--jobs", "20", "--no-plots", "--no-progress", "--out", str(out),
                 "--policy", "lyra", *extra])
    text = capsys.readouterr()
    doc = json.loads((out / "summary.json").read_text()) if code == 0 else {}
    return code, doc, text.out + text.err


def test_usage_burst_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, out = _cli(tmp_path, capsys, "--usage-burst", "0.02")
    assert code == 0, out
    assert abs(doc["usage_median_burst"] - 0.02) <= BURST_TOLERANCE and "median 5-minute change 2.00%" in out
    code, doc, out = _cli(tmp_path, capsys)
    assert code == 0 and doc["usage_median_burst"] < 0.005
    code, _, out = _cli(tmp_path, capsys, "--usage-burst", "-1")
    assert code != 0 and "usage_burst" in out
    code, _, out = _cli(tmp_path, capsys, "--usage-burst", "x")
    assert code != 0 and "--usage-burst" in out
    # the preset's burst is dropped with another series; given explicitly it is refused
    code, doc, out = _cli(tmp_path, capsys, "--preset", "lyra-thesis", "--window-days", "0.25", "--usage", "none",
                          "--policy", "fifo", "lyra", "lyra-loan")
    assert code == 0, out
    code, _, out = _cli(tmp_path, capsys, "--usage", "none", "--usage-burst", "0.02")
    assert code != 0 and "usage_burst shapes the synthetic usage series only" in out
