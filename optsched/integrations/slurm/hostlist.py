"""Slurm host lists (``n[1-3,7]``, ``gpu[01-02],cpu1``) expanded to node names, as ``scontrol show hostnames``
does for the forms Slurm prints in ``squeue --json`` (one bracket group per name)."""

from __future__ import annotations

from optsched.core.errors import ValidationError


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p]


def expand_hostlist(text: str) -> tuple[str, ...]:
    """The node names of a Slurm host list, in its order; ``""`` is no node. One clear error for a form it
    does not read (two bracket groups in one name, a bad range)."""
    names: list[str] = []
    for item in _split_top(text.strip()):
        if "[" not in item:
            names.append(item)
            continue
        head, _, rest = item.partition("[")
        body, _, tail = rest.partition("]")
        if "[" in tail or "]" in tail or not body:
            raise ValidationError(f"slurm: host list {text!r}: cannot read {item!r} (one bracket group per name)")
        for rng in body.split(","):
            lo, _, hi = rng.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise ValidationError(f"slurm: host list {text!r}: bad range {rng!r}")
            width = len(lo)
            for k in range(int(lo), int(hi or lo) + 1):
                names.append(f"{head}{k:0{width}d}{tail}")
    return tuple(names)
