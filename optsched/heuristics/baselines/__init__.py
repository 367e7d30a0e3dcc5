"""The baselines of the Rubick evaluation (Sec. 7.3, Table 4), one file each: FIFO, Synergy-like,
Sia-like and AntMan-like (shared rules in :mod:`optsched.heuristics.baselines.common`)."""

from optsched.heuristics.baselines.antman import AntManResult, antman_round, schedule_antman
from optsched.heuristics.baselines.fifo import schedule_fifo
from optsched.heuristics.baselines.sia import schedule_sia
from optsched.heuristics.baselines.synergy import SYNERGY_TUNE_FRACTION, schedule_synergy

__all__ = ["AntManResult", "SYNERGY_TUNE_FRACTION", "antman_round", "schedule_antman", "schedule_fifo",
           "schedule_sia", "schedule_synergy"]
