"""Workload traces for the simulator: the :class:`~optsched.sim.traces.trace.Trace` value object and
its CSV loaders, one module per format (Rubick Sec. 7.3, "Methodology").

Three formats, told apart by their header (:func:`load_trace`), see ``../shared/data/README.md``:

* **workload** -- the Rubick 406-job trace (``workload-{base,bp,mt}.csv``, ``naive.csv``), columns
  ``name,submission_time,duration,application,num_gpus,num_cpus,bandwidth,exec_plan,steps,is_sla``:
  :func:`~optsched.sim.traces.workload.load_workload_csv`. ``steps`` is the work, ``exec_plan`` the
  user's initial plan, parsed exactly like the measurement files
  (:func:`optsched.core.plan.parse_plan_code` with ``offload_gc=offload_runs_with_gc(model)``) so
  that trace plans equal measured-table plans.
* **philly** -- Microsoft Philly (Jeon et al., ATC'19), ``timestamp,duration,num_gpus,...``:
  :func:`~optsched.sim.traces.philly.load_philly_csv`.
* **itp** -- Microsoft ITP 2021, ``job_id,submission_time,duration,num_gpu``:
  :func:`~optsched.sim.traces.itp.load_itp_csv`.

The production traces carry no model names. Like Rubick Sec. 7.3 ("For each job, we select a model
from Table 1 randomly. In case the original GPU number is infeasible for the model, we use a
feasible one and adjust the duration to maintain the same GPU hours. ... we translate the job
duration to targeted minibatches using the measured throughput"),
:func:`~optsched.sim.traces.assign.assign_jobs` -- the one function shared by both loaders and
:mod:`optsched.sim.traces.synthetic` -- gives every job a model, a GPU count, an initial plan and
its work in iterations.

Choices where the paper is silent (all overridable by keyword arguments where it makes sense):

* **GPU type and packing.** Feasibility is judged on one GPU type (``gpu_type``; default the type
  with the most GPUs in the cluster, ties by name) and on the *packed* placement of the request
  (:func:`optsched.core.pool.packed_placement`: whole nodes of the largest node size of that type
  first, then the remainder on one node), with the host memory the coefficient table grants
  (:func:`optsched.perf.memory.host_room` of the smallest node,
  :mod:`optsched.rounds.rubick.table`), so every requested plan of a trace is accepted there. On a
  cluster with several GPU types each job is pinned (``Job.gpu_type``) to the type its plan and work
  were computed for.
* **Allowed initial plans** (:func:`~optsched.sim.traces.assign.allowed_plans`): the plans of
  :func:`optsched.perf.plans.enumerate_plans` on the packed placement, without TP/PP for vit,
  roberta, bert and t5 (:data:`~optsched.core.catalog.NO_3D_MODELS`, "we disable TP and PP as they
  are mostly unnecessary for these relatively small models"), every feasible 3D plan for the others.
  A GPU count is *feasible* for a model when at least one allowed plan exists on it.
* **Nearest feasible GPU count**: the smallest feasible count above the original one, else the
  largest feasible count below it (a count above the GPUs of the type is never feasible). The
  duration is scaled by ``original / new`` to keep the GPU-hours.
* **Initial plan**: uniformly at random among the allowed plans (``plan_choice="random"``, the base
  trace) or the fastest one by ``iteration_time`` (``"best"``, the BP trace; ties by plan label).
* **Work**: ``ceil(duration / iteration_time(model, gpu_type, plan, gpus_per_node, cpus_per_gpu))``
  iterations with :data:`~optsched.core.job.DEFAULT_CPUS_PER_GPU` = 8 CPUs per GPU (the 406-job
  trace's ratio), at least one (a job of duration 0 runs one iteration).
* **Randomness**: one ``numpy.random.Generator`` seeded with the caller's seed; models are drawn for
  all jobs first (one integer per job, in submit-time order), then one uniform number per job picks
  the plan, so the model assignment does not depend on ``plan_choice`` or ``iteration_time``.
* **Tenants** (:func:`~optsched.sim.traces.trace.tenancy`): when any job is guaranteed, guaranteed
  jobs belong to tenant ``A`` and best-effort ones to ``B``, with quota ``A`` = the cluster's GPUs
  (Rubick's MT trace: "Tenant-A with a quota of 64 GPUs, and Tenant-B with no quota" on the 64-GPU
  cluster); otherwise every job is tenant ``default`` without quotas. ``tenant_of(name,
  guaranteed)`` and ``quotas`` override it; with a custom ``tenant_of`` and no ``quotas`` no quota
  is enforced.
* **Submit times**: kept as written for the workload format (it starts at 0); for Philly and ITP,
  seconds after the first kept job (rows may be unsorted; jobs are processed in (time, row) order).
  ``start``/``end`` keep rows with ``start <= time < end`` (Philly: timestamps, ITP: the file's
  seconds); ``max_jobs`` then keeps the earliest ones.
* **Validation.** Every row is checked; all broken rows are reported together (first
  :data:`~optsched.sim.traces.csv_rows.MAX_REPORTED_ERRORS`), each as ``<file> row <n> (line <l>):
  <rule>``, row 1 being the first data row after the header (blank lines are skipped and not
  counted). With ``skip_invalid=True`` (Philly and ITP) broken rows are skipped instead and one
  warning counts them per rule. The workload format's ``bandwidth`` column is optional and ignored
  (the performance model derives communication from the plan), as are Philly's ``gpu_time`` and
  ``cluster`` columns.

Files: ``trace.py`` (the value object, tenants), ``csv_rows.py`` (reading and checking rows),
``assign.py`` (models, GPU counts, plans and work for rows without models), one loader per format
(``workload.py``, ``philly.py``, ``itp.py``), ``synthetic.py`` (the built-in Philly-calibrated
trace) and ``load.py`` (format detection and :func:`load_trace`)."""

from optsched.sim.traces.assign import (PLAN_CHOICES, TRACE_MODELS, IterationTimeFn, RawJob, allowed_plans, assign_jobs,
                                        default_iteration_time, packed_plan_violation)
from optsched.sim.traces.itp import load_itp_csv
from optsched.sim.traces.load import BUILTIN_TRACES, FORMATS, detect_format, load_trace
from optsched.sim.traces.philly import load_philly_csv
from optsched.sim.traces.synthetic import offered_load, synthetic_trace
from optsched.sim.traces.trace import TenantFn, Trace, tenancy
from optsched.sim.traces.workload import INFEASIBLE_PLAN_POLICIES, load_workload_csv

__all__ = ["BUILTIN_TRACES", "FORMATS", "INFEASIBLE_PLAN_POLICIES", "PLAN_CHOICES", "TRACE_MODELS", "IterationTimeFn",
           "RawJob", "TenantFn", "Trace", "allowed_plans", "assign_jobs", "default_iteration_time", "detect_format",
           "load_itp_csv", "load_philly_csv", "load_trace", "load_workload_csv", "offered_load",
           "packed_plan_violation", "synthetic_trace", "tenancy"]
