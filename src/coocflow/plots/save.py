"""Writing a Matplotlib figure: whole or not at all, and drawable whatever the run did.

Every figure coocflow writes goes through `save_figure`, so a diverging run's figure (its last
finite observations can reach 1e300) draws like any other instead of failing while the figure is
written: Matplotlib's log-axis ticks overflow to infinity once an axis reaches about 1e290
(`OverflowError: cannot convert float infinity to integer`, measured with a loss of 5e275)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

LOG_AXIS_TOP = 1e200
"""The highest value a log axis shows: Matplotlib draws data up to 1e200 with margins and ticks
(a span of 1e-300 .. 1e200 too), and fails from about 1e290. Values above are cut, and the panel
says so."""


def bound_log_axes(fig) -> int:
    """Cut every log-scaled y axis of `fig` whose data reach above `LOG_AXIS_TOP` at that value, with
    a note in the panel; returns how many axes were cut."""
    cut = 0
    for ax in fig.axes:
        if ax.get_yscale() != "log":
            continue
        low, high = ax.dataLim.y0, ax.dataLim.y1
        if np.isfinite(high) and high <= LOG_AXIS_TOP:
            continue
        bottom = low if np.isfinite(low) and 0 < low < LOG_AXIS_TOP else LOG_AXIS_TOP * 1e-10
        ax.set_ylim(bottom, LOG_AXIS_TOP)
        ax.text(0.99, 0.98, f"values above {LOG_AXIS_TOP:.0e} not drawn", transform=ax.transAxes,
                ha="right", va="top", fontsize=7, color="0.3")
        cut += 1
    return cut


def save_figure(fig, path: Path, dpi: int, fmt: str | None = None, close: bool = True, **savefig_kwargs) -> Path:
    """`fig` written to `path` (format `fmt`, default the file's suffix) through a temporary file
    and a rename, its log axes bounded (`bound_log_axes`); with `close` the figure is closed either way."""
    import matplotlib.pyplot as plt  # lazy: defers matplotlib, 0.3 s

    from coocflow.storage.atomic import atomic_write_with  # lazy: defers pyarrow, 0.3 s

    path = Path(path)
    try:
        bound_log_axes(fig)
        atomic_write_with(path, lambda tmp: fig.savefig(tmp, format=fmt or path.suffix.lstrip("."), dpi=dpi,
                                                        **savefig_kwargs))
    finally:
        if close:
            plt.close(fig)
    return path
