"""Discrete-event cluster simulator: traces, ground truth, the event loop and its metrics."""
