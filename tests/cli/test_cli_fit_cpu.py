"""``optsched fit`` on the public LLaMA-2-7B rows: the published CPU anchor (Rubick Fig. 7) is used as a
prior of the v2 fit and said so, and the params file says why the held parameters were held."""

from __future__ import annotations

import pytest

from optsched.cli import main
from optsched.core import get_model
from optsched.core.jsonio import read_json
from optsched.perf.cpu_anchor import published_cpu_anchors
from optsched.perf.performance_model import PerformanceModel


def test_fit_of_llama7_meets_the_published_cpu_anchor_and_says_so(shared_data, tmp_path, capsys) -> None:
    out = tmp_path / "p.json"
    rc = main(["fit", "--placements", str(shared_data / "morphling" / "placements" / "llama7.csv"), "--model", "llama7",
               "--fwd-s", "0.3745", "--starts", "2", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0 and "CPU anchor (a prior, not a row): Rubick (Sec. 7.2, Fig. 7)" in text
    assert "fitted 8 -> 16 CPUs per GPU: 1.70" in text
    data = read_json(out)
    assert "m_zero_offload" in data["fit"]["identified"] and data["fit"]["n_samples"] == 31
    assert "CPU counts" in data["fit"]["reasons"]["k_swap"]
    pm = PerformanceModel.from_dict(data)
    slow, fast = published_cpu_anchors("llama7", "A800")[0].configs(get_model("llama7"))
    assert pm.iteration_time(*slow) / pm.iteration_time(*fast) == pytest.approx(1.7, abs=0.01)
    # Eq. 1 has no GPU-side factor to free: no anchor line
    main(["fit", "--placements", str(shared_data / "morphling" / "placements" / "llama7.csv"), "--model", "llama7",
          "--fwd-s", "0.3745", "--starts", "1", "--model-form", "eq1", "--out", str(tmp_path / "e.json")])
    assert "CPU anchor" not in capsys.readouterr().out
