"""The figure of a system's run (`training.png`): every observable over time, one panel each."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from coocflow.plots.figures import band_curve, plt
from coocflow.plots.save import save_figure

MAX_PANELS = 12
"""Panels of one figure; a system with more observables gets its first ones (the table has all)."""


def system_figure(t: np.ndarray, series: dict[str, np.ndarray], loss_name: str, title: str, time_label: str,
                  path: Path) -> Path:
    """`training_figure`, written atomically to `path` (temporary file, then rename)."""
    return save_figure(training_figure(t, series, loss_name, title, time_label), path, dpi=110)


def training_figure(t: np.ndarray, series: dict[str, np.ndarray], loss_name: str, title: str, time_label: str):
    """One panel per observable (`series[name]`: (seeds, times); the median and 10-90% band over
    seeds), the loss first on log axes; a vector observable's entries (`name_1`, `name_2`, ...)
    share a panel."""
    groups: dict[str, list[str]] = {}
    for name in series:
        stem, _, entry = name.rpartition("_")
        key = stem if entry.isdigit() and f"{stem}_1" in series else name
        groups.setdefault(key, []).append(name)
    names = sorted(groups, key=lambda name: name != loss_name)[:MAX_PANELS]
    columns = min(3, len(names))
    rows = math.ceil(len(names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.4 * rows), constrained_layout=True, squeeze=False)
    shown = t > 0
    for ax, name in zip(axes.ravel(), names):
        if not shown.any():  # every seed diverged at t = 0 (the table has no row), or only t = 0 was observed
            ax.text(0.5, 0.5, "nothing observed after t = 0", ha="center", va="center", transform=ax.transAxes)
            ax.set(title=name, xticks=[], yticks=[])
            continue
        for index, member in enumerate(groups[name]):
            band_curve(ax, t[shown], series[member][:, shown], member, f"C{index % 10}")
        values = np.concatenate([series[member][:, shown].ravel() for member in groups[name]])
        positive = values[np.isfinite(values)]
        log_y = name == loss_name and positive.size and (positive > 0).all()
        ax.set(xscale="log", yscale="log" if log_y else "linear", xlabel=time_label, title=name)
        if len(groups[name]) > 1:
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    for ax in axes.ravel()[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=9)
    return fig
