"""Reading placements CSVs (optsched.perf.measurements): valid files and every malformed-row rule.

All files are written by the tests into tmp_path (the shared measurements are never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optsched.core import ValidationError, ZeroMode, get_model
from optsched.perf.measurements import measured_times, read_placements_csv, read_profile_forward_s

BERT = get_model("bert")
HEADER = "exec_plan,placement,iter_time,forward,overlap_sync,optimize\n"


def write(tmp_path: Path, text: str, name: str = "rows.csv", encoding: str = "utf-8") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding=encoding)
    return p


def rejected(path: Path, *, require_iter_time: bool = True) -> str:
    with pytest.raises(ValidationError) as info:
        read_placements_csv(path, BERT, require_iter_time=require_iter_time)
    return str(info.value)


def test_valid_file_parses_plans_placements_and_times(tmp_path):
    p = write(tmp_path, HEADER + "ga,11,0.44,118.6,288.1,25.4\n"
                                 "zero-offload,2222,0.9,1,2,3\n"
                                 "142,8,0.3,0,1,2\n")
    rows = read_placements_csv(p, BERT)
    assert [r.row for r in rows] == [1, 2, 3]
    assert rows[0].gpus_per_node == (1, 1) and rows[0].plan.dp == 2 and rows[0].plan.family == "ga"
    assert rows[1].plan.zero is ZeroMode.OFFLOAD and rows[1].gpus_per_node == (2, 2, 2, 2)
    assert (rows[2].plan.pp, rows[2].plan.tp, rows[2].plan.dp) == (1, 4, 2)
    assert measured_times(rows) == [0.44, 0.9, 0.3]
    assert dict(rows[0].extra)["forward"] == "118.6"


def test_bad_plan_code_names_row(tmp_path):
    msg = rejected(write(tmp_path, HEADER + "ga,1,0.5,0,0,0\nxyz,1,0.4,0,0,0\n"))
    assert "row 2" in msg and "xyz" in msg


def test_plan_placement_gpu_mismatch_names_row(tmp_path):
    msg = rejected(write(tmp_path, HEADER + "248,44,0.5,0,0,0\n"))
    assert "row 1" in msg and "248" in msg and "64" in msg and "8" in msg


@pytest.mark.parametrize("value", ["abc", "-1", "0", "nan", "inf", ""])
def test_bad_iter_time_names_row(tmp_path, value):
    msg = rejected(write(tmp_path, HEADER + "ga,1,0.5,0,0,0\ngc,2," + value + ",0,0,0\n"))
    assert "row 2" in msg and "iter_time" in msg


@pytest.mark.parametrize("placement", ["10", "1a", "a", "", "4-4"])
def test_bad_placement_names_row(tmp_path, placement):
    msg = rejected(write(tmp_path, HEADER + f"ga,{placement},0.5,0,0,0\n"))
    assert "row 1" in msg and "placement" in msg


@pytest.mark.parametrize("header,missing", [("exec_plan,iter_time\nga,0.5\n", "placement"),
                                             ("placement,iter_time\n1,0.5\n", "exec_plan"),
                                             ("exec_plan,placement\nga,1\n", "iter_time")])
def test_missing_column(tmp_path, header, missing):
    msg = rejected(write(tmp_path, header))
    assert "missing column" in msg and missing in msg


def test_extra_field_names_row(tmp_path):
    msg = rejected(write(tmp_path, "exec_plan,placement,iter_time\nga,1,0.5\ngc,1,0.5,7\n"))
    assert "row 2" in msg and "more fields" in msg


def test_two_column_file_valid_without_iter_time(tmp_path):
    p = write(tmp_path, "exec_plan,placement\nga,1\nzero-dp,44\n211,2\n")
    rows = read_placements_csv(p, BERT, require_iter_time=False)
    assert [(r.exec_plan, r.placement) for r in rows] == [("ga", "1"), ("zero-dp", "44"), ("211", "2")]
    assert all(r.iter_time is None for r in rows)
    with pytest.raises(ValidationError, match="no iter_time"):
        measured_times(rows)


def test_blank_lines_skipped(tmp_path):
    p = write(tmp_path, HEADER + "\nga,1,0.5,0,0,0\n\n\ngc,2,0.4,0,0,0\n\n")
    rows = read_placements_csv(p, BERT)
    assert [r.exec_plan for r in rows] == ["ga", "gc"]
    # a bad row after blank lines is named by its data-row number
    msg = rejected(write(tmp_path, HEADER + "\nga,1,0.5,0,0,0\n\nxyz,2,0.4,0,0,0\n", name="bad.csv"))
    assert "row 2" in msg


def test_utf8_bom_accepted(tmp_path):
    p = write(tmp_path, HEADER + "ga,1,0.5,0,0,0\n", encoding="utf-8-sig")
    assert p.read_bytes().startswith(b"\xef\xbb\xbf")
    rows = read_placements_csv(p, BERT)
    assert rows[0].iter_time == 0.5


def test_header_only_and_missing_file(tmp_path):
    assert "no data rows" in rejected(write(tmp_path, HEADER))
    assert "cannot read" in rejected(tmp_path / "absent.csv")


def test_batch_not_divisible_names_row(tmp_path):
    # bert's global batch is 32: plain DP over 3 GPUs cannot split it
    msg = rejected(write(tmp_path, HEADER + "ga,3,0.5,0,0,0\n"))
    assert "row 1" in msg and "divisible" in msg


# -- profiled forward time (read_profile_forward_s) ----------------------------------------------

PROFILE_CFG = "\ufeffnodes,gpus,parameter_size,batch_size,seq_hid,num_cpu_threads,zero_type,is_tp,is_pp\n"
PROFILE_DAT = "\ufeffforward_time,Tcc,Topt,iter_time,strategy\n"


def write_profile(tmp_path: Path, cfg_rows: list[str], dat_rows: list[str]) -> Path:
    d = tmp_path / "profile"
    d.mkdir()
    (d / "config.csv").write_text(PROFILE_CFG + "".join(r + "\n" for r in cfg_rows), encoding="utf-8")
    (d / "data.csv").write_text(PROFILE_DAT + "".join(r + "\n" for r in dat_rows), encoding="utf-8")
    return d


def test_profile_forward_is_the_median_per_sample_time(tmp_path):
    # BERT, global batch 32: 8 GPUs -> 4 samples/GPU, 40 ms -> 10 ms/sample; 4 GPUs -> 8, 60 ms -> 7.5;
    # 2 nodes x 1 GPU -> 16 samples, 4 ms (a misrecorded run) -> 0.25 ms. Median: 7.5 ms.
    d = write_profile(tmp_path, ["1,8,320,1,0,1,0,0,0", "1,4,320,1,0,1,0,0,0", "2,1,320,1,0,4,1,0,0"],
                      ["40,83,25,157,1100", "60,130,24,225,1100", "4,10,10,30,1111"])
    assert read_profile_forward_s(d, BERT) == pytest.approx(0.0075)


def test_profile_forward_divides_by_the_strategy_forward_multiplier_and_skips_3d(tmp_path):
    # strategy 2...: the forward pass runs twice -> 80 ms / (2 * 4 samples) = 10 ms; the TP run is skipped
    d = write_profile(tmp_path, ["1,8,320,1,0,1,0,0,0", "1,8,320,1,0,1,0,1,0"],
                      ["80,83,25,157,2100", "5,83,25,157,1100"])
    assert read_profile_forward_s(d, BERT) == pytest.approx(0.010)


def test_profile_forward_rejects_unpaired_or_empty_profiles(tmp_path):
    d = write_profile(tmp_path, ["1,8,320,1,0,1,0,0,0"], ["40,83,25,157,1100", "60,130,24,225,1100"])
    with pytest.raises(ValidationError, match="config.csv has 1 rows but data.csv has 2"):
        read_profile_forward_s(d, BERT)
    (tmp_path / "x").mkdir()
    d2 = write_profile(tmp_path / "x",
                       ["1,8,320,1,0,1,0,0,1"], ["40,83,25,157,1100"])
    with pytest.raises(ValidationError, match="no data-parallel profiling run"):
        read_profile_forward_s(d2, BERT)


# -- choosing the profiling rows --------------------------------------------------------------------
SHAPES = ["1", "2", "4", "8", "11", "1111", "11111111", "44", "2222"]


def _ga_rows(tmp_path: Path):
    text = HEADER + "".join(f"ga,{p},1.0,0,0,0\n" for p in SHAPES) + "".join(
        f"zero-offload,{p},2.0,0,0,0\n" for p in ("1", "2", "44"))
    return read_placements_csv(write(tmp_path, text), BERT)


def test_maximin_design_takes_the_farthest_row_each_time(tmp_path):
    """Slots: the three ZeRO-Offload rows first, then GA; every GA pick is the GA row farthest
    (min distance in placement shape) from all rows chosen before it: checked by brute force."""
    import numpy as np

    from optsched.perf.measurements import placement_shape, sample_measurements
    rows = _ga_rows(tmp_path)
    for seed in range(5):
        chosen = sample_measurements(rows, 6, np.random.default_rng(seed))
        assert sorted(r.placement for r in chosen if r.plan.zero is ZeroMode.OFFLOAD) == ["1", "2", "44"]
        picked = [r for r in chosen if r.plan.zero is ZeroMode.OFFLOAD]
        ga = [r for r in chosen if r.exec_plan == "ga"]
        assert len(ga) == 3
        remaining = [r for r in rows if r.exec_plan == "ga"]
        for _ in range(3):  # replay the greedy choice: the chosen GA rows must be a maximin sequence
            def far(r):
                return min(float(np.linalg.norm(placement_shape(r) - placement_shape(q))) for q in picked)
            best = max(far(r) for r in remaining)
            step = [r for r in ga if r in remaining and abs(far(r) - best) < 1e-12]
            assert step, (seed, [r.placement for r in ga])
            picked.append(step[0])
            remaining.remove(step[0])


def test_maximin_design_spreads_more_than_random_rows(tmp_path):
    """Over 20 seeds the design's GA rows are on average farther apart than random GA rows, and both
    keep the family quotas; spread=False is reproducible per seed."""
    import itertools

    import numpy as np

    from optsched.perf.measurements import placement_shape, sample_measurements
    rows = _ga_rows(tmp_path)

    def spread_of(chosen):
        ga = [placement_shape(r) for r in chosen if r.exec_plan == "ga"]
        return min(float(np.linalg.norm(a - b)) for a, b in itertools.combinations(ga, 2))

    design = [spread_of(sample_measurements(rows, 6, np.random.default_rng(s))) for s in range(20)]
    drawn = [spread_of(sample_measurements(rows, 6, np.random.default_rng(s), spread=False)) for s in range(20)]
    assert np.mean(design) > np.mean(drawn)
    a = sample_measurements(rows, 6, np.random.default_rng(3), spread=False)
    assert a == sample_measurements(rows, 6, np.random.default_rng(3), spread=False)
    assert sum(r.plan.zero is ZeroMode.OFFLOAD for r in a) == 3
