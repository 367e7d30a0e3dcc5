"""A MILP back end is refused by every method that would not use it (issue 26: ``--backend highs`` used to run
the Lyra kinds on CP-SAT without a word)."""

from __future__ import annotations

import pytest

from optsched.core.errors import ValidationError
from optsched.core.kinds import round_kinds
from optsched.policies.options import PolicyOptions
from optsched.policies.registry import backend_methods, make_policy, methods_of

#: the methods whose exact model is solved by the chosen back end (CP-SAT or a MILP through pulp)
USES_BACKEND = {("rubick", "exact"), ("rubick", "rubick-exact"), ("crius", "exact"), ("crius", "crius-exact"),
                ("experts", "exact")}


@pytest.mark.parametrize("kind", round_kinds())
def test_every_method_either_uses_the_backend_or_refuses_it(kind: str) -> None:
    for name in methods_of(kind):
        if (kind, name) in USES_BACKEND:
            make_policy(name, PolicyOptions(backend="cbc"), kind=kind)
            continue
        with pytest.raises(ValidationError, match=f"backend 'cbc'.*{kind}.*{name}|{name}.*{kind}.*backend 'cbc'"):
            make_policy(name, PolicyOptions(backend="cbc"), kind=kind)
        make_policy(name, PolicyOptions(backend="cpsat"), kind=kind)  # the default is no choice


def test_backend_methods_lists_them() -> None:
    assert {(k, m) for k, ms in backend_methods().items() for m in ms} == USES_BACKEND
