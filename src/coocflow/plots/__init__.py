"""Matplotlib figures drawn from the metrics table alone: PNG, and figure1.pdf when asked
(`write_run_figures(..., formats=("png", "pdf"))`). Panel titles state what the run measured."""

from coocflow.plots.figures import SeriesView, figure1, overview, write_run_figures

__all__ = ["SeriesView", "figure1", "overview", "write_run_figures"]
