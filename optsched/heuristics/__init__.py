"""The papers' algorithms and the baselines as functions of (round, table) -> choices (no solver):
Rubick's Algorithm 1 (:mod:`.rubick`, on the shared round state :mod:`.round_state`), the baselines
of the Rubick evaluation (:mod:`.baselines`, one file each), and the node ledger every packing
heuristic shares (:mod:`.placement`)."""
