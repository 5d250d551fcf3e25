"""The figure of a declared theorem's rates over a sweep (`verify.png`): each rate claim's quantity
against its axis on log-log axes, every seed, with the fitted slope and the claimed one."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

from coocflow.plots.figures import plt
from coocflow.plots.save import save_figure


def rates_figure(rates: list[dict], title: str, path: Path) -> Path | None:
    """One panel per rate (`{"id", "statement", "axis_name", "axis", "values", "exponent", "ci",
    "predicted", "ylabel"}`; `values` is axis values x seeds, already divided by the declared factor), written
    atomically to `path`; None when no rate has values to draw."""
    rates = [rate for rate in rates if rate.get("values")]
    if not rates:
        return None
    columns = min(3, len(rates))
    rows = math.ceil(len(rates) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.6 * columns, 4.4 * rows), constrained_layout=True, squeeze=False)
    for ax, rate in zip(axes.ravel(), rates):
        x = np.asarray(rate["axis"], float)
        values = np.abs(np.asarray(rate["values"], float))
        for seed in range(values.shape[1]):
            ax.plot(x, values[:, seed], "o", ms=3.5, alpha=0.6, color="tab:blue", label="seeds" if seed == 0 else None)
        middle = np.exp(np.nanmean(np.log(values), axis=1))
        anchor = (math.exp(np.mean(np.log(x))), float(np.exp(np.nanmean(np.log(middle)))))
        for exponent, style, label in ((rate.get("exponent"), "-", "fitted"), (rate["predicted"], "--", "claimed")):
            if exponent is None:
                continue
            text = f"{label} {exponent:+.3f}"
            if label == "fitted" and rate.get("ci"):
                text += f" ({rate['ci'][0]:+.3f} to {rate['ci'][1]:+.3f})"
            ax.plot(x, anchor[1] * (x / anchor[0]) ** exponent, style, color="black" if label == "claimed" else "tab:red",
                    lw=1.2, label=text)
        ax.set(xscale="log", yscale="log", xlabel=rate["axis_name"], ylabel=rate.get("ylabel", "quantity"))
        ax.set_title(textwrap.fill(f"{rate['id']}: {rate['statement']}", 50), fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    for ax in axes.ravel()[len(rates):]:
        ax.set_visible(False)
    fig.suptitle(textwrap.fill(title, 60 * columns), fontsize=10)
    return save_figure(fig, path, dpi=110)
