"""The ground truth a spec names (``--ground-truth SPEC``): ``analytical``, ``measured:DIR``,
``neighbours:DIR`` or ``params:FILE.json`` (:func:`~optsched.sim.ground_truth.parse_ground_truth_spec`).
A module of its own because the measured-neighbour source (:mod:`optsched.sim.neighbour_truth`) builds on
:mod:`optsched.sim.ground_truth`."""

from __future__ import annotations

from optsched.core.hardware import Cluster
from optsched.sim.ground_truth import (AnalyticalGroundTruth, GroundTruth, MeasuredGroundTruth,
                                       parse_ground_truth_spec)
from optsched.sim.neighbour_truth import NeighbourGroundTruth


def ground_truth_from_spec(spec: str, cluster: Cluster) -> GroundTruth:
    """The ground truth a spec names (:func:`~optsched.sim.ground_truth.parse_ground_truth_spec`), on
    ``cluster``; ``ValidationError`` naming a malformed spec, a missing directory or file."""
    kind, arg = parse_ground_truth_spec(spec)
    if kind == "measured":
        return MeasuredGroundTruth.from_directory(arg, cluster)
    if kind == "neighbours":
        return NeighbourGroundTruth.from_directory(arg, cluster)
    if kind == "params":
        return AnalyticalGroundTruth.from_params_json(arg, cluster)
    return AnalyticalGroundTruth(cluster)


__all__ = ["ground_truth_from_spec"]
