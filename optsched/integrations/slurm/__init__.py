"""optsched drives Slurm (issue 28; ``docs/integration.md``, "Slurm"): :mod:`.reader` turns ``sinfo``/``squeue``
JSON into a Rubick round, :mod:`.comment` reads what a job states in its JSON ``--comment``, :mod:`.agent` solves
the round and applies the decision with ``scontrol``, :mod:`.client` runs Slurm's commands, :mod:`.local` starts
a throw-away Slurm on this machine (munge, slurmctld, fake-GPU slurmd's) for tests and measurements."""
