"""Aggregate figures of a sweep: any summary column against any axis, medians and 10-90%
bands over seeds, one line per value of another axis, with a fitted log-log slope."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coocflow.errors import ConfigError
from coocflow.sweep.store import SweepStore, read_record


def _column(table, name: str, what: str) -> np.ndarray:
    if name not in table.column_names:
        choices = ", ".join(c for c in table.column_names if c not in ("job",))
        raise ConfigError(f"{what} {name!r}: not a column of the sweep's summary table; choose one of {choices}")
    return np.asarray(table.column(name).to_numpy(zero_copy_only=False))


def slope(x: np.ndarray, y: np.ndarray) -> float | None:
    """Exponent b of y ~ x^b fitted on log-log axes (None with fewer than two usable points)."""
    keep = (x > 0) & (y > 0) & np.isfinite(y)
    if len(np.unique(x[keep])) < 2:
        return None
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def group_order(groups) -> list:
    """The distinct groups in legend order: numbers by value (m = 32, 64, 128, not 128, 32, 64), then
    anything else as text."""
    return sorted(set(groups), key=lambda g: (1, str(g), 0.0) if isinstance(g, str) else (0, "", float(g)))


def label_x_values(ax, values) -> None:
    """Ticks at the swept values themselves, written plainly (32, 64, 128; not 3x10^1), and no
    minor tick labels on a log y axis."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator  # lazy: defers matplotlib, 0.7 s

    values = sorted(set(float(v) for v in values))
    ax.xaxis.set_major_locator(FixedLocator(values))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_formatter(NullFormatter())


def headline_column(root: Path) -> str:
    """What a sweep's default figures show: T1 for runs of eq. (1); for other systems (whose
    summary has no T1) the final training loss."""
    names = SweepStore(root).read_table("summary").column_names
    if "T1" in names:
        return "T1"
    finals = [name for name in ("final.loss", "final.train_loss") if name in names]
    return (finals or [name for name in names if name.startswith("final.")] or ["T1"])[0]


def aggregate(root: Path, x: str, y: str = "T1", by: str | None = None) -> list[dict]:
    """Per value of `by` (or one group): x values, median and 10-90% band of y over seeds and
    jobs, and the fitted slope."""
    table = SweepStore(root).read_table("summary")
    xs, ys = _column(table, x, "--x").astype(float), _column(table, y, "--y").astype(float)
    groups = _column(table, by, "--by") if by else np.zeros(len(xs))
    out = []
    for group in group_order(groups.tolist()):
        rows = groups == group
        values = sorted(set(xs[rows].tolist()))
        stats = []
        for value in values:
            found = ys[rows & (xs == value)]
            found = found[np.isfinite(found)]
            stats.append(np.quantile(found, [0.1, 0.5, 0.9]) if found.size else np.full(3, np.nan))
        stats = np.array(stats)
        out.append({"group": group, "x": np.array(values), "low": stats[:, 0], "median": stats[:, 1],
                    "high": stats[:, 2], "slope": slope(np.array(values), stats[:, 1])})
    return out


def aggregate_figure(root: Path, x: str, y: str = "T1", by: str | None = None, log: bool | None = None,
                     path: Path | None = None) -> Path:
    """Draw `y` against `x` (log-log when every value is positive, unless `log` says otherwise)."""
    import matplotlib  # lazy: defers matplotlib, 0.7 s

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: defers matplotlib, 0.7 s

    from coocflow.plots.save import save_figure  # lazy: beside matplotlib

    lines = aggregate(root, x, y, by)
    positive = all((line["x"] > 0).all() and (line["median"][np.isfinite(line["median"])] > 0).all() for line in lines)
    log = positive if log is None else log
    fig, ax = plt.subplots(figsize=(5.6, 4.2), constrained_layout=True)
    for line, color in zip(lines, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 4):
        fit = f", slope {line['slope']:.2f}" if line["slope"] is not None and log else ""
        label = (f"{by} = {line['group']}" if by else y) + fit
        ax.plot(line["x"], line["median"], "o-", color=color, label=label, ms=4)
        ax.fill_between(line["x"], line["low"], line["high"], color=color, alpha=0.2, lw=0)
    if log:
        ax.set(xscale="log", yscale="log")
    label_x_values(ax, [v for line in lines for v in line["x"]])
    record = read_record(root)
    ax.set(xlabel=x, ylabel=f"{y} (median, 10-90% over seeds)",
           title=f"{record['name']}: {y} against {x}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, which="both", lw=0.4)
    path = path or Path(root) / "figures" / f"{y}_vs_{x}.png".replace("/", "-")
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path, dpi=120, fmt="png")


def independent_axes(record: dict) -> list[str]:
    """The axes a sweep's values vary along independently: each [grid] key, and of the [zip] keys
    (which move together) only the first; in the spec's order."""
    first_zipped = next((axis for axis in record["axes"] if axis in record["zip"]), None)
    return [axis for axis in record["axes"] if axis in record["grid"] or axis == first_zipped]


def default_figures(root: Path) -> list[Path]:
    """T1 (or a system's final loss, `headline_column`) against every numeric independent axis, one
    line per value of the next independent axis. A [zip]'s keys move together, so it is drawn once,
    against its first key (a line per value of a zip partner would hold a single point)."""
    record = read_record(root)
    y = headline_column(root)
    axes = independent_axes(record)
    numeric = [a for a in axes if all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                      for v in (record["grid"].get(a) or record["zip"].get(a)))]
    figures = []
    for axis in numeric:
        others = [a for a in axes if a != axis]
        figures.append(aggregate_figure(root, axis, y, by=others[0] if others else None))
    return figures
