"""Reading and writing the value objects as JSON files with clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from optsched.core.errors import ValidationError


def read_json(path: str | Path) -> Any:
    """Parse a JSON file; a missing file or malformed JSON raises ``ValidationError`` naming the
    file, line and column."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise ValidationError(f"{p}: cannot read file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{p}: not UTF-8 text ({exc})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{p}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None


def write_json(path: str | Path, data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
