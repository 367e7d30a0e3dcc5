"""Exact models of one round in OR-Tools; each ``solve`` returns a :class:`~optsched.formulations.solution.Solution`."""
