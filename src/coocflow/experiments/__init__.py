"""Named experiments: `coocflow run NAME`."""

from coocflow.experiments.registry import EXPERIMENTS, Experiment, get_experiment

__all__ = ["EXPERIMENTS", "Experiment", "get_experiment"]
