"""What the command modules of :mod:`optsched.cli` share: output (the package's only writes to stdout
and stderr, :func:`out` and :func:`err`), output-path checks, tables, and the resolution of clusters
and fitted models given on the command line.

Only :mod:`optsched.core` is imported here at module level; a fitted model file is read through
:mod:`optsched.perf` when a command asks for one (:func:`load_params`).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from optsched.core.catalog import CLUSTERS, get_cluster
from optsched.core.errors import ValidationError, one_line
from optsched.core.hardware import Cluster
from optsched.core.jsonio import format_json, read_json

if TYPE_CHECKING:  # pragma: no cover
    from optsched.perf.measurements import Measurement
    from optsched.perf.performance_model import PerformanceModel

#: the logger of every command (``-v`` shows its INFO lines)
log = logging.getLogger("optsched.cli")

PROG = "optsched"
DEFAULT_CLUSTER = "a800-8x8"
DEFAULT_GPU_TYPE = "A800"

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_GPU_TYPE", "PROG", "check_output_dir", "check_output_file", "emit_json", "err",
           "format_table", "load_params", "log", "one_line", "out", "plan_configs", "policy_models", "resolve_cluster",
           "write_text"]


# -- output --------------------------------------------------------------------------------------
def out(text: str) -> None:
    """Write ``text`` (a newline is added when missing) to stdout."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def err(text: str) -> None:
    """Write ``text`` (a newline is added when missing) to stderr."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``; an OS error becomes a one-line :class:`ValidationError`."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"{path}: cannot write file ({exc.strerror or exc})") from None


def check_output_file(path: str | Path | None, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be written as a file: it is a directory, or its
    directory does not exist or is not writable."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise ValidationError(f"{flag} {p}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValidationError(f"{flag} {p}: directory {parent} does not exist")
    if (p.exists() and not os.access(p, os.W_OK)) or not os.access(parent, os.W_OK):
        raise ValidationError(f"{flag} {p}: not writable")


def check_output_dir(path: str | Path, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be used as an output directory (creating it)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValidationError(f"{flag} {p}: exists and is not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"{flag} {p}: cannot create directory ({exc.strerror or exc})") from None
    if not os.access(p, os.W_OK):
        raise ValidationError(f"{flag} {p}: directory not writable")


def emit_json(data: Any, path: str | None) -> None:
    """Write ``data`` as JSON (:func:`~optsched.core.jsonio.format_json`) to ``path``, or to stdout when no
    path is given."""
    text = format_json(data)
    if path:
        write_text(path, text)
    else:
        out(text)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """``header`` and ``rows`` as left-aligned columns two spaces apart, one line each."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in (header, *rows)]
    return "\n".join(lines) + "\n"


# -- what the options name -----------------------------------------------------------------------
def resolve_cluster(name: str) -> Cluster:
    """A catalogue cluster by name, or a cluster JSON file (``Cluster.to_dict`` format) by path."""
    if name in CLUSTERS or not Path(name).suffix:
        return get_cluster(name)
    if not Path(name).is_file():
        raise ValidationError(f"cluster {name!r} is neither a built-in cluster ({', '.join(sorted(CLUSTERS))}) "
                              "nor an existing JSON file")
    data = read_json(name)  # its errors name the file already
    try:
        return Cluster.from_dict(data)
    except ValidationError as exc:
        raise ValidationError(f"{name}: {exc}") from None


def load_params(path: str | Path) -> "PerformanceModel":
    """The fitted model of a params JSON (the output of ``optsched fit``)."""
    from optsched.perf.performance_model import PerformanceModel
    return PerformanceModel.from_dict(read_json(path))


def policy_models(paths: Sequence[str], cluster: Cluster) -> dict[tuple[str, str], "PerformanceModel"]:
    """The fitted models of ``--params`` files keyed by (model, GPU type); each must be for a GPU type
    the cluster has, and no (model, GPU type) may come twice."""
    models: dict[tuple[str, str], PerformanceModel] = {}
    types = {n.gpu_type for n in cluster.nodes}
    for path in paths:
        pm = load_params(path)
        key = (pm.model.name, pm.gpu_type)
        if pm.gpu_type not in types:
            raise ValidationError(f"--params {path}: fitted for GPU type {pm.gpu_type!r}, but cluster {cluster.name!r} "
                                  f"has only {', '.join(sorted(types))}")
        if key in models:
            raise ValidationError(f"--params {path}: a second fitted model for {key[0]!r} on {key[1]!r}")
        models[key] = pm
    return models


def plan_configs(rows: Sequence["Measurement"]) -> list[tuple[Any, tuple[int, ...], float]]:
    """(plan, GPUs per node, CPUs per GPU) of each measured row: what the performance model takes."""
    return [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]
