"""Lyra's shared vocabulary (thesis chapter 3): the two-pool cluster (training and loaned inference
servers, ``cluster.py``), elastic jobs in workers and their scaling (``jobs.py``), the fields every
Lyra round shares (``problem.py``: pools, normalisation, flexible workers) and random cluster states
(``generate.py``). The kinds are ``lyra-reclaim`` (:mod:`optsched.rounds.lyra_reclaim`),
``lyra-allocate`` (:mod:`optsched.rounds.lyra_allocate`), ``placement``
(:mod:`optsched.rounds.placement`) and ``lyra`` (:mod:`optsched.rounds.lyra_sim`, the round the simulator
drives)."""

from optsched.rounds.lyra.problem import INFERENCE, INFERENCE_FACTOR, TRAINING, LyraRound

__all__ = ["INFERENCE", "INFERENCE_FACTOR", "LyraRound", "TRAINING"]
