"""What the command modules of :mod:`optsched.cli` share: output (the package's only writes to stdout
and stderr, :func:`out` and :func:`err`), output-path checks, tables, and the resolution of clusters
given on the command line.

Only :mod:`optsched.core` is imported here; a command that reads fitted model files imports
:mod:`optsched.perf.lookup` itself (``load_params``, ``fitted_models``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from optsched.core.catalog import resolve_cluster
from optsched.core.errors import ValidationError, one_line
from optsched.core.jsonio import format_json

if TYPE_CHECKING:  # pragma: no cover
    from optsched.perf.measurements import Measurement

#: the logger of every command (``-v`` shows its INFO lines)
log = logging.getLogger("optsched.cli")

PROG = "optsched"
DEFAULT_CLUSTER = "a800-8x8"
DEFAULT_GPU_TYPE = "A800"

__all__ = ["DEFAULT_CLUSTER", "DEFAULT_GPU_TYPE", "PROG", "check_output_dir", "check_output_file", "emit_json", "err",
           "format_table", "log", "one_line", "out", "plan_configs", "plots_skipped", "resolve_cluster",
           "write_text"]


# -- output --------------------------------------------------------------------------------------
def out(text: str) -> None:
    """Write ``text`` (a newline is added when missing) to stdout."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def err(text: str) -> None:
    """Write ``text`` (a newline is added when missing) to stderr."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def plots_skipped() -> bool:
    """Whether plots asked for must be skipped because matplotlib is not installed; if so, says it on stderr
    with how to install it (the ``plot`` extra). The library skips plots quietly; the commands say so."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is not None:
        return False
    err(f"{PROG}: warning: plots skipped: matplotlib is not installed (install the plot extra: "
        "pip install -e \".[plot]\" in the repository)")
    return True


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``; an OS error becomes a one-line :class:`ValidationError`."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ValidationError(f"{path}: cannot write file ({exc.strerror or exc})") from None


def check_output_file(path: str | Path | None, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be written as a file: it is a directory, its directory does
    not exist, or opening it for writing fails. The open is what decides (``os.access`` says yes to root even
    where the file system refuses, as under ``/sys``): a regular file or a new one is opened for appending,
    which leaves an existing file's content as it was, and a file created by the check is removed again."""
    if not path:
        return
    p = Path(path)
    if p.is_dir():
        raise ValidationError(f"{flag} {p}: is a directory; give a file name")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise ValidationError(f"{flag} {p}: directory {parent} does not exist")
    if p.exists() and not p.is_file():  # a device or a pipe (/dev/null, /dev/stdout): opening may block
        if not os.access(p, os.W_OK):
            raise ValidationError(f"{flag} {p}: not writable")
        return
    existed = p.exists()
    try:
        with open(p, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise ValidationError(f"{flag} {p}: not writable ({exc.strerror or exc})") from None
    if not existed:
        p.unlink(missing_ok=True)


def check_output_dir(path: str | Path, flag: str = "--out") -> None:
    """Fail before any work when ``path`` cannot be used as an output directory. A directory that does not
    exist is created to prove it can be, then removed again with every parent the check created: a command
    that fails later leaves nothing behind, and the writer of the outputs creates it when there is something
    to write."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise ValidationError(f"{flag} {p}: exists and is not a directory")
    created = [d for d in (p, *p.parents) if not d.exists()]
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValidationError(f"{flag} {p}: cannot create directory ({exc.strerror or exc})") from None
    try:
        if not os.access(p, os.W_OK):
            raise ValidationError(f"{flag} {p}: directory not writable")
    finally:
        for d in created:  # deepest first
            with contextlib.suppress(OSError):
                d.rmdir()


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
def plan_configs(rows: Sequence["Measurement"]) -> list[tuple[Any, tuple[int, ...], float]]:
    """(plan, GPUs per node, CPUs per GPU) of each measured row: what the performance model takes."""
    return [(r.plan, r.gpus_per_node, r.cpus_per_gpu) for r in rows]
