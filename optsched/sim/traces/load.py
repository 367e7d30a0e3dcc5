"""Loading a trace of any supported format, told by its CSV header, or a built-in trace by name."""

from __future__ import annotations

import csv
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from optsched.core.csvio import open_csv
from optsched.core.errors import ValidationError
from optsched.core.hardware import Cluster
from optsched.sim.traces.assign import IterationTimeFn
from optsched.sim.traces.itp import ITP_COLUMNS, load_itp_csv
from optsched.sim.traces.philly import PHILLY_COLUMNS, load_philly_csv
from optsched.sim.traces.synthetic import synthetic_trace
from optsched.sim.traces.trace import Trace
from optsched.sim.traces.workload import WORKLOAD_COLUMNS, load_workload_csv


#: trace formats by required header columns, in the order they are tried
FORMATS: dict[str, tuple[str, ...]] = {"workload": WORKLOAD_COLUMNS, "philly": PHILLY_COLUMNS,
                                       "itp": ITP_COLUMNS}
#: names :func:`load_trace` accepts instead of a path
BUILTIN_TRACES = ("synthetic",)


def detect_format(path: str | Path) -> str:
    """``workload``, ``philly`` or ``itp`` from the CSV header (first non-blank line); raises
    ``ValidationError`` listing the accepted headers otherwise."""
    p = Path(path)
    with open_csv(p) as handle:
        header = next((r for r in csv.reader(handle) if any(f.strip() for f in r)), None)
    if header is None:
        raise ValidationError(f"{p}: empty file (no header, no rows)")
    cols = {h.strip() for h in header}
    for fmt, needed in FORMATS.items():
        if set(needed) <= cols:
            return fmt
    accepted = "; ".join(f"{fmt}: {','.join(needed)}" for fmt, needed in FORMATS.items())
    raise ValidationError(f"{p}: unrecognised trace header {[h.strip() for h in header]}; accepted headers "
                          f"(columns that must be present) are {accepted}")


def load_trace(path_or_name: str | Path, cluster: Cluster, *, seed: int,
               iteration_time: IterationTimeFn | None = None, **kwargs: Any) -> Trace:
    """Load a trace file of any supported format (told by its header, :func:`detect_format`), or the
    built-in ``"synthetic"`` trace (:func:`optsched.sim.traces.synthetic.synthetic_trace`). ``seed`` and
    ``iteration_time`` are used by the formats without model names and the synthetic trace (the
    workload format ignores them); other keyword arguments go to the loader."""
    if isinstance(path_or_name, str) and path_or_name in BUILTIN_TRACES:
        _check_options(synthetic_trace, kwargs, "synthetic trace")
        return synthetic_trace(cluster, seed=seed, iteration_time=iteration_time, **kwargs)
    p = Path(path_or_name)
    if not p.is_file():
        raise ValidationError(f"trace {str(path_or_name)!r} is neither a file nor a built-in trace "
                              f"({', '.join(BUILTIN_TRACES)})")
    fmt = detect_format(p)
    loader = {"workload": load_workload_csv, "philly": load_philly_csv, "itp": load_itp_csv}[fmt]
    _check_options(loader, kwargs, f"{p} ({fmt} trace)")
    if fmt == "workload":
        return load_workload_csv(p, cluster, **kwargs)
    return loader(p, cluster, seed=seed, iteration_time=iteration_time, **kwargs)


def _check_options(fn: Callable[..., Any], kwargs: Mapping[str, Any], who: str) -> None:
    """Raise ``ValidationError`` naming options ``fn`` does not take (they would be silently lost)."""
    params = inspect.signature(fn).parameters
    fixed = {"path", "cluster", "seed", "iteration_time"}
    unknown = sorted(k for k in kwargs if k not in params or k in fixed)
    if unknown:
        known = sorted(k for k, v in params.items() if v.kind is v.KEYWORD_ONLY and k not in fixed)
        raise ValidationError(f"{who}: unknown option(s) {', '.join(unknown)}; this format takes "
                              f"{', '.join(known)}")


__all__ = ["BUILTIN_TRACES", "FORMATS", "detect_format", "load_trace"]
