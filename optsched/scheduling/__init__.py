"""The round layer: builds a round's coefficient table from the performance models, admits guaranteed
jobs, scores and checks decisions, and exposes :func:`optsched.solve`."""
