"""The feasibility check every returned Rubick decision passes: rows of the right job, shapes on
distinct nodes of the row's GPU type, node capacities in GPUs, CPUs and memory, protected jobs reaching
their reference throughput on their admission type when they have one (quotas per GPU type,
:mod:`optsched.rounds.rubick.admission`), guaranteed jobs waiting for quota not running, admitted deadline
jobs running at the throughput their deadline needs (:mod:`optsched.rounds.rubick.deadlines`), every job's
own hard constraints (:func:`~optsched.rounds.rubick.constraints.broken`, checked on the placement itself,
not on how the table was built, and the node rules of :func:`~optsched.rounds.rubick.constraints.node_broken`:
selectors, node states and a required topology rule), and, when every other rule holds, the priority rule
(:func:`~optsched.rounds.rubick.priorities.priority_broken`)."""

from __future__ import annotations

from typing import Mapping

from optsched.core.capacity import NodeUsage
from optsched.perf.coefficients import CoefficientTable
from optsched.rounds.rubick.admission import Admission, reaches_guarantee
from optsched.rounds.rubick.choice import Choice, check_round_table, placement_of
from optsched.rounds.rubick.constraints import broken, node_broken, node_constrained
from optsched.rounds.rubick.priorities import priority_broken
from optsched.rounds.rubick.deadlines import RATE_RTOL, admit_round
from optsched.rounds.rubick.problem import RubickRound

#: tolerance of the capacity check (GPUs, CPUs, GiB)
CAPACITY_TOL = 1e-6


def violations(problem: RubickRound, table: CoefficientTable, choices: Mapping[str, Choice],
               admission: Admission | None = None) -> list[str]:
    """Every rule ``choices`` breaks (module docstring; empty list: feasible). ``admission`` defaults
    to :func:`~optsched.rounds.rubick.deadlines.admit_round` (quotas, then deadlines)."""
    check_round_table(problem, table)
    admission = admission or admit_round(problem, table)
    out: list[str] = []
    known = {n.name for n in problem.cluster.nodes}
    node_rules = node_constrained(problem)  # else every node rule holds: no need to read them per job
    usage = NodeUsage()
    for name, choice in choices.items():
        if name not in table.job_position:
            out.append(f"job {name!r} is not in the round")
            continue
        j = table.index_of(name)
        row, parts = choice.row, choice.parts
        if not 0 <= row < len(table) or table.job_index[row] != j:
            out.append(f"job {name!r}: row {row} is not one of its configurations")
            continue
        nodes = [n for n, _ in parts]
        if len(set(nodes)) != len(nodes):
            out.append(f"job {name!r}: a node appears twice in its placement")
        if tuple(sorted((g for _, g in parts), reverse=True)) != table.gpus_per_node[row]:
            out.append(f"job {name!r}: placement {parts} does not have the shape {table.gpus_per_node[row]} of its row")
        for node, _ in parts:
            if node not in known:
                out.append(f"job {name!r}: unknown node {node!r}")
            elif problem.cluster.node(node).gpu_type != table.gpu_type[row]:
                out.append(f"job {name!r}: node {node!r} is not of GPU type {table.gpu_type[row]}")
        if any(n not in known for n in nodes):
            continue
        placement = placement_of(problem, table, j, choice)
        usage.add_all(placement.shares)
        job = problem.job(name)
        out.extend(f"job {name!r}: {b}" for b in broken(job, table.plans[row], placement.gpus_per_node,
                                                          placement.total_cpus))
        if node_rules:
            out.extend(f"job {name!r}: {b}" for b in node_broken(problem, job, placement))
        if name in admission.waiting:
            out.append(f"job {name!r} runs although it waits for quota ({admission.waiting[name]})")
    for name in admission.protected:
        choice = choices.get(name)
        if choice is None:
            out.append(f"guaranteed job {name!r} does not run")
        elif not reaches_guarantee(table, choice.row)[0]:
            j = table.index_of(name)
            out.append(f"guaranteed job {name!r} gets {table.throughput[choice.row]:.4g} samples/s, below the "
                       f"{table.reference_throughput[j]:.4g} of its request")
        elif not admission.meets_guarantee(table, choice.row)[0]:
            out.append(f"guaranteed job {name!r} runs on {table.gpu_type[choice.row]}, not on "
                       f"{admission.gpu_type[name]}, the GPU type it is admitted on")
    deadlines = admission.deadlines
    for name in () if deadlines is None else deadlines.admitted:
        choice, need = choices.get(name), deadlines.needs[name]
        if choice is None:
            out.append(f"deadline job {name!r}, admitted, does not run")
        elif table.throughput[choice.row] < need * (1.0 - RATE_RTOL):
            out.append(f"deadline job {name!r}, admitted, gets {table.throughput[choice.row]:.4g} samples/s, below the "
                       f"{need:.4g} its deadline needs")
    for n in problem.cluster.nodes:
        for o in usage.excess(n.name, problem.free(n.name), CAPACITY_TOL):
            out.append(f"node {o.node!r}: {o.used:g} {o.unit} allocated, {o.capacity:g} free")
    if not out:
        out.extend(priority_broken(problem, table, choices, admission))
    return out


__all__ = ["CAPACITY_TOL", "violations"]
