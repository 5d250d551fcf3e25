"""Snapshots (observe.snapshots) and the T1 state: the weights the compiled driver keeps are the
ones observed at those times (GD and the flow, ensembles), a resumed run keeps the same ones,
bad times are refused at the door, and the report draws them as heatmaps."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

from conftest import TINY
from coocflow.api import resolve_config, resume_run, run_and_write
from coocflow.errors import ConfigError
from coocflow.model import Transformer
from coocflow.observables import observe
from coocflow.report import write_report
from coocflow.systems.eq1 import build_problem
from coocflow.storage import load_run
from coocflow.storage.checkpoint import read_checkpoint_meta

from test_checkpoint import Killed, kill_after_saves

SNAPSHOTS = [0.5, 3.0]
"""Steps 5 and 30 of TINY's gradient descent (lr = 0.1, 200 steps, t_end = 20)."""
WEIGHTS = ("W_Q", "W_K", "W_V", "W", "a")


def tiny(method: str, seeds: int = 2, **extra):
    settings = {**TINY, "observe.snapshots": SNAPSHOTS, **extra}
    if method == "flow":
        settings.update({"train.method": "flow", "train.t_end": 20.0})
    return resolve_config("paper", [f"{k}={v}" for k, v in settings.items()], n_seeds=seeds)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshots")
    return {method: run_and_write(tiny(method), root / method, figures=False)[0] for method in ("gd", "flow")}


def seed_weights(arrays: dict, seed_index: int) -> dict:
    return {k: arrays[k][seed_index] for k in WEIGHTS}


def assert_observed(weights: dict, config, seed: int, metrics: dict, t: float) -> None:
    """Every observable recomputed from `weights` equals the metrics row of `seed` at time `t`."""
    model = Transformer(**{k: jnp.asarray(v) for k, v in weights.items()})
    recomputed = observe(model, build_problem(config, seed))
    row = np.flatnonzero((metrics["seed"] == seed) & (metrics["t"] == t))
    assert len(row) == 1, f"no metrics row at t = {t}"
    for name, value in recomputed.items():
        np.testing.assert_allclose(float(value), metrics[name][row[0]], rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_snapshots_and_t1_hold_the_weights_observed_at_those_times(runs, method):
    run = load_run(runs[method])
    config = tiny(method)
    snaps, t1 = run.state_snapshots, run.state_t1
    np.testing.assert_array_equal(snaps["t"], SNAPSHOTS)
    assert snaps["W_Q"].shape == (2, 2, 8, 16) and snaps["valid"].all()
    assert run.manifest["snapshots"]["state_snapshots.npz"] == SNAPSHOTS
    assert run.manifest["snapshots"]["state_t1.npz"] == [seed["T1"] for seed in run.manifest["per_seed"]]
    for i, seed in enumerate(run.manifest["seeds"]):
        for k, t in enumerate(snaps["t"]):
            assert_observed(seed_weights({key: v[k] for key, v in snaps.items()}, i), config, seed, run.metrics, t)
        assert t1["t"][i] == run.manifest["per_seed"][i]["T1"] is not None
        assert_observed(seed_weights(t1, i), config, seed, run.metrics, t1["t"][i])
        np.testing.assert_array_equal(t1["tokens"][i], run.state_init["tokens"][i])
    if method == "gd":
        np.testing.assert_array_equal(snaps["step"], [5, 30])
        assert list(t1["step"]) == [round(t / 0.1) for t in t1["t"]]
    else:
        assert (snaps["step"] == -1).all() and (t1["step"] == -1).all()


def test_gd_snapshots_equal_runs_stopped_at_those_times(runs, tmp_path):
    """Independent runs that end at steps 5 and 30 end with the snapshots' weights."""
    snaps = load_run(runs["gd"]).state_snapshots
    for k, steps in enumerate((5, 30)):
        config = resolve_config("paper", [f"{key}={v}" for key, v in {**TINY, "train.steps": steps}.items()],
                                n_seeds=2)
        final = load_run(run_and_write(config, tmp_path / str(steps), figures=False)[0]).state_final
        for key in WEIGHTS:
            np.testing.assert_allclose(snaps[key][k], final[key], rtol=0, atol=1e-12, err_msg=f"step {steps} {key}")


def test_a_single_seed_run_has_no_seed_axis_and_loads_with_numpy_alone(tmp_path):
    folder, _ = run_and_write(tiny("gd", seeds=1), tmp_path / "one", figures=False)
    manifest = json.loads((folder / "manifest.json").read_text())
    with np.load(folder / "state_snapshots.npz", allow_pickle=False) as z:
        assert z["W_Q"].shape == (2, 8, 16) and z["valid"].shape == (2,) and list(z["t"]) == SNAPSHOTS
    with np.load(folder / "state_t1.npz", allow_pickle=False) as z:
        assert z["W_Q"].shape == (8, 16) and float(z["t"]) == manifest["T1"]


@pytest.mark.parametrize("value, message", [
    ([-1.0], "observe.snapshots: flow times must be finite and >= 0"),
    ([1.0, float("nan")], "observe.snapshots: flow times must be finite and >= 0"),
    ([5.0, 25.0], r"observe.snapshots: 25 is after the run's end t = 20; drop it or lengthen the run \(train.steps\)"),
    (3.0, "observe.snapshots: expected a list of numbers"),
    (["soon"], r"observe.snapshots\[0\]: expected a number"),
])
def test_bad_snapshot_times_are_refused_with_one_line(value, message):
    with pytest.raises(ConfigError, match=message) as caught:
        resolve_config("paper", [f"{k}={v}" for k, v in TINY.items()]).replace({"observe.snapshots": value})
    assert "\n" not in str(caught.value)


def test_flow_snapshots_beyond_t_end_name_train_t_end():
    with pytest.raises(ConfigError, match=r"after the run's end t = 2; .*\(train.t_end\)"):
        resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, "train.method": "flow", "train.t_end": 2.0,
                                                         "observe.snapshots": [3.0]}.items()])


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_a_resumed_run_keeps_the_same_snapshots(runs, method, tmp_path, monkeypatch):
    """Killed after the first of three chunks (the first snapshot and a T1 already taken, kept
    only in the checkpoint), the resumed run writes the same snapshot files bit for bit."""
    config = tiny(method).replace({"observe.checkpoint_every_s": 0})
    kill_after_saves(monkeypatch, 1)
    with pytest.raises(Killed):
        run_and_write(config, tmp_path / "run", figures=False)
    monkeypatch.undo()
    next_obs = read_checkpoint_meta(tmp_path / "run")["next_obs"]
    reference = load_run(runs[method])
    times = np.unique(reference.metrics["t"])
    assert times[next_obs - 1] >= SNAPSHOTS[0] and times[next_obs] <= SNAPSHOTS[1]
    assert min(reference.state_t1["t"]) < times[next_obs], "no T1 before the kill; kill later"
    folder, _ = resume_run(tmp_path / "run", figures=False)
    for name in ("state_snapshots.npz", "state_t1.npz"):
        with np.load(folder / name) as x, np.load(reference.path / name) as y:
            assert x.files == y.files
            for key in x.files:
                assert np.array_equal(x[key], y[key], equal_nan=True), f"{name}:{key}"


def test_report_draws_score_and_attention_heatmaps(runs):
    text = write_report(runs["gd"]).read_text()
    figures = json.loads(text.split("const FIGURES = ", 1)[1].split(";\nfor (const", 1)[0].replace("<\\/", "</"))
    heatmaps = [trace for figure in figures.values() for trace in figure["data"] if trace["type"] == "heatmap"]
    assert len(heatmaps) == 3 + 2 + 3 * 3  # A at 0, T1, end; A - A(0) at T1, end; 3 samples x 3 times
    titles = [figure["layout"]["title"]["text"] for figure in figures.values()]
    assert "Score changes A(t) - A(0)" in titles and any(title.startswith("Score matrix A") for title in titles)
    mlp = next(figure for figure in figures.values() if figure["layout"]["title"]["text"].startswith("MLP"))
    assert [t["name"] for t in mlp["data"] if t.get("yaxis") == "y2" and "name" in t] == ["u_norm2 (right axis)"]
