"""Which on-loan servers to return (thesis Sec. 3.4 and 3.7.3): Lyra's reclaiming heuristic and the
Random and SCF baselines, as functions of a :class:`~optsched.rounds.lyra_reclaim.view.ReclaimView`
returning server indices in the order they are picked.

**Lyra** (Sec. 3.4, Table 3.1). The preemption cost of a server is the sum, over the jobs with base
workers on it, of the job's *server fraction* ``1 / span`` (span: the on-loan servers holding the job's
base workers; the servers a preemption of the job helps vacate). Repeatedly the cheapest server is
taken, its jobs are preempted everywhere, and the costs of the servers they shared are lowered, until
``count`` servers are taken. Servers without base workers cost 0, so idle servers and then the
flexible-demand group go first: returning them only scales elastic jobs in (Sec. 3.5.3, "release the
server group for flexible demands first without any preemption"). Ties in cost are broken by
(1) collateral damage, (2) flexible GPUs scaled in, (3) server order.

*Collateral damage of taking server s* (the thesis names the tie-break but not its formula; our
choice, after the metric of Sec. 3.7.3, "GPUs vacated in excess of the reclaiming demand"): the GPUs
the jobs preempted with ``s`` hold on other servers, except those on on-loan servers the preemption
leaves without base workers, counting up to ``count - taken - 1`` such servers (they become free picks
that still serve the demand). On Fig. 3.5 this prefers server 1 (it frees server 2 whole, damage 0)
to servers 4 and 6 (each frees one GPU on the shared server 5), which is the optimum of Table 3.1.

**Random**: servers drawn uniformly (``numpy.random.Generator``). **SCF** (smallest count first):
the servers hosting the fewest jobs (any workers), then server order.

Cost: Lyra O(servers) numpy work per step, a step per server taken but one for a run of servers without base
workers at the lowest cost (:func:`lyra_reclaim_within`), plus the tie-break over the tied servers with base
workers (each O(its jobs' shares)); SCF O(servers log servers).
"""

from __future__ import annotations

import heapq

import numpy as np

from optsched.core.deadline import Deadline
from optsched.rounds.lyra_reclaim.view import ReclaimView

_TIE = 1e-9
#: steps of Lyra's heuristic between two looks at its deadline (a millisecond or two on 100,000 servers)
CHECK_STEPS = 16
#: the definitions of a server's preemption cost of Table 3.1 (Lyra uses ``server-fraction``)
COST_DEFINITIONS = ("jobs", "gpu-fraction", "server-fraction")


def server_costs(view: ReclaimView, definition: str = "server-fraction") -> np.ndarray:
    """Preemption cost of every on-loan server under one definition of Table 3.1: the number of jobs
    with base workers on it, the sum of the fractions of those jobs' GPUs it holds, or the sum of their
    server fractions (``1 / span``, module docstring)."""
    if definition not in COST_DEFINITIONS:
        raise ValueError(f"unknown cost definition {definition!r}; known: {', '.join(COST_DEFINITIONS)}")
    out = np.zeros(len(view.servers))
    for s, js in enumerate(view.base_jobs):
        for j in js:
            if definition == "jobs":
                out[s] += 1
            elif definition == "server-fraction":
                out[s] += 1.0 / len(view.job_servers[j])
            else:
                gpus = view.job_gpus[j]
                out[s] += gpus.get(view.servers[s], 0) / sum(gpus.values())
    return out


def lyra_reclaim(view: ReclaimView, count: int) -> list[int]:
    """Lyra's reclaiming heuristic (module docstring): the servers to return, in the order picked."""
    return lyra_reclaim_within(view, count, None)[0]


def lyra_reclaim_within(view: ReclaimView, count: int, deadline: Deadline | None) -> tuple[list[int], bool]:
    """:func:`lyra_reclaim` within ``deadline``: the picks and whether the deadline cut the heuristic short. Past
    the deadline (looked at every :data:`CHECK_STEPS` steps: a small round always finishes) the servers still to
    take are the cheapest left by their costs at that moment, then flexible GPUs, then order, without the costs
    falling as the jobs they preempt go or the collateral-damage tie-break (one sort; a partial answer that still
    returns ``count`` servers).

    Work saved without changing a pick (``tests/heuristics/test_lyra_reclaim_speed.py`` checks it against the plain
    heuristic): a tie among servers without base workers (their collateral damage is 0) is broken by flexible GPUs
    and order over arrays; the damage is computed for the tied servers with base workers only; and when every tied
    server is without base workers and at exactly the lowest cost (the idle and flexible-only servers, cost 0),
    taking one preempts nothing and changes no cost, so they are taken together in that order (issue 26, item 2:
    12,886 of 103,093 on-loan servers took 11 s one at a time)."""
    n = len(view.servers)
    target = min(count, n)
    span = [len(s) for s in view.job_servers]
    alive_on = [set(js) for js in view.base_jobs]
    has_base = np.array([bool(a) for a in alive_on], dtype=bool)   # alive_on[s] is not empty, as an array
    cost = server_costs(view)
    masked = cost.copy()   # cost, inf once taken
    flex = [dict(f) for f in view.flex]
    flex_gpus = np.array([sum(f.values()) for f in flex], dtype=np.int64)
    flex_on: dict[str, list[int]] = {}   # job -> the servers holding its flexible workers
    for s2, f in enumerate(flex):
        for name in f:
            flex_on.setdefault(name, []).append(s2)
    taken = np.zeros(n, dtype=bool)
    picks: list[int] = []
    step = 0
    while len(picks) < target:
        step += 1
        if deadline is not None and not step % CHECK_STEPS and deadline.expired():
            rest = np.flatnonzero(~taken)
            rest = rest[np.lexsort((rest, flex_gpus[rest], masked[rest]))][:target - len(picks)]
            picks.extend(rest.tolist())
            return picks, True
        low = masked.min()
        ties = np.flatnonzero(masked <= low + _TIE)
        hit_mask = has_base[ties]
        if not hit_mask.any() and bool((masked[ties] == low).all()):
            batch = ties[np.lexsort((ties, flex_gpus[ties]))][:target - len(picks)]
            taken[batch] = True
            masked[batch] = np.inf
            cost[batch] = 0.0
            picks.extend(batch.tolist())
            continue
        if ties.size == 1:
            s = int(ties[0])
        else:
            left = count - len(picks) - 1
            hit = ties[hit_mask].tolist()
            keys = [(_collateral(view, alive_on, taken, t, left), int(flex_gpus[t]), t) for t in hit]
            if len(hit) < ties.size:   # servers without base workers: damage 0, then flexible GPUs, order
                free = ties[~hit_mask]
                first = int(free[np.lexsort((free, flex_gpus[free]))[0]])
                keys.append((0, int(flex_gpus[first]), first))
            s = min(keys)[2]
        taken[s] = True
        masked[s] = np.inf
        picks.append(s)
        for j in list(alive_on[s]):
            name = view.jobs[j]
            for s2 in view.job_servers[j]:
                alive_on[s2].discard(j)
                has_base[s2] = bool(alive_on[s2])
                cost[s2] -= 1.0 / span[j]
                if not taken[s2]:
                    masked[s2] = cost[s2]
            for s2 in flex_on.pop(name, ()):
                flex_gpus[s2] -= flex[s2].pop(name, 0)
        cost[s] = 0.0
    return picks, False


def _collateral(view: ReclaimView, alive_on: list[set[int]], taken: np.ndarray, s: int, left: int) -> int:
    """Collateral damage of taking server ``s`` with ``left`` more servers to take (module docstring)."""
    victims = alive_on[s]
    if not victims:
        return 0
    freed: dict[str, int] = {}
    for j in victims:
        for node, g in view.job_gpus[j].items():
            if node != view.servers[s]:
                freed[node] = freed.get(node, 0) + g
    total = sum(freed.values())
    if left <= 0:
        return total
    index = view.server_index
    vacated = sorted((g for node, g in freed.items()
                      if node in index and not taken[index[node]] and alive_on[index[node]] <= victims),
                     reverse=True)
    return total - sum(vacated[:left])


def random_reclaim(view: ReclaimView, count: int, rng: np.random.Generator) -> list[int]:
    """``count`` servers drawn uniformly at random."""
    return [int(s) for s in rng.choice(len(view.servers), size=min(count, len(view.servers)), replace=False)]


def scf_reclaim(view: ReclaimView, count: int) -> list[int]:
    """Smallest (job) count first: the ``count`` servers hosting the fewest jobs."""
    return [s for _, s in heapq.nsmallest(count, ((len(js), s) for s, js in enumerate(view.jobs_on)))]


__all__ = ["CHECK_STEPS", "COST_DEFINITIONS", "lyra_reclaim", "lyra_reclaim_within", "server_costs", "random_reclaim",
           "scf_reclaim"]
