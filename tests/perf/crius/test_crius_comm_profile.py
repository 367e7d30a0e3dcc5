"""The offline communication profile (Crius Sec. 5.1): interpolation, rank scaling, files, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsched.core import get_cluster
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.perf.crius.comm_profile import CommCurve, CommProfile, default_comm_profile, ring_factor


def _profile() -> CommProfile:
    return CommProfile([CommCurve("G", "intra", "all_reduce", 2, [100.0, 1000.0, 10000.0], [1.0, 2.0, 12.0]),
                        CommCurve("G", "intra", "all_reduce", 8, [100.0, 1000.0], [3.0, 5.0])])


def test_interpolation_rules() -> None:
    p = _profile()
    t = lambda b: float(p.time("G", "intra", "all_reduce", 2, b))  # noqa: E731
    assert t(1000.0) == 2.0 and t(550.0) == pytest.approx(1.5)      # measured point, linear between
    assert t(10.0) == 1.0                                            # below: the first point's time
    assert t(20000.0) == pytest.approx(12.0 + 10000.0 * 10.0 / 9000.0)  # above: the last slope
    assert t(0.0) == 0.0 and float(p.time("G", "intra", "all_reduce", 1, 500.0)) == 0.0
    assert p.seconds("G", "intra", "all_reduce", 2, 550.0) == pytest.approx(1.5)
    assert np.allclose(p.time("G", "intra", "all_reduce", 2, np.array([100.0, 550.0])), [1.0, 1.5])


def test_unmeasured_ranks_use_the_nearest_curve_with_ring_scaling() -> None:
    p = _profile()
    # 4 ranks: the 2-rank curve at bytes x f(4) / f(2) = bytes x 1.5 / 1
    assert float(p.time("G", "intra", "all_reduce", 4, 400.0)) == pytest.approx(float(
        p.time("G", "intra", "all_reduce", 2, 600.0)))
    # 16 ranks: the 8-rank curve (largest below)
    scale = ring_factor("all_reduce", 16) / ring_factor("all_reduce", 8)
    assert float(p.time("G", "intra", "all_reduce", 16, 500.0)) == pytest.approx(float(
        p.time("G", "intra", "all_reduce", 8, 500.0 * scale)))


def test_missing_curve_is_named() -> None:
    with pytest.raises(UnknownNameError, match="G/inter/all_reduce.*G/intra/all_reduce"):
        _profile().time("G", "inter", "all_reduce", 2, 10.0)


def test_files_round_trip() -> None:
    p = default_comm_profile(get_cluster("crius-testbed-64"))
    back = CommProfile.from_dict(json.loads(json.dumps(p.to_dict())))
    assert back.to_dict() == p.to_dict()
    again = CommProfile.from_csv(p.to_csv())
    assert again.to_dict() == p.to_dict()
    assert p.gpu_types == ("A10", "A40")


@pytest.mark.parametrize("kwargs, match", [
    ({"link": "nvswitch"}, "unknown link 'nvswitch'"), ({"collective": "broadcast"}, "unknown collective"),
    ({"ranks": 1}, "ranks must be >= 2"), ({"bytes": [1.0, 1.0], "seconds": [1.0, 2.0]}, "measured twice"),
    ({"seconds": [0.0, 1.0]}, "finite and > 0"), ({"seconds": [1.0]}, "equally long")])
def test_bad_curves(kwargs: dict, match: str) -> None:
    args = {"gpu_type": "G", "link": "intra", "collective": "all_reduce", "ranks": 2, "bytes": [1.0, 2.0],
            "seconds": [1.0, 2.0], **kwargs}
    with pytest.raises(ValidationError, match=match):
        CommCurve(**args)


def test_bad_csv_rows_are_named() -> None:
    with pytest.raises(ValidationError, match="header"):
        CommProfile.from_csv("a,b\n1,2\n")
    with pytest.raises(ValidationError, match="row 1: ranks must be an integer"):
        CommProfile.from_csv("gpu_type,link,collective,ranks,bytes,seconds\nG,intra,all_reduce,two,1,1\n")


def test_default_profile_is_alpha_beta() -> None:
    c = get_cluster("crius-sim-1280")
    p = default_comm_profile(c)
    nbytes = 4.0 ** 12
    # NVLink A100 (200 GB/s, 5 us), 4 ranks: 6 steps x alpha + bytes x 1.5 / bw
    assert float(p.time("A100-40G", "intra", "all_reduce", 4, nbytes)) == pytest.approx(6 * 5e-6 + nbytes * 1.5 / 200e9)
    # inter-node collectives share a node's 12.5 GB/s over its 4 GPUs; a send/recv stream gets all of it
    assert float(p.time("A100-40G", "inter", "all_gather", 2, nbytes)) == pytest.approx(20e-6 + nbytes * 0.5 / (12.5e9 / 4))
    assert float(p.time("A100-40G", "inter", "send_recv", 2, nbytes)) == pytest.approx(20e-6 + nbytes / 12.5e9)
    slower = default_comm_profile(c, bandwidth_scale={"inter": 0.5})
    assert float(slower.time("A10", "inter", "send_recv", 2, nbytes)) > float(p.time("A10", "inter", "send_recv", 2, nbytes))
    with pytest.raises(ValidationError, match="bandwidth_scale"):
        default_comm_profile(c, bandwidth_scale={"wan": 2.0})
