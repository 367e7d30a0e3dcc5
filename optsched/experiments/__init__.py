"""Running many policies (or instances) and reporting on them: N policies on one trace with the
comparison table, ``summary.json``, ``jobs.csv``, ``timeline.csv`` and plots (:mod:`.compare`)."""

from optsched.experiments.compare import comparison_rows, run_policies, summary_document, write_outputs

__all__ = ["comparison_rows", "run_policies", "summary_document", "write_outputs"]
