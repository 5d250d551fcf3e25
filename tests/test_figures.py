"""Run figures from synthetic series (no training): measured titles, labels inside their axes,
t = 0 on every time axis, formats, thinning and the ensemble band."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from coocflow.observables.ensemble import median_band  # noqa: E402
from coocflow.plots import SeriesView, write_run_figures  # noqa: E402
from coocflow.plots.figures import (  # noqa: E402
    LOSS_CURVES,
    MAX_POINTS,
    OVERVIEW_PANELS,
    SCORE_CURVES,
    band,
    figure1,
    overview,
    phase1_rise,
    phase1_title,
    scores_titles,
)

T1 = 0.3


def grid(first: float = 0.01, end: float = 30.0, n: int = 150) -> np.ndarray:
    """t = 0, then a linear stretch and a log stretch, like the observation grids of a run."""
    return np.unique(np.r_[0.0, first * np.arange(1, 6), np.geomspace(6 * first, end, n - 6)])


def make_view(t=None, i2_bump=0.05, i3_bump=0.025, seeds=1, t1=T1, rng_seed=0) -> SeriesView:
    """Every series the figures draw; the I2/I3 losses rise by about `bump` near t = 0.02 when
    `bump` > 0 (a list gives one bump per seed), then fall; the scores move after T1."""
    t = grid() if t is None else t
    rng = np.random.default_rng(rng_seed)
    decay = np.exp(-t)

    def rows(f):
        return np.stack([f(i) * (1 + 1e-3 * rng.standard_normal(len(t)) * (t > 0)) for i in range(seeds)])

    def bump(size, i):
        size = size[i] if np.ndim(size) else size
        return size * (t / 0.02) * np.exp(1 - t / 0.02)

    phase2 = np.log1p(np.maximum(t - t1, 0)) if t1 else np.zeros_like(t)
    series = {
        "loss": rows(lambda i: 0.69 * decay / (1 + t)),
        "test_loss": rows(lambda i: 0.69 * decay + 0.05),
        "loss_I1": rows(lambda i: 0.6 * decay),
        "loss_I2": np.stack([0.7 * decay + bump(i2_bump, i) for i in range(seeds)]),
        "loss_I3": np.stack([0.7 * decay + bump(i3_bump, i) for i in range(seeds)]),
        "loss_I4": rows(lambda i: 0.69 * decay ** 2),
        "A_mu1_mu2": rows(lambda i: 0.04 + 0.003 * phase2),
        "A_mu2_mu1": rows(lambda i: -0.06 + 0.004 * phase2),
        "A_mu3_mu1": rows(lambda i: -0.08 - 0.002 * phase2),
        "A_mu3_mu2": rows(lambda i: 0.12 - 0.002 * phase2),
        "min_margin": rows(lambda i: np.where(t >= t1, 1.0, -1.0) if t1 else -np.ones_like(t)),
        "train_acc": rows(lambda i: 1 - 0.5 * decay),
        "test_acc": rows(lambda i: 0.95 - 0.4 * decay),
        "R": rows(lambda i: 1 + 0.1 * decay),
    }
    for _, curves, _ in OVERVIEW_PANELS:
        for key, _, _ in curves:
            series.setdefault(key, rows(lambda i: 0.2 + 0.1 * np.log1p(t)))
    return SeriesView(t=t, series=series, t1s=[t1] * seeds)


def time_axes(fig):
    return [ax for ax in fig.axes if ax.get_xscale() == "symlog"]


def test_phase1_title_reports_the_measured_rise():
    view = make_view()
    title = phase1_title(view)
    rise2, falls2 = phase1_rise(view, "loss_I2")
    rise3, falls3 = phase1_rise(view, "loss_I3")
    assert 0.03 < rise2 < 0.06 and 0.01 < rise3 < 0.03 and falls2 and falls3
    assert f"I2 rises by {rise2:.2g}" in title and f"I3 by {rise3:.2g}" in title
    assert "then both fall" in title and "no rise" not in title


def test_phase1_title_reports_no_rise_when_the_losses_only_fall():
    title = phase1_title(make_view(i2_bump=0.0, i3_bump=0.0))
    assert "no rise of the I2/I3 losses" in title and "rises" not in title


def test_phase1_title_names_the_group_that_does_not_rise():
    title = phase1_title(make_view(i2_bump=0.05, i3_bump=0.0))
    assert "I2 rises by" in title and "I3 does not rise" in title


def test_ensemble_titles_use_the_median_series():
    # one seed of three rises: the median does not
    assert "no rise" in phase1_title(make_view(i2_bump=[0.2, 0, 0], i3_bump=[0.2, 0, 0], seeds=3))
    assert "I2 rises by" in phase1_title(make_view(i2_bump=[0.2, 0.1, 0], i3_bump=0.0, seeds=3))


def test_scores_titles_state_the_measured_phase2_changes():
    view = make_view()
    a, a2 = scores_titles(view)
    assert "Phase 1" in a and "moves them by at most" in a
    i1 = np.searchsorted(view.t, T1, side="right") - 1
    change = view.series["A_mu1_mu2"][0, -1] - view.series["A_mu1_mu2"][0, i1]
    assert f"A[μ1,μ2] {change:+.2g}" in a2 and "Phase 2 change (T1 to t = 30)" in a2
    assert "A[μ3,μ1] −" in a2, "the decreasing scores are reported with their sign"


@pytest.fixture(scope="module")
def drawn():
    """figure1 and overview, drawn, for T1 in the middle, near the start, near the end, absent."""
    cases = {"middle": make_view(), "early": make_view(t1=0.01), "late": make_view(t1=25.0),
             "none": make_view(t1=None), "ensemble": make_view(seeds=4, i2_bump=[0.05, 0.04, 0.06, 0.0])}
    figures = {}
    for name, view in cases.items():
        for make in (figure1, overview):
            fig = make(view, title=f"synthetic {name}")
            fig.canvas.draw()
            figures[name, make.__name__] = fig
    yield figures
    for fig in figures.values():
        plt.close(fig)


def test_every_label_lies_inside_its_axes(drawn):
    renderer = None
    for (case, kind), fig in drawn.items():
        renderer = fig.canvas.get_renderer()
        labels = []
        for ax in fig.axes:
            box = ax.get_window_extent(renderer)
            extents = []
            for text in ax.texts:
                if not text.get_text():
                    continue
                ext = text.get_window_extent(renderer)
                assert (ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1 and ext.y0 >= box.y0 - 1
                        and ext.y1 <= box.y1 + 1), f"{case} {kind}: '{text.get_text()}' outside its axes"
                assert not any(ext.overlaps(other) for other in extents), f"{case} {kind}: '{text.get_text()}' overlaps"
                extents.append(ext)
                labels.append(text.get_text())
        if case != "none":
            assert labels.count("Phase 2") == len(fig.axes), (case, kind, labels)
        else:
            assert not any("Phase" in s for s in labels) and any("no T1" in s for s in labels)
    assert renderer is not None


def test_time_zero_is_inside_every_time_axis(drawn):
    for (case, kind), fig in drawn.items():
        assert len(time_axes(fig)) == len(fig.axes) == (4 if kind == "figure1" else 6)
        for ax in fig.axes:
            left, right = ax.get_xlim()
            assert left < 0 < right, (case, kind, ax.get_xlim())
            assert ax.lines[0].get_xdata()[0] == 0, "the curves start at t = 0"


@pytest.mark.parametrize("first, end", [(1e-3, 30.0), (0.01, 1e6)])
def test_time_axis_reads_from_t0_for_small_first_times_and_long_flows(first, end):
    view = make_view(t=grid(first, end), t1=0.2)
    fig = figure1(view)
    try:
        for ax in time_axes(fig)[:3]:
            left, right = ax.get_xlim()
            assert left < 0 and right == pytest.approx(end)
            assert ax.xaxis.get_transform().linthresh == pytest.approx(first)
        left, right = fig.axes[3].get_xlim()  # the Phase 1 zoom ends at 3 T1
        assert left < 0 and right == pytest.approx(0.6)
    finally:
        plt.close(fig)


def test_write_run_figures_formats(tmp_path):
    view = make_view()
    paths = write_run_figures(view, tmp_path, title="synthetic")
    assert sorted(p.name for p in paths) == ["figure1.png", "overview.png"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figure1.png", "overview.png"], "no pdf, no temp files"
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10000
    paths = write_run_figures(view, tmp_path / ".", formats=("png", "pdf"))
    assert (tmp_path / "figure1.pdf").read_bytes()[:5] == b"%PDF-" and len(paths) == 3
    with pytest.raises(ValueError, match="formats"):
        write_run_figures(view, tmp_path, formats=("svg",))


def test_a_loss_near_overflow_draws_cut_at_the_log_axis_top(tmp_path):
    """A diverging seed's last finite loss (5e275 in a deep run at lr 1e8) made Matplotlib's log
    ticks overflow (OverflowError while the figure was written); `save_figure` cuts the axis at
    `LOG_AXIS_TOP` with a note, leaves an axis below it as it was, and leaves no temporary file."""
    import io

    from coocflow.plots.save import LOG_AXIS_TOP, save_figure

    fig, (huge, fine) = plt.subplots(1, 2, constrained_layout=True)
    huge.plot([1, 2, 3], [0.7, 4e13, 5e275])
    fine.plot([1, 2, 3], [0.7, 0.1, 1e-3])
    for ax in (huge, fine):
        ax.set(xscale="log", yscale="log")
    with pytest.raises(OverflowError):
        fig.savefig(io.BytesIO(), format="png")
    path = save_figure(fig, tmp_path / "bounded.png", dpi=80)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert huge.get_ylim() == (0.7, LOG_AXIS_TOP) and [t.get_text() for t in huge.texts] == ["values above 1e+200 not drawn"]
    assert fine.get_ylim()[1] < 1 and not fine.texts
    assert [p.name for p in tmp_path.iterdir()] == ["bounded.png"]


def test_long_series_are_thinned_keeping_both_ends():
    t = np.r_[0.0, np.geomspace(1e-3, 1e6, 4000)]
    view = make_view(t=t, seeds=2, t1=0.2)
    fig = figure1(view)
    try:
        line = fig.axes[2].lines[0]
        x = line.get_xdata()
        assert len(x) <= MAX_POINTS + 2 and x[0] == 0 and x[-1] == t[-1]
    finally:
        plt.close(fig)


def test_band_equals_median_band_with_and_without_nan():
    values = np.random.default_rng(1).normal(size=(5, 50))
    for v in (values, np.where(np.arange(50) > 40, np.nan, values)):
        for ours, theirs in zip(band(v), median_band(v)):
            np.testing.assert_array_equal(ours, theirs)


def test_curves_are_the_paper_panels():
    """Every panel keeps its curves: four scores in (a) and (a'), five losses in (b) and (b')."""
    fig = figure1(make_view(seeds=2))
    try:
        counts = [len([ln for ln in ax.lines if not ln.get_label().startswith("_")]) for ax in fig.axes]
        assert counts == [len(SCORE_CURVES), len(SCORE_CURVES), len(LOSS_CURVES), len(LOSS_CURVES)]
        assert all(ax.collections for ax in fig.axes), "an ensemble draws its 10-90% bands"
    finally:
        plt.close(fig)


def test_phase1_is_not_named_from_too_few_points():
    """A Phase 1 with fewer than 10 observations up to T1 is "not resolved" (with how to resolve it),
    whatever its losses do; from 10 on the rise is named as measured."""
    from coocflow.plots.figures import MIN_POINTS_TO_NAME, phase1_points

    coarse = np.unique(np.r_[0.0, np.geomspace(0.02, 0.3, MIN_POINTS_TO_NAME - 2), np.geomspace(0.4, 30, 60)])
    view = make_view(t=coarse)
    assert phase1_points(view) == MIN_POINTS_TO_NAME - 1
    title = phase1_title(view)
    assert "not resolved" in title and "observe.start" in title and "rise" not in title
    assert "not resolved" in scores_titles(view)[0]
    fine = np.unique(np.r_[coarse, 0.25])
    assert phase1_points(make_view(t=fine)) == MIN_POINTS_TO_NAME
    assert "rises" in phase1_title(make_view(t=fine)) and "not resolved" not in phase1_title(make_view(t=fine))


def test_the_gram_example_observes_phase1_at_m_1e6_with_no_flags():
    """The theory init observes the flow from 0.01 / U0 (`observe.start` = 0), so at m = m1 = 10^6
    Phase 1 gets at least 20 observations before T1, while a kaiming run still starts at optimizer.lr."""
    from coocflow.api import resolve_config
    from coocflow.run.eq1 import observation_grid
    from coocflow.run import train

    wide = {"model.space": "gram", "model.m": 10**6, "model.m1": 10**6, "init.scheme": "theory",
            "train.method": "flow", "observe.chunks": 2}
    result = train(resolve_config("paper", wide))
    t1 = result.t1[0]
    assert t1 is not None and int(np.count_nonzero(result.trajectory.t <= t1)) >= 20
    assert result.trajectory.t[1] == pytest.approx(0.01 / 10**6)
    kaiming = resolve_config("paper", {"train.method": "flow"})
    assert observation_grid(kaiming)[0][1] == pytest.approx(kaiming.optimizer.lr)
