"""Scheduler loop (issue "A round a real cluster scheduler can state", item 10): a closed loop of 5-minute
rounds as a cluster scheduler importing optsched runs it, through ``optsched.solve`` only.

    python benchmarks/scheduler_loop.py [--hours 4] [--jobs 60] [--seed 0] [--time-limit 10]
                                        [--methods exact,heuristic,fifo-backfill,sia]
                                        [--settings default,seconds,seconds+hold] [--quick]

The loop (seeded, deterministic up to the exact solver's time limit):

* **Cluster**: 24 nodes, 12 x 8 A100-40G (96 CPUs, 1,024 GiB) and 12 x 8 V100-32G (96 CPUs, 768 GiB),
  labelled ``rack`` (``r0``..``r3``, 6 nodes a rack, each rack with both types) and ``gpu`` (``a100`` /
  ``v100``), the racks also their ``topology``.
* **Jobs**: ``--jobs`` jobs arriving as a Poisson process over the first half of ``--hours`` (the arrival
  times of a Poisson process given their count: sorted uniform times), catalogue models vit, roberta,
  bert, t5, gpt2 (all run on 32-40 GB GPUs), 1-8 GPUs, 3 tenants with GPU quotas (64 GPUs each),
  40% guaranteed, the rest best-effort. Each job is one of: gang (``min_gpus = max_gpus = requested``),
  one-node (``max_nodes = 1``), selector (``node_selector`` on a ``rack`` or a ``gpu`` label), CPU floor
  (``min_cpus_per_gpu = 10``), fixed plan (``plan_fixed`` with the best plan on its request on A100-40G, pinned there by
  ``gpu_type``), priority (``priority`` 1 or 2; every other job has 0), deadline (``deadline`` = submission
  + 1.5-3 times its run time at its request; once it has passed, a queued job is sent without it, as a
  round refuses a queued job past its deadline), rack (``topology`` ``{"level": "rack"}``, ``required`` or
  ``preferred``), plain. Its
  ``total_iterations`` make it run 20-90 minutes at its request on the fastest GPU type it may use (the
  request's throughput, read from a one-job round solved by ``fifo-backfill`` once per (model, type, GPUs)).
* **Rounds**: every 300 s for ``--hours``; each round is a ``rubick`` round (cluster with the current node
  states, the submitted unfinished jobs with their ``completed_iterations``, as ``running`` the previous
  decision's allocations of the jobs still there), built as the JSON a scheduler would send
  (``RoundProblem.from_dict``) and solved by ``optsched.solve(problem, method, time_limit, seed=0,
  defer_unreachable_guarantees=True)``.
* **Settings** (``--settings``; every round of a run the same): ``default``: the round's dimensionless
  penalties (0.05 a reconfiguration, 0.25 a preemption); ``seconds``: the penalties derived from what the
  loop simulates (``round_interval_s = 300``, every job ``restart_seconds = 78``, a running job
  ``checkpoint_age_s`` = seconds since its last checkpoint; docs/rounds.md, "Weights and penalties in
  seconds"); ``seconds+hold``: as ``seconds`` with ``min_hold_s = 900`` and each running allocation's
  ``since`` = the round of its last start or reconfiguration.
* **Node events** (at fractions of ``--hours``; at 4 h): at 1.5 h node ``a100-05`` is cordoned (until the
  end), at 2 h node ``v100-03`` is drained, at 3 h it is ready again.
* **Applying a decision**: ``start`` and ``reconfigure`` launch the job from its checkpoint: no progress
  for ``restart_s = 78`` s of that round (Rubick Sec. 7.3's average); ``keep`` and ``trim`` (in-place limit
  update) cost nothing; ``preempt`` loses the progress since the job's last checkpoint. A job checkpoints
  when it is reconfigured and every 30 simulated minutes of wall clock (``t % 1800 == 0``) while it runs.
  A running job advances by its decision's predicted ``throughput`` / the model's ``global_batch``
  iterations a second over the rest of the round, and finishes the moment it reaches ``total_iterations``
  (its resources stay unused until the next round).

At the defaults (60 jobs) the cluster is lightly loaded (almost every job finishes under every method);
``--jobs 150`` contends for GPUs. Simplifications: predicted throughputs are taken as the truth (no noise,
no straggler); restarts cost the same 78 s for every job and size; a job submitted inside a round waits
for the next round; the scheduler never crashes or loses state; no work outside optsched
(``occupied`` is empty); a decision is applied atomically at the round's start. An ``optsched.solve``
error stops that (method, setting) run; the error is printed with the round's time and counted.

Columns (one row per method and penalty setting):

* ``method``, ``setting``: the method and the penalty setting of every round;
* ``rounds``: rounds solved; ``errors``: rounds whose solve raised (the run stops there);
* ``violations``: hard-constraint violations in the decisions' allocations, counted by this script's own
  check (not optsched's): per node the running allocations' GPUs, CPUs and memory within capacity;
  per job GPUs in ``[min_gpus, max_gpus]``, ``dp x tp x pp`` = its GPUs, one GPU type, ``plan ==
  requested_plan`` when ``plan_fixed``, at most ``max_nodes`` nodes, one rack for a ``required`` rack rule,
  on every node CPUs >=
  ``min_cpus_per_gpu`` x its GPUs there, every node matching ``node_selector``, no more GPUs on a
  cordoned node than it held there before the round, nothing on a draining node; and the priority rule where
  it can be tested without a table (:func:`priority_check`: a job preempted or shrunk although its
  allocation fits with only lower priorities' room, a job waiting although its request fits one node that
  way; a protected job's or a promised deadline's room does not count, as the rule says); must be 0;
* ``on_draining``, ``on_cordoned``: running jobs holding GPUs on a draining / cordoned node at a round's
  start, summed over rounds (that the node events touched jobs; a job on a draining node must leave);
* ``restarts``: reconfigurations plus resumptions after a preemption (launches of a job that ran before);
* ``restart_gpu_h``: sum over those restarts of the new allocation's GPUs x 78 s, in GPU-hours;
* ``preempts``: preemptions;
* ``reconf_per_job_h``: reconfigurations per job-hour, a job-hour being an hour a job held an allocation;
* ``flipflop_per_job_h``: flip-flops per job-hour; a flip-flop is a start or reconfiguration to a
  configuration (plan, sorted GPUs-per-node shape, GPU type) the job had two or more configuration
  changes earlier (A -> B -> A counts once);
* ``deadlines_met``: deadline jobs that finished by their deadline / deadline jobs;
* ``finished``: jobs finished within ``--hours``; ``mean_jct_h``: their mean completion time (finish -
  submit), hours (over each row's own finished jobs, so rows with different ``finished`` compare
  different sets);
* ``solve_p50_s``, ``solve_p95_s``: median and 95th percentile of the decisions' ``solve_seconds``;
* ``wall_s``: wall time of the whole (method, setting) run.

Writes ``benchmarks/out/scheduler_loop.csv``.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optsched  # noqa: E402
from optsched.core.catalog import GPU_TYPES, get_model  # noqa: E402
from optsched.core.hardware import Cluster, Node  # noqa: E402
from report import emit  # noqa: E402  (benchmarks/report.py, next to this script)

ROUND_S = 300.0
RESTART_S = 78.0
CHECKPOINT_S = 1800.0
MODELS = ("vit", "roberta", "bert", "t5", "gpt2")
TYPES = {"A100-40G": ("a100", 1024.0), "V100-32G": ("v100", 768.0)}
TENANTS = ("t0", "t1", "t2")
QUOTA = 64
KINDS = ("gang", "one-node", "selector", "cpu-floor", "plan-fixed", "priority", "deadline", "rack", "plain")
#: seconds a job is held after a start or reconfiguration in the ``hold`` setting
MIN_HOLD_S = 900.0
#: the penalty settings compared (module docstring, "Settings")
SETTINGS = ("default", "seconds", "seconds+hold")


def build_cluster() -> Cluster:
    nodes = []
    for gtype, (label, mem) in TYPES.items():
        for i in range(12):
            nodes.append(Node(f"{label}-{i:02d}", gtype, 8, 96, mem, labels=(("rack", f"r{i // 3}"), ("gpu", label)),
                              topology=(("rack", f"r{i // 3}"),)))
    return Cluster("a100-v100-24x8", tuple(nodes), (GPU_TYPES["A100-40G"], GPU_TYPES["V100-32G"]),
                   intra_node_gbps=150.0, inter_node_gbps=12.5, pcie_gbps=20.0)


_REQUEST: dict[tuple[str, str, int], tuple[float, dict]] = {}


def request_row(cluster: Cluster, model: str, gtype: str, gpus: int) -> tuple[float, dict]:
    """(throughput, plan) of a job's request on one node of ``gtype``, from a one-job round."""
    key = (model, gtype, gpus)
    if key not in _REQUEST:
        node = next(n for n in cluster.nodes if n.gpu_type == gtype)
        c = Cluster("probe", (Node("p", gtype, node.num_gpus, node.num_cpus, node.memory_gib),),
                    (GPU_TYPES[gtype],), cluster.intra_node_gbps, cluster.inter_node_gbps, cluster.pcie_gbps)
        rnd = {"kind": "rubick", "cluster": c.to_dict(),
               "jobs": [{"name": "j", "model": model, "requested_gpus": gpus, "total_iterations": 1}]}
        d = optsched.solve(optsched.RoundProblem.from_dict(rnd), "fifo-backfill", 10.0).to_dict()["jobs"][0]
        _REQUEST[key] = (d["throughput"], d["plan"])
    return _REQUEST[key]


def make_jobs(cluster: Cluster, n: int, horizon_s: float, seed: int) -> list[dict]:
    rng = random.Random(seed)
    arrivals = sorted(rng.uniform(0.0, horizon_s / 2) for _ in range(n))
    jobs = []
    for i, submit in enumerate(arrivals):
        model = rng.choice(MODELS)
        gpus = rng.choice((1, 2, 4, 8) if model in ("vit", "roberta", "bert") else (2, 4, 8))
        kind = KINDS[i % len(KINDS)] if i < len(KINDS) else rng.choice(KINDS)
        job: dict[str, Any] = {"name": f"j{i:03d}-{model}", "model": model, "requested_gpus": gpus,
                               "requested_cpus": 8 * gpus, "requested_mem_gib": 32.0 * gpus,
                               "tenant": TENANTS[rng.randrange(3)], "guaranteed": rng.random() < 0.4,
                               "submit_time": round(submit, 1)}
        gtype = "A100-40G"
        if kind == "gang":
            job["min_gpus"] = job["max_gpus"] = gpus
        elif kind == "one-node":
            job["max_nodes"] = 1
        elif kind == "selector":
            if rng.random() < 0.5:
                job["node_selector"] = {"rack": f"r{rng.randrange(4)}"}
            else:
                label = rng.choice(("a100", "v100"))
                job["node_selector"] = {"gpu": label}
                gtype = "A100-40G" if label == "a100" else "V100-32G"
        elif kind == "cpu-floor":
            job["min_cpus_per_gpu"] = 10
            job["requested_cpus"] = 10 * gpus
        elif kind == "rack":  # every GPU in one rack (a rack holds 48 GPUs of two types: room for any request)
            job["topology"] = {"level": "rack", "mode": rng.choice(("required", "preferred"))}
        elif kind == "priority":
            job["priority"] = rng.choice((1, 2))
        elif kind == "plan-fixed":
            # pinned: a requested plan must run on every GPU type the job may use (roberta's dp=2 needs
            # 35 GiB a GPU, more than a V100-32G has, and the round is refused otherwise)
            job["requested_plan"] = request_row(cluster, model, gtype, gpus)[1]
            job["plan_fixed"] = True
            job["gpu_type"] = gtype
        thr = request_row(cluster, model, gtype, gpus)[0]
        minutes = rng.uniform(20.0, 90.0)
        job["total_iterations"] = max(1, int(minutes * 60 * thr / get_model(model).global_batch))
        if kind == "deadline":  # 1.5-3 times its run time at its request, counted from its submission
            job["deadline"] = round(submit + rng.uniform(1.5, 3.0) * minutes * 60, 1)
        job["_kind"] = kind
        jobs.append(job)
    return jobs


def node_states(t: float, hours: float) -> dict[str, str]:
    """Node events at fractions of the horizon (1.5 h, 2 h and 3 h of 4 h)."""
    h = hours * 3600.0
    states = {}
    if t >= 0.375 * h:
        states["a100-05"] = "cordoned"
    if 0.5 * h <= t < 0.75 * h:
        states["v100-03"] = "draining"
    return states


def config_of(plan: dict, placement: dict, node_type: dict[str, str]) -> tuple:
    shape = tuple(sorted((s["gpus"] for s in placement.values()), reverse=True))
    gtypes = tuple(sorted({node_type[n] for n in placement}))
    return tuple(sorted(plan.items())), shape, gtypes


def check(rnd: dict, jobs_by_name: dict[str, dict], entries: list[dict], unpromised: frozenset[str] = frozenset()
          ) -> list[str]:
    """This script's own hard-constraint check of one decision (module docstring); one string a violation."""
    out = []
    nodes = {n["name"]: n for n in rnd["cluster"]["nodes"]}
    before = {a["job"]: a["placement"] for a in rnd["running"]}
    used: dict[str, list[float]] = {n: [0, 0, 0.0] for n in nodes}
    for e in entries:
        if e["plan"] is None:
            continue
        job, plan, pl = jobs_by_name[e["job"]], e["plan"], e["placement"]
        name = e["job"]
        g = sum(s["gpus"] for s in pl.values())
        if g < job.get("min_gpus", 1) or (job.get("max_gpus") is not None and g > job["max_gpus"]):
            out.append(f"{name}: {g} GPUs outside [{job.get('min_gpus', 1)}, {job.get('max_gpus')}]")
        if plan["dp"] * plan.get("tp", 1) * plan.get("pp", 1) != g:
            out.append(f"{name}: plan {plan} does not use its {g} GPUs")
        if len({nodes[n]["gpu_type"] for n in pl}) != 1:
            out.append(f"{name}: several GPU types")
        if job.get("plan_fixed") and plan != job["requested_plan"]:
            out.append(f"{name}: plan {plan} != fixed plan {job['requested_plan']}")
        if job.get("max_nodes") is not None and len(pl) > job["max_nodes"]:
            out.append(f"{name}: {len(pl)} nodes > max_nodes {job['max_nodes']}")
        rule = job.get("topology")
        if rule and rule.get("mode", "required") == "required":
            domains = {nodes[n].get("topology", {}).get(rule["level"]) for n in pl}
            if len(domains) != 1 or None in domains:
                out.append(f"{name}: spans {rule['level']} domains {sorted(map(str, domains))}, one required")
        for n, s in pl.items():
            node = nodes[n]
            if s["gpus"] < 1:
                out.append(f"{name}: a share of 0 GPUs on {n}")
            if job.get("min_cpus_per_gpu") and s["cpus"] < job["min_cpus_per_gpu"] * s["gpus"]:
                out.append(f"{name}: {s['cpus']} CPUs for {s['gpus']} GPUs on {n} < floor {job['min_cpus_per_gpu']}")
            labels = node.get("labels", {})
            for k, v in job.get("node_selector", {}).items():
                if labels.get(k) != v:
                    out.append(f"{name}: node {n} does not match {k}={v}")
            state = node.get("state", "ready")
            if state == "draining":
                out.append(f"{name}: runs on draining node {n}")
            if state == "cordoned" and s["gpus"] > before.get(name, {}).get(n, {}).get("gpus", 0):
                out.append(f"{name}: new GPUs on cordoned node {n}")
            u = used[n]
            u[0] += s["gpus"]
            u[1] += s["cpus"]
            u[2] += s["mem_gb"]
    for n, (g, c, m) in used.items():
        node = nodes[n]
        if g > node["num_gpus"] or c > node["num_cpus"] or m > node["memory_gib"] + 1e-6:
            out.append(f"node {n}: {g} GPUs, {c} CPUs, {m:.1f} GiB over capacity")
    return out + priority_check(rnd, jobs_by_name, entries, used, unpromised)


def priority_check(rnd: dict, jobs_by_name: dict[str, dict], entries: list[dict], used: dict[str, list[float]],
                   unpromised: frozenset[str] = frozenset()) -> list[str]:
    """The priority rule (docs/rounds.md, "Priorities") where this script can test it without a table: a job
    preempted or given fewer GPUs whose current allocation fits, node by node, the free resources plus its
    own plus those of unprotected jobs of lower priority but not the free resources plus its own; a waiting
    job whose request (its GPUs, CPUs and memory on one node it may use) fits one node that way. One-sided:
    what it flags breaks the rule, what it misses it does not see. The room of a job bound to a floor does
    not count (the rule's exception): a protected job, or a job with a deadline the decision promises (one
    not in ``unpromised``, the decision's ``deadline_at_risk`` and ``deadline_missed`` jobs)."""
    nodes = {n["name"]: n for n in rnd["cluster"]["nodes"]}
    free = {n: [nodes[n]["num_gpus"] - u[0], nodes[n]["num_cpus"] - u[1], nodes[n]["memory_gib"] - u[2]]
            for n, u in used.items()}
    before = {a["job"]: a["placement"] for a in rnd["running"]}
    by_job = {e["job"]: e for e in entries}
    out = []
    for e in entries:
        name, job = e["job"], jobs_by_name[e["job"]]
        prio = job.get("priority", 0)
        low: dict[str, list[float]] = {n: [0, 0, 0.0] for n in nodes}
        for o in entries:
            other = jobs_by_name[o["job"]]
            floored = o["protected"] or (other.get("deadline") is not None and o["job"] not in unpromised)
            if o["plan"] is not None and other.get("priority", 0) < prio and not floored:
                for n, sh in o["placement"].items():
                    low[n] = [low[n][0] + sh["gpus"], low[n][1] + sh["cpus"], low[n][2] + sh["mem_gb"]]
        own = {n: [sh["gpus"], sh["cpus"], sh["mem_gb"]] for n, sh in (e["placement"] or {}).items()}

        def room(n: str, extra: bool) -> list[float]:
            o = own.get(n, [0, 0, 0.0])
            return [free[n][i] + o[i] + (low[n][i] if extra else 0) for i in range(3)]

        def fits(target: dict[str, list[float]], extra: bool) -> bool:
            return all(all(room(n, extra)[i] >= v[i] - 1e-6 for i in range(3)) for n, v in target.items())
        cur = before.get(name)
        if cur is not None and any(nodes[n].get("state") == "draining" for n in cur):
            continue  # it must leave: its target is any configuration, which this check does not enumerate
        if cur is not None and (e["plan"] is None or sum(s["gpus"] for s in e["placement"].values())
                                < sum(s["gpus"] for s in cur.values())):
            if e["plan"] is not None and e["normalised_throughput"] >= by_job[name]["normalised_throughput"]:
                continue
            target = {n: [s["gpus"], s["cpus"], s["mem_gb"]] for n, s in cur.items()}
            if fits(target, True) and not fits(target, False):
                out.append(f"{name} (priority {prio}) {e['action']} although its allocation fits with lower "
                           "priorities' room")
        elif cur is None and e["plan"] is None and "quota" not in e["reason"] and "deferred" not in e["reason"]:
            g = job["requested_gpus"]
            need = [g, job.get("requested_cpus", 0), job.get("requested_mem_gib", 0.0)]
            ok = [n for n, node in nodes.items() if node["num_gpus"] >= g and node.get("state", "ready") == "ready"
                  and (job.get("gpu_type") is None or node["gpu_type"] == job["gpu_type"])
                  and all(node.get("labels", {}).get(k) == v for k, v in job.get("node_selector", {}).items())]
            if any(fits({n: need}, True) for n in ok) and not any(fits({n: need}, False) for n in ok):
                out.append(f"{name} (priority {prio}) waits although its request fits one node with lower "
                           "priorities' room")
    return out


def run(cluster: Cluster, jobs: list[dict], hours: float, method: str, setting: str, time_limit: float) -> dict:
    node_type = {n.name: n.gpu_type for n in cluster.nodes}
    base_cluster = cluster.to_dict()
    done: dict[str, float] = {}                 # job -> completed iterations
    ckpt: dict[str, float] = {}                 # job -> iterations at the last checkpoint
    ckpt_at: dict[str, float] = {}              # job -> time of its last checkpoint (or launch)
    since: dict[str, float] = {}                # job -> time of its last start or reconfiguration
    finish: dict[str, float] = {}               # job -> finish time
    running: dict[str, dict] = {}               # job -> {"plan", "placement"}
    history: dict[str, list[tuple]] = {}        # job -> configurations, one a change
    ran_before: set[str] = set()
    stats = {"rounds": 0, "errors": 0, "violations": 0, "restarts": 0, "restart_gpu_s": 0.0, "preempts": 0,
             "reconfs": 0, "flipflops": 0, "drained": 0, "cordoned": 0, "alloc_s": 0.0, "solve": [], "error_msg": ""}
    t = 0.0
    t0 = time.perf_counter()
    while t < hours * 3600.0 - 1e-9:
        states = node_states(t, hours)
        cl = dict(base_cluster)
        cl["nodes"] = [dict(n, state=states[n["name"]]) if n["name"] in states else n for n in base_cluster["nodes"]]
        present = [j for j in jobs if j["submit_time"] <= t and j["name"] not in finish]
        rjobs = [{k: v for k, v in j.items() if not k.startswith("_")}
                 | {"completed_iterations": done.get(j["name"], 0.0)} for j in present]
        for j in rjobs:  # a queued job past its deadline is refused by the round: the scheduler drops the deadline
            if j.get("deadline") is not None and j["deadline"] <= t and j["name"] not in running:
                del j["deadline"]
        rnd = {"kind": "rubick", "time": t, "cluster": cl, "jobs": rjobs,
               "running": [{"job": name, **a} for name, a in running.items()],
               "quotas": {tn: QUOTA for tn in TENANTS}}
        if setting != "default":  # penalties in seconds (module docstring, "Settings")
            rnd["round_interval_s"] = ROUND_S
            for j in rjobs:
                j["restart_seconds"] = RESTART_S
                if j["name"] in running:
                    j["checkpoint_age_s"] = t - ckpt_at[j["name"]]
        if setting == "seconds+hold":
            rnd["min_hold_s"] = MIN_HOLD_S
            for a in rnd["running"]:
                a["since"] = since[a["job"]]
        try:
            problem = optsched.RoundProblem.from_dict(rnd)
            decision = optsched.solve(problem, method, time_limit, seed=0, defer_unreachable_guarantees=True)
        except Exception as exc:  # a real error of optsched: report it with the round, stop this run
            stats["errors"] += 1
            stats["error_msg"] = f"round t={t:.0f}s: {type(exc).__name__}: {exc}"
            sys.stdout.write(f"ERROR {method} {setting} {stats['error_msg']}\n")
            break
        d = decision.to_dict()
        for a in rnd["running"]:  # jobs the node events touch at this round's start
            st = {states.get(n) for n in a["placement"]}
            stats["drained"] += "draining" in st
            stats["cordoned"] += "cordoned" in st
        stats["rounds"] += 1
        stats["solve"].append(d["solve_seconds"])
        by_name = {j["name"]: j for j in rjobs}
        unpromised = frozenset(e["job"] for e in d.get("deadline_at_risk", []) + d.get("deadline_missed", []))
        bad = check(rnd, by_name, d["jobs"], unpromised)
        if bad:
            stats["violations"] += len(bad)
            sys.stdout.write(f"VIOLATION {method} {setting} round t={t:.0f}s: {'; '.join(bad[:5])}\n")
        new_running: dict[str, dict] = {}
        for e in d["jobs"]:
            name, action = e["job"], e["action"]
            total = by_name[name]["total_iterations"]
            if action == "preempt":
                stats["preempts"] += 1
                done[name] = ckpt.get(name, 0.0)
                continue
            if e["plan"] is None:
                continue
            new_running[name] = {"plan": e["plan"], "placement": e["placement"]}
            gpus = sum(s["gpus"] for s in e["placement"].values())
            delay = 0.0
            if action in ("start", "reconfigure"):
                delay = RESTART_S
                since[name] = ckpt_at[name] = t
                if action == "reconfigure":
                    ckpt[name] = done.get(name, 0.0)
                    stats["reconfs"] += 1
                if action == "reconfigure" or name in ran_before:
                    stats["restarts"] += 1
                    stats["restart_gpu_s"] += gpus * RESTART_S
                cfg = config_of(e["plan"], e["placement"], node_type)
                hist = history.setdefault(name, [])
                if cfg in hist[:-1]:
                    stats["flipflops"] += 1
                if not hist or hist[-1] != cfg:
                    hist.append(cfg)
            ran_before.add(name)
            rate = e["throughput"] / get_model(by_name[name]["model"]).global_batch
            left = total - done.get(name, 0.0)
            run_s = ROUND_S - delay
            if rate > 0 and left <= rate * run_s:
                finish[name] = t + delay + left / rate
                done[name] = float(total)
                stats["alloc_s"] += delay + left / rate
                del new_running[name]
            else:
                done[name] = done.get(name, 0.0) + rate * run_s
                stats["alloc_s"] += ROUND_S
        t += ROUND_S
        if t % CHECKPOINT_S == 0:
            for name in new_running:
                ckpt[name] = done[name]
                ckpt_at[name] = t
        running = new_running
    submit = {j["name"]: j["submit_time"] for j in jobs}
    jct = [finish[n] - submit[n] for n in finish]
    due = {j["name"]: j["deadline"] for j in jobs if j.get("deadline") is not None}
    stats["deadlines"] = len(due)
    stats["deadlines_met"] = sum(1 for n, d in due.items() if n in finish and finish[n] <= d)
    solve = sorted(stats["solve"]) or [math.nan]
    job_h = stats["alloc_s"] / 3600.0
    return {**stats, "finished": len(finish), "mean_jct_h": sum(jct) / len(jct) / 3600.0 if jct else math.nan,
            "job_h": job_h, "p50": solve[len(solve) // 2], "p95": solve[min(len(solve) - 1, int(0.95 * len(solve)))],
            "wall_s": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, default=None, help="simulated hours (4; --quick: 2)")
    ap.add_argument("--jobs", type=int, default=None, help="jobs (60; --quick: 24)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--methods", default="exact,heuristic,fifo-backfill,sia")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds a solve (10; --quick: 2)")
    ap.add_argument("--settings", default=",".join(SETTINGS), help=f"penalty settings ({', '.join(SETTINGS)})")
    ap.add_argument("--quick", action="store_true", help="2 hours, 24 jobs, time limit 2 s")
    args = ap.parse_args(argv)
    hours = args.hours if args.hours is not None else (2.0 if args.quick else 4.0)
    njobs = args.jobs if args.jobs is not None else (24 if args.quick else 60)
    limit = args.time_limit if args.time_limit is not None else (2.0 if args.quick else 10.0)
    cluster = build_cluster()
    jobs = make_jobs(cluster, njobs, hours * 3600.0, args.seed)
    kinds = {k: sum(j["_kind"] == k for j in jobs) for k in KINDS}
    sys.stdout.write(f"{njobs} jobs ({', '.join(f'{v} {k}' for k, v in kinds.items())}; "
                     f"{sum(j['guaranteed'] for j in jobs)} guaranteed), {hours:g} h of {ROUND_S:.0f}-s rounds, "
                     f"time limit {limit:g} s, seed {args.seed}\n")
    rows = []
    for method in args.methods.split(","):
        for label in args.settings.split(","):
            r = run(cluster, jobs, hours, method, label, limit)
            sys.stdout.write(f"{method} {label}: {r['rounds']} rounds in {r['wall_s']:.1f} s, {r['finished']} "
                             f"finished, {r['violations']} violations, {r['errors']} errors\n")
            sys.stdout.flush()
            jh = max(r["job_h"], 1e-9)
            rows.append((method, label, r["rounds"], r["errors"], r["violations"], r["drained"], r["cordoned"],
                         r["restarts"], f"{r['restart_gpu_s'] / 3600.0:.2f}", r["preempts"], f"{r['reconfs'] / jh:.3f}",
                         f"{r['flipflops'] / jh:.3f}", f"{r['deadlines_met']}/{r['deadlines']}", r["finished"],
                         f"{r['mean_jct_h']:.2f}", f"{r['p50']:.2f}", f"{r['p95']:.2f}", f"{r['wall_s']:.0f}"))
    emit(("method", "setting", "rounds", "errors", "violations", "on_draining", "on_cordoned", "restarts",
          "restart_gpu_h", "preempts", "reconf_per_job_h", "flipflop_per_job_h", "deadlines_met", "finished",
          "mean_jct_h", "solve_p50_s", "solve_p95_s", "wall_s"), rows, "scheduler_loop.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
