"""Small Crius rounds for tests: a toy heterogeneous cluster, toy operator graphs, and a brute-force
optimum of a round (every choice of every job, every mapping of parts to nodes)."""

from __future__ import annotations

import itertools
from typing import Mapping, Sequence

from optsched.core import Allocation, Cluster, GPUType, Job, Node, NodeShare, Placement
from optsched.perf.crius.cell_estimator import cell_plan
from optsched.perf.crius.op_graph import Operator, OperatorGraph
from optsched.rounds.crius.admission import admit, allowed_rows
from optsched.rounds.crius.capacity import part_share, slot_rates
from optsched.rounds.crius.choice import Choice, keep_choice
from optsched.rounds.crius.objective import objective
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

FAST = GPUType("fast", 40.0, 200.0, intra_node_gbps=100.0, intra_link="nvlink", efficiency=0.5)
SLOW = GPUType("slow", 24.0, 100.0, intra_node_gbps=20.0, intra_link="pcie", efficiency=0.4)


def toy_cluster(fast_nodes: int = 2, fast_gpus: int = 2, slow_nodes: int = 1, slow_gpus: int = 4) -> Cluster:
    nodes = [Node(f"f{i}", "fast", fast_gpus, 8 * fast_gpus, 64.0 * fast_gpus) for i in range(fast_nodes)]
    nodes += [Node(f"s{i}", "slow", slow_gpus, 8 * slow_gpus, 64.0 * slow_gpus) for i in range(slow_nodes)]
    return Cluster("toy-crius", tuple(nodes), (FAST, SLOW), 100.0, 10.0, 16.0)


def toy_graph(name: str, flops: float = 2e11, params: float = 2e8, ops: int = 4, batch: int = 64) -> OperatorGraph:
    o = [Operator(f"op{i}", flops=flops * (1 + 0.5 * i), params=params, act_bytes=1e6, tp_allreduce_bytes=1e5,
                  tp_allreduces=4, kernels=10) for i in range(ops)]
    return OperatorGraph.of(name, batch, o, [(f"op{i}", f"op{i + 1}", 2e5) for i in range(ops - 1)])


def late_deadline_round(depth: int) -> CriusRound:
    """A reviewer's round (deadline objective, search depth ``depth``): running deadline job j0 on a Cell
    (1 fast GPU) that misses its deadline, while larger Cells meet it; j1 runs next to outside work."""
    c = Cluster("fz", (Node("f0", "fast", 3, 24, 192.0), Node("f1", "fast", 2, 8, 128.0),
                       Node("s0", "slow", 2, 16, 128.0), Node("s1", "slow", 2, 16, 64.0)), (FAST, SLOW),
                100.0, 10.0, 16.0)
    models = (("poor", toy_graph("poor", flops=2e10, params=1e9)),
              ("wide", toy_graph("wide", flops=5e11, params=5e8, ops=6)))
    jobs = (Job("j0", "wide", 4, 100, submit_time=1.0, completed_iterations=36.0, deadline=2709.1),
            Job("j1", "poor", 4, 100, submit_time=0.0, completed_iterations=35.0))
    return CriusRound(cluster=c, jobs=jobs, models=models, time=10.0, search_depth=depth, objective="deadline",
                      running=(alloc_on(c, "j0", "fast", {"f1": 1}, 1), alloc_on(c, "j1", "slow", {"s0": 1}, 1)),
                      occupied=(("s0", NodeShare(1, 3, 20.13)),))


def alloc_on(problem_cluster: Cluster, job: str, gpu_type: str, shares: Mapping[str, int], stages: int) -> Allocation:
    """A running Cell of ``job`` with ``shares`` (node -> GPUs) and CPUs/memory in proportion."""
    rates = slot_rates(problem_cluster)
    placement = Placement.of({n: part_share(rates, gpu_type, g) for n, g in shares.items()})
    return Allocation(job, cell_plan(sum(shares.values()), stages), placement)


def _fits(problem: CriusRound, table: CriusTable, chosen: Mapping[str, int], kept: Sequence[str],
          touch: tuple[str, Sequence[set[str]]] | None = None) -> bool:
    """Whether the rows of ``chosen`` map onto nodes (every mapping tried) next to the kept jobs; with
    ``touch = (job, node sets)`` only mappings where ``job`` has a part on a node of every set count."""
    free = {n.name: problem.free(n.name) for n in problem.cluster.nodes}
    left = {n: [s.gpus, s.cpus, s.mem_gib] for n, s in free.items()}
    for name in kept:
        for n, s in problem.current(name).placement.shares:  # type: ignore[union-attr]
            left[n][0] -= s.gpus
            left[n][1] -= s.cpus
            left[n][2] -= s.mem_gib
    rates = slot_rates(problem.cluster)
    parts: list[tuple[str, str, NodeShare]] = []
    for name, row in chosen.items():
        t = table.gpu_type[row]
        for _ in range(int(table.parts[row])):
            parts.append((name, t, part_share(rates, t, int(table.unit[row]))))

    def rec(i: int, used: dict[str, set[str]]) -> bool:
        if i == len(parts):
            return touch is None or all(used.get(touch[0], set()) & nodes for nodes in touch[1])
        name, t, share = parts[i]
        for n in problem.cluster.nodes:
            if n.gpu_type != t or n.name in used.setdefault(name, set()):
                continue
            l = left[n.name]
            if l[0] >= share.gpus and l[1] >= share.cpus and l[2] >= share.mem_gib - 1e-9:
                l[0] -= share.gpus
                l[1] -= share.cpus
                l[2] -= share.mem_gib
                used[name].add(n.name)
                ok = rec(i + 1, used)
                used[name].discard(n.name)
                l[0] += share.gpus
                l[1] += share.cpus
                l[2] += share.mem_gib
                if ok:
                    return True
        return False
    return all(min(v) >= -1e-9 for v in left.values()) and rec(0, {})


def brute_force(problem: CriusRound, table: CriusTable, *, for_pending: bool = True) -> float:
    """The best objective over every combination of (nothing, keep, a candidate Cell) per job that obeys
    the admission and the search depth (``D`` rescaled running jobs per scheduling choice), suspends no running job
    but dropped and late ones and opportunistic ones that held GPUs where the protected job runs, and maps
    onto the nodes (``for_pending=False``: the opportunistic jobs may be suspended for any gain, the rule
    before issue 25)."""
    adm = admit(problem, table)
    options: list[list[object]] = []
    for j, job in enumerate(problem.jobs):
        opts: list[object] = [None]
        if job.name in adm.dropped:
            options.append(opts)
            continue
        cur = int(table.current_row[j])
        if cur >= 0:
            opts.append("keep")
            late = problem.objective == "deadline" and job.deadline is not None and not table.deadline_ok[cur]
            if job.name not in adm.opportunistic and not late:
                opts.remove(None)  # may not be suspended
        opts.extend(int(r) for r in allowed_rows(problem, table, j, table.candidates_of(j)))
        options.append(opts)
    best = float("-inf")
    for combo in itertools.product(*options):
        chosen = {problem.jobs[j].name: o for j, o in enumerate(combo) if isinstance(o, int)}
        kept = [problem.jobs[j].name for j, o in enumerate(combo) if o == "keep"]
        running = set(chosen) | set(kept)
        if adm.protected and adm.protected not in running:
            continue
        if any(g not in running for g in adm.guaranteed):
            continue
        # D per scheduling choice (Crius Sec. 6.1): one choice per queued job started, one per late running job
        # rescaled, one for Algorithm 1 line 12
        late = [problem.objective == "deadline" and problem.jobs[j].deadline is not None and table.current_row[j] >= 0
                and not table.deadline_ok[table.current_row[j]] for j in range(len(combo))]
        rescaled = sum(1 for j, o in enumerate(combo) if isinstance(o, int) and table.current_row[j] >= 0)
        n_choices = 1 + sum(1 for j, o in enumerate(combo)
                            if isinstance(o, int) and (table.current_row[j] < 0 or late[j]))
        if rescaled > problem.search_depth * n_choices:
            continue
        if problem.objective == "deadline" and any(
                table.current_row[j] >= 0 and o == "keep" and problem.jobs[j].deadline is not None
                and not table.deadline_ok[table.current_row[j]] for j, o in enumerate(combo)):
            continue
        # Crius Sec. 6.1, "the opportunistic jobs will be suspended to launch the pending one": every suspended
        # opportunistic job (not late) held GPUs on a node where the protected job runs a part
        gone = [{n for n, sh in problem.current(problem.jobs[j].name).placement.shares  # type: ignore[union-attr]
                 if sh.gpus > 0}
                for j, o in enumerate(combo) if o is None and problem.jobs[j].name in adm.opportunistic
                and not late[j]]
        if not for_pending:
            gone = []
        if gone and not adm.protected:
            continue
        if not _fits(problem, table, chosen, kept, (adm.protected, gone) if gone else None):
            continue
        choices = {n: Choice(r, ()) for n, r in chosen.items()}
        choices.update({n: keep_choice(problem, table, table.index_of(n)) for n in kept})
        best = max(best, objective(problem, table, choices))
    return best


__all__ = ["FAST", "SLOW", "alloc_on", "brute_force", "late_deadline_round", "toy_cluster", "toy_graph"]
