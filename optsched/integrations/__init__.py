"""Integrations: optsched driving a real cluster manager (a layer above ``policies``; docs/architecture.md).

* :mod:`optsched.integrations.slurm`: an agent that reads Slurm's nodes and jobs, solves a Rubick round and
  applies the decision with Slurm's own client commands (``docs/integration.md``, "Slurm").
"""
