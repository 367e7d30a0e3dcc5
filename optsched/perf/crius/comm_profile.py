"""The offline communication profile of Crius Sec. 5.1: how long a communication operator takes, per
GPU type and link, as a function of the bytes it moves ("the latency performance of a communication
operator only changes due to the volume of transferred data"; "Crius estimates them through
traffic-based interpolation. The data used for interpolation is obtained offline").

A :class:`CommProfile` is a set of measured curves, one per (GPU type, link, collective, ranks):
``bytes`` (increasing, > 0) and ``seconds`` (> 0). Links: ``intra`` (GPUs of one node: NVLink or
PCIe, whichever the type has) and ``inter`` (GPUs of different nodes). Collectives and what
``bytes`` means for each: ``send_recv`` (the message), ``all_reduce`` (the buffer on each rank),
``all_gather`` (the gathered buffer on each rank), ``all_to_all`` (what each rank sends in all).

**Interpolation** (:meth:`CommProfile.time`): linear in bytes between the two measured points around
the request; below the first point the first point's time (latency bound); above the last point the
last segment's slope carried on (bandwidth bound). One rank, or no bytes, costs nothing. When the
requested number of ranks was not measured, the curve of the nearest measured count (the largest
below, else the smallest above) is read at ``bytes x f(ranks) / f(measured)``, with the ring factors
``f`` = ``2 (n - 1) / n`` (all-reduce) and ``(n - 1) / n`` (all-gather, all-to-all). A (GPU type, link,
collective) without any curve is an ``UnknownNameError`` naming what the profile has.

**Files** (users replace the built-in profile with their own measurements; :meth:`from_dict`,
:meth:`from_csv`): JSON ``{"format": "optsched.comm-profile/1", "curves": [{"gpu_type": "A40",
"link": "intra", "collective": "all_reduce", "ranks": 2, "bytes": [...], "seconds": [...]}, ...]}``,
or CSV with header ``gpu_type,link,collective,ranks,bytes,seconds`` and one measured point a row
(rows of one curve need not be adjacent; they are sorted by bytes).

**Built-in profile** (:func:`default_comm_profile`): an alpha-beta model per GPU type of a cluster,
sampled at 1 KiB .. 16 GiB (powers of 4) and 2 .. 256 ranks (powers of 2):
``seconds = steps(n) x alpha + bytes x f(n) / bandwidth`` with ``steps`` = 1 (send/recv), ``2 (n - 1)``
(all-reduce), ``n - 1`` (all-gather, all-to-all). Intra-node bandwidth: the cluster's for that type
(:meth:`~optsched.core.hardware.Cluster.intra_bandwidth`), alpha 5 us on NVLink and 10 us on PCIe;
inter-node: the node's network bandwidth (:meth:`~optsched.core.hardware.Cluster.inter_bandwidth`)
for a send/recv stream, and the node's bandwidth split over its GPUs for collectives (every GPU of
the node communicates at once), alpha 20 us. ``bandwidth_scale`` and ``latency_scale`` (per link)
let a second profile differ from the first (the simulator's ground truth does, so that prediction and
truth are kept apart).
"""

from __future__ import annotations

import bisect
import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from optsched.core.checks import json_int, require_int, require_keys, require_name
from optsched.core.errors import UnknownNameError, ValidationError
from optsched.core.hardware import Cluster

FORMAT = "optsched.comm-profile/1"
COLLECTIVES: tuple[str, ...] = ("send_recv", "all_reduce", "all_gather", "all_to_all")
LINKS: tuple[str, ...] = ("intra", "inter")
CSV_HEADER: tuple[str, ...] = ("gpu_type", "link", "collective", "ranks", "bytes", "seconds")

#: alpha (seconds) of the built-in profile per link kind
ALPHA_S: dict[str, float] = {"nvlink": 5e-6, "pcie": 10e-6, "inter": 20e-6}
#: bytes and ranks at which the built-in profile is sampled
DEFAULT_BYTES: tuple[float, ...] = tuple(float(4 ** k) for k in range(5, 18))
DEFAULT_RANKS: tuple[int, ...] = (2, 4, 8, 16, 32, 64, 128, 256)

Key = tuple[str, str, str, int]


def ring_factor(collective: str, ranks: int) -> float:
    """Bytes a rank moves per byte of the operand (module docstring)."""
    if collective == "send_recv":
        return 1.0
    if collective == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    return (ranks - 1) / ranks


def _steps(collective: str, ranks: int) -> float:
    if collective == "send_recv":
        return 1.0
    if collective == "all_reduce":
        return 2.0 * (ranks - 1)
    return float(ranks - 1)


@dataclass(frozen=True, eq=False)
class CommCurve:
    """One measured curve (module docstring)."""

    gpu_type: str
    link: str
    collective: str
    ranks: int
    bytes: np.ndarray
    seconds: np.ndarray
    _slope: float = field(init=False, repr=False)
    _bytes_list: list[float] = field(init=False, repr=False)
    _secs_list: list[float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        who = f"communication profile curve ({self.gpu_type!r}, {self.link!r}, {self.collective!r}, {self.ranks!r})"
        require_name(who, self.gpu_type)
        if self.link not in LINKS:
            raise UnknownNameError("link", str(self.link), LINKS, context=f"in {who}")
        if self.collective not in COLLECTIVES:
            raise UnknownNameError("collective", str(self.collective), COLLECTIVES, context=f"in {who}")
        require_int(who, "ranks", self.ranks, 2)
        try:
            b = np.asarray(self.bytes, dtype=float)
            s = np.asarray(self.seconds, dtype=float)
        except (TypeError, ValueError):
            raise ValidationError(f"{who}: bytes and seconds must be numbers") from None
        if b.ndim != 1 or b.shape != s.shape or b.size == 0:
            raise ValidationError(f"{who}: bytes and seconds must be equally long, non-empty lists")
        if not (np.all(np.isfinite(b)) and np.all(np.isfinite(s)) and b.min() > 0 and s.min() > 0):
            raise ValidationError(f"{who}: bytes and seconds must be finite and > 0")
        order = np.argsort(b, kind="stable")
        b, s = b[order], s[order]
        if np.any(np.diff(b) <= 0):
            raise ValidationError(f"{who}: a byte count is measured twice")
        for a in (b, s):
            a.flags.writeable = False
        object.__setattr__(self, "bytes", b)
        object.__setattr__(self, "seconds", s)
        slope = (s[-1] - s[-2]) / (b[-1] - b[-2]) if b.size > 1 else s[-1] / b[-1]
        object.__setattr__(self, "_slope", max(float(slope), 0.0))
        object.__setattr__(self, "_bytes_list", [float(v) for v in b])
        object.__setattr__(self, "_secs_list", [float(v) for v in s])

    def seconds_at(self, nbytes: float) -> float:
        """:meth:`time` of one byte count (a float; faster for scalars)."""
        b = self._bytes_list
        if nbytes <= b[0]:
            return self._secs_list[0]
        if nbytes >= b[-1]:
            return self._secs_list[-1] + (nbytes - b[-1]) * self._slope
        i = bisect.bisect_right(b, nbytes)
        x0, x1, y0, y1 = b[i - 1], b[i], self._secs_list[i - 1], self._secs_list[i]
        return y0 + (y1 - y0) * (nbytes - x0) / (x1 - x0)

    @property
    def key(self) -> Key:
        return (self.gpu_type, self.link, self.collective, self.ranks)

    def time(self, nbytes: np.ndarray | float) -> np.ndarray:
        """Seconds for ``nbytes`` (interpolation rule of the module docstring)."""
        x = np.asarray(nbytes, dtype=float)
        t = np.interp(x, self.bytes, self.seconds)
        last = self.bytes[-1]
        if (x.max() if x.ndim else float(x)) > last:
            t = np.where(x > last, self.seconds[-1] + (x - last) * self._slope, t)
        return t


class CommProfile:
    """Measured communication curves (module docstring); immutable once built."""

    def __init__(self, curves: Iterable[CommCurve]) -> None:
        self._curves: dict[Key, CommCurve] = {}
        self._ranks: dict[tuple[str, str, str], list[int]] = {}
        for c in curves:
            if not isinstance(c, CommCurve):
                raise ValidationError(f"communication profile: curves must be CommCurve objects, got {c!r}")
            if c.key in self._curves:
                raise ValidationError(f"communication profile: curve {c.key} given twice")
            self._curves[c.key] = c
            self._ranks.setdefault(c.key[:3], []).append(c.ranks)
        for v in self._ranks.values():
            v.sort()
        self._exact = self._curves

    @property
    def curves(self) -> tuple[CommCurve, ...]:
        return tuple(self._curves[k] for k in sorted(self._curves))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({k[0] for k in self._curves}))

    def replaced(self, other: "CommProfile") -> "CommProfile":
        """This profile with ``other``'s curves replacing (or adding to) its own."""
        merged = dict(self._curves)
        merged.update(other._curves)
        return CommProfile(merged.values())

    def seconds(self, gpu_type: str, link: str, collective: str, ranks: int, nbytes: float) -> float:
        """:meth:`time` of one byte count, as a float."""
        if ranks <= 1 or nbytes <= 0:
            return 0.0
        curve = self._exact.get((gpu_type, link, collective, ranks))
        if curve is not None:
            return curve.seconds_at(nbytes)
        return float(self.time(gpu_type, link, collective, ranks, nbytes))

    def time(self, gpu_type: str, link: str, collective: str, ranks: int, nbytes: np.ndarray | float) -> np.ndarray:
        """Seconds of ``collective`` over ``ranks`` GPUs of ``gpu_type`` on ``link`` moving ``nbytes``
        (scalar or array; module docstring)."""
        x = np.asarray(nbytes, dtype=float)
        if ranks <= 1:
            return np.zeros_like(x)
        curve = self._exact.get((gpu_type, link, collective, ranks))
        if curve is not None:
            return np.where(x > 0, curve.time(x), 0.0)
        measured = self._ranks.get((gpu_type, link, collective))
        if measured is None:
            have = sorted({f"{k[0]}/{k[1]}/{k[2]}" for k in self._curves})
            raise UnknownNameError("communication curve", f"{gpu_type}/{link}/{collective}", have,
                                   context="in the communication profile")
        below = [r for r in measured if r <= ranks]
        r = below[-1] if below else measured[0]
        curve = self._curves[(gpu_type, link, collective, r)]
        if r != ranks:
            x = x * (ring_factor(collective, ranks) / ring_factor(collective, r))
        return np.where(x > 0, curve.time(x), 0.0)

    # -- files ----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "curves": [
            {"gpu_type": c.gpu_type, "link": c.link, "collective": c.collective, "ranks": c.ranks,
             "bytes": [float(v) for v in c.bytes], "seconds": [float(v) for v in c.seconds]} for c in self.curves]}

    @classmethod
    def from_dict(cls, data: Any) -> "CommProfile":
        require_keys("communication profile", data, ("curves",), ("format",))
        if data.get("format", FORMAT) != FORMAT:
            raise ValidationError(f"communication profile: unsupported format {data['format']!r}, expected {FORMAT}")
        if not isinstance(data["curves"], list):
            raise ValidationError("communication profile: curves must be a JSON array")
        curves = []
        for i, c in enumerate(data["curves"]):
            require_keys(f"communication profile curves[{i}]", c,
                         ("gpu_type", "link", "collective", "ranks", "bytes", "seconds"))
            curves.append(CommCurve(c["gpu_type"], c["link"], c["collective"], json_int(c["ranks"]), c["bytes"],
                                    c["seconds"]))
        return cls(curves)

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_HEADER)
        for c in self.curves:
            for b, s in zip(c.bytes, c.seconds):
                w.writerow((c.gpu_type, c.link, c.collective, c.ranks, repr(float(b)), repr(float(s))))
        return buf.getvalue()

    @classmethod
    def from_csv(cls, source: str | Path) -> "CommProfile":
        """Read the CSV form from a path or from CSV text (a string holding a newline); each bad row is
        a ``ValidationError`` naming it."""
        text = source if isinstance(source, str) and "\n" in source else Path(source).read_text(encoding="utf-8-sig")
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or tuple(h.strip() for h in rows[0]) != CSV_HEADER:
            raise ValidationError(f"communication profile CSV: the header must be {','.join(CSV_HEADER)}")
        points: dict[Key, list[tuple[float, float]]] = {}
        for i, row in enumerate(rows[1:], start=1):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != len(CSV_HEADER):
                raise ValidationError(f"communication profile CSV row {i}: expected {len(CSV_HEADER)} columns, "
                                      f"got {len(row)}")
            try:
                key = (row[0].strip(), row[1].strip(), row[2].strip(), int(row[3]))
                b, s = float(row[4]), float(row[5])
            except ValueError:
                raise ValidationError(f"communication profile CSV row {i}: ranks must be an integer and bytes, "
                                      f"seconds numbers, got {row[3:]}") from None
            points.setdefault(key, []).append((b, s))
        return cls(CommCurve(*k, [b for b, _ in v], [s for _, s in v]) for k, v in points.items())


def default_comm_profile(cluster: Cluster, *, bandwidth_scale: Mapping[str, float] | None = None,
                         latency_scale: Mapping[str, float] | None = None) -> CommProfile:
    """The built-in alpha-beta profile of every GPU type of ``cluster`` (module docstring);
    ``bandwidth_scale`` / ``latency_scale`` map ``intra`` / ``inter`` to factors (default 1)."""
    bw_scale = dict(bandwidth_scale or {})
    lat_scale = dict(latency_scale or {})
    for name, scales in (("bandwidth_scale", bw_scale), ("latency_scale", lat_scale)):
        for k, v in scales.items():
            if k not in LINKS or isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 \
                    or not math.isfinite(v):
                raise ValidationError(f"default_comm_profile: {name} maps 'intra'/'inter' to positive factors, "
                                      f"got {k!r}: {v!r}")
    sizes = np.array(DEFAULT_BYTES)
    curves = []
    for t in cluster.gpu_types:
        per_node = max((n.num_gpus for n in cluster.nodes_of_type(t.name)), default=1) or 1
        intra_alpha = ALPHA_S[cluster.intra_link(t.name)] * lat_scale.get("intra", 1.0)
        intra_bw = cluster.intra_bandwidth(t.name) * 1e9 * bw_scale.get("intra", 1.0)
        inter_alpha = ALPHA_S["inter"] * lat_scale.get("inter", 1.0)
        node_bw = cluster.inter_bandwidth(t.name) * 1e9 * bw_scale.get("inter", 1.0)
        for coll in COLLECTIVES:
            for n in DEFAULT_RANKS if coll != "send_recv" else (2,):
                for link, alpha, bw in (("intra", intra_alpha, intra_bw),
                                        ("inter", inter_alpha, node_bw if coll == "send_recv" else node_bw / per_node)):
                    secs = _steps(coll, n) * alpha + sizes * ring_factor(coll, n) / bw
                    curves.append(CommCurve(t.name, link, coll, n, sizes, secs))
    return CommProfile(curves)


__all__ = ["ALPHA_S", "COLLECTIVES", "CSV_HEADER", "CommCurve", "CommProfile", "FORMAT", "LINKS",
           "default_comm_profile", "ring_factor"]
