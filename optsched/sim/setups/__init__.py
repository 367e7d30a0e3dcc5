"""The simulation setups of the built-in kinds (:mod:`optsched.sim.setup`), one module per kind;
importing this package registers them, ``rubick`` first (the default of ``optsched simulate``)."""

from optsched.sim.setups import rubick  # noqa: F401  (registers the rubick setup)
from optsched.sim.setups import crius  # noqa: F401  (registers the crius setup)
from optsched.sim.setups import lyra  # noqa: F401  (registers the lyra setup)
