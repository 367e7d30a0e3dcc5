"""Opening CSV files with clear errors: the one CSV opener of measurement files and traces."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from optsched.core.errors import ValidationError


@contextmanager
def open_csv(path: str | Path) -> Iterator[TextIO]:
    """Open ``path`` for reading as UTF-8 CSV text (a byte-order mark is skipped). A file that cannot
    be opened, or whose bytes are not UTF-8 text or not CSV (found while the block reads it), raises
    ``ValidationError`` naming the file."""
    p = Path(path)
    try:
        handle = p.open(newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise ValidationError(f"{p}: cannot read file ({exc.strerror or exc})") from None
    with handle:
        try:
            yield handle
        except (UnicodeDecodeError, csv.Error) as exc:
            raise ValidationError(f"{p}: not a readable UTF-8 CSV file ({exc})") from None


__all__ = ["open_csv"]
