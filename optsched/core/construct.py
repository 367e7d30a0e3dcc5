"""Building a frozen dataclass from values already checked, without its generated ``__init__``.

A frozen dataclass's ``__init__`` sets each field by ``object.__setattr__``: for :class:`~optsched.core.job.Job`,
30 fields, 4.5 us of the 8 us it takes to read a job from JSON (issue 26, item 2: a 20,000-job round read and
checked within a 1 s limit). :func:`frozen_builder` gives a constructor that fills the instance's ``__dict__``
in one update, field defaults first, then runs the class's ``__post_init__``: the object is the one ``cls(**kw)``
makes (same ``__dict__``, same checks) for keyword arguments that name fields only. It is for ``from_dict``
methods, after their own key check (:func:`~optsched.core.checks.require_keys`) has refused unknown and
missing members; a missing required field is refused here too, naming it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

from optsched.core.errors import ValidationError

_T = TypeVar("_T")


def frozen_builder(cls: type[_T]) -> Callable[..., _T]:
    """A constructor of the frozen dataclass ``cls`` taking its fields as keyword arguments (module docstring).
    ``cls`` must have no field with a ``default_factory`` and must keep its fields in ``__dict__``
    (no ``__slots__``)."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(f.default_factory is not dataclasses.MISSING for f in fields):
        raise TypeError(f"frozen_builder: {cls.__name__} has a field with a default_factory")
    if "__slots__" in cls.__dict__:
        raise TypeError(f"frozen_builder: {cls.__name__} keeps its fields in slots")
    # every field in declaration order (what ``__init__`` leaves in ``__dict__``), required ones as placeholders
    template = {f.name: f.default for f in fields if f.init or f.default is not dataclasses.MISSING}
    required = frozenset(f.name for f in fields if f.init and f.default is dataclasses.MISSING)
    post_init = getattr(cls, "__post_init__", None)
    new = object.__new__

    def build(**values: Any) -> _T:
        if not required <= values.keys():
            missing = ", ".join(sorted(required - values.keys()))
            raise ValidationError(f"{cls.__name__}: missing field(s) {missing}")
        obj = new(cls)
        state = obj.__dict__
        state.update(template)
        state.update(values)
        if post_init is not None:
            post_init(obj)
        return obj

    build.__name__ = f"build_{cls.__name__}"
    return build


__all__ = ["frozen_builder"]
