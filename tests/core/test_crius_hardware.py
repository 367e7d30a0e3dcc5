"""The heterogeneous hardware of Crius: GPU types with link kinds, network generations and
efficiencies, the Table 1 cluster and the Sec. 8.1 testbed."""

from __future__ import annotations

from collections import Counter

import pytest

from optsched.core import GPU_TYPES, Cluster, GPUType, Node, UnknownNameError, ValidationError, get_cluster
from optsched.core.catalog import INTER_LINKS_GBPS


def test_table1_cluster() -> None:
    c = get_cluster("crius-sim-1280")
    assert c.total_gpus == 1280
    gpus = Counter()
    nodes = Counter()
    for n in c.nodes:
        gpus[n.gpu_type] += n.num_gpus
        nodes[(n.gpu_type, n.num_gpus)] += 1
    assert gpus == {"A100-40G": 320, "A40": 320, "A10": 320, "V100-32G": 320}
    assert nodes == {("A100-40G", 4): 80, ("A40", 2): 160, ("A10", 2): 160, ("V100-32G", 16): 20}
    assert {t.name: t.memory_gib for t in c.gpu_types} == {"A100-40G": 40.0, "A40": 48.0, "A10": 24.0, "V100-32G": 32.0}
    assert {t.name: c.intra_link(t.name) for t in c.gpu_types} == {
        "A100-40G": "nvlink", "A40": "pcie", "A10": "pcie", "V100-32G": "nvlink"}
    assert {t.name: t.inter_link for t in c.gpu_types} == {
        "A100-40G": "ib-cx5", "A40": "ib-cx5", "A10": "ib-cx6", "V100-32G": "ib-cx5"}
    assert c.inter_bandwidth("A10") == INTER_LINKS_GBPS["ib-cx6"] == 2 * c.inter_bandwidth("A40")
    assert Cluster.from_dict(c.to_dict()) == c


def test_testbed_cluster() -> None:
    c = get_cluster("crius-testbed-64")
    assert c.total_gpus == 64
    assert Counter((n.gpu_type, n.num_gpus, n.num_cpus, n.memory_gib) for n in c.nodes) == {
        ("A40", 2, 48, 256.0): 16, ("A10", 2, 48, 256.0): 16}


def test_gpu_type_fields_and_defaults() -> None:
    g = GPUType("X", 16.0, 100.0, intra_node_gbps=100.0, intra_link="nvlink", inter_link="ib-cx6",
                inter_node_gbps=25.0, efficiency=0.5)
    assert GPUType.from_dict(g.to_dict()) == g
    # the A800 of the Rubick measurements is written exactly as before
    assert GPU_TYPES["A800"].to_dict() == {"name": "A800", "memory_gib": 80.0, "peak_tflops": 312.0}
    plain = GPUType("P", 16.0, 100.0)
    fast = Cluster("c", (Node("n0", "P", 2, 8, 64.0),), (plain,), 150.0, 10.0, 16.0)
    slow = Cluster("c", (Node("n0", "P", 2, 8, 64.0),), (plain,), 20.0, 10.0, 16.0)
    assert fast.intra_link("P") == "nvlink" and slow.intra_link("P") == "pcie"
    assert fast.inter_bandwidth("P") == 10.0


@pytest.mark.parametrize("kwargs, match", [
    ({"efficiency": 1.5}, "efficiency"), ({"efficiency": 0.0}, "efficiency"),
    ({"inter_node_gbps": -1.0}, "inter_node_gbps"), ({"inter_link": ""}, "inter_link")])
def test_gpu_type_rejects_bad_fields(kwargs: dict, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        GPUType("X", 16.0, 100.0, **kwargs)


def test_unknown_intra_link_is_named() -> None:
    with pytest.raises(UnknownNameError, match="intra-node link 'infiniband'.*nvlink, pcie"):
        GPUType("X", 16.0, 100.0, intra_link="infiniband")
