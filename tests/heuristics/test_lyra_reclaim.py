"""Lyra's reclaiming heuristic and its baselines on the thesis' example (Fig. 3.5, Table 3.1)."""

from __future__ import annotations

import numpy as np
import pytest
from lyra_cases import figure_3_5

from optsched.heuristics.lyra_reclaim import lyra_reclaim, random_reclaim, scf_reclaim, server_costs
from optsched.rounds.lyra_reclaim import ReclaimView, generate_reclaim_round


def test_table_3_1_costs() -> None:
    v = ReclaimView(figure_3_5())
    assert server_costs(v, "jobs").tolist() == [1, 1, 1, 1, 2, 1]
    assert server_costs(v, "gpu-fraction") == pytest.approx([0.5, 0.5, 1, 0.8, 0.4, 0.8])
    assert server_costs(v, "server-fraction") == pytest.approx([0.5, 0.5, 1, 0.5, 1, 0.5])


def test_reclaiming_two_servers_picks_1_and_2_with_one_preemption() -> None:
    v = ReclaimView(figure_3_5(reclaim=2))
    picks = lyra_reclaim(v, 2)
    assert sorted(v.servers[s] for s in picks) == ["inf-000", "inf-001"]
    assert v.outcome(picks).preempted == ("a",)


def test_other_cost_definitions_would_preempt_more() -> None:
    """Sec. 3.4: by GPU fraction server 5 is cheapest (two preemptions); by job count any two 1-cost
    servers, e.g. 3 and 4 (two preemptions)."""
    v = ReclaimView(figure_3_5())
    assert int(np.argmin(server_costs(v, "gpu-fraction"))) == 4
    assert len(v.outcome([4]).preempted) == 2
    assert len(v.outcome([2, 3]).preempted) == 2


def test_flexible_group_goes_first_without_preemption() -> None:
    p = generate_reclaim_round(seed=1, servers=24, reclaim=3, occupancy=0.97)
    v = ReclaimView(p)
    flex_only = [s for s in range(len(v.servers)) if not v.base_jobs[s] and v.flex[s]]
    idle = [s for s in range(len(v.servers)) if not v.base_jobs[s] and not v.flex[s]]
    assert flex_only  # the instance has a flexible-only server
    picks = lyra_reclaim(v, len(idle) + 1)
    assert set(idle) <= set(picks) and v.outcome(picks).preempted == ()
    assert v.outcome(picks).scaled_in


def test_baselines_pick_the_asked_number() -> None:
    v = ReclaimView(figure_3_5(reclaim=3))
    assert len(set(random_reclaim(v, 3, np.random.default_rng(0)))) == 3
    assert scf_reclaim(v, 2) == [0, 1]  # one job each, server order
