"""The Crius round (Crius Sec. 6): the common round (cluster, jobs, running allocations, outside work,
time; :class:`~optsched.core.round.RoundProblem`) plus the round's own operator graphs, the search
depth, the objective and the penalties for disturbing running jobs.

A job's ``model`` names a model of the Crius catalogue (:mod:`optsched.perf.crius.models`, e.g.
``bert-2.6b@256``) or one of the round's ``models``; ``requested_gpus`` is the user's initial GPU count
``N_G`` (Sec. 6.1: "Crius now requires the user to specify an initial GPU number"), the round offers
the job Cells of ``N_G / 2``, ``N_G`` and ``2 N_G`` GPUs; ``deadline`` (optional) is used by the
deadline-aware objective; ``gpu_type`` pins a job to one type. A running job's allocation is a Cell:
its plan's ``pp`` is the stage count (:func:`~optsched.perf.crius.cell_estimator.cell_plan`), its
GPUs are of one type.

Fields:

* ``models``: operator graphs defined in the round (JSON: ``{name: graph}``, the graph format of
  :mod:`optsched.perf.crius.op_graph`); a name may not shadow a catalogue model;
* ``search_depth`` (``D``, default 3, Sec. 8.4): at most this many jobs are *rescaled* (run with another
  Cell or on other nodes) per scheduling choice (Sec. 6.1; :func:`~optsched.rounds.crius.choice.depth_bound`);
* ``objective`` (:mod:`~optsched.rounds.crius.objective`): the paper's ``"throughput"`` (default; Sec.
  2.2 and 6: "we use the sum of all training jobs' throughput as the cluster throughput", raw samples/s,
  no penalty) or ``"deadline"`` (Sec. 8.5: the same cluster throughput, "strict deadline guarantees for
  each scheduled job", hopeless jobs dropped early); or ours, ``"normalised"`` (each job's throughput
  divided by its reference so that models of different speeds weigh alike, minus penalties) and
  ``"normalised-deadline"`` (that plus a bonus per deadline job on a Cell meeting its deadline, under
  the deadline rules);
* ``rescale_penalty`` / ``preempt_penalty`` (objectives ``normalised*`` only, normalised-throughput units;
  defaults 0.05 / 0.25): charged for a rescaled / suspended running job;
* ``deadline_bonus`` (objective ``normalised-deadline`` only; default 10): what a deadline job running on
  a Cell that meets its deadline adds (so admitting one more deadline job outweighs any throughput).
  A penalty or bonus set under an objective that has none is refused, naming it.
* ``past_deadlines`` (``"error"``, default, or ``"accept"``): a job whose deadline is before the round's time
  is an error naming it, or (``"accept"``, what a simulation's rounds use, where deadlines pass while jobs
  wait) a job that can no longer meet its deadline (no row meets it; the deadline rules drop it).

Validation (every error names the job or model and the rule): every job's model is known and its
``requested_gpus`` is a power of two (Sec. 4.2: stages and Cells are powers of two of GPUs); its
smallest Cell (``max(1, N_G / 2)`` GPUs) is not larger than the GPUs of every type it may use ("a
Cell on more GPUs than a type has"); a deadline is not before the round's time; a running job runs
a power of two of GPUs with a stage count that divides it; the round's graphs are valid operator
graphs (:class:`~optsched.perf.crius.op_graph.OperatorGraph`). A job none of whose Cells passes the
memory filter (Sec. 4.2) is not an error: a production round should not fail for one job that cannot
run; it waits, and its decision says why (:data:`~optsched.rounds.crius.decision.NO_CELL`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_int, require_int, require_name, require_number
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.job import CONSTRAINT_FIELDS, OBJECTIVE_FIELDS
from optsched.core.pool import gpu_types_with_gpus, usable_gpu_types
from optsched.core.round import RoundProblem
from optsched.perf.crius.models import MODEL_SHAPES, resolve_model
from optsched.perf.crius.op_graph import OperatorGraph
from optsched.perf.crius.stages import is_power_of_two

#: the paper's objectives first (raw cluster throughput, Sec. 2.2/6; its deadline variant, Sec. 8.5), then ours
OBJECTIVES: tuple[str, ...] = ("throughput", "deadline", "normalised", "normalised-deadline")
#: the objectives under the deadline rules of Sec. 8.5 (admission: drops, guarantees, Cells meeting deadlines)
DEADLINE_OBJECTIVES: tuple[str, ...] = ("deadline", "normalised-deadline")
DEFAULT_SEARCH_DEPTH = 3
DEFAULT_RESCALE_PENALTY = 0.05
DEFAULT_PREEMPT_PENALTY = 0.25
DEFAULT_DEADLINE_BONUS = 10.0


@dataclass(frozen=True)
class CriusRound(RoundProblem):
    """A Crius round (module docstring)."""

    KIND: ClassVar[str] = "crius"
    #: job fields no Crius method reads: a job that sets one is refused naming it (the hard constraints
    #: of ``rubick`` rounds, the elastic range and Lyra's worker fields, requested CPUs and memory)
    UNBOUND_JOB_FIELDS: ClassVar[tuple[str, ...]] = (*CONSTRAINT_FIELDS, *OBJECTIVE_FIELDS, "min_gpus", "max_gpus",
                                                     "gpus_per_worker", "fungible", "checkpointing",
                                                     "requested_cpus", "requested_mem_gib")
    FIELD_KEYS: ClassVar[tuple[str, ...]] = ("models", "search_depth", "objective", "rescale_penalty",
                                             "preempt_penalty", "deadline_bonus", "past_deadlines")

    models: tuple[tuple[str, OperatorGraph], ...] = ()
    search_depth: int = DEFAULT_SEARCH_DEPTH
    objective: str = "throughput"
    rescale_penalty: float | None = None
    preempt_penalty: float | None = None
    deadline_bonus: float | None = None
    past_deadlines: str = "error"

    @property
    def deadline_aware(self) -> bool:
        """Whether the deadline rules of Sec. 8.5 hold (objectives ``deadline`` and ``normalised-deadline``)."""
        return self.objective in DEADLINE_OBJECTIVES

    @property
    def normalised(self) -> bool:
        """Whether the objective sums normalised throughputs with penalties (ours) rather than raw ones."""
        return self.objective.startswith("normalised")

    @property
    def rescale_cost(self) -> float:
        """What a rescaled running job costs the objective (0 under the paper's objectives)."""
        if not self.normalised:
            return 0.0
        return DEFAULT_RESCALE_PENALTY if self.rescale_penalty is None else float(self.rescale_penalty)

    @property
    def preempt_cost(self) -> float:
        """What a suspended running job costs the objective (0 under the paper's objectives)."""
        if not self.normalised:
            return 0.0
        return DEFAULT_PREEMPT_PENALTY if self.preempt_penalty is None else float(self.preempt_penalty)

    @property
    def bonus(self) -> float:
        """What a deadline job on a Cell meeting its deadline adds (objective ``normalised-deadline`` only)."""
        if self.objective != "normalised-deadline":
            return 0.0
        return DEFAULT_DEADLINE_BONUS if self.deadline_bonus is None else float(self.deadline_bonus)

    def _check_fields(self) -> None:
        items = tuple(self.models.items()) if isinstance(self.models, Mapping) else tuple(self.models)
        names: set[str] = set()
        for item in items:
            if not isinstance(item, tuple) or len(item) != 2:
                raise ValidationError(f"round: models hold (name, operator graph) pairs, got {item!r}")
            name, graph = item
            require_name("round model", name)
            if name in names:
                raise ValidationError(f"round: model {name!r} defined twice")
            if name.partition("@")[0] in MODEL_SHAPES:
                raise ValidationError(f"round: model {name!r} shadows a catalogue model; give it another name")
            if not isinstance(graph, OperatorGraph):
                raise ValidationError(f"round: model {name!r} must be an OperatorGraph")
            names.add(name)
        object.__setattr__(self, "models", tuple(sorted(items, key=lambda kv: kv[0])))
        require_int("round", "search_depth", self.search_depth, 0)
        if self.past_deadlines not in ("error", "accept"):
            raise ValidationError(f"round: past_deadlines must be 'error' or 'accept', got {self.past_deadlines!r}")
        if self.objective not in OBJECTIVES:
            raise UnknownNameError("objective", str(self.objective), OBJECTIVES, context="of a crius round")
        for f in ("rescale_penalty", "preempt_penalty", "deadline_bonus"):
            if getattr(self, f) is None:
                continue
            require_number("round", f, getattr(self, f), 0.0)
            allowed = ("normalised-deadline",) if f == "deadline_bonus" else ("normalised", "normalised-deadline")
            if self.objective not in allowed:
                raise ValidationError(f"round: {f} applies to the objective {' and '.join(allowed)} only; objective "
                                      f"{self.objective!r} (the paper's cluster throughput, Crius Sec. 2.2, 6) has "
                                      "no penalty or bonus")
        types = {n.gpu_type: 0 for n in self.cluster.nodes}
        for n in self.cluster.nodes:
            types[n.gpu_type] += n.num_gpus
        with_gpus = gpu_types_with_gpus(self.cluster)  # once, not per job (issue 26: 0.7 s of 20,000 jobs)
        for j in self.jobs:
            who = f"round: job {j.name!r}"
            try:
                self.graph(j.model)
            except UnknownNameError as e:
                raise ValidationError(f"{who}: {e}") from None
            except ValidationError as e:
                raise ValidationError(f"{who}: {e}") from None
            if not is_power_of_two(j.requested_gpus):
                raise ValidationError(f"{who}: requests {j.requested_gpus} GPUs, not a power of two (Crius Cells "
                                      "run powers of two of GPUs, Sec. 4.2)")
            smallest = max(1, j.requested_gpus // 2)
            usable = usable_gpu_types(self.cluster, j, with_gpus)
            if all(types.get(t, 0) < smallest for t in usable):
                have = ", ".join(f"{t}: {types.get(t, 0)}" for t in usable)
                raise ValidationError(f"{who}: its smallest Cell needs {smallest} GPUs of one type, more than any type "
                                      f"it may use has ({have})")
            if j.deadline is not None and j.deadline < self.time and self.past_deadlines != "accept":
                raise ValidationError(f"{who}: deadline {j.deadline:g} s is before the round's time {self.time:g} s")
        for a in self.running:
            g = a.placement.total_gpus
            if not is_power_of_two(g) or g % a.plan.pp:
                raise ValidationError(f"round: running job {a.job!r} runs {g} GPUs in {a.plan.pp} stages; a Cell runs a "
                                      "power of two of GPUs in a stage count that divides it")

    def graph(self, model: str) -> OperatorGraph:
        """The operator graph of ``model`` (the round's own, else the catalogue's)."""
        return resolve_model(model, dict(self.models))

    def _fields_to_dict(self) -> dict[str, Any]:
        return {"models": {name: {k: v for k, v in g.to_dict().items() if k != "name"} for name, g in self.models},
                "search_depth": self.search_depth, "objective": self.objective,
                **{f: getattr(self, f) for f in ("rescale_penalty", "preempt_penalty", "deadline_bonus")
                   if getattr(self, f) is not None},
                **({"past_deadlines": self.past_deadlines} if self.past_deadlines != "error" else {})}

    @classmethod
    def _fields_from_dict(cls, data: Mapping[str, Any]) -> dict[str, Any]:
        models = data.get("models", {})
        if not isinstance(models, dict):
            raise ValidationError("round: models must be a JSON object {name: operator graph}")
        graphs = []
        for name, g in models.items():
            try:
                graphs.append((name, OperatorGraph.from_dict(g, name=name)))
            except ValidationError as e:
                raise ValidationError(f"round: model {name!r}: {e}") from None
        return {"models": tuple(graphs), "search_depth": json_int(data.get("search_depth", DEFAULT_SEARCH_DEPTH)),
                "objective": data.get("objective", "throughput"),
                "rescale_penalty": data.get("rescale_penalty"), "preempt_penalty": data.get("preempt_penalty"),
                "deadline_bonus": data.get("deadline_bonus"), "past_deadlines": data.get("past_deadlines", "error")}


__all__ = ["CriusRound", "DEADLINE_OBJECTIVES", "DEFAULT_DEADLINE_BONUS", "DEFAULT_PREEMPT_PENALTY",
           "DEFAULT_RESCALE_PENALTY", "DEFAULT_SEARCH_DEPTH", "OBJECTIVES"]
