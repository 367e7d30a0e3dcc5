"""The source of a toy round kind, ``toy-gang``, that ``tests/test_new_kind.py`` writes into a temporary
module and imports: everything a new kind needs, in the order of ``docs/architecture.md`` ("A new round
kind"), each step in a few lines. Not imported by the package.

A toy-gang round runs each job on exactly its requested GPUs on one node, or not at all; its objective
is the number of GPUs running less 0.5 for each running job moved or stopped. The heuristic is
first-fit in submission order (running jobs first, where they are); the exact model a CP-SAT
assignment warm-started by it.
"""

SOURCE = '''
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import numpy as np
from ortools.sat.python import cp_model

from optsched.core.allocation import Allocation, NodeShare, Placement
from optsched.core.catalog import a800_cluster
from optsched.core.deadline import Deadline
from optsched.core.decision import Decision, JobAllocations, JobDecision, relative_gap
from optsched.core.job import Job
from optsched.core.kinds import RoundKind, register_kind
from optsched.core.plan import ExecutionPlan
from optsched.core.round import RoundProblem
from optsched.formulations.solution import ModelSize, Solution
from optsched.policies.exact import ExactKind, Outcome, WarmStart, exact_method, hint_of, register_exact
from optsched.policies.registry import register_method
from optsched.sim.setup import SimulationInputs, SimulationRequest, SimulationSetup, register_simulation

MOVE_PENALTY = 0.5


# 1. rounds/<kind>/: the problem class, its generator, the registration of the kind
@dataclass(frozen=True)
class ToyRound(RoundProblem):
    KIND: ClassVar[str] = "toy-gang"


def generate(*, seed: int = 0, nodes: int = 2, jobs: int = 6) -> ToyRound:
    rng = np.random.default_rng(seed)
    return ToyRound(cluster=a800_cluster(nodes, 8, "toy"),
                    jobs=tuple(Job(f"j{i}", "gpt2", int(rng.choice([1, 2, 4, 8])), 500) for i in range(jobs)))


register_kind(RoundKind("toy-gang", ToyRound, JobAllocations, generate, "a toy: gangs on one node"))


def node_of(problem: ToyRound, job: str) -> str | None:
    cur = problem.current(job)
    return None if cur is None else cur.placement.shares[0][0]


def value(problem: ToyRound, answer: Mapping[str, str]) -> float:
    moved = sum(1 for j in problem.jobs if node_of(problem, j.name) not in (None, answer.get(j.name)))
    return float(sum(problem.job(j).requested_gpus for j in answer)) - MOVE_PENALTY * moved


def to_decision(problem: ToyRound, answer: Mapping[str, str], method: str, status: str, **top: Any) -> Decision:
    out = []
    for j in problem.jobs:
        cur, node = problem.current(j.name), answer.get(j.name)
        if node is None:
            out.append(JobDecision(j.name, None, 0.0, 0.0, "wait" if cur is None else "preempt"))
            continue
        alloc = Allocation(j.name, ExecutionPlan(dp=j.requested_gpus),
                           Placement(((node, NodeShare(j.requested_gpus)),)))
        action = "start" if cur is None else ("keep" if cur == alloc else "reconfigure")
        out.append(JobDecision(j.name, cur if action == "keep" else alloc, float(j.requested_gpus), 1.0, action))
    obj = value(problem, answer)
    return Decision("toy-gang", method, status, obj, JobAllocations(tuple(out)),
                    gap=relative_gap(top.get("bound"), obj), **top)


# 2. heuristics/: first fit, running jobs first where they are
def first_fit(problem: ToyRound) -> dict[str, str]:
    free = {n.name: problem.free(n.name).gpus for n in problem.cluster.nodes}
    answer: dict[str, str] = {}
    for j in sorted(problem.jobs, key=lambda j: (node_of(problem, j.name) is None, j.submit_time, j.name)):
        where = [node_of(problem, j.name)] if node_of(problem, j.name) else list(free)
        for n in where:
            if n is not None and free[n] >= j.requested_gpus:
                answer[j.name], free[n] = n, free[n] - j.requested_gpus
                break
    return answer


@dataclass(frozen=True)
class FirstFitPolicy:
    kind: ClassVar[str] = "toy-gang"
    name: str = "first-fit"

    def decide(self, problem: RoundProblem) -> Decision:
        assert isinstance(problem, ToyRound)
        return to_decision(problem, first_fit(problem), self.name, "heuristic")


# 3. formulations/: the exact assignment
def solve_model(problem: ToyRound, time_limit: float, seed: int, hint: Mapping[str, str] | None) -> Solution:
    m = cp_model.CpModel()
    nodes = [n.name for n in problem.cluster.nodes]
    x = {(j.name, n): m.NewBoolVar(f"x_{j.name}_{n}") for j in problem.jobs for n in nodes}
    for j in problem.jobs:
        m.AddAtMostOne(x[j.name, n] for n in nodes)
    for n in nodes:
        m.Add(sum(j.requested_gpus * x[j.name, n] for j in problem.jobs) <= problem.free(n).gpus)
    running = [j for j in problem.jobs if node_of(problem, j.name)]
    m.Maximize(sum(2 * j.requested_gpus * x[j.name, n] for j in problem.jobs for n in nodes)
               + sum(x[j.name, node_of(problem, j.name)] for j in running))   # doubled: 0.5 -> 1
    for (j, n), var in x.items():
        if hint is not None:
            m.AddHint(var, int(hint.get(j) == n))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.random_seed = seed
    solver.parameters.num_workers = 1
    code = solver.Solve(m)
    size = ModelSize(len(x), len(problem.jobs) + len(nodes), "assignment")
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return Solution("unknown", None, None, solver.WallTime(), hint is not None, size)
    answer = {j: n for (j, n), var in x.items() if solver.Value(var)}
    offset = MOVE_PENALTY * len(running)
    return Solution("optimal" if code == cp_model.OPTIMAL else "feasible", value(problem, answer),
                    solver.BestObjectiveBound() / 2 - offset, solver.WallTime(), hint is not None, size,
                    {"answer": answer})


# 4. policies/: the exact contract and the methods
class ToyExact(ExactKind[ToyRound, ToyRound, Mapping[str, str]]):
    problem_type: ClassVar[type[RoundProblem]] = ToyRound
    answer_key: ClassVar[str] = "answer"

    def prepare(self, problem: ToyRound, deadline: Deadline) -> ToyRound:
        return problem

    def warm_start(self, ctx: ToyRound, deadline: Deadline) -> WarmStart[Mapping[str, str]]:
        answer = first_fit(ctx)
        return WarmStart(answer, value(ctx, answer))

    def solve(self, ctx: ToyRound, warm: WarmStart[Mapping[str, str]] | None, *, time_limit: float, seed: int,
              workers: int, backend: str, cold: bool = False,
              trace: list[tuple[float, float, float]] | None = None) -> Solution:
        return solve_model(ctx, time_limit, seed, hint_of(warm, cold))

    def assemble(self, ctx: ToyRound, warm: WarmStart[Mapping[str, str]] | None, answer: Mapping[str, str],
                 outcome: Outcome, method: str) -> Decision:
        return to_decision(ctx, answer, method, outcome.status, bound=outcome.bound,
                           solve_seconds=outcome.solve_seconds, heuristic_objective=outcome.heuristic_objective,
                           warm_start=outcome.warm_start, message=outcome.message)


register_exact("toy-gang", lambda o: ToyExact())
register_method("toy-gang", "exact", exact_method("exact", lambda o: ToyExact()), "CP-SAT assignment")
register_method("toy-gang", "first-fit", lambda o: FirstFitPolicy(), "first fit (heuristic)")


# 5. sim/setups/: what a simulation of the kind runs on
class ToyTruth:
    def iteration_time(self, model: str, gpu_type: str, plan: object, gpus_per_node: tuple[int, ...],
                       cpus_per_gpu: float) -> float:
        return 8.0 / sum(gpus_per_node)

    def describe(self) -> str:
        return "toy: 8 s per iteration on one GPU"


def build(request: SimulationRequest) -> SimulationInputs:
    rng = np.random.default_rng(request.seed)
    jobs = tuple(Job(f"t{i}", "gpt2", int(rng.choice([2, 4, 8])), 200, submit_time=60.0 * i)
                 for i in range(request.jobs))
    return SimulationInputs(a800_cluster(2, 8, "toy"), jobs, ToyTruth(), "toy trace",
                            f"toy trace: {len(jobs)} jobs")


register_simulation(SimulationSetup("toy-gang", "a toy", ("first-fit", "exact"), None, build, reads=("jobs",)))
'''
