"""The baselines of the Rubick evaluation (Sec. 7.3, Table 4), one file each: FIFO, Synergy-like,
Sia-like and AntMan-like (shared rules in :mod:`optsched.heuristics.baselines.common`); and of the
Crius evaluation (Sec. 8.1): FCFS (with and without backfilling), Gandiva, Gavel and ElasticFlow (-LS and
deadline-aware; the stateful ones are classes that remember the rounds of a run) (shared rules in
:mod:`optsched.heuristics.baselines.cells`)."""

from optsched.heuristics.baselines.antman import AntManResult, antman_round, schedule_antman
from optsched.heuristics.baselines.fifo import schedule_fifo
from optsched.heuristics.baselines.sia import schedule_sia
from optsched.heuristics.baselines.synergy import SYNERGY_TUNE_FRACTION, schedule_synergy
from optsched.heuristics.baselines.elasticflow import ElasticFlowDDL, schedule_elasticflow, schedule_elasticflow_ddl
from optsched.heuristics.baselines.fcfs import schedule_fcfs, schedule_fcfs_backfill
from optsched.heuristics.baselines.gandiva import Gandiva, schedule_gandiva
from optsched.heuristics.baselines.gavel import Gavel, schedule_gavel

__all__ = ["ElasticFlowDDL", "Gandiva", "Gavel", "schedule_elasticflow_ddl", "schedule_fcfs_backfill",
           "AntManResult", "SYNERGY_TUNE_FRACTION", "antman_round", "schedule_antman", "schedule_fifo",
           "schedule_sia", "schedule_synergy", "schedule_elasticflow", "schedule_fcfs", "schedule_gandiva",
           "schedule_gavel"]
