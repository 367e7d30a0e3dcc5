"""A Pollux-like allocation of a Lyra round: the baseline of Lyra thesis Sec. 3.7.1 and 3.7.4 ("Pollux [120]: Pollux
computes the goodput of training jobs and applies genetic algorithms to find the resource allocation"; "we set the
number of iterations to 250").

**What it allocates.** Workers per job and a pool (training, or inference for a fungible job), over the round's
jobs, within the GPUs each pool may hand out (:func:`~optsched.rounds.lyra_allocate.capacity.available`, in training
GPUs, as Lyra's allocation counts them). A queued job gets 0 workers or ``w_min .. w_max`` (an inelastic job exactly
its request: Pollux "considers job's minimum demand", Sec. 3.7.4). A running job keeps at least what it starts the
round with (:func:`~optsched.heuristics.lyra_allocate.running_base`) on its pool: Pollux pins "non-preemptible" jobs
that hold an allocation (its scheduler's ``ispinned``), and with no job checkpointing (thesis Sec. 3.7.3) a
preempted job would lose its progress; an elastic one is resized up to ``w_max``. Placement on servers is the
simulator policy's (naive best-fit decreasing), not part of the genome (Pollux's genome is replicas per node; ours
is workers per job, the servers chosen after).

**Goodput** (Pollux: goodput = throughput x statistical efficiency). Throughput: the round's work rate on ``w``
workers (:func:`~optsched.rounds.lyra.jobs.work_rate`, the round's ``scaling``). Statistical efficiency: Pollux's
``EFFICIENCY(M) = (phi + M0) / (phi + M)`` with the global batch ``M`` growing with the workers at a fixed
per-worker batch, ``M = M0 x w / w_min``, so ``E(w) = (r + 1) / (r + w / w_min)`` with ``r = phi / M0``, the
gradient noise scale over the base batch (:data:`NOISE_RATIO`). Where we depart: the thesis "adopt[s] the model
distribution listed by Pollux to capture the model goodput"; our traces (Philly rows) name no model, so every job
gets the one ratio ``r`` of our own (default 4: doubling the workers keeps 5/6 of the samples' worth), and the batch
is not tuned per allocation. The efficiency only shapes the choice: jobs run at the simulator's ground truth like
every other method's (Lyra+TunedJobs, whose jobs run faster with tuned batches, is not modelled).

**Fitness** (Pollux's scheduler, one objective: the cluster is not autoscaled). The sum over jobs of ``SPEEDUP_j =
GOODPUT_j(w) / GOODPUT_j(w_min)``, scaled by the job's dominant share times the servers (``gpus_per_worker x servers
/ GPUs``: a worker's share of the cluster, as a server's worth), times ``1 - RESTART_PENALTY`` (0.1) for a job whose
workers change this round (a start included); 0 for a job without workers. Pinned work (running jobs that cannot
change) adds a constant and is left out.

**The genetic algorithm** (Pollux's operators; NSGA-II with one objective is elitist truncation): a population of
:data:`POPULATION` (100) genomes, the first the current allocation, the others that one mutated; each generation
:data:`POPULATION` children by binary tournament, single-point crossover over jobs and Pollux's mutation (each gene
with probability 1 / (genes of its kind, zero or not), drawn uniformly within its range, 0 or ``w_min .. w_max`` for
a queued job, the pool drawn among the job's pools), every genome repaired to the capacities (jobs in Pollux's
order, running ones first, then by base workers and submit time: a job's workers cut to what its pool has left after
the jobs before it, counted at what they asked for, and a queued job below its base demand gets none), then the best
:data:`POPULATION` of parents and children survive. So the best fitness never decreases and the answer is never
worse than the initial population's best. ``generations`` (default :data:`GENERATIONS`, 250, the thesis' setting)
stop early when ``deadline`` expires (``cut`` says so). Seeded by ``seed`` (``numpy.random.default_rng``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.core.checks import require_seed
from optsched.core.deadline import Deadline
from optsched.core.errors import ValidationError
from optsched.heuristics.lyra_allocate import running_base
from optsched.rounds.lyra.jobs import SUBLINEAR_LOSS, base_workers, max_workers
from optsched.rounds.lyra.problem import INFERENCE, TRAINING, LyraRound
from optsched.rounds.lyra_allocate.capacity import available, current_pool

#: Lyra thesis Sec. 3.7.4: "we set the number of iterations to 250" (Pollux's preset: 100)
GENERATIONS = 250
#: Pollux's scheduler: ``NSGA2(pop_size=100, ...)``
POPULATION = 100
#: Pollux's scheduler: ``self._restart_penalty = 0.1``
RESTART_PENALTY = 0.1
#: ours (module docstring): gradient noise scale over the base batch, phi / M0
NOISE_RATIO = 4.0

_POOLS = (TRAINING, INFERENCE)


@dataclass(frozen=True)
class PolluxResult:
    """The best genome: workers and pool per job (jobs with workers only), its fitness, the best fitness of the
    initial population, the generations run and whether the deadline cut them short."""

    workers: dict[str, int]
    pool: dict[str, str]
    fitness: float
    initial_fitness: float
    generations: int
    cut: bool


@dataclass(frozen=True)
class _Genes:
    """The jobs with a choice, in Pollux's order, as arrays: names, range (``lo``, ``hi``; ``lo`` 0 for a queued
    job), base workers, GPUs per worker, current workers, whether queued, allowed pools (0 training, 1 inference;
    ``fixed_pool``: -1 free between the two, else the pool), and each pool's capacity left for them."""

    names: tuple[str, ...]
    lo: np.ndarray
    hi: np.ndarray
    base: np.ndarray
    gpw: np.ndarray
    current: np.ndarray
    queued: np.ndarray
    fixed_pool: np.ndarray
    capacity: np.ndarray


def _genes(problem: LyraRound) -> _Genes:
    cap = available(problem)
    rows = []
    for j in problem.jobs:
        pool = current_pool(problem, j.name)
        b, hi = base_workers(j), max_workers(j)
        if pool is not None:
            start = running_base(problem, j)
            if start >= hi:   # pinned: nothing to choose (its workers are not in the capacity either)
                continue
            rows.append((0, b, j.submit_time, j.name, start, hi, b, j.gpus_per_worker, problem.workers_of(j.name),
                         False, _POOLS.index(pool)))
        else:
            fixed = -1 if j.fungible else 0
            rows.append((1, b, j.submit_time, j.name, 0, hi, b, j.gpus_per_worker, 0, True, fixed))
    rows.sort(key=lambda r: r[:4])
    col = list(zip(*rows)) if rows else [()] * 11
    return _Genes(tuple(col[3]), np.array(col[4], dtype=np.int64), np.array(col[5], dtype=np.int64),
                  np.array(col[6], dtype=np.int64), np.array(col[7], dtype=np.int64),
                  np.array(col[8], dtype=np.int64), np.array(col[9], dtype=bool), np.array(col[10], dtype=np.int64),
                  np.array([cap[TRAINING], cap[INFERENCE]], dtype=np.int64))


def _repair(g: _Genes, w: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Workers of every genome within the capacities (module docstring): a row's job gets at most what its pool
    has left after the jobs before it, counted at what they asked for (one pass, so a row is always feasible)."""
    w = np.clip(w, g.lo, g.hi)
    out = w.copy()
    for k in (0, 1):
        mine = pool == k
        ask = np.where(mine, (w - np.where(g.queued, 0, g.lo)) * g.gpw, 0)
        before = np.cumsum(ask, axis=1) - ask
        room = np.maximum(g.capacity[k] - before, 0) // g.gpw
        got = np.where(g.queued, np.minimum(w, room), g.lo + np.minimum(w - g.lo, room))
        out = np.where(mine, got, out)
    return np.where(g.queued & (out < g.base), 0, out)


def _fitness(g: _Genes, w: np.ndarray, scaling: str, servers: int, gpus: int, ratio: float) -> np.ndarray:
    """Pollux's fitness of every genome (module docstring)."""
    eff = 1.0 if scaling == "linear" else 1.0 - SUBLINEAR_LOSS
    b = g.base.astype(float)
    wf = w.astype(float)
    rate = np.minimum(wf, b) + eff * np.maximum(wf - b, 0.0)
    speedup = np.where(w > 0, rate / b * (ratio + 1.0) / (ratio + wf / b), 0.0)
    scaled = speedup * g.gpw * servers / max(gpus, 1)
    scaled = np.where(w != g.current, scaled * (1.0 - RESTART_PENALTY), scaled)
    return scaled.sum(axis=1)


def _mutate(g: _Genes, w: np.ndarray, pool: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pollux's mutation: each gene with probability 1 / (genes of its kind in the genome, zero or not), a value
    drawn uniformly within its range (and a pool among the job's)."""
    n = w.shape[1]
    nonzero = (w > 0).sum(axis=1, keepdims=True)
    prob = 1.0 / np.maximum(np.where(w > 0, nonzero, n - nonzero), 1)
    hit = rng.random(w.shape) < prob
    # a queued job's range is 0 or base..max (hi - base + 2 values), a running one's lo..hi
    k = np.floor(rng.random(w.shape) * np.where(g.queued, g.hi - g.base + 2, g.hi - g.lo + 1)).astype(np.int64)
    drawn = np.where(g.queued, np.where(k == 0, 0, g.base + k - 1), g.lo + k)
    free = g.fixed_pool < 0
    new_pool = np.where(free, (rng.random(w.shape) < 0.5).astype(np.int64), g.fixed_pool)
    return np.where(hit, drawn, w), np.where(hit, new_pool, pool)


def pollux_allocate(problem: LyraRound, *, seed: int = 0, generations: int = GENERATIONS,
                    population: int = POPULATION, noise_ratio: float = NOISE_RATIO,
                    deadline: Deadline | None = None) -> PolluxResult:
    """The genetic algorithm of the module docstring on ``problem``."""
    require_seed("pollux_allocate", seed)
    for name, v, lo in (("generations", generations, 0), ("population", population, 2)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValidationError(f"pollux: {name} must be an integer >= {lo}, got {v!r}")
    if isinstance(noise_ratio, bool) or not isinstance(noise_ratio, (int, float)) or not noise_ratio > 0:
        raise ValidationError(f"pollux: noise_ratio must be a number > 0, got {noise_ratio!r}")
    g = _genes(problem)
    kept = {j.name: problem.workers_of(j.name) for j in problem.jobs if problem.current(j.name) is not None}
    pools = {j: str(current_pool(problem, j)) for j in kept}
    if not g.names:
        return PolluxResult(kept, pools, 0.0, 0.0, 0, False)
    rng = np.random.default_rng(seed)
    servers, gpus = len(problem.cluster.nodes), sum(n.num_gpus for n in problem.cluster.nodes)

    def fit(w: np.ndarray) -> np.ndarray:
        return _fitness(g, w, problem.scaling, servers, gpus, float(noise_ratio))

    first_pool = np.where(g.fixed_pool < 0, 0, g.fixed_pool)
    w0 = np.broadcast_to(np.where(g.queued, 0, np.maximum(g.current, g.lo)), (population, len(g.names))).copy()
    p0 = np.broadcast_to(first_pool, w0.shape).copy()
    mw, mp = _mutate(g, w0[1:], p0[1:], rng)
    w0[1:], p0[1:] = mw, mp
    w, pool = _repair(g, w0, p0), p0
    f = fit(w)
    initial = float(f.max())
    done, cut = 0, False
    half = population // 2
    cols = np.arange(len(g.names))
    for _ in range(generations):
        if deadline is not None and deadline.expired():
            cut = True
            break
        a, b = rng.integers(population, size=(2, 2 * half))
        parents = np.where(f[a] >= f[b], a, b).reshape(2, half)
        point = rng.integers(len(g.names), size=(half, 1))
        left = cols < point
        cw = np.concatenate([np.where(left, w[parents[0]], w[parents[1]]),
                             np.where(left, w[parents[1]], w[parents[0]])])
        cp = np.concatenate([np.where(left, pool[parents[0]], pool[parents[1]]),
                             np.where(left, pool[parents[1]], pool[parents[0]])])
        cw, cp = _mutate(g, cw, cp, rng)
        cw = _repair(g, cw, cp)
        allw, allp, allf = np.concatenate([w, cw]), np.concatenate([pool, cp]), np.concatenate([f, fit(cw)])
        best = np.argsort(-allf, kind="stable")[:population]
        w, pool, f = allw[best], allp[best], allf[best]
        done += 1
    top = int(np.argmax(f))
    out_w, out_p = dict(kept), dict(pools)
    for i, name in enumerate(g.names):
        if w[top, i] > 0:
            out_w[name], out_p[name] = int(w[top, i]), _POOLS[int(pool[top, i])]
    return PolluxResult(out_w, out_p, float(f[top]), initial, done, cut)


__all__ = ["GENERATIONS", "NOISE_RATIO", "POPULATION", "PolluxResult", "RESTART_PENALTY", "pollux_allocate"]
