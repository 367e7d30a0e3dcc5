"""The feasibility check every returned Crius decision passes: rows of the right job, parts on distinct
nodes of the row's GPU type in the row's shape, node capacities in GPUs, CPUs and memory, the search
depth (at most ``D`` running jobs rescaled per scheduling choice,
:func:`~optsched.rounds.crius.choice.depth_bound`), the protected job started, guaranteed jobs
kept on Cells meeting their deadlines, deadline jobs only on such Cells and dropped jobs not running
(:mod:`~optsched.rounds.crius.admission`), and no running job suspended but the opportunistic ones,
only to launch the pending job (each held GPUs on a node the protected job runs on, Sec. 6.1), and
the dropped or late deadline jobs (Sec. 8.5).

Crius's methods (Algorithm 1 and the exact model) pass every rule. The baselines (Sec. 8.1), which are
not Crius, pass the rules of shapes and capacities only: they are bound neither by the search depth
nor by opportunistic execution (their admission protects nobody; they may preempt any job) nor by
the deadline rules -- they schedule for throughput under either objective and are scored by it
(:mod:`~optsched.heuristics.baselines.cells`); check them with ``search_depth=False,
deadline_rows=False, suspensions=False``."""

from __future__ import annotations

from typing import Mapping

from optsched.core.capacity import NodeUsage
from optsched.rounds.crius.admission import CriusAdmission, admit
from optsched.rounds.crius.choice import Choice, counts, depth_bound, is_late, placement_of
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: tolerance of the capacity check (GPUs, CPUs, GiB)
CAPACITY_TOL = 1e-6


def violations(problem: CriusRound, table: CriusTable, choices: Mapping[str, Choice],
               admission: CriusAdmission | None = None, *, search_depth: bool = True,
               deadline_rows: bool = True, suspensions: bool = True) -> list[str]:
    """Every rule ``choices`` breaks (module docstring; empty: feasible). ``search_depth=False`` leaves
    the search-depth bound out, ``deadline_rows=False`` the rule that deadline jobs run only on Cells
    meeting their deadlines, ``suspensions=False`` the rule that only opportunistic, dropped and late
    running jobs are suspended (all three: the baselines)."""
    admission = admission or admit(problem, table)
    out: list[str] = []
    usage = NodeUsage()
    deadline_mode = problem.deadline_aware
    for name, choice in choices.items():
        if name not in table.coefficients.job_position:
            out.append(f"job {name!r} is not in the round")
            continue
        j = table.index_of(name)
        row = choice.row
        if not 0 <= row < len(table) or table.job_index[row] != j:
            out.append(f"job {name!r}: row {row} is not one of its Cells")
            continue
        nodes = [n for n, _ in choice.parts]
        if len(set(nodes)) != len(nodes):
            out.append(f"job {name!r}: a node holds two of its parts")
        if tuple(sorted((g for _, g in choice.parts), reverse=True)) != table.coefficients.gpus_per_node[row]:
            out.append(f"job {name!r}: parts {choice.parts} are not the shape {table.coefficients.gpus_per_node[row]} "
                       "of its Cell")
        bad = False
        for node, _ in choice.parts:
            try:
                t = problem.cluster.node(node).gpu_type
            except Exception:  # noqa: BLE001 - UnknownNameError
                out.append(f"job {name!r}: unknown node {node!r}")
                bad = True
                continue
            if t != table.gpu_type[row]:
                out.append(f"job {name!r}: node {node!r} is not of GPU type {table.gpu_type[row]}")
        if bad:
            continue
        usage.add_all(placement_of(problem, table, j, choice).shares)
        if name in admission.dropped:
            out.append(f"job {name!r} runs although it is dropped (no Cell meets its deadline)")
        if deadline_rows and deadline_mode and problem.jobs[j].deadline is not None and not table.deadline_ok[row]:
            out.append(f"job {name!r} runs a Cell that misses its deadline")
    if admission.protected is not None and admission.protected not in choices:
        out.append(f"protected job {admission.protected!r} (opportunistic execution) does not start")
    for name in admission.guaranteed:
        if name not in choices:
            out.append(f"job {name!r}, guaranteed its deadline, does not run")
    if suspensions:
        prot = choices.get(admission.protected) if admission.protected is not None else None
        prot_nodes = {n for n, _ in prot.parts} if prot is not None else set()
        for j, job in enumerate(problem.jobs):
            cur = int(table.current_row[j])
            if cur < 0 or job.name in choices or job.name in admission.dropped or is_late(problem, table, j):
                continue
            if job.name in admission.opportunistic:
                alloc = problem.current(job.name)
                held = {n for n, sh in alloc.placement.shares if sh.gpus > 0} if alloc is not None else set()
                if not held & prot_nodes:
                    out.append(f"opportunistic job {job.name!r} is suspended, but not to launch the pending job: it "
                               f"held no GPUs on a node the protected job {admission.protected!r} runs on (Crius "
                               "Sec. 6.1: \"the opportunistic jobs will be suspended to launch the pending one\")")
                continue
            out.append(f"running job {job.name!r} is suspended, but only opportunistic jobs (for the protected "
                       "job) and dropped or late deadline jobs may be (Crius Sec. 6.1, 8.5)")
    if search_depth:
        rescaled, _ = counts(problem, table, choices)
        most = depth_bound(problem, table, choices)
        if rescaled > most:
            out.append(f"{rescaled} running jobs rescaled, more than the search depth {problem.search_depth} allows "
                       f"({most}: D per scheduling choice, Crius Sec. 6.1)")
    for n in problem.cluster.nodes:
        for o in usage.excess(n.name, problem.free(n.name), CAPACITY_TOL):
            out.append(f"node {o.node!r}: {o.used:g} {o.unit} allocated, {o.capacity:g} free")
    return out


__all__ = ["CAPACITY_TOL", "violations"]
