"""Groups of items joined by shared links (connected components by union-find): the nodes a running
job spans together (partitioned solving, :mod:`optsched.rounds.rubick.partition`), the on-loan servers
joined by shared jobs (Lyra's exact reclaim, :mod:`optsched.formulations.lyra_reclaim`)."""

from __future__ import annotations

from typing import Hashable, Iterable, Sequence, TypeVar

T = TypeVar("T", bound=Hashable)


def connected_groups(items: Sequence[T], links: Iterable[Iterable[T]]) -> list[list[T]]:
    """The items in groups: two items share a group when some link holds both (directly or through
    other items). Each group keeps the order of ``items``; groups come in the order of their first
    item. Every item of a link must be among ``items``."""
    parent: dict[T, T] = {x: x for x in items}

    def find(x: T) -> T:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for link in links:
        members = list(link)
        for other in members[1:]:
            ra, rb = find(members[0]), find(other)
            if ra != rb:
                parent[rb] = ra
    groups: dict[T, list[T]] = {}
    for x in items:
        groups.setdefault(find(x), []).append(x)
    return list(groups.values())


__all__ = ["connected_groups"]
