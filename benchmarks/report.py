"""Shared output of the benchmark scripts: an aligned table on stdout and the same rows as CSV under
``benchmarks/out/``."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Sequence

OUT = Path(__file__).resolve().parent / "out"


def emit(header: Sequence[str], rows: Sequence[Sequence[object]], csv_name: str, directory: Path | None = None) -> Path:
    """Print ``rows`` under ``header`` right-aligned and write them to ``<directory>/<csv_name>`` (default
    ``benchmarks/out/``)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    sys.stdout.write("\n" + "\n".join("  ".join(str(c).rjust(w) for c, w in zip(r, widths))
                                      for r in (header, *rows)) + "\n")
    where = OUT if directory is None else Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    path = where / csv_name
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path
