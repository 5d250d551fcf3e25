"""Matplotlib figures (PNG and PDF) drawn from the metrics table alone."""

from coocflow.plots.figures import SeriesView, figure1, overview, write_run_figures

__all__ = ["SeriesView", "figure1", "overview", "write_run_figures"]
