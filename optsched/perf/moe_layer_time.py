"""The time of one MoE layer of inference from its device loads (thesis Sec. 4.2.2, 4.7.3: "MoE layer
time includes gate computation, ..., two all-to-all, and expert computation"): a fixed part (gate and
launch), two all-to-alls whose time is set by the device that sends and receives the most tokens (each
token carries ``hidden`` values of ``bytes_per_value`` bytes over the device's link), and the expert
computation of the slowest device (an expert FFN of hidden size h and 4h inner size costs 16 h^2 FLOPs
per token, at ``efficiency`` of the device's peak). The defaults are the Lina testbed's (A100, 100 Gb/s
InfiniBand) and a hidden size of 1024 (the 419M-parameter Transformer-XL of Table 4.1)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsched.core.checks import require_number


@dataclass(frozen=True)
class MoELayerTime:
    """Parameters of the layer-time model (module docstring)."""

    hidden: int = 1024
    bytes_per_value: int = 2
    link_gbps: float = 12.5
    peak_tflops: float = 312.0
    efficiency: float = 0.4
    fixed_ms: float = 0.2

    def __post_init__(self) -> None:
        for name in ("hidden", "bytes_per_value", "link_gbps", "peak_tflops", "efficiency"):
            require_number("MoE layer time", name, getattr(self, name), 0.0, strict=True)
        require_number("MoE layer time", "fixed_ms", self.fixed_ms, 0.0)

    def all_to_all_ms(self, device_tokens: np.ndarray) -> float:
        """The two all-to-alls in ms: set by the device that sends and receives the most tokens."""
        tokens = np.asarray(device_tokens, dtype=float)
        return 2 * tokens.max(initial=0.0) * self.hidden * self.bytes_per_value / (self.link_gbps * 1e6)

    def compute_ms(self, device_tokens: np.ndarray, speeds: np.ndarray | None = None) -> float:
        """The expert computation of the slowest device in ms (``speeds``: relative, default 1)."""
        tokens = np.asarray(device_tokens, dtype=float)
        speed = np.ones_like(tokens) if speeds is None else np.asarray(speeds, dtype=float)
        flops = 16.0 * self.hidden ** 2
        return float((tokens / speed).max(initial=0.0)) * flops / (self.peak_tflops * 1e12 * self.efficiency) * 1e3

    def ms(self, device_tokens: np.ndarray, speeds: np.ndarray | None = None) -> float:
        """Layer time in ms for the tokens each device serves (``speeds``: relative, default 1)."""
        return self.fixed_ms + self.all_to_all_ms(device_tokens) + self.compute_ms(device_tokens, speeds)


__all__ = ["MoELayerTime"]
