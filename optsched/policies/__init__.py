"""Turning a round into a decision: per kind, the table, the warm-start heuristic, the exact model and
the fallback within one time limit; the registry of methods keyed by (kind, method); :func:`solve`.
Importing this package registers the methods of every built-in kind."""

from optsched.policies import rubick  # noqa: F401  (registers the methods of the rubick kind)
from optsched.policies import experts  # noqa: F401  (registers the methods of the experts kind)
from optsched.policies import moe_comm  # noqa: F401  (registers the methods of the moe-comm kind)
from optsched.policies import training_packing  # noqa: F401  (registers the methods of the training-packing kind)
from optsched.policies import crius  # noqa: F401  (registers the methods of the crius kind)
from optsched.policies.options import DEFAULT_TIME_LIMIT, PolicyOptions
from optsched.policies.registry import (DEFAULT_KIND, describe_methods, make_policy, method, methods_of,
                                        register_method)
from optsched.policies.solve import solve

__all__ = ["DEFAULT_KIND", "DEFAULT_TIME_LIMIT", "PolicyOptions", "describe_methods", "make_policy", "method",
           "methods_of", "register_method", "solve"]
from optsched.policies import lyra  # noqa: F401,E402  (registers the methods of the Lyra kinds)
