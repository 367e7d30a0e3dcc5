"""The decision payload of ``placement``: per job the GPUs its base and its flexible workers hold per
server, and the workers that did not fit. JSON: ``{"placements": {job: {"base": {node: gpus},
"flexible": {node: gpus}}}, "unplaced": {job: workers}}``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from optsched.core.checks import json_ints, require_int, require_keys, require_name
from optsched.core.errors import ValidationError

Shares = tuple[tuple[str, int], ...]


def _shares(value: Any, what: str) -> Shares:
    items = value.items() if isinstance(value, Mapping) else value
    out = []
    for node, g in items:
        require_name(what, node)
        require_int(what, f"GPUs on {node!r}", g, 1)
        out.append((node, g))
    return tuple(sorted(out))


def _json_shares(value: Any) -> Any:
    """A ``{node: GPUs}`` member of a placement decision with :func:`~optsched.core.checks.json_int` applied
    to the GPUs (anything but a JSON object unchanged, for :func:`_shares` to reject)."""
    return json_ints(value) if isinstance(value, dict) else value


@dataclass(frozen=True)
class JobPlacement:
    """Where one job's workers are: ``base`` and ``flexible`` GPUs per node."""

    job: str
    base: Shares
    flexible: Shares = ()

    def __post_init__(self) -> None:
        require_name("job placement", self.job)
        object.__setattr__(self, "base", _shares(self.base, f"placement of job {self.job!r}"))
        object.__setattr__(self, "flexible", _shares(self.flexible, f"placement of job {self.job!r}"))

    def gpus_per_node(self) -> dict[str, int]:
        out = dict(self.base)
        for n, g in self.flexible:
            out[n] = out.get(n, 0) + g
        return out


@dataclass(frozen=True)
class WorkerPlacement:
    """Placements of the jobs that run and the workers left unplaced (module docstring)."""

    KEYS: ClassVar[tuple[tuple[str, ...], tuple[str, ...]]] = (("placements",), ("unplaced",))

    placements: tuple[JobPlacement, ...]
    unplaced: tuple[tuple[str, int], ...] = ()
    _by_job: dict[str, JobPlacement] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ps = tuple(sorted(self.placements, key=lambda p: p.job))
        by_job = {p.job: p for p in ps}
        if len(by_job) != len(ps):
            raise ValidationError("placement decision: a job appears twice")
        object.__setattr__(self, "placements", ps)
        object.__setattr__(self, "_by_job", by_job)
        un = dict(self.unplaced)
        for job, w in un.items():
            require_int(f"placement decision: unplaced workers of job {job!r}", "workers", w, 1)
        object.__setattr__(self, "unplaced", tuple(sorted(un.items())))

    def of(self, job: str) -> JobPlacement | None:
        return self._by_job.get(job)

    def to_dict(self) -> dict[str, Any]:
        return {"placements": {p.job: {"base": dict(p.base), "flexible": dict(p.flexible)} for p in self.placements},
                "unplaced": dict(self.unplaced)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkerPlacement":
        if not isinstance(data.get("placements"), dict) or not isinstance(data.get("unplaced", {}), dict):
            raise ValidationError("placement decision: placements and unplaced must be JSON objects")
        out = []
        for job, entry in data["placements"].items():
            require_keys(f"placement of job {job!r}", entry, ("base",), ("flexible",))
            out.append(JobPlacement(job, _json_shares(entry["base"]), _json_shares(entry.get("flexible", {}))))
        return cls(tuple(out), tuple(json_ints(data.get("unplaced", {})).items()))


__all__ = ["JobPlacement", "WorkerPlacement"]
