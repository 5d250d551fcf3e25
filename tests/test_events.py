"""Event times located between observations (coocflow/flow/events.py): on the
flow, the first all-correct time, T0.5, T' and T* move with the solver's tolerance, not with the
observation grid."""

import numpy as np
import pytest

from coocflow.api import resolve_config
from coocflow.verify.paper.checks import SeedData
from coocflow.run import train

SMALL_THEORY = {"data.n": 12, "data.L": 3, "data.d": 40, "data.n_test": 12, "model.m": 4096, "model.m1": 8,
                "model.neurons": "false", "train.t_end": 50.0 * 4096, "solver.rtol": 1e-10, "solver.atol": 1e-14,
                "seeds": [0, 1], "observe.chunks": 2}
LOCATED_TO = 1e-6
"""Moving the grid from 100 to 400 observations moves a located event by less
than this, relative. At rtol 1e-10 the measured change is at most 2.1e-7 (T0.5, whose gap is a
difference of two rates); 2e-9 for the others (theory preset, m = 2^15, 2 seeds)."""


@pytest.fixture(scope="module")
def two_grids():
    def run(points):
        # 50 observations a chunk on both grids: the second run reuses the first's compiled programs
        overrides = [f"{k}={v}" for k, v in {**SMALL_THEORY, "observe.points": points,
                                             "observe.chunks": points // 50}.items()]
        return train(resolve_config("theory", overrides)).trajectory

    return run(100), run(400)


def test_located_events_do_not_move_with_the_grid(two_grids):
    coarse, fine = two_grids
    assert set(coarse.events) == {"all_correct", "T0.5", "T_prime", "T_star", "T0.5_sandwich"}
    located = 0
    for name in coarse.events:
        after_start = coarse.events[name] > 0  # an event that holds at t = 0 has nothing to locate
        assert np.array_equal(after_start, fine.events[name] > 0), name
        assert coarse.events_located[name][after_start].all() and fine.events_located[name][after_start].all(), name
        change = np.abs(coarse.events[name] - fine.events[name])[after_start] / fine.events[name][after_start]
        assert np.all(change < LOCATED_TO), f"{name}: moved {change.max():.2e} relative between 100 and 400 points"
        located += int(after_start.sum())
    assert located >= 9, "all five events of both seeds but one (seed 1 has I2 and I3 correct at t = 0)"


def test_the_grid_alone_would_move_them(two_grids):
    """The same events read off the grid (the first observation where they hold) move by far more:
    the test above could fail."""
    coarse, fine = two_grids
    for training in (coarse, fine):
        first = np.array([training.t[np.argmax(training.series["min_margin"][s] > 0)] for s in range(2)])
        assert np.all(first >= training.events["all_correct"])
    grid_coarse = coarse.t[np.argmax(coarse.series["min_margin"][0] > 0)]
    grid_fine = fine.t[np.argmax(fine.series["min_margin"][0] > 0)]
    assert abs(grid_coarse - grid_fine) / grid_fine > 100 * LOCATED_TO


def test_a_located_event_lies_between_the_observations_that_bracket_it(two_grids):
    coarse, _ = two_grids
    for s in range(2):
        hit = int(np.argmax(coarse.series["loss"][s] <= 4096.0 ** -2))
        assert coarse.t[hit - 1] < coarse.events["T_star"][s] <= coarse.t[hit]
        assert coarse.event_settings["T_star"] == {"level": 4096.0 ** -2}


def test_verify_reads_a_located_time_only_at_its_own_level():
    t = np.array([0.0, 1.0, 2.0])
    data = SeedData({"t": t, "min_margin": np.array([-1.0, -0.5, 0.5]), "loss": np.array([1.0, 0.5, 0.1])}, m=4,
                    events={"T_star": 1.7, "all_correct": 1.6},
                    event_settings={"T_star": {"level": 4.0 ** -2}, "all_correct": {"level": 0.0}})
    assert data.event_time("all_correct", 2.0) == 1.6
    assert data.event_time("T_star", 2.0, level=4.0 ** -2) == 1.7
    assert data.event_time("T_star", 2.0, level=4.0 ** -3) == 2.0, "another k's T* is the grid's"
    assert data.event_time("T0.5", 1.0) == 1.0, "an event the run did not locate is the grid's"


def test_the_sandwich_start_is_located_inside_its_grid_bracket(two_grids):
    """Lemma 4.3's T0.5 for the declared C = 0.1 (a last-entry event: the start of the sandwich's last
    stretch up to the declared T1 = C_T1/U0): located between the grid's last failure and its start."""
    from coocflow.verify.paper.boundaries import sandwich_start

    coarse, _ = two_grids
    config = resolve_config("theory", [f"{k}={v}" for k, v in SMALL_THEORY.items()])
    assert coarse.event_settings["T0.5_sandwich"] == {"level": 0.0, "window_end": config.paper_t1,
                                                      "window_event": None, "c": 0.1}
    for s in range(2):
        series = {**{name: values[s] for name, values in coarse.series.items()}, "t": coarse.t}
        grid = sandwich_start(series, 0.1, config.paper_t1)
        k = int(np.searchsorted(coarse.t, grid))
        assert coarse.events_located["T0.5_sandwich"][s]
        assert coarse.t[k - 1] < coarse.events["T0.5_sandwich"][s] <= grid


def test_a_run_stopped_at_its_event_is_the_full_run_up_to_there(two_grids):
    """`train.stop_at = "all_correct"` ends after the chunk in which the last seed got there: the
    observations it kept, and the located event time, are the full run's bit for bit (the chunks
    before are the same computation), and it ends well before t_end."""
    full = two_grids[0]
    overrides = [f"{k}={v}" for k, v in {**SMALL_THEORY, "observe.points": 100, "train.stop_at": "all_correct"}.items()]
    stopped = train(resolve_config("theory", overrides)).trajectory
    kept = len(stopped.t)
    assert kept == 50, "the first of the two chunks: T1 ~ 6/m is far before t_end = 50 m"
    assert stopped.t[-1] >= np.nanmax(stopped.events["all_correct"])
    for name in ("loss", "min_margin"):
        assert np.array_equal(stopped.series[name], full.series[name][:, :kept]), name
    assert np.array_equal(stopped.events["all_correct"], full.events["all_correct"])


@pytest.mark.parametrize("overrides,message", [
    ({"train.stop_at": "T_never"}, "train.stop_at: 'T_never' is not an event of the eq1 system that a run can stop "
                                   "at; use one of: reached, all_correct, T0.5, T_prime, T_star"),
    ({"train.stop_at": "T0.5_sandwich", "verify.sandwich_c": 0.1}, "'T0.5_sandwich' is not an event"),
    ({"train.stop_at": "all_correct", "train.method": "gd", "train.t_end": 0.0},
     "train.stop_at: a discrete method stops only at 'reached'"),
    ({"train.stop_at": "reached", "observe.snapshots": [1e-3]}, "train.stop_at: a run that stops at an event keeps no"),
])
def test_stop_at_names_what_a_run_can_stop_at(overrides, message):
    from coocflow.errors import ConfigError
    from coocflow.systems.eq1 import Eq1System

    overrides = {**{k: v for k, v in SMALL_THEORY.items() if k != "model.neurons"}, **overrides}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        resolve_config("theory", overrides)  # refused at the door
    config = resolve_config("theory", {**overrides, "train.stop_at": ""}).replace(
        {"train.stop_at": overrides["train.stop_at"]})  # Config alone does not know a System's events
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        Eq1System.from_config(config).check_training(config)


def test_gd_stops_once_every_seed_is_correct():
    config = resolve_config("tiny", {"train.stop_at": "reached", "seeds": [0, 1], "observe.chunks": 20})
    result = train(config)
    full = train(config.replace({"train.stop_at": ""}))
    kept = len(result.trajectory.t)
    assert all(t1 is not None for t1 in result.t1) and result.t1 == full.t1
    assert kept < len(full.trajectory.t)
    assert np.array_equal(result.trajectory.series["loss"], full.trajectory.series["loss"][:, :kept])


def _reference_first_index(event, t, series, level, window_end):
    """The grid search as it read one seed at a time before it was vectorized (session 37)."""
    with np.errstate(invalid="ignore"):
        holds = np.asarray(event.holds(series, level), dtype=bool) & np.isfinite(t)
    if event.last_entry:
        if np.isfinite(window_end) and window_end > t[-1]:
            return None
        inside = np.flatnonzero((t > 0) & (t <= window_end))
        if not inside.size or not holds[inside[-1]]:
            return None
        broken = inside[~holds[inside]]
        return int(inside[0] if not broken.size else broken[-1] + 1)
    if event.after_start:
        holds &= t > 0
    hits = np.flatnonzero(holds)
    return int(hits[0]) if hits.size else None


@pytest.mark.parametrize("kind", ["first", "after_start", "last_entry", "per_seed_value"])
def test_the_vectorized_grid_search_finds_what_the_per_seed_one_found(kind):
    """`FirstHit.first_indices` (all seeds at once, as `locate` calls it) against the per-seed search
    it replaced, on noisy series with NaN tails, holds at t = 0, and windows that end before, inside
    and after the grid, and with a `value` that reads one seed only (applied seed by seed)."""
    from coocflow.systems.base import FirstHit

    rng = np.random.default_rng(7)
    t = np.concatenate([[0.0], np.geomspace(0.1, 10.0, 39)])
    x = np.cumsum(rng.normal(size=(60, 40)), axis=1) + rng.normal(size=(60, 1))
    x[rng.integers(0, 60, 10), -5:] = np.nan
    series = {"x": x}
    value = (lambda o: o["x"]) if kind != "per_seed_value" else (lambda o: np.stack([o["x"][j] for j in range(len(o["x"]))]))
    event = FirstHit(value, 0.5, rising=bool(kind != "after_start"), strict=kind == "first",
                     after_start=kind == "after_start", last_entry=kind == "last_entry")
    ends = rng.choice([np.inf, -np.inf, 0.05, 2.0, 9.0, 11.0], size=60)
    found = event.first_indices(t, series, 0.5, ends)
    expected = [_reference_first_index(event, t, {"x": x[s]}, 0.5, ends[s]) for s in range(60)]
    assert [None if i < 0 else int(i) for i in found] == expected
    assert sum(e is not None for e in expected) >= 10 and sum(e is None for e in expected) >= 1


def test_observe_locate_locates_the_named_events_and_leaves_the_others_on_the_grid(two_grids):
    """`observe.locate = ["all_correct"]` (a table of T1 alone): that event's time is the one the full
    run located, bit for bit (the same program solves the same pair); every other event keeps its
    first observed time, and says so (`events_located` false)."""
    coarse, _ = two_grids
    overrides = [f"{k}={v}" for k, v in {**SMALL_THEORY, "observe.points": 100, "observe.chunks": 2}.items()]
    only = train(resolve_config("theory", overrides + ['observe.locate=["all_correct"]'])).trajectory
    assert np.array_equal(only.events["all_correct"], coarse.events["all_correct"])
    assert np.array_equal(only.events_located["all_correct"], coarse.events_located["all_correct"])
    moved = 0
    for name in set(coarse.events) - {"all_correct"}:
        assert not only.events_located[name].any(), name
        hit = np.isfinite(only.events[name])
        assert np.array_equal(hit, np.isfinite(coarse.events[name])), name
        assert np.all(np.isin(only.events[name][hit], only.t)), f"{name}: not an observed time"
        assert np.all(only.events[name][hit] >= coarse.events[name][hit]), name
        moved += int(np.sum(only.events[name][hit] > coarse.events[name][hit]))
    assert moved >= 4, "the grid times differ from the located ones: the test could fail"


def test_observe_locate_names_only_the_systems_events():
    from coocflow.errors import ConfigError

    with pytest.raises(ConfigError, match=r"observe.locate: 'T1' is not an event of the eq1 system; use some of: all_correct"):
        resolve_config("theory", ['observe.locate=["T1"]'])
    with pytest.raises(ConfigError, match=r'expected a list of names, e.g. observe.locate = \["all_correct"\]'):
        resolve_config("theory", ["observe.locate=all_correct"])
    assert "locate" not in resolve_config("theory", []).to_dict()["observe"], "unset, a run's record is as before"


def test_fewer_locating_steps_reuse_the_program_and_keep_the_located_times(two_grids):
    """`observe.locate_steps` is a traced input of the locating program: 2 steps instead of 16
    compile nothing new, locate every event the 16-step run located, inside the same bracket, and
    move it by less than `LOCATED_TO` (the bound the grid is held to) but not by nothing, so the
    setting is really read."""
    from coocflow.errors import ConfigError
    from coocflow.flow import discrete

    coarse, _ = two_grids
    traced = discrete.TRACE_COUNTS["locate"]
    overrides = [f"{k}={v}" for k, v in {**SMALL_THEORY, "observe.points": 100, "observe.chunks": 2,
                                         "observe.locate_steps": 2}.items()]
    few = train(resolve_config("theory", overrides)).trajectory
    assert discrete.TRACE_COUNTS["locate"] == traced
    moved = 0
    for name in coarse.events:
        assert np.array_equal(few.events_located[name], coarse.events_located[name]), name
        located = coarse.events_located[name]
        change = np.abs(few.events[name] - coarse.events[name])[located] / coarse.events[name][located]
        assert np.all(change < LOCATED_TO), (name, change.max())
        index = np.searchsorted(few.t, coarse.events[name][located])
        assert np.all((few.t[index - 1] < few.events[name][located]) & (few.events[name][located] <= few.t[index])), name
        moved += int(np.sum(change > 0))
    assert moved > 0, "two steps give other roots than sixteen: the setting is read"
    with pytest.raises(ConfigError, match=r"observe.locate_steps: the fewest steps of an event's locating solve, 1 to 256 "
                                          r"\(got 0\); 16 is the default"):
        resolve_config("theory", ["observe.locate_steps=0"])
    assert "locate_steps" not in resolve_config("theory", []).to_dict()["observe"], "at its default, a run's record is as before"
