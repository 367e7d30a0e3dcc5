"""``optsched gen-round``: write a reproducible random round of a registered kind."""

from __future__ import annotations

import argparse
import inspect
from typing import Any, Callable

from optsched.cli.common import check_output_file, emit_json
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind, round_kinds

#: gen-round flags and the generator keyword each one sets (a kind's generator takes a subset)
_GEN_FLAGS = (("--nodes", "nodes", "number of nodes"), ("--gpus-per-node", "gpus_per_node", "GPUs per node"),
              ("--jobs", "jobs", "number of jobs"))
_GEN_FLAGS += (("--experts", "experts", "number of experts"), ("--devices", "devices", "number of devices"),
               ("--slots", "slots", "expert replicas per device"), ("--tokens", "tokens", "tokens of the batch"),
               ("--moe-layers", "moe_layers", "MoE layers of the backward pass"))
_GEN_FLAGS += (("--servers", "servers", "on-loan inference servers (Lyra kinds)"),
               ("--training", "training", "training servers (Lyra kinds)"),
               ("--reclaim", "reclaim", "servers to reclaim (lyra-reclaim)"))
#: gen-round flags taking a number that need not be whole
_GEN_FLOAT_FLAGS = (("--load", "load", "queued base demand over the GPUs the round may hand out (lyra-allocate, lyra)"),)


def _generator_defaults(generate: Callable[..., Any]) -> str:
    return ", ".join(f"{n}={q.default}" for n, q in inspect.signature(generate).parameters.items()
                     if q.default is not inspect.Parameter.empty and n != "seed")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched gen-round``."""
    kinds = round_kinds()
    p.description = ("Generate a reproducible random round of a kind. Defaults per kind: "
                     + "; ".join(f"{k}: {_generator_defaults(round_kind(k).generate)}" for k in kinds))
    p.add_argument("--kind", default="rubick", choices=kinds, help="round kind (default rubick)")
    for flag, _, text in _GEN_FLAGS:
        p.add_argument(flag, type=int, metavar="N", help=f"{text} (default: the kind's)")
    for flag, _, text in _GEN_FLOAT_FLAGS:
        p.add_argument(flag, type=float, metavar="X", help=f"{text} (default: the kind's)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", metavar="FILE", help="write the round here instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Generate the round with the options given (each must be one the kind's generator takes) and write
    its JSON to ``--out`` or stdout."""
    check_output_file(args.out)
    kind = round_kind(args.kind)
    options: dict[str, Any] = {"seed": args.seed}
    for flag, key, _ in _GEN_FLAGS + _GEN_FLOAT_FLAGS:
        value = getattr(args, key)
        if value is None:
            continue
        if key not in kind.generator_options:
            raise ValidationError(f"gen-round --kind {args.kind} does not take {flag}")
        options[key] = value
    emit_json(kind.generate(**options).to_dict(), args.out)
    return 0
