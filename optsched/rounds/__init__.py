"""What each round kind means: one package per kind (its problem fields, coefficient table from the
performance models, admission, objective, feasibility check, decision assembly and random generator).
Importing this package imports, and so registers, every built-in kind."""

from optsched.rounds import rubick  # noqa: F401  (registers the kind)
from optsched.rounds import experts  # noqa: F401  (registers the kind)
from optsched.rounds import moe_comm  # noqa: F401  (registers the kind)
from optsched.rounds import training_packing  # noqa: F401  (registers the kind)
from optsched.rounds import lyra_reclaim  # noqa: F401  (registers the kind)
from optsched.rounds import lyra_allocate  # noqa: F401  (registers the kind)
from optsched.rounds import placement  # noqa: F401  (registers the kind)
from optsched.rounds import lyra_sim  # noqa: F401  (registers the kind)
from optsched.rounds import crius  # noqa: F401  (registers the kind)
__all__ = ["rubick", "experts", "moe_comm", "training_packing", "lyra_reclaim", "lyra_allocate", "placement",
           "lyra_sim", "crius"]
