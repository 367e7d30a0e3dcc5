"""``optsched gen-round``: write a reproducible random round of a registered kind.

The flags come from the kinds' generators (:attr:`optsched.core.kinds.RoundKind.generate`): every
keyword option of a generator but ``seed`` is the flag ``--`` + its name with ``_`` as ``-``, parsed
as the parameter's annotation says (else as its default's type): ``int`` takes ``N``, ``float``
``X``, ``str`` ``TEXT``, and a ``bool`` is ``--name`` / ``--no-name``. A kind registered later gets
its flags with no change here; :data:`OPTION_HELP` only words the help of the options it knows.
"""

from __future__ import annotations

import argparse
import inspect
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable

from optsched.cli.common import check_output_file, emit_json
from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kind, round_kinds

#: help of the generator options by name, in the order ``--help`` lists them (the others follow
#: in the order the kinds name them, with a generic help)
OPTION_HELP: dict[str, str] = {
    "nodes": "number of nodes", "gpus_per_node": "GPUs per node", "jobs": "number of jobs",
    "experts": "number of experts", "devices": "number of devices", "slots": "expert replicas per device",
    "tokens": "tokens of the batch", "moe_layers": "MoE layers of the backward pass",
    "servers": "on-loan inference servers (Lyra kinds)", "training": "training servers (Lyra kinds)",
    "reclaim": "servers to reclaim (lyra-reclaim)",
    "load": "queued base demand over the GPUs the round may hand out (lyra-allocate, lyra)",
    "constrained": "fraction of queued jobs with a constraint (rubick: rack selector, max_nodes, gang, CPU floor, "
                   "required or preferred rack topology; nodes labelled with racks, racks as their topology) and of "
                   "all jobs with priority 1 or 2",
}
#: names a generator option may not have: gen-round's own options and what the top-level parser sets
RESERVED = frozenset({"kind", "out", "help", "verbose", "version", "command", "handler"})
_TYPES: dict[str, type] = {"int": int, "float": float, "bool": bool, "str": str}
_METAVARS: dict[type, str] = {int: "N", float: "X", str: "TEXT"}


@dataclass(frozen=True)
class GeneratorOption:
    """A keyword option of one or more kinds' generators, offered as a gen-round flag."""

    name: str
    type: type
    kinds: tuple[str, ...]

    @property
    def flag(self) -> str:
        """``--`` + the name with ``_`` as ``-``."""
        return "--" + self.name.replace("_", "-")

    @property
    def help(self) -> str:
        """:data:`OPTION_HELP`'s text, or a generic one naming the kinds that take the option."""
        text = OPTION_HELP.get(self.name, f"option {self.name} of the kind's generator ({', '.join(self.kinds)})")
        return f"{text} (default: the kind's)"


def _type_names(annotation: Any) -> list[str]:
    """The names of the types an annotation allows, ``None`` left out (``"int | None"`` -> ``["int"]``)."""
    if annotation is inspect.Parameter.empty:
        return []
    if isinstance(annotation, str):  # from ``from __future__ import annotations``
        parts = re.sub(r"^(typing\.)?Optional\[(.*)\]$", r"\2", annotation.strip()).split("|")
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType):
        parts = [getattr(a, "__name__", str(a)) for a in typing.get_args(annotation)]
    else:
        parts = [getattr(annotation, "__name__", str(annotation))]
    return [p.strip() for p in parts if p.strip() not in ("None", "NoneType")]


def option_type(param: inspect.Parameter) -> type:
    """What a generator option's flag parses: the annotation's int, float, bool or str (``int | float``:
    float), else the default's type when the annotation names none, else str."""
    names = _type_names(param.annotation)
    if len(names) == 1 and names[0] in _TYPES:
        return _TYPES[names[0]]
    if set(names) == {"int", "float"}:
        return float
    if not names and type(param.default) in _TYPES.values():
        return type(param.default)
    return str


def generator_options() -> list[GeneratorOption]:
    """Every keyword option of the registered kinds' generators but ``seed``, in :data:`OPTION_HELP`'s
    order, then the others in the order the kinds (sorted) name them. An option named like one of
    :data:`RESERVED`, or typed differently by two kinds, is a ``TypeError`` (a generator to fix)."""
    found: dict[str, GeneratorOption] = {}
    for kind_name in round_kinds():
        kind = round_kind(kind_name)
        params = inspect.signature(kind.generate).parameters
        for name in kind.generator_options:
            if name == "seed":
                continue
            if name in RESERVED:
                raise TypeError(f"the generator of round kind {kind_name!r} has an option {name!r}, which gen-round "
                                "uses itself; rename it")
            typ, old = option_type(params[name]), found.get(name)
            if old is not None and old.type is not typ:
                raise TypeError(f"generator option {name!r} is {old.type.__name__} for round kind {old.kinds[0]!r} "
                                f"but {typ.__name__} for {kind_name!r}; gen-round parses it one way")
            found[name] = GeneratorOption(name, typ, (*old.kinds, kind_name) if old else (kind_name,))
    order = list(OPTION_HELP)
    return sorted(found.values(), key=lambda o: order.index(o.name) if o.name in order else len(order))


def _generator_defaults(generate: Callable[..., Any]) -> str:
    return ", ".join(f"{n}={q.default}" for n, q in inspect.signature(generate).parameters.items()
                     if q.default is not inspect.Parameter.empty and n != "seed")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched gen-round``: ``--kind``, one flag per generator option, ``--seed``, ``--out``."""
    kinds = round_kinds()
    p.description = ("Generate a reproducible random round of a kind. Defaults per kind: "
                     + "; ".join(f"{k}: {_generator_defaults(round_kind(k).generate)}" for k in kinds))
    p.add_argument("--kind", default="rubick", choices=kinds, help="round kind (default rubick)")
    for option in generator_options():
        if option.type is bool:
            p.add_argument(option.flag, dest=option.name, action=argparse.BooleanOptionalAction, help=option.help)
        else:
            p.add_argument(option.flag, dest=option.name, type=option.type, metavar=_METAVARS[option.type],
                           help=option.help)
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--out", metavar="FILE", help="write the round here instead of stdout")


def run(args: argparse.Namespace) -> int:
    """Generate the round with the options given (each must be one the kind's generator takes) and write
    its JSON to ``--out`` or stdout."""
    check_output_file(args.out)
    kind = round_kind(args.kind)
    options: dict[str, Any] = {"seed": args.seed}
    for option in generator_options():
        value = getattr(args, option.name)
        if value is None:
            continue
        if option.name not in kind.generator_options:
            raise ValidationError(f"gen-round --kind {args.kind} does not take {option.flag}")
        options[option.name] = value
    emit_json(kind.generate(**options).to_dict(), args.out)
    return 0
