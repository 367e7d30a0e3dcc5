"""The exact Rubick round (formulations/rubick_round.py) and the solve API against brute force,
the heuristic, the paper's Fig. 8 example, and bad input."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from optsched import cli
from optsched.core import ExecutionPlan, InfeasibleError, Job, NodeShare, ValidationError
from optsched.core.catalog import a800_cluster
from optsched.formulations import rubick_round
from optsched.core.decision import Decision
from optsched.policies.exact import ExactPolicy
from optsched.policies.rubick import RubickExact
from optsched.policies.solve import solve
from optsched.rounds.rubick.admission import admit
from optsched.rounds.rubick.choice import Choice, is_trim
from optsched.rounds.rubick.decision import choices_of
from optsched.rounds.rubick.feasibility import violations
from optsched.rounds.rubick.generate import generate_rubick_round
from optsched.rounds.rubick.objective import objective
from optsched.rounds.rubick.problem import RubickRound
from optsched.rounds.rubick.table import build_round_table

from helpers import alloc, best_assignment, cpu_hungry_round, solve_tiny


def _brute_force(problem: RubickRound, table) -> float:
    """Best objective over every assignment: each job nothing or one row with its parts on distinct nodes."""
    nodes = [n.name for n in problem.cluster.nodes]
    options = []
    for j, name in enumerate(table.jobs):
        opts: list = [None]
        for k in rubick_round.allowed_rows(table, admit(problem, table))[j]:
            k = int(k)
            shape = table.gpus_per_node[k]
            for perm in itertools.permutations(nodes, len(shape)):
                opts.append(Choice(k, tuple(sorted(zip(perm, shape)))))
            cur = problem.current(name)
            if k == int(table.current_row[j]) and cur is not None:
                opts.append(Choice(k, tuple((n, s.gpus) for n, s in cur.placement.shares)))
        options.append(sorted(set(opts), key=repr))
    return best_assignment(problem, table, options, admit(problem, table))


def _tiny(seed: int) -> RubickRound:
    rng = np.random.default_rng(seed)
    cluster = a800_cluster(2, 4)
    models = ["vit", "roberta", "bert", "gpt2", "t5"]
    jobs = []
    for i in range(3):
        jobs.append(Job(f"j{i}", str(rng.choice(models)), int(rng.choice([1, 2, 4])), 100,
                        guaranteed=bool(rng.random() < 0.3), max_gpus=4))
    running = []
    if rng.random() < 0.7:
        j = jobs[0]
        running.append(alloc(j.name, ExecutionPlan(dp=j.requested_gpus) if j.model not in ("gpt2", "t5")
                             else ExecutionPlan(dp=j.requested_gpus, zero="zero-dp"),
                             {"n000": (j.requested_gpus, 4 * j.requested_gpus, 40.0)}))
    return RubickRound(cluster, tuple(jobs), tuple(running), reconfig_penalty=0.1, preempt_penalty=0.3)


@pytest.mark.parametrize("seed", range(6))
def test_exact_equals_brute_force_on_tiny_rounds(seed: int) -> None:
    problem = _tiny(seed)
    table, sol = solve_tiny(problem)
    assert sol.status == "optimal"
    assert sol.objective == pytest.approx(_brute_force(problem, table), abs=1e-5)
    assert violations(problem, table, sol.payload["choices"]) == []
    for encoding in ("aggregated", "pooled"):
        agg = rubick_round.solve(problem, table, time_limit=20, encoding=encoding)
        assert agg.bound is not None and agg.bound >= sol.objective - 1e-5  # a relaxation bounds the optimum
        assert violations(problem, table, agg.payload["choices"]) == []



def _tiny_trims(seed: int) -> RubickRound:
    """Two 4-GPU nodes of 14 CPUs (outside work holds 2 GPUs and 4 CPUs of n001); job j0 runs the best
    2-GPU plan of its table on n000 with 12 CPUs, so a queued job can use n000's free GPUs only if j0 is
    trimmed (issue 16, item 5); trim penalties from 0 up to the reconfiguration penalty."""
    rng = np.random.default_rng(seed)
    base = a800_cluster(2, 4)
    cluster = replace(base, nodes=tuple(replace(n, num_cpus=14) for n in base.nodes))
    models = ["vit", "roberta", "bert"]
    jobs = [Job("j0", str(rng.choice(models)), 2, 100, requested_cpus=4, max_gpus=4)]
    jobs += [Job(f"j{i}", str(rng.choice(models)), int(rng.choice([1, 2])), 100, max_gpus=4,
                 guaranteed=bool(rng.random() < 0.3), submit_time=float(i)) for i in (1, 2)]
    queued = build_round_table(RubickRound(cluster, tuple(jobs)), cpus_per_gpu_options=(2, 6))
    best = max((k for k in queued.configs_of("j0") if queued.gpus[k] == 2), key=lambda k: queued.throughput[k])
    running = (alloc("j0", queued.plans[best], {"n000": (2, 12, 40.0)}),)
    return RubickRound(cluster, tuple(jobs), running, occupied={"n001": NodeShare(2, 4, 0.0)},
                       reconfig_penalty=0.1, preempt_penalty=0.3, trim_penalty=float(rng.choice([0.0, 0.01, 0.05, 0.1])))


@pytest.mark.parametrize("seed", range(6))
def test_exact_equals_brute_force_on_tiny_rounds_with_trims(seed: int) -> None:
    """The per-node model (CP-SAT, and CBC on two seeds) reaches the brute-force optimum (which trims the
    running job on most of these rounds: next test); the aggregated and pooled models' bounds are at least
    the optimum and their answers feasible."""
    problem = _tiny_trims(seed)
    table = build_round_table(problem, cpus_per_gpu_options=(2, 6))
    best = _brute_force(problem, table)
    sol = rubick_round.solve(problem, table, time_limit=20, encoding="per-node")
    assert sol.status == "optimal" and sol.objective == pytest.approx(best, abs=1e-5)
    choices = sol.payload["choices"]
    assert violations(problem, table, choices) == []
    for encoding in ("aggregated", "pooled"):
        agg = rubick_round.solve(problem, table, time_limit=20, encoding=encoding)
        assert agg.bound is not None and agg.bound >= best - 1e-5 and agg.objective <= best + 1e-9
        assert violations(problem, table, agg.payload["choices"]) == []
    # the default: pooled first, then per node when the pooled answer's placement is not proven optimal
    default = rubick_round.solve(problem, table, time_limit=20)
    assert default.status == "optimal" and default.objective == pytest.approx(best, abs=1e-5)
    assert violations(problem, table, default.payload["choices"]) == []
    if seed < 2:
        cbc = rubick_round.solve(problem, table, time_limit=20, encoding="per-node", backend="cbc")
        assert cbc.objective == pytest.approx(best, abs=1e-5)


def test_the_optimum_of_most_tiny_trim_rounds_trims_the_running_job() -> None:
    """The rounds of the previous test exercise trims: on most of them the optimum keeps j0 on its node
    with fewer CPUs (on the others the optimum reconfigures j0 and runs one-GPU jobs, which RoBERTa's
    one-GPU factor makes worth more, ``optsched.perf.model_v2``)."""
    trims = 0
    for seed in range(6):
        problem = _tiny_trims(seed)
        table = build_round_table(problem, cpus_per_gpu_options=(2, 6))
        sol = rubick_round.solve(problem, table, time_limit=20, encoding="per-node")
        trims += is_trim(problem, table, table.index_of("j0"), sol.payload["choices"]["j0"])
    assert trims >= 3


def test_exact_never_below_heuristic_where_trims_pay() -> None:
    """On rounds where queued jobs need CPUs running jobs hold, the warm-started exact solve is feasible
    and never below Algorithm 1, and both trim running jobs."""
    trims = {"exact": 0, "heuristic": 0}
    for seed in range(3):
        problem = cpu_hungry_round(4, 24, seed)
        table = build_round_table(problem)
        exact = solve(problem, "exact", time_limit=20, seed=0)
        heur = solve(problem, "heuristic")
        for d in (exact, heur):
            assert violations(problem, table, choices_of(d, table, problem)) == []
            trims[d.method] += sum(x.action == "trim" for x in d.jobs)
        assert exact.objective >= heur.objective - 1e-9
        assert_ran_or_proven(exact, heur)
    assert trims["exact"] > 0 and trims["heuristic"] > 0, trims

@pytest.mark.parametrize("nodes,jobs,seed", [(8, 20, 0), (8, 40, 1), (4, 30, 2), (8, 40, 3)])
def test_exact_is_feasible_and_never_below_heuristic(nodes: int, jobs: int, seed: int) -> None:
    problem = generate_rubick_round(nodes, 8, jobs, seed)
    exact = solve(problem, "exact", time_limit=20, seed=0)
    heur = solve(problem, "heuristic")
    table = build_round_table(problem)
    for d in (exact, heur):
        assert violations(problem, table, choices_of(d, table, problem)) == []
        for jd in d.jobs:
            if jd.protected:
                assert jd.allocation is not None and jd.normalised >= 1 - 1e-9
    assert exact.objective >= heur.objective - 1e-9
    assert_ran_or_proven(exact, heur)
    assert exact.status in ("optimal", "feasible", "heuristic-fallback")
    assert exact.bound is not None and exact.bound >= exact.objective - 1e-6


def assert_ran_or_proven(exact: Decision, heur: Decision) -> None:
    """Algorithm 1 ran for the exact solve (its objective the heuristic's), or the solver proved its answer
    optimal without it (policies/exact.py, step 2)."""
    if exact.heuristic_objective is None:
        assert exact.status == "optimal" and not exact.warm_start
    else:
        assert exact.heuristic_objective == pytest.approx(heur.objective)


@pytest.mark.parametrize("seed", range(4))
def test_a_skipped_warm_start_never_changes_the_returned_optimum(seed: int) -> None:
    """The exact method with Algorithm 1 first (``eager_warm_start``) and without it (the default: Algorithm 1
    only after a solve not proven optimal) return the same optimum; the eager one reports its warm start."""
    problem = generate_rubick_round(8, 8, 40, seed)
    lazy = solve(problem, "exact", time_limit=20, seed=0)
    eager = ExactPolicy(RubickExact(eager_warm_start=True), time_limit=20.0, seed=0).decide(problem)
    heur = solve(problem, "heuristic")
    assert lazy.status == eager.status == "optimal"
    assert lazy.objective == pytest.approx(eager.objective, abs=1e-6)
    assert lazy.heuristic_objective is None and not lazy.warm_start and "no warm start" in lazy.message
    assert eager.warm_start and eager.heuristic_objective == pytest.approx(heur.objective)


def _fig8() -> RubickRound:
    cluster = a800_cluster(1, 4)
    jobs = (Job("roberta", "roberta", 2, 100), Job("t5", "t5", 2, 100))
    return RubickRound(cluster, jobs)


def test_fig8_exact_beats_equal_split_and_heuristic() -> None:
    """Rubick Fig. 8: a RoBERTa and a T5 job on one 4-GPU A800 node. The exact round is at least as
    good as the equal split (2 + 2 GPUs, best row of each at 2 GPUs) and as the heuristic."""
    problem = _fig8()
    table = build_round_table(problem)
    split = {}
    for j, name in enumerate(table.jobs):
        rows = [int(k) for k in table.configs_of(name) if table.gpus[k] == 2]
        k = max(rows, key=lambda r: (table.throughput[r], -table.cpus[r]))
        split[name] = Choice(k, (("n000", 2),))
    split_obj = objective(problem, table, split)
    # the split needs CPUs/memory of both; it must fit on the node for the comparison to be fair
    if violations(problem, table, split):
        pytest.skip("equal split does not fit the node's CPUs/memory")
    exact = solve(problem, "exact", time_limit=10)
    heur = solve(problem, "heuristic")
    assert exact.status == "optimal"
    assert exact.objective >= split_obj - 1e-9
    assert exact.objective >= heur.objective - 1e-9
    gpus = {d.job: (d.allocation.placement.total_gpus if d.allocation else 0) for d in exact.jobs}
    assert sum(gpus.values()) <= 4


def test_infeasible_guarantees_name_the_jobs() -> None:
    cluster = a800_cluster(1, 8)
    jobs = tuple(Job(f"g{i}", "gpt2", 8, 100, guaranteed=True, tenant="a") for i in range(2))
    problem = RubickRound(cluster, jobs)
    with pytest.raises(InfeasibleError) as exc:
        solve(problem, "exact", time_limit=5)
    assert "g0" in str(exc.value) and "g1" in str(exc.value) and "guarantee" in str(exc.value)


def test_quota_keeps_a_guaranteed_job_waiting() -> None:
    cluster = a800_cluster(2, 8)
    jobs = (Job("a", "bert", 8, 100, guaranteed=True, tenant="t", submit_time=0.0),
            Job("b", "bert", 8, 100, guaranteed=True, tenant="t", submit_time=1.0))
    problem = RubickRound(cluster, jobs, quotas={"t": 8})
    d = solve(problem, "exact", time_limit=5)
    assert d.job("a").protected and d.job("a").allocation is not None
    assert not d.job("b").protected and d.job("b").allocation is None


def test_large_reconfiguration_penalty_keeps_running_jobs() -> None:
    problem = generate_rubick_round(4, 8, 12, 5)
    problem = RubickRound(problem.cluster, problem.jobs, problem.running, problem.occupied, quotas=problem.quotas,
                          reconfig_penalty=100.0, preempt_penalty=100.0)
    d = solve(problem, "exact", time_limit=10)
    for a in problem.running:
        jd = d.job(a.job)
        if jd.normalised > 0:
            assert jd.action == "keep"


def test_time_limit_and_bad_arguments() -> None:
    problem = generate_rubick_round(4, 8, 10, 0)
    with pytest.raises(ValidationError):
        solve(problem, "exact", time_limit=0)
    with pytest.raises(ValidationError, match="unknown method"):
        solve(problem, "simplex")
    solve(problem, "exact", time_limit=0.5)


def test_ablations_run_and_are_feasible() -> None:
    problem = generate_rubick_round(8, 8, 30, 7)
    table = build_round_table(problem)
    for method in ("rubick-e", "rubick-r", "rubick-n"):
        d = solve(problem, method)
        for jd in d.jobs:
            if jd.protected:
                assert jd.allocation is not None
        assert d.status == "heuristic" and d.method == method
    full = solve(problem, "heuristic")
    assert violations(problem, table, choices_of(full, table, problem)) == []


def test_cli_solve_and_gen_round(tmp_path, capsys) -> None:
    path = tmp_path / "round.json"
    assert cli.main(["gen-round", "--kind", "rubick", "--nodes", "4", "--gpus-per-node", "8", "--jobs", "10",
                     "--seed", "3", "--out", str(path)]) == 0
    assert cli.main(["solve", str(path), "--method", "exact", "--time-limit", "5", "--seed", "1"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("status", "objective", "bound", "gap", "solve_seconds", "heuristic_objective", "jobs"):
        assert key in out
    for jd in out["jobs"]:
        for share in jd["placement"].values():
            assert set(share) == {"gpus", "cpus", "mem_gb"}


def test_cli_rejects_malformed_round_files(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "rubick", "cluster": "a800-8x8", "jobs": [ {"name": "x"')
    assert cli.main(["solve", str(bad)]) == 2
    assert "malformed JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"kind": "rubick", "cluster": "a800-8x8",
                               "jobs": [{"name": "x", "model": "gpt5", "requested_gpus": 1, "total_iterations": 5}]}))
    assert cli.main(["solve", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "gpt5" in err and "unknown model" in err and "Traceback" not in err
    bad.write_text(json.dumps({"kind": "crius2", "cluster": "a800-8x8", "jobs": []}))
    assert cli.main(["solve", str(bad)]) == 2
    assert "round kind" in capsys.readouterr().err


def test_a_forced_per_node_model_over_its_size_limit_is_refused_before_it_is_built(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problem = generate_rubick_round(16, 8, 60, 0)
    table = build_round_table(problem)

    def no_model() -> None:
        raise AssertionError("a model was made")
    with monkeypatch.context() as m:
        m.setattr(rubick_round.cp_model, "CpModel", no_model)
        with pytest.raises(rubick_round.ModelTooLarge, match=r"needs \d+ part variables, more than max_node_vars=100"):
            rubick_round.build(problem, table, encoding="per-node", max_node_vars=100)
    # the default strategy skips the per-node refinement then, and still answers
    sol = rubick_round.solve(problem, table, time_limit=10, max_node_vars=100)
    assert sol.size.encoding == "pooled" and sol.objective is not None


def test_the_model_moves_a_running_job_whose_only_row_is_its_current_one() -> None:
    """Two half-full nodes and a queued guaranteed gang of 8 GPUs on one node: only moving a running
    fixed-plan job (its one row, its current one) beside the other frees a node. The model states that
    move (``m[current]``, docstring), so exact proves the round optimal with the gang running; without it
    the model would be infeasible."""
    from dataclasses import replace as _replace

    from optsched.core import ExecutionPlan, Job
    from optsched.core.catalog import a800_cluster
    from optsched.rounds.rubick.problem import RubickRound
    from optsched.rounds.rubick.table import build_round_table

    from helpers import alloc

    cluster = a800_cluster(2, 8)
    plan = ExecutionPlan(dp=4)
    a = Job("a", "bert", 4, 10_000, requested_plan=plan, plan_fixed=True, min_gpus=4, max_gpus=4, guaranteed=True)
    d = _replace(a, name="d")
    b = Job("b", "bert", 8, 10_000, min_gpus=8, max_gpus=8, max_nodes=1, guaranteed=True)
    probe = build_round_table(RubickRound(cluster, (a,)))
    k = int(probe.configs_of("a")[0])
    cpus, mem = int(probe.cpus[k]), float(probe.mem_gib[k])
    running = (alloc("a", plan, {"n000": (4, cpus, mem)}), alloc("d", plan, {"n001": (4, cpus, mem)}))
    problem = RubickRound(cluster, (a, d, b), running)
    table = build_round_table(problem)
    assert len(table.configs_of("a")) == 1  # its current row only
    sol = rubick_round.solve(problem, table, time_limit=20, encoding="per-node")
    assert sol.status == "optimal"
    choices = sol.payload["choices"]
    assert set(choices) == {"a", "d", "b"}
    moved = [n for n in ("a", "d") if sorted(choices[n].parts) != sorted(problem.current(n).placement.gpu_parts)]
    assert len(moved) == 1 and choices[moved[0]].row == int(table.current_row[table.index_of(moved[0])])
    import optsched
    decision = optsched.solve(problem, "exact", time_limit=20)
    actions = {x.job: x.action for x in decision.jobs}
    assert sorted((actions["a"], actions["d"])) == ["keep", "reconfigure"]  # either one moves beside the other
    assert decision.status == "optimal"
