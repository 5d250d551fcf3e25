"""The paper's Figure 1 and an overview of the other observables, from a metrics table.

Every figure takes a `SeriesView` (built from `metrics.parquet`, so it works on a loaded run
folder as well as a fresh run). Time axes are symlog: linear from t = 0 up to the first positive
observation time, logarithmic beyond, so t = 0 is drawn. Phase 1 (t < T1) is shaded and labelled
inside the axes. For a seed ensemble each curve is the median over seeds with a 10-90% band, and
T1 is the median with its 10-90% range shaded. Panel titles state what this run shows (measured
from its series, the median for an ensemble), never what the paper says.

Speed: Agg, a fixed layout (no layout engine), dpi 100, a single draw per format, PDF only when
asked, at most `MAX_POINTS` drawn points per curve.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator  # noqa: E402

from coocflow.observables.ensemble import BAND, first_time_all_correct, median_band  # noqa: E402
from coocflow.plots.save import save_figure  # noqa: E402

SCORE_CURVES = (
    ("A_mu2_mu1", r"$A[\mu_2,\mu_1]$", "tab:blue"),
    ("A_mu1_mu2", r"$A[\mu_1,\mu_2]$", "tab:orange"),
    ("A_mu3_mu1", r"$A[\mu_3,\mu_1]$", "tab:green"),
    ("A_mu3_mu2", r"$A[\mu_3,\mu_2]$", "tab:red"),
)
LOSS_CURVES = (
    ("loss", "total", "black"),
    ("loss_I1", r"$I_1$ ($\mu_1,\mu_2$; y=+1)", "tab:blue"),
    ("loss_I2", r"$I_2$ ($\mu_1$ only)", "tab:orange"),
    ("loss_I3", r"$I_3$ ($\mu_2$ only)", "tab:green"),
    ("loss_I4", r"$I_4$ (neither)", "tab:red"),
)
PLAIN = {
    "A_mu1_mu2": "A[μ1,μ2]", "A_mu2_mu1": "A[μ2,μ1]", "A_mu3_mu1": "A[μ3,μ1]", "A_mu3_mu2": "A[μ3,μ2]",
    "G_mu1": "G(μ1)", "G_mu2": "G(μ2)", "G_mu3": "G(μ3)", "G_rand_maxabs": "max|G(rand)|",
    "p_q1_k2": "μ1→μ2", "p_q2_k1": "μ2→μ1", "p_q1_k3": "μ1→μ3", "p_q2_k3": "μ2→μ3",
    "V_mu1_mu2": "μ1·μ2", "V_mu1_mu3": "μ1·μ3", "V_mu2_mu3": "μ2·μ3",
    "R": "R", "train_acc": "train acc", "test_acc": "test acc", "min_margin": "min margin",
    "loss": "train", "test_loss": "test",
}
"""Plain-text names (no mathtext) of the curves whose values a panel title reports."""

DPI = 100
MAX_POINTS = 400
"""Curves longer than this are thinned to about this many points, evenly spaced on the time axis."""
RISE_TOL = 1e-4
"""A loss 'rises' in Phase 1 when its peak exceeds its t = 0 value by more than this fraction of it."""
TITLE_SIZE = 8.5
LABEL_BOX = {"boxstyle": "square,pad=0.1", "facecolor": "white", "alpha": 0.7, "lw": 0}


def _title(ax, text: str) -> None:
    """A panel title at a fixed position (y given: Matplotlib skips its per-draw search for
    overlapping tick labels above the axes, a third of a second per run)."""
    ax.set_title(text, fontsize=TITLE_SIZE, y=1.0, pad=5)


@dataclass
class SeriesView:
    """What a figure needs: shared times, per-seed series (seeds, times), and T1 per seed."""

    t: np.ndarray
    series: dict[str, np.ndarray]
    t1s: list[float | None]

    @property
    def t1(self) -> float | None:
        """Median T1 over the seeds that reached it."""
        found = [v for v in self.t1s if v is not None]
        return float(np.median(found)) if found else None

    @property
    def ensemble(self) -> bool:
        return len(self.t1s) > 1

    @classmethod
    def from_metrics(cls, metrics: dict[str, np.ndarray], t1s: list[float | None] | None = None) -> "SeriesView":
        """Pivot a long metrics table (one row per seed and time) into per-seed series."""
        from coocflow.storage.run_folder import pivot_metrics  # lazy: defers pyarrow, 0.3 s

        t, series = pivot_metrics(metrics)
        if t1s is None and "min_margin" not in series:  # another system's run: no T1
            t1s = [None] * len(next(iter(series.values())))
        if t1s is None:
            t1s = [first_time_all_correct(t, margins) for margins in series["min_margin"]]
        return cls(t=t, series=series, t1s=list(t1s))


# ---------------------------------------------------------------- what the run shows


def band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`observables.median_band` (10% quantile, median, 90% quantile over seeds), computed in one
    vectorised `np.quantile` when no value is NaN (the same numbers; `np.nanquantile` loops over
    the columns in Python, ~8 ms a curve), and by `median_band` itself otherwise."""
    values = np.asarray(values, dtype=float)
    if np.isnan(values).any() or values.shape[0] == 0:
        return median_band(values)
    low, mid, high = np.quantile(values, [BAND[0], 0.5, BAND[1]], axis=0)
    return low, mid, high


def _median(view: SeriesView, key: str) -> np.ndarray:
    values = np.asarray(view.series[key], dtype=float)
    return values[0] if values.shape[0] == 1 else band(values)[1]


def _last_finite(values: np.ndarray) -> int | None:
    idx = np.flatnonzero(np.isfinite(values))
    return int(idx[-1]) if idx.size else None


def _zoom_horizon(view: SeriesView) -> float:
    """Right end of the Phase 1 zoom: 3 T1, or the first tenth of the run without T1."""
    return 3 * view.t1 if view.t1 else float(view.t[-1]) / 10


def phase1_rise(view: SeriesView, key: str) -> tuple[float, bool]:
    """(rise, falls) of one loss in Phase 1: rise = max over t <= T1 (the zoom horizon without T1)
    minus the value at t = 0, of the median series; falls = the value at the end of the zoom
    window is below that maximum. rise is NaN when the series has no value at t = 0."""
    t, y = view.t, _median(view, key)
    end = view.t1 if view.t1 else _zoom_horizon(view)
    window = (t <= end) & np.isfinite(y)
    if not np.isfinite(y[0]) or not window.any():
        return float("nan"), False
    peak = float(np.max(y[window]))
    zoom = np.flatnonzero((t <= _zoom_horizon(view)) & np.isfinite(y))
    return peak - float(y[0]), bool(zoom.size and y[zoom[-1]] < peak)


def rises(view: SeriesView, key: str) -> bool:
    rise, _ = phase1_rise(view, key)
    y0 = abs(_median(view, key)[0])
    return bool(np.isfinite(rise) and rise > RISE_TOL * max(y0, 1e-12))


MIN_POINTS_TO_NAME = 10
"""A title names a phenomenon (a rise, its absence, a decay rate) only from at least this many
observations in its window; with fewer it says the window is not resolved and how to resolve it."""


def phase1_points(view: SeriesView) -> int:
    """Observations in Phase 1, t = 0 to T1 (to the zoom horizon without T1)."""
    end = view.t1 if view.t1 else _zoom_horizon(view)
    return int(np.count_nonzero(view.t <= end))


def not_resolved(view: SeriesView) -> str | None:
    """What a Phase-1 title says instead of naming a phenomenon when too few observations fall in
    it (`MIN_POINTS_TO_NAME`), else None."""
    found = phase1_points(view)
    if found >= MIN_POINTS_TO_NAME:
        return None
    end = view.t1 if view.t1 else _zoom_horizon(view)
    return (f"not resolved: {found} observations up to t = {end:.2g} ({MIN_POINTS_TO_NAME} needed);\n"
            f"observe from earlier (the flow: --set observe.start={end / 1000:.1g}) or more points")


def phase1_title(view: SeriesView) -> str:
    """Title of panel (b'): whether the I2 and I3 losses rise before T1, by how much, and whether
    they fall afterwards; "not resolved" when Phase 1 holds too few observations to tell."""
    head = "(b') Phase 1 zoom: "
    unresolved = not_resolved(view)
    if unresolved:
        return head + unresolved
    found = {g: rises(view, f"loss_{g}") for g in ("I2", "I3")}
    if not any(found.values()):
        return head + "no rise of the I2/I3 losses\n(the paper's Figure 1(b) shows one)"
    parts, falling = [], []
    for g, up in found.items():
        rise, falls = phase1_rise(view, f"loss_{g}")
        if up:
            parts.append(f"{g} rises by {rise:.2g}" if not parts else f"{g} by {rise:.2g}")
            falling.append((g, falls))
        else:
            parts.append(f"{g} does not rise")
    text = head + ", ".join(parts)
    fell = [g for g, f in falling if f]
    if len(fell) == len(falling):
        tail = "then both fall" if len(fell) == 2 else "then falls"
    elif fell:
        tail = f"then {fell[0]} falls, {[g for g, f in falling if not f][0]} not by 3 T1"
    else:
        tail = "no fall by the end of the zoom"
    return f"{text},\n{tail}"


def _fmt(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{x:+.2g}".replace("-", "−")


def _t1_index(view: SeriesView) -> int | None:
    if not view.t1:
        return None
    return int(np.searchsorted(view.t, view.t1, side="right") - 1)


def scores_titles(view: SeriesView) -> tuple[str, str]:
    """Titles of panels (a) and (a'): how far the scores move in Phase 1, and each score's change
    in Phase 2 (from T1 to the last observation; from t = 0 without T1)."""
    keys = [k for k, _, _ in SCORE_CURVES]
    mids = {k: _median(view, k) for k in keys}
    i1 = _t1_index(view)
    if i1 is None:
        a = "(a) attention scores (no T1: no Phase 2)"
    else:
        diffs = np.concatenate([np.abs(m[: i1 + 1] - m[0]) for m in mids.values()])
        diffs = diffs[np.isfinite(diffs)]
        moved = f"{diffs.max():.2g}" if diffs.size else "nan"
        a = f"(a) attention scores\nPhase 1 (t ≤ T1) moves them by at most {moved}"
        if not_resolved(view):
            a = f"(a) attention scores\nPhase 1 {not_resolved(view).split(';')[0]}"
    start = 0 if i1 is None else i1
    changes = []
    end_t = None
    for k in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2"):
        last = _last_finite(mids[k])
        if last is None:
            changes.append(f"{PLAIN[k]} nan")
            continue
        end_t = view.t[last] if end_t is None else max(end_t, view.t[last])
        changes.append(f"{PLAIN[k]} {_fmt(mids[k][last] - mids[k][start])}")
    end = f"t = {end_t:.3g}" if end_t is not None else "the end"
    span = f"change from t = 0 to {end}" if i1 is None else f"Phase 2 change (T1 to {end})"
    return a, f"(a') A(t) − A(0); {span}:\n" + ", ".join(changes)


def loss_title(view: SeriesView) -> str:
    """Title of panel (b): the total loss at t = 0 and at the end, and the late decay exponent
    (log-log slope over the last two decades of Phase 2)."""
    y = _median(view, "loss")
    last = _last_finite(y)
    if last is None or not np.isfinite(y[0]):
        return "(b) total and per-group loss"
    text = f"(b) total and per-group loss\ntotal {y[0]:.3g} → {y[last]:.3g} at t = {view.t[last]:.3g}"
    t_from = max(view.t1 or 0.0, view.t[last] / 100)
    keep = (view.t >= t_from) & (view.t > 0) & np.isfinite(y) & (y > 0)
    if keep.sum() >= MIN_POINTS_TO_NAME and view.t1:
        slope = np.polyfit(np.log(view.t[keep]), np.log(y[keep]), 1)[0]
        text += f", late decay ~ t^{slope:.2f}".replace("-", "−")
    return text


# ---------------------------------------------------------------- drawing


def _thin(t: np.ndarray) -> np.ndarray | slice:
    """Indices of at most about MAX_POINTS points evenly spaced in log(t + first positive t)."""
    if len(t) <= MAX_POINTS:
        return slice(None)
    pos = t[t > 0]
    scale = pos.min() if pos.size else 1.0
    u = np.log(np.maximum(t, 0) + scale)
    grid = np.linspace(u[0], u[-1], MAX_POINTS)
    idx = np.unique(np.clip(np.searchsorted(u, grid), 0, len(t) - 1))
    return np.union1d(idx, [0, len(t) - 1])


def band_curve(ax, t, values: np.ndarray, label: str, color: str | None = None, style: str = "-") -> None:
    """One seed: a line. Several: the median over seeds (rows of `values`) and the 10-90% band.
    Long series are thinned to about MAX_POINTS points."""
    t = np.asarray(t)
    values = np.asarray(values)
    keep = _thin(t)
    t, values = t[keep], values[:, keep]
    if values.shape[0] == 1:
        ax.plot(t, values[0], style, label=label, color=color, lw=1.5)
        return
    low, mid, high = band(values)
    (line,) = ax.plot(t, mid, style, label=label, color=color, lw=1.5)
    ax.fill_between(t, low, high, color=line.get_color(), alpha=0.2, lw=0)


def linthresh(view: SeriesView) -> float:
    """The end of the linear part of the time axis: the first positive observation time."""
    pos = view.t[view.t > 0]
    return float(pos.min()) if pos.size else 1.0


def time_axis(ax, view: SeriesView, right: float | None = None) -> None:
    """Symlog time axis: linear on [0, first positive time] (half a decade wide), log beyond; the
    left limit sits a little below 0 so the t = 0 point is not on the spine."""
    lt = linthresh(view)
    ax.set_xscale("symlog", linthresh=lt, linscale=0.5, subs=(2, 5))
    right = float(view.t.max()) if right is None else right
    ax.set_xlim(-0.15 * lt, max(right, 2 * lt))
    ax.set_xlabel("flow time t (linear up to t = %.3g, log beyond)" % lt, fontsize=8.5)


def _axes_fraction(ax, x: float) -> float:
    return float(ax.transAxes.inverted().transform(ax.transData.transform((x, 1.0)))[0])


def _label_width(ax, text: str, fontsize: float) -> float:
    """Width of `text` as a fraction of the axes width, estimated a little high (no renderer)."""
    fig = ax.figure
    width_pt = ax.get_position().width * fig.get_figwidth() * 72
    return 0.7 * fontsize * len(text) / width_pt


def _label(ax, x: float, y: float, text: str, ha: str, fontsize: float = 8, **kw) -> None:
    ax.text(x, y, text, transform=ax.transAxes, ha=ha, fontsize=fontsize, clip_on=False, bbox=LABEL_BOX, **kw)


def _phase_labels(ax, f: float, y: float = 0.975) -> tuple[float, str]:
    """"Phase 1" ending just left of axes fraction f (T1) and "Phase 2" starting just right of
    it, both kept inside the axes (margin 0.01) and apart when T1 is near either edge; returns
    where "Phase 2" is anchored."""
    margin, pad, size = 0.01, 0.008, 8
    w1, w2 = _label_width(ax, "Phase 1", size), _label_width(ax, "Phase 2", size)
    x1, ha1, x2, ha2 = f - pad, "right", f + pad, "left"
    if x1 - w1 < margin:
        x1, ha1 = margin, "left"
        x2 = max(x2, margin + w1 + 2 * pad)
    if x2 + w2 > 1 - margin:
        x2, ha2 = 1 - margin, "right"
        x1 = margin if ha1 == "left" else min(x1, 1 - margin - w2 - 2 * pad)
    _label(ax, x1, y, "Phase 1", ha1, size, va="top")
    _label(ax, x2, y, "Phase 2", ha2, size, va="top")
    return x2, ha2


def _headroom(ax, fraction: float = 0.17) -> None:
    """Raise the top y limit by `fraction` of the axes height (in the axis' own scale: linear,
    log or symlog) so the phase labels at the top do not sit on the curves."""
    low, high = ax.get_ylim()
    scale = ax.yaxis.get_transform()
    a, b = scale.transform([low, high])
    if np.isfinite(a) and np.isfinite(b) and b > a:
        ax.set_ylim(low, float(scale.inverted().transform([b + fraction * (b - a)])[0]))


def mark_phases(ax, view: SeriesView) -> None:
    """Shade Phase 1 (0 <= t < T1), draw T1 (median, and its 10-90% range over seeds for an
    ensemble) and label both phases and T1 inside the axes. Call after the x limits are set."""
    t1 = view.t1
    if t1 is None or t1 <= 0:
        ax.text(0.01, 0.975, "no T1: some training sample is never classified correctly",
                transform=ax.transAxes, ha="left", va="top", fontsize=7.5, color="0.3", bbox=LABEL_BOX)
        return
    ax.axvspan(0, t1, color="0.92", zorder=0, lw=0)
    ax.axvline(t1, color="0.4", lw=1, ls="--", zorder=1)
    found = [v for v in view.t1s if v is not None]
    if len(found) > 1:
        low, high = np.quantile(found, [0.1, 0.9])
        ax.axvspan(low, high, color="0.75", alpha=0.35, zorder=0, lw=0)
    f = min(max(_axes_fraction(ax, t1), 0.0), 1.0)
    if _axes_fraction(ax, t1) < 1:
        x, ha = _phase_labels(ax, f)
    else:  # T1 beyond the right end: all of the axes is Phase 1
        x, ha = 0.99, "right"
        _label(ax, x, 0.975, "Phase 1", ha, va="top")
    row = 12 / (ax.get_position().height * ax.figure.get_figheight() * 72)  # one 8 pt line
    _label(ax, x, 0.975 - row, f"T1={t1:.3g}", ha, 7, color="0.3", va="top")


def _plot(ax, view: SeriesView, curves, transform=lambda y: y, right: float | None = None, legend="best"):
    t = view.t
    shown = np.ones(len(t), bool) if right is None else t <= right
    for key, label, color in curves:
        values = transform(np.asarray(view.series[key], dtype=float))
        band_curve(ax, t[shown], values[:, shown], label, color)
    time_axis(ax, view, right)
    if ax.get_yscale() == "log":  # minor ticks at 2 and 5 only: a loss spans many decades
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    _headroom(ax)
    mark_phases(ax, view)
    ax.legend(fontsize=7, loc=legend)
    ax.grid(alpha=0.3, which="both", lw=0.4)


def _suptitle(fig, view: SeriesView, title: str) -> None:
    t1 = view.t1
    if t1 is None:
        shows = "T1 not reached (Phase 2 never starts)"
    elif view.ensemble:
        found = sum(v is not None for v in view.t1s)
        shows = f"T1 = {t1:.3g} (median; reached by {found}/{len(view.t1s)} seeds)"
    else:
        shows = f"T1 = {t1:.3g}: every training sample correct"
    fig.suptitle(f"{title}\n{shows}" if title else shows, fontsize=9.5, y=0.995, va="top")


SHORT_NUMBERS = FuncFormatter(lambda value, _: f"{value:.3g}")
"""Tick labels that carry their own exponent: Matplotlib's offset text ("1e-8" above the axis)
would sit on the panel's two-line title when score changes are tiny (wide models)."""


def figure1(view: SeriesView, title: str = ""):
    """Figure 1: (a) the four scores, raw and minus their initial value; (b) the losses, and a
    linear-scale zoom on Phase 1. Panel titles state the measured behaviour."""
    fig, axes = plt.subplots(1, 4, figsize=(20, 5.0))
    fig.subplots_adjust(left=0.05, right=0.995, bottom=0.1, top=0.83, wspace=0.2)
    title_a, title_a2 = scores_titles(view)
    _plot(axes[0], view, SCORE_CURVES)
    axes[0].set_ylabel(r"score $\nu^\top W_K^\top W_Q \mu$")
    _title(axes[0], title_a)
    _plot(axes[1], view, SCORE_CURVES, transform=lambda y: y - y[:, :1])
    axes[1].set_ylabel("score minus its value at t=0")
    axes[1].axhline(0, color="0.5", lw=0.6)
    for ax in axes[:2]:
        ax.yaxis.set_major_formatter(SHORT_NUMBERS)
    _title(axes[1], title_a2)
    axes[2].set_yscale("log")
    _plot(axes[2], view, LOSS_CURVES)
    axes[2].set_ylabel("training loss")
    _title(axes[2], loss_title(view))
    _phase1_zoom(axes[3], view)
    _suptitle(fig, view, title)
    return fig


def _phase1_zoom(ax, view: SeriesView) -> None:
    """Group losses on a linear scale up to 3 T1 (or the first tenth of the run)."""
    _plot(ax, view, LOSS_CURVES, right=_zoom_horizon(view))
    ax.set_ylabel("training loss (linear)")
    _title(ax, phase1_title(view))


OVERVIEW_PANELS = (
    ("MLP alignment G", (("G_mu1", r"$G(\mu_1)$", "tab:blue"), ("G_mu2", r"$G(\mu_2)$", "tab:orange"),
                         ("G_mu3", r"$G(\mu_3)$", "tab:green"), ("G_rand_mean", "mean G(random)", "0.4"),
                         ("G_rand_maxabs", "max |G(random)|", "0.7")), "linear"),
    ("attention weights", (("p_q1_k2", r"$p_{q\leftarrow\mu_1,k\leftarrow\mu_2}$", "tab:blue"),
                           ("p_q2_k1", r"$p_{q\leftarrow\mu_2,k\leftarrow\mu_1}$", "tab:orange"),
                           ("p_q1_k3", r"$p_{q\leftarrow\mu_1,k\leftarrow\mu_3}$", "tab:green"),
                           ("p_q2_k3", r"$p_{q\leftarrow\mu_2,k\leftarrow\mu_3}$", "tab:red")), "linear"),
    ("value Gram", (("V_mu1_mu2", r"$\mu_1^\top W_V^\top W_V \mu_2$", "tab:blue"),
                    ("V_mu1_mu3", r"$\mu_1^\top W_V^\top W_V \mu_3$", "tab:green"),
                    ("V_mu2_mu3", r"$\mu_2^\top W_V^\top W_V \mu_3$", "tab:red")), "linear"),
    ("balancing (Lemmas 4.4, 4.5)", (("R", "R(t)", "black"), ("bal_S2_S3", r"$|S_2-S_3|/\min$", "tab:orange"),
                                     ("bal_sum_neg", r"$\sum g/(S_2+S_3+S_4-S_1)$", "tab:blue"),
                                     ("bal_sum_S1_S2", r"$\sum g/(S_1-S_2)$", "tab:green")), "symlog"),
    ("accuracy and margin", (("train_acc", "train acc", "tab:blue"), ("test_acc", "test acc", "tab:orange"),
                             ("min_margin", r"min $y_iF_i$", "black")), "linear"),
    ("loss", (("loss", "train", "black"), ("test_loss", "test", "tab:orange")), "log"),
)


def panel_values_title(view: SeriesView, name: str, curves) -> str:
    """`name`, then the last value of each curve with a plain name (median over seeds)."""
    parts, end_t = [], None
    for key, _, _ in curves:
        if key not in PLAIN or key not in view.series:
            continue
        y = _median(view, key)
        last = _last_finite(y)
        if last is None:
            continue
        end_t = view.t[last] if end_t is None else max(end_t, view.t[last])
        parts.append(f"{PLAIN[key]} {y[last]:.3g}".replace("-", "−"))
    if not parts:
        return name
    return f"{name}\nat t = {end_t:.3g}: " + ", ".join(parts)


def overview(view: SeriesView, title: str = ""):
    """The other tracked quantities: G, attention weights, value Grams, balancing, accuracy, loss."""
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.2))
    fig.subplots_adjust(left=0.055, right=0.99, bottom=0.065, top=0.895, wspace=0.2, hspace=0.42)
    for ax, (name, curves, yscale) in zip(axes.ravel(), OVERVIEW_PANELS):
        ax.set_yscale(yscale)
        _plot(ax, view, curves)
        ax.set_ylabel(name.split(" (")[0], fontsize=9)
        _title(ax, panel_values_title(view, name, curves))
    _suptitle(fig, view, title)
    return fig


def save(fig, stem: Path, formats=("png",)) -> list[Path]:
    """Write `fig` in each format (`plots.save.save_figure`: atomically, log axes bounded) and close it."""
    paths = []
    try:
        for fmt in formats:
            kwargs = {"pil_kwargs": {"compress_level": 3}} if fmt == "png" else {}
            paths.append(save_figure(fig, Path(f"{stem}.{fmt}"), DPI, fmt, close=False, **kwargs))
    finally:
        plt.close(fig)
    return paths


def write_run_figures(view: SeriesView, folder: Path, title: str = "", formats=("png",)) -> list[Path]:
    """figure1 in each of `formats` ("png", "pdf") and overview.png in `folder`."""
    folder = Path(folder)
    formats = tuple(formats)
    unknown = set(formats) - {"png", "pdf"}
    if unknown:
        raise ValueError(f"formats: png and/or pdf (got {', '.join(sorted(unknown))})")
    paths = save(figure1(view, title), folder / "figure1", formats=formats)
    paths += save(overview(view, title), folder / "overview", formats=("png",))
    return paths
