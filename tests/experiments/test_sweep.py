"""Sweeps (optsched.experiments.sweep): the grid, one row per point, the same rows in this process, on
the local process pool and on Ray (when installed), the runner choice, clear errors for bad specs."""

from __future__ import annotations

import csv
import itertools
import pickle
import sys
import types
from typing import Any

import pytest

from optsched.core.errors import OptschedError, ValidationError
from optsched.experiments.sweep import (METRIC_COLUMNS, POINT_COLUMNS, RAY_INSTALL_HINT, TIMING_COLUMNS, SweepPoint,
                                        SweepPointError, comparable, grid, parse_trace_spec, resolve_runner,
                                        run_point, run_sweep, write_csv)

TRACE = "synthetic:15:1.0"
CLUSTER = "a800-8x8"


def small_grid() -> list[SweepPoint]:
    return grid(policies=["rubick", "fifo"], traces=TRACE, clusters=CLUSTER, seeds=[0, 1])


@pytest.fixture(scope="module")
def serial_rows() -> list[dict[str, Any]]:
    """The small grid run in this process (workers=1): the reference the other runners must match."""
    return run_sweep(small_grid(), runner="local", workers=1)


# -- the grid ----------------------------------------------------------------------------------------
def test_grid_is_the_cartesian_product_in_a_stable_order() -> None:
    pts = grid(policies=["rubick", "sia", "fifo"], traces=[TRACE, "synthetic:30:0.5"], clusters=CLUSTER,
               seeds=[0, 1], round_interval_s=[300, 600], time_limit=5)
    expected = [(p, t, CLUSTER, s, float(r)) for p, t, s, r in
                itertools.product(["rubick", "sia", "fifo"], [TRACE, "synthetic:30:0.5"], [0, 1], [300, 600])]
    assert [(p.policy, p.trace, p.cluster, p.seed, p.round_interval_s) for p in pts] == expected
    assert all(p.time_limit == 5.0 and isinstance(p.round_interval_s, float) for p in pts)
    assert len(set(pts)) == len(pts)
    again = grid(policies=["rubick", "sia", "fifo"], traces=[TRACE, "synthetic:30:0.5"], clusters=CLUSTER,
                 seeds=[0, 1], round_interval_s=[300, 600], time_limit=5)
    assert again == pts


def test_points_are_picklable_hashable_values() -> None:
    p = SweepPoint("rubick", TRACE, CLUSTER, seed=3, max_time_s=1000)
    q = pickle.loads(pickle.dumps(p))
    assert q == p and hash(q) == hash(p) and q.max_time_s == 1000.0
    assert p.sim_config().seed == 3 and p.sim_config().max_time_s == 1000.0
    assert list(p.fields()) == list(POINT_COLUMNS)


def test_grid_takes_single_values() -> None:
    pts = grid(policies="fifo", traces=TRACE, seeds=2)
    assert pts == [SweepPoint("fifo", TRACE, CLUSTER, 2)]


# -- the same rows whoever runs them ----------------------------------------------------------------
def test_rows_follow_the_points_and_hold_the_summary(serial_rows: list[dict[str, Any]]) -> None:
    pts = small_grid()
    assert [(r["policy"], r["seed"]) for r in serial_rows] == [(p.policy, p.seed) for p in pts]
    for r in serial_rows:
        assert list(r) == [*POINT_COLUMNS, *METRIC_COLUMNS, *TIMING_COLUMNS]
        assert r["jobs"] == 15 and r["finished"] + r["unfinished"] == 15 and r["rounds"] > 0
    # a point is its own experiment: the same row on its own as inside the sweep
    assert comparable(run_point(pts[1])) == comparable(serial_rows[1])
    # different seeds give different traces, so different rows
    assert comparable(serial_rows[0]) != comparable(serial_rows[1])


def test_local_pool_gives_the_rows_of_a_serial_run(serial_rows: list[dict[str, Any]]) -> None:
    rows = run_sweep(small_grid(), runner="local", workers=2, progress=True)
    assert [comparable(r) for r in rows] == [comparable(r) for r in serial_rows]
    assert all(r["wall_seconds"] >= 0 for r in rows)


def test_ray_gives_the_rows_of_a_serial_run(serial_rows: list[dict[str, Any]]) -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False)
    try:
        assert resolve_runner("auto") == "ray"
        rows = run_sweep(small_grid(), runner="ray")
    finally:
        ray.shutdown()
    assert [comparable(r) for r in rows] == [comparable(r) for r in serial_rows]


class _FakeRef:
    def __init__(self, fn: Any, args: tuple[Any, ...]) -> None:
        self.fn, self.args = fn, args


def fake_ray() -> types.ModuleType:
    """Just enough of Ray's API to drive the Ray runner in this process: tasks run when fetched, and
    ``wait`` hands back the newest task first, so results arrive out of order."""
    m = types.ModuleType("ray")
    state = {"up": False, "inits": 0, "submitted": 0, "in_flight": 0, "max_in_flight": 0}

    def init(**kwargs: Any) -> None:
        state["up"] = True
        state["inits"] += 1

    def remote(**options: Any) -> Any:
        def wrap(fn: Any) -> Any:
            def submit(*args: Any) -> _FakeRef:
                state["submitted"] += 1
                state["in_flight"] += 1
                state["max_in_flight"] = max(state["max_in_flight"], state["in_flight"])
                return _FakeRef(fn, args)
            return types.SimpleNamespace(remote=submit)
        return wrap

    m.init = init  # type: ignore[attr-defined]
    m.is_initialized = lambda: state["up"]  # type: ignore[attr-defined]
    m.shutdown = lambda: state.update(up=False)  # type: ignore[attr-defined]
    m.remote = remote  # type: ignore[attr-defined]
    m.wait = lambda refs, num_returns=1: (refs[-num_returns:], refs[:-num_returns])  # type: ignore[attr-defined]

    def get(ref: _FakeRef) -> Any:
        state["in_flight"] -= 1
        return pickle.loads(pickle.dumps(ref.fn(*pickle.loads(pickle.dumps(ref.args)))))  # as if sent

    m.get = get  # type: ignore[attr-defined]
    m.cancel = lambda ref: None  # type: ignore[attr-defined]
    m.state = state  # type: ignore[attr-defined]
    return m


def test_ray_runner_keeps_point_order_and_limits_tasks_in_flight(serial_rows: list[dict[str, Any]],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ray = fake_ray()
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_runner("auto") == "local"  # importable but not initialised, no RAY_ADDRESS
    rows = run_sweep(small_grid(), runner="ray", workers=2)
    assert [comparable(r) for r in rows] == [comparable(r) for r in serial_rows]
    assert ray.state["inits"] == 1 and not ray.state["up"]  # started here, so shut down here
    assert ray.state["submitted"] == 4 and ray.state["max_in_flight"] == 2
    ray.init()
    assert resolve_runner("auto") == "ray"


def test_ray_runner_sends_absolute_paths_and_reports_the_point_as_given(tmp_path: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "broken.csv"
    bad.write_text("job_id,submission_time,duration,num_gpu\nj1,0,notanumber,1\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", fake_ray())
    point = SweepPoint("fifo", "broken.csv", CLUSTER)
    with pytest.raises(SweepPointError) as err:
        run_sweep([point], runner="ray")
    assert err.value.point == point  # named as given ...
    assert "broken.csv" in str(err.value) and "notanumber" in str(err.value)  # ... with the loader's message


# -- errors -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, words", [
    (dict(policies=["rubick", "nope"]), ["unknown policy 'nope'", "rubick", "fifo"]),
    (dict(clusters="tpu-pod"), ["unknown cluster 'tpu-pod'", "a800-8x8"]),
    (dict(traces="synthetic:abc:1.0"), ["'synthetic:abc:1.0'", "'abc' is not an integer", "synthetic:N:LOAD"]),
    (dict(traces="synthetic:10"), ["'synthetic:10'", "synthetic:N:LOAD"]),
    (dict(traces="synthetic:10:-1"), ["'synthetic:10:-1'", "synthetic:N:LOAD"]),
    (dict(traces="no/such/trace.csv"), ["'no/such/trace.csv'", "no such file"]),
    (dict(seeds=[-1]), ["seed", "-1"]),
    (dict(seeds=[0, 0]), ["seeds 0 listed twice"]),
    (dict(ground_truth="measured"), ["'measured'", "measured:DIR"]),
    (dict(round_interval_s=0), ["round_interval_s"]),
    (dict(time_limit=0), ["time_limit"]),
    (dict(rounds=3), ["unknown setting(s) rounds", "round_interval_s"]),
])
def test_bad_specs_name_the_item(kwargs: dict[str, Any], words: list[str]) -> None:
    args: dict[str, Any] = dict(policies=["rubick"], traces=TRACE, clusters=CLUSTER, seeds=[0])
    args.update(kwargs)
    with pytest.raises(ValidationError) as err:
        grid(**args)
    for w in words:
        assert w in str(err.value)


def test_parse_trace_spec() -> None:
    assert parse_trace_spec("synthetic:60:1.5") == ("synthetic", {"num_jobs": 60, "load": 1.5})
    assert parse_trace_spec("data/trace.csv") == ("data/trace.csv", {})


def test_ray_runner_without_ray_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ValidationError) as err:
        run_sweep(small_grid(), runner="ray")
    assert RAY_INSTALL_HINT in str(err.value)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert resolve_runner("auto") == "local"
    monkeypatch.setenv("RAY_ADDRESS", "ray://nowhere:10001")
    assert resolve_runner("auto") == "local"  # a cluster address, but no Ray to reach it with


def test_bad_runner_and_workers() -> None:
    with pytest.raises(ValidationError, match="unknown runner 'dask'"):
        run_sweep(small_grid(), runner="dask")
    with pytest.raises(ValidationError, match="workers"):
        run_sweep(small_grid(), runner="local", workers=0)
    assert run_sweep([], runner="local") == []


def test_a_failing_point_is_named(tmp_path: Any) -> None:
    bad = tmp_path / "broken.csv"
    bad.write_text("job_id,submission_time,duration,num_gpu\nj1,0,notanumber,1\n")
    point = SweepPoint("fifo", str(bad), CLUSTER)
    with pytest.raises(SweepPointError) as err:
        run_sweep([point], runner="local", workers=1)
    assert "policy='fifo'" in str(err.value) and "notanumber" in str(err.value)
    assert isinstance(err.value.__cause__, ValidationError)
    again = pickle.loads(pickle.dumps(err.value))  # crosses process boundaries intact
    assert isinstance(again, OptschedError) and str(again) == str(err.value) and again.point == point


# -- the CSV ----------------------------------------------------------------------------------------
def test_write_csv_one_row_per_point_stable_columns(serial_rows: list[dict[str, Any]], tmp_path: Any) -> None:
    path = write_csv(list(reversed(serial_rows)), tmp_path / "out" / "sweep.csv")
    with path.open(newline="") as f:
        read = list(csv.DictReader(f))
    assert list(read[0]) == [*POINT_COLUMNS, *METRIC_COLUMNS, *TIMING_COLUMNS]
    assert len(read) == len(serial_rows)
    assert read[-1]["policy"] == serial_rows[0]["policy"] and read[0]["max_time_s"] == ""
    assert read[0]["checkpoint_on_preempt"] == "true"
    assert float(read[-1]["avg_jct_s"]) == serial_rows[0]["avg_jct_s"]
