"""Capacity loaning for simulations (thesis Sec. 3.2.1, 3.4, 3.7.1): an inference usage series, a
synthetic one of the published shape, a CSV loader, and the orchestrator turning a series into
:class:`~optsched.core.events.PoolTarget` events.

**Usage series**: the fraction of inference servers inference needs, one value in [0, 1] every
``step_s`` seconds (5 minutes in the thesis, Fig. 3.1), from time 0.

**Orchestrator** (:func:`loan_targets`): at every point of the series the inference side lends
``floor((1 - usage - headroom) x N)`` of its ``N`` servers (never negative), ``headroom`` = 2% "never
to be loaned" (Sec. 3.7.1, "Headroom in inference cluster"); a target is emitted when that number
changes. The thesis' orchestrator acts on a predicted series (an LSTM five minutes ahead); a
simulation takes the series as the prediction.

**Opportunistic scheduling** (:func:`opportunistic_changes`, the baseline of Sec. 3.7.1): no server is
lent; inference holds ``ceil(usage x GPUs)`` of the inference GPUs, spread evenly over the servers (the
first servers take one more), as :class:`~optsched.core.events.CapacityChange` events, and training
jobs use the rest at lower priority: when inference grows, the simulator evicts them (latest started
first).

**Synthetic diurnal series** (:func:`synthetic_usage`), after Fig. 3.1: one week, "peak traffic lasts
about four hours at night" (a plateau 20:00-24:00 at ``peak``), the trough before dawn (05:00, at
``peak / peak_to_trough``: 95% and 42% for the defaults, the caption's range, ratio about 2.2), a
rising ramp through the day and a falling one after midnight whose steepness is solved so that the
mean is ``mean`` (65%), plus small noise from the given seed.

**The 5-minute burst** (``burst``, the ``usage_burst`` option of a Lyra simulation): Sec. 3.7.1, "we find
that the median inference traffic burst within five minutes is ~2% of the inference cluster capacity based
on our GPU utilization trace". :func:`median_burst` measures it on a series: the median absolute change
over five minutes, as a share of the inference cluster's capacity (the series' unit). The series above
moves about 0.3% (its smoothed noise and the diurnal ramps). Given ``burst``, independent Gaussian noise,
one draw per point from the same seed, is added to that series (then clipped to [0, 1]), its scale solved
by bisection so that :func:`median_burst` of the result is ``burst``. The text gives the median only: the
bursts' shape (independent from one point to the next, Gaussian) is ours. Without ``burst`` the series is
unchanged. A ``burst`` below the series' own median change, or above what clipped noise can reach, is
refused naming the reachable bound.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from optsched.core.checks import require_seed
from optsched.core.allocation import NodeShare
from optsched.core.errors import ValidationError
from optsched.core.events import CapacityChange, PoolTarget
from optsched.core.hardware import Cluster

#: servers never lent (Sec. 3.7.1)
HEADROOM = 0.02
#: seconds between two points of a usage series (Fig. 3.1: 5-minute intervals)
STEP_S = 300.0
#: the span of a burst (Sec. 3.7.1: "the median inference traffic burst within five minutes")
BURST_SPAN_S = 300.0
#: how close :func:`synthetic_usage` brings :func:`median_burst` to the ``burst`` asked (share of capacity)
BURST_TOLERANCE = 1e-4


@dataclass(frozen=True)
class UsageSeries:
    """Inference usage (fraction of servers in use) every ``step_s`` seconds from 0."""

    values: tuple[float, ...]
    step_s: float = STEP_S

    def __post_init__(self) -> None:
        if not self.values:
            raise ValidationError("usage series: it is empty")
        if not (self.step_s > 0 and math.isfinite(self.step_s)):
            raise ValidationError(f"usage series: step must be a positive number of seconds, got {self.step_s!r}")
        for i, v in enumerate(self.values):
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValidationError(f"usage series: value {v!r} at point {i} ({i * self.step_s:g} s) is outside "
                                      "[0, 1]")
        object.__setattr__(self, "values", tuple(float(v) for v in self.values))

    @property
    def times(self) -> np.ndarray:
        return np.arange(len(self.values)) * self.step_s


def _shape(hours: np.ndarray, power: float) -> np.ndarray:
    """Diurnal shape in [0, 1]: trough at 05:00, rise to 20:00, plateau to 24:00, fall to 05:00."""
    h = np.mod(hours, 24.0)
    out = np.ones_like(h)
    rise = (h >= 5) & (h < 20)
    fall = h < 5
    x_rise = (h[rise] - 5) / 15.0
    x_fall = 1.0 - h[fall] / 5.0
    out[rise] = x_rise ** power
    out[fall] = x_fall ** power
    return out


def median_burst(values: Sequence[float] | np.ndarray, step_s: float = STEP_S) -> float:
    """The median absolute change of a usage series over :data:`BURST_SPAN_S` (five minutes; the points
    that far apart, at least one step), as a share of the inference cluster's capacity (module
    docstring); 0 for a series of one point."""
    v = np.asarray(values, dtype=float)
    lag = max(1, int(round(BURST_SPAN_S / step_s)))
    if v.size <= lag:
        return 0.0
    return float(np.median(np.abs(v[lag:] - v[:-lag])))


def check_burst(burst: object) -> float:
    """``burst`` as a float when it is a number in [0, 1]; a ``ValidationError`` naming the option otherwise."""
    if isinstance(burst, bool) or not isinstance(burst, (int, float)) or not (math.isfinite(burst)
                                                                             and 0.0 <= burst <= 1.0):
        raise ValidationError(f"usage_burst (the median 5-minute change of the inference usage series, a share of "
                              f"the inference cluster's capacity) must be a number in [0, 1], got {burst!r}")
    return float(burst)


def _with_burst(base: np.ndarray, z: np.ndarray, burst: float, step_s: float) -> np.ndarray:
    """``clip(base + s z, 0, 1)`` with the scale ``s`` found by bisection so that its :func:`median_burst` is
    ``burst`` (module docstring)."""
    def series(s: float) -> np.ndarray:
        return np.clip(base + s * z, 0.0, 1.0)

    lowest = median_burst(series(0.0), step_s)
    if burst < lowest - BURST_TOLERANCE:
        raise ValidationError(f"usage_burst {burst:g}: the synthetic series already moves {lowest:.4f} (median "
                              "5-minute change) without bursts; give at least that")
    hi = 0.01
    while median_burst(series(hi), step_s) < burst:
        hi *= 2.0
        if hi > 64.0:
            raise ValidationError(f"usage_burst {burst:g}: noise clipped to [0, 1] reaches a median 5-minute change "
                                  f"of {median_burst(series(hi), step_s):.4f} at most; give less")
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        got = median_burst(series(mid), step_s)
        if abs(got - burst) <= BURST_TOLERANCE / 4:
            return series(mid)
        if got < burst:
            lo = mid
        else:
            hi = mid
    return series(hi)


def synthetic_usage(days: float = 7.0, *, seed: int = 0, peak: float = 0.95, peak_to_trough: float = 2.2,
                    mean: float = 0.65, noise: float = 0.01, start_hour: float = 0.0,
                    step_s: float = STEP_S, burst: float | None = None) -> UsageSeries:
    """The synthetic diurnal series (module docstring); ``start_hour``: wall-clock hour of time 0; ``burst``:
    the median 5-minute change to give it (module docstring, "The 5-minute burst"; None: the series as
    drawn)."""
    if burst is not None:
        burst = check_burst(burst)
    trough = peak / peak_to_trough
    if not 0 < trough < mean < peak <= 1:
        raise ValidationError(f"synthetic usage: need 0 < trough ({trough:.3f}) < mean ({mean}) < peak ({peak}) <= 1")
    n = max(1, int(round(days * 86400 / step_s)))
    hours = start_hour + np.arange(n) * step_s / 3600.0
    day = np.arange(0, 24, step_s / 3600.0)
    target = (mean - trough) / (peak - trough)
    lo, hi = 0.01, 50.0
    for _ in range(60):   # bisection on the ramp power: a larger power lowers the mean
        mid = math.sqrt(lo * hi)
        if _shape(day, mid).mean() > target:
            lo = mid
        else:
            hi = mid
    require_seed("synthetic_usage", seed)
    rng = np.random.default_rng(seed)
    smooth = np.convolve(rng.normal(0.0, noise, n + 5), np.ones(6) / 6, mode="valid")[:n]
    values = np.clip(trough + (peak - trough) * _shape(hours, math.sqrt(lo * hi)) + smooth, 0.0, 1.0)
    if burst is not None:
        values = _with_burst(values, rng.standard_normal(n), burst, step_s)
    return UsageSeries(tuple(values.tolist()), step_s)


def load_usage_csv(path: str | Path) -> UsageSeries:
    """A usage series from a CSV with columns ``time_s,usage`` (header required; times from 0 at one fixed
    step, in order). A gap (a step unlike the first), a time out of order, a missing or non-numeric value
    or a usage outside [0, 1] is a ``ValidationError`` naming the line."""
    p = Path(path)
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as e:
        raise ValidationError(f"usage CSV {p}: cannot be read ({e})") from None
    if not rows or [c.strip() for c in rows[0]] != ["time_s", "usage"]:
        raise ValidationError(f"usage CSV {p}: the header must be time_s,usage")
    times: list[float] = []
    values: list[float] = []
    for line, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        where = f"usage CSV {p}, line {line}"
        if len(row) != 2:
            raise ValidationError(f"{where}: expected 2 fields, got {len(row)}")
        try:
            t, u = float(row[0]), float(row[1])
        except ValueError:
            raise ValidationError(f"{where}: time_s and usage must be numbers, got {row!r}") from None
        if not (math.isfinite(u) and 0.0 <= u <= 1.0):
            raise ValidationError(f"{where}: usage {row[1].strip()} is outside [0, 1]")
        if not math.isfinite(t) or (not times and t != 0.0):
            raise ValidationError(f"{where}: the series must start at time_s 0, got {row[0].strip()}")
        if len(times) >= 2:
            step = times[1] - times[0]
            if abs((t - times[-1]) - step) > 1e-6 * max(1.0, step):
                raise ValidationError(f"{where}: time_s {t:g} leaves a gap or breaks the order (step {step:g} s "
                                      f"after {times[-1]:g})")
        elif len(times) == 1 and not t > times[0]:
            raise ValidationError(f"{where}: time_s {t:g} is not after {times[0]:g}")
        times.append(t)
        values.append(u)
    if not values:
        raise ValidationError(f"usage CSV {p}: no data rows")
    return UsageSeries(tuple(values), times[1] - times[0] if len(times) > 1 else STEP_S)


def loan_targets(usage: UsageSeries, nodes: Sequence[str], headroom: float = HEADROOM) -> list[PoolTarget]:
    """The pool targets of the orchestrator (module docstring) for the inference servers ``nodes``."""
    if not 0.0 <= headroom < 1.0:
        raise ValidationError(f"headroom must lie in [0, 1), got {headroom}")
    nodes = tuple(nodes)
    out: list[PoolTarget] = []
    last = None
    for t, u in zip(usage.times, usage.values):
        count = max(0, min(len(nodes), int(math.floor((1.0 - u - headroom) * len(nodes) + 1e-9))))
        if count != last:
            out.append(PoolTarget(float(t), nodes, count))
            last = count
    return out


def opportunistic_changes(usage: UsageSeries, cluster: Cluster, nodes: Sequence[str]) -> list[CapacityChange]:
    """The capacity changes of opportunistic scheduling (module docstring) on the inference servers
    ``nodes`` of ``cluster``."""
    servers = [cluster.node(n) for n in nodes]
    total = sum(s.num_gpus for s in servers)
    out: list[CapacityChange] = []
    last: dict[str, int] = {}
    for t, u in zip(usage.times, usage.values):
        need = min(total, int(math.ceil(u * total - 1e-9)))
        base, extra = divmod(need, len(servers)) if servers else (0, 0)
        for i, s in enumerate(servers):
            g = min(s.num_gpus, base + (1 if i < extra else 0))
            if last.get(s.name) != g:
                frac = g / s.num_gpus if s.num_gpus else 0.0
                out.append(CapacityChange(float(t), s.name, NodeShare(g, int(round(frac * s.num_cpus)),
                                                                      frac * s.memory_gib)))
                last[s.name] = g
    return out


__all__ = ["BURST_SPAN_S", "BURST_TOLERANCE", "HEADROOM", "opportunistic_changes", "STEP_S", "UsageSeries",
           "check_burst", "load_usage_csv", "loan_targets", "median_burst", "synthetic_usage"]
