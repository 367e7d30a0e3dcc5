"""Running many policies or instances and reporting on them: N policies on one trace with the comparison
table, ``summary.json``, ``jobs.csv``, ``timeline.csv`` and plots (:mod:`.compare`); optimality-gap studies
(:mod:`.gap`); grids of simulations on Ray or a local process pool (:mod:`.sweep`); Lina's popularity-estimation
study and the partition-size sweep (:mod:`.lina_estimation`); Lina's inference against the baseline, median and p95
request and layer times (:mod:`.lina_inference`); adaptive gating's training-time model
(:mod:`.adaptive_gating_training`)."""

from optsched.experiments.compare import comparison_rows, run_policies, summary_document, write_outputs
from optsched.experiments.gap import gap_row, growth_exponent, plot_study
from optsched.experiments.sweep import SweepPoint, grid, run_point, run_sweep, write_csv

__all__ = ["SweepPoint", "comparison_rows", "gap_row", "grid", "growth_exponent", "plot_study", "run_point",
           "run_policies", "run_sweep", "summary_document", "write_csv", "write_outputs"]
