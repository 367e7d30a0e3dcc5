"""Units and semantics that cannot be misread (issue 16, item 3): warnings for implausible numbers, requested
host memory as a minimum, memory in decisions on a 1/16 GiB grid; and item 5: no reconfiguration when only
CPUs or memory would change for nothing (``keep_unchanged``)."""

from __future__ import annotations

import json
from typing import Any


import optsched
from optsched.cli import main
from optsched.core import Job, a800_cluster
from optsched.core.units import cluster_warnings, request_warnings
from optsched.core.allocation import NodeShare
from optsched.rounds.rubick.choice import Choice, is_kept, placement_of
from optsched.rounds.rubick.decision import keep_unchanged
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import MEM_GRANULARITY_GIB, build_round_table


def _mb_round() -> dict[str, Any]:
    data = generate_rubick_round(2, 8, 4, seed=0, running_fraction=0.0, occupied_fraction=0.0).to_dict()
    data["cluster"]["nodes"][0]["memory_gib"] = 1048576.0  # MB where GiB is meant
    data["jobs"][0]["requested_mem_gib"] = 262144.0
    return data


def test_implausible_numbers_are_warned_in_the_decision_and_on_stderr(tmp_path: Any, capsys: Any) -> None:
    data = _mb_round()
    problem = optsched.RoundProblem.from_dict(data)
    warnings = cluster_warnings(problem.cluster) + request_warnings(problem.cluster, problem.jobs)
    assert warnings[0] == ("node 'n000' has 1.04858e+06 GiB of host memory, more than 64 TiB: is it in MiB or MB? "
                           "(memory_gib is in GiB)")
    assert warnings[1].startswith(f"job {problem.jobs[0].name!r} requests 262144 GiB of host memory for ")
    d = optsched.solve(problem, "heuristic")
    assert d.message.startswith("warning: node 'n000' has 1.04858e+06 GiB")
    path = tmp_path / "round.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["solve", str(path), "--method", "heuristic"]) == 0
    err = capsys.readouterr().err
    assert "optsched: warning: node 'n000' has 1.04858e+06 GiB of host memory" in err
    cluster = a800_cluster(1, 8)
    big = a800_cluster(1, 8)
    object.__setattr__(big.nodes[0], "num_cpus", 96000)
    assert "is it in millicores?" in cluster_warnings(big)[0]
    assert cluster_warnings(cluster) == [] and request_warnings(cluster, (Job("x", "bert", 8, 10, 96, 1600.0),)) == []
    plain = generate_rubick_round(4, 8, 16, seed=1)
    assert "warning" not in optsched.solve(plain, "heuristic").message


def test_requested_memory_is_a_minimum_and_cpus_are_not() -> None:
    job = Job("g", "gpt2", 4, 100, requested_cpus=64, requested_mem_gib=256.0)
    problem = RubickRound(a800_cluster(2, 8), (job,))
    table = build_round_table(problem)
    rows = table.configs_of("g")
    assert all(table.mem_gib[r] >= 64.0 * table.gpus[r] - 1e-9 for r in rows)  # 256 GiB / 4 GPUs per GPU
    d = optsched.solve(problem, "exact")
    a = d.job("g").allocation
    assert a.placement.total_mem_gib >= 64.0 * a.placement.total_gpus - 1e-9
    # CPUs are a performance resource: fewer than requested is allowed when the throughput says so
    assert min(int(table.cpus[r]) for r in rows) < 64


def test_decision_memory_is_on_the_sixteenth_gib_grid() -> None:
    for seed in range(3):
        problem = generate_rubick_round(4, 8, 24, seed=seed)
        for method in ("heuristic", "exact", "synergy", "sia"):
            d = optsched.solve(problem, method, time_limit=10.0)
            for j in d.jobs:
                if j.allocation is None or j.action == "keep":
                    continue  # a kept job holds what it held
                for _, share in j.allocation.placement.shares:
                    steps = share.mem_gib / MEM_GRANULARITY_GIB
                    assert steps == int(steps), (j.job, share.mem_gib)


def _trim_case() -> tuple[RubickRound, Any, str, int, Choice]:
    """A running job of a generated round and a row of its table with its current plan and shape but other
    CPUs or memory, no faster than its current row (fewer CPUs; memory from the table's rule)."""
    for seed in range(20):
        problem = generate_rubick_round(2, 8, 8, seed=seed)
        table = build_round_table(problem)
        for j, name in enumerate(table.jobs):
            cur = problem.current(name)
            cur_row = int(table.current_row[j])
            if cur is None:
                continue
            parts = tuple((n, s.gpus) for n, s in cur.placement.shares if s.gpus > 0)
            for r in table.configs_of(name):
                r = int(r)
                if (r != cur_row and table.plans[r] == cur.plan and table.gpus_per_node[r] == table.gpus_per_node[cur_row]
                        and table.throughput[r] <= table.throughput[cur_row]):
                    return problem, table, name, cur_row, Choice(r, parts)
    raise AssertionError("no generated round has a trim case")


def test_a_trim_that_frees_nothing_needed_is_undone() -> None:
    problem, table, name, cur_row, trim = _trim_case()
    j = table.index_of(name)
    assert not is_kept(problem, table, j, trim)
    kept = keep_unchanged(problem, table, {name: trim})
    assert kept[name].row == cur_row and is_kept(problem, table, j, kept[name])
    assert objective(problem, table, kept) > objective(problem, table, {name: trim})
    unchanged = {name: Choice(cur_row, trim.parts)}
    assert keep_unchanged(problem, table, unchanged) is unchanged


def test_a_trim_another_job_needs_stays() -> None:
    problem, table, name, cur_row, trim = _trim_case()
    node = trim.parts[0][0]
    j = table.index_of(name)
    trimmed = placement_of(problem, table, j, trim).to_dict()[node]
    # another job's choice takes everything the trim leaves on the node (free capacity is cached per node,
    # so shrinking it here stands for that neighbour)
    problem._free[node] = NodeShare(trimmed["gpus"], trimmed["cpus"], trimmed["mem_gb"])
    assert keep_unchanged(problem, table, {name: trim})[name] == trim
