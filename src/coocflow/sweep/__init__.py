"""Sweeps over seeds and configurations, resumable, on one machine or a Ray cluster."""

from coocflow.sweep.aggregate import aggregate, aggregate_figure, default_figures
from coocflow.sweep.execute import run_job
from coocflow.sweep.spec import Job, SweepSpec, load_spec, spec_from_dict
from coocflow.sweep.store import SweepStore, read_record

__all__ = [
    "Job", "SweepSpec", "SweepStore", "aggregate", "aggregate_figure", "default_figures", "load_spec",
    "read_record", "run_job", "spec_from_dict",
]
