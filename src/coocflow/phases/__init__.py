"""Phase analysis of observed trajectories."""

from coocflow.phases.boundaries import first_time_all_correct

__all__ = ["first_time_all_correct"]
