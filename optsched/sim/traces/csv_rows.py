"""Reading a trace CSV and checking its rows: every broken row is reported as ``<file> row <n> (line
<l>): <rule>`` (row 1 is the first data row after the header; blank lines are skipped and not
counted), all together (the first :data:`MAX_REPORTED_ERRORS`), or skipped with one warning per
file."""

from __future__ import annotations

import csv
import logging
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optsched.core.csvio import open_csv
from optsched.core.errors import ValidationError

log = logging.getLogger(__name__)

#: row errors listed in one exception
MAX_REPORTED_ERRORS = 10


class RowError(Exception):
    """A broken row rule; ``rule`` is a short key for the skip summary."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class Row:
    number: int
    line: int
    values: dict[str, str]


def read_csv(path: Path, required: Sequence[str], optional: Sequence[str] = ()) -> Iterator[Row]:
    """Rows of ``path`` as stripped strings; raises for an unreadable or empty file and missing columns.
    A row with more or fewer fields than the header yields a row whose values mark the problem."""
    with open_csv(path) as handle:
        yield from _rows(path, csv.reader(handle), required, optional)


def _rows(path: Path, reader: Any, required: Sequence[str], optional: Sequence[str]) -> Iterator[Row]:
    header: list[str] | None = None
    for fields in reader:
        if any(f.strip() for f in fields):
            header = [f.strip() for f in fields]
            break
    if header is None:
        raise ValidationError(f"{path}: empty file (no header, no rows)")
    missing = [c for c in required if c not in header]
    if missing:
        raise ValidationError(f"{path}: missing column(s) {', '.join(missing)}; header is {header}")
    dup = sorted(c for c, k in Counter(header).items() if k > 1 and c in (*required, *optional))
    if dup:
        raise ValidationError(f"{path}: column(s) {', '.join(dup)} appear twice in the header")
    number = 0
    for fields in reader:
        if not any(f.strip() for f in fields):
            continue  # blank line (e.g. at the end of philly.csv)
        number += 1
        values = {h: f.strip() for h, f in zip(header, fields)}
        if len(fields) != len(header):
            values["\0fields"] = f"{len(fields)} fields but the header has {len(header)} columns"
        yield Row(number, reader.line_num, values)
    if number == 0:
        raise ValidationError(f"{path}: no data rows after the header")


def check_field_count(row: Row) -> None:
    if "\0fields" in row.values:
        raise RowError(row.values["\0fields"], "wrong number of fields")


def text_field(row: Row, col: str) -> str:
    text = row.values.get(col, "")
    if not text:
        raise RowError(f"{col} is empty", f"empty {col}")
    return text


def number_field(row: Row, col: str) -> float:
    text = text_field(row, col)
    try:
        x = float(text)
    except ValueError:
        raise RowError(f"{col} {text!r} is not a number", f"non-numeric {col}") from None
    if not math.isfinite(x):
        raise RowError(f"{col} must be finite, got {text!r}", f"non-numeric {col}")
    return x


def non_negative_field(row: Row, col: str, what: str) -> float:
    x = number_field(row, col)
    if x < 0:
        raise RowError(f"{col} is a {what} and must be >= 0, got {row.values[col]}", f"negative {col}")
    return x


def integer_field(row: Row, col: str, minimum: int, rule: str) -> int:
    x = number_field(row, col)
    if x != int(x):
        raise RowError(f"{col} must be an integer, got {row.values[col]}", f"non-integer {col}")
    if x < minimum:
        raise RowError(f"{col} must be >= {minimum} ({rule}), got {row.values[col]}", rule)
    return int(x)


def gpu_count_field(row: Row, col: str) -> int:
    x = number_field(row, col)
    if x == 0:
        raise RowError(f"{col} is 0: a job needs at least one GPU", "zero GPUs")
    if x != int(x) or x < 0:
        raise RowError(f"{col} must be a positive integer, got {row.values[col]}", f"bad {col}")
    return int(x)


class RowErrors:
    """Collects row errors of one file; raises them together, or skips them with one warning."""

    def __init__(self, path: Path, skip: bool) -> None:
        self.path = path
        self.skip = skip
        self.messages: list[str] = []
        self.rules: Counter[str] = Counter()

    def where(self, row: Row) -> str:
        return f"{self.path} row {row.number} (line {row.line})"

    def add(self, row: Row, exc: RowError) -> None:
        self.messages.append(f"{self.where(row)}: {exc}")
        self.rules[exc.rule] += 1

    def finish(self, kept: int) -> None:
        if not self.messages:
            return
        if self.skip:
            summary = ", ".join(f"{k} x {r}" for r, k in sorted(self.rules.items()))
            log.warning("%s: skipped %d invalid row(s) (%s); first: %s", self.path, len(self.messages),
                        summary, self.messages[0])
            if kept == 0:
                raise ValidationError(f"{self.path}: every row is invalid ({summary})")
            return
        shown = self.messages[:MAX_REPORTED_ERRORS]
        more = len(self.messages) - len(shown)
        text = "\n  - ".join(shown) + (f"\n  - ... and {more} more" if more else "")
        head = f"{self.path}: {len(self.messages)} invalid row(s)"
        if len(self.messages) == 1:
            raise ValidationError(self.messages[0])
        raise ValidationError(f"{head}:\n  - {text}")


__all__ = ["MAX_REPORTED_ERRORS", "Row", "RowError", "RowErrors", "check_field_count", "gpu_count_field",
           "integer_field", "non_negative_field", "number_field", "read_csv", "text_field"]
