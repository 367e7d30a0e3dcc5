"""Performance models: plans, memory, iteration time, fitting, sensitivity curves, coefficient tables."""
