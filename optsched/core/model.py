"""Model vocabulary: the shape of a transformer training job (Morphling Table 5: s, h, l, P, b)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optsched.core.checks import json_fields, require_int, require_keys, require_name


@dataclass(frozen=True)
class ModelSpec:
    """A transformer model and its training batch.

    ``num_params`` is P, ``hidden`` h, ``layers`` l, ``seq_len`` s, ``global_batch`` b (samples per
    iteration, fixed whatever the plan), ``num_heads`` the attention heads (tensor parallelism must
    divide it; attention-score activations scale with it).
    """

    name: str
    num_params: int
    hidden: int
    layers: int
    seq_len: int
    global_batch: int
    num_heads: int

    def __post_init__(self) -> None:
        require_name("ModelSpec", self.name)
        owner = f"model {self.name!r}"
        for f in ("num_params", "hidden", "layers", "seq_len", "global_batch", "num_heads"):
            require_int(owner, f, getattr(self, f), 1)

    @property
    def params_billion(self) -> float:
        """P in units of 10^9 parameters: the unit in which k_opt and k_opt_off are fitted."""
        return self.num_params / 1e9

    @property
    def forward_flops_per_sample(self) -> float:
        """Forward FLOPs of one sample: 2 P s for the matrix products plus 4 l s^2 h for attention
        scores and their weighted sum (Narayanan et al., 2021, without the 3x for backward)."""
        return 2.0 * self.num_params * self.seq_len + 4.0 * self.layers * self.seq_len ** 2 * self.hidden

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "num_params": self.num_params, "hidden": self.hidden,
                "layers": self.layers, "seq_len": self.seq_len, "global_batch": self.global_batch,
                "num_heads": self.num_heads}

    @classmethod
    def from_dict(cls, data: Any) -> "ModelSpec":
        require_keys("ModelSpec", data, ("name", "num_params", "hidden", "layers", "seq_len",
                                         "global_batch", "num_heads"))
        return cls(**json_fields(cls, data))
