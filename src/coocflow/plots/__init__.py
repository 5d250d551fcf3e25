"""Matplotlib figures drawn from the metrics table alone: PNG, and figure1.pdf when asked
(`write_run_figures(..., formats=("png", "pdf"))`). Panel titles state what the run measured.
Every figure is written by `coocflow.plots.save.save_figure` (atomically, its log axes bounded)."""

__all__ = ["SeriesView", "figure1", "overview", "write_run_figures"]


def __getattr__(name: str):
    """The figures on first use: `coocflow.plots.figures` imports Matplotlib and the observables
    (JAX), which `coocflow.plots.save` alone does not need."""
    if name in __all__:
        from coocflow.plots import figures  # lazy: defers Matplotlib and JAX, 1-3.6 s

        return getattr(figures, name)
    raise AttributeError(f"module 'coocflow.plots' has no attribute {name!r}")
