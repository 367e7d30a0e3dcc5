"""Fixtures shared by every test folder. Plain helper functions are in ``helpers.py`` (importable as
``from helpers import ...`` because ``tests`` is on ``pythonpath``, see pyproject.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import SHARED_DATA, shared_data_dir

__all__ = ["SHARED_DATA", "shared_data"]


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (read-only public data next to the repository); skips the test when absent."""
    d = shared_data_dir()
    if not d.is_dir():
        pytest.skip("../shared/data is absent")
    return d
