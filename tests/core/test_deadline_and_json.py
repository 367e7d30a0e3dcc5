"""The shared time budget (optsched/core/deadline.py) and the JSON text of decisions and rounds
(optsched/core/jsonio.format_json)."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from optsched.core import ValidationError
from optsched.core.deadline import Deadline, cancel_scope, current_cancel
from optsched.core.jsonio import format_json


def test_deadline_counts_from_its_start_and_moves_earlier() -> None:
    start = time.perf_counter() - 3.0
    d = Deadline(5.0, start)
    assert d.at == pytest.approx(start + 5.0)
    assert 1.5 < d.remaining() <= 2.0 and not d.expired() and d.expired(reserve=2.5)
    e = d.earlier(1.5)
    assert e.start == start and e.seconds == pytest.approx(3.5) and 0 < e.remaining() <= 0.5
    assert d.earlier(10.0).expired() and d.earlier(10.0).seconds > 0  # never before its start
    assert d.earlier(-1.0).seconds == 5.0  # a negative amount does not extend it
    assert math.isinf(Deadline.never().earlier(100.0).remaining())


def test_a_cancelled_deadline_has_no_time_left_and_deadlines_made_in_a_scope_carry_its_event() -> None:
    """Issue 26 (a solve whose client hangs up is cancelled): once the scope's event is set, every deadline made in
    the scope, and every deadline moved earlier from one, is expired; outside the scope deadlines are as before."""
    cancel = threading.Event()
    assert current_cancel() is None and Deadline(5.0).cancel is None
    with cancel_scope(cancel):
        d = Deadline(5.0)
        e = Deadline.since(5.0, time.perf_counter()).earlier(1.0)
        assert current_cancel() is cancel and not d.expired() and d.remaining() > 4.0
        cancel.set()
        assert d.expired() and e.expired() and d.remaining() <= 0.0 and d.cancelled
        assert Deadline.never().expired() and d == Deadline(5.0, d.start, None)  # the event is not compared
    assert current_cancel() is None and not Deadline(5.0).expired()
    with cancel_scope(None):
        assert current_cancel() is None


@pytest.mark.parametrize("bad", [0, -1.0, True, "5", float("nan")])
def test_deadline_rejects_a_bad_limit(bad: object) -> None:
    with pytest.raises(ValidationError, match="time limit must be a positive number"):
        Deadline(bad)  # type: ignore[arg-type]


def test_format_json_is_the_same_json_one_item_per_line() -> None:
    data = {"format": "x/1", "jobs": [{"job": "a", "placement": {"n0": [1, 2]}}, {"job": "b"}], "empty": [],
            "none": None, "nested": {"k": [1, 2]}, "text": "é\n"}
    text = format_json(data)
    assert json.loads(text) == data
    lines = text.splitlines()
    assert lines[0] == "{" and lines[-1] == "}" and text.endswith("}\n")
    assert '    {"job": "a", "placement": {"n0": [1, 2]}},' in lines and '    {"job": "b"}' in lines
    assert '  "empty": [],' in lines
    for other in ([1, 2], {}, "s", 3):
        assert json.loads(format_json(other)) == other
