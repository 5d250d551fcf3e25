"""Runs in the Gram space (model.space = "gram") against runs in weight space: the same numbers
on every shared metrics column, any width, and what the Gram space cannot do refused."""

import json

import numpy as np
import pytest
from conftest import TINY

from coocflow.api import resolve_config, run_and_write
from coocflow.errors import ConfigError
from coocflow.observables.registry import neuron_only
from coocflow.systems.eq1 import gram_source
from coocflow.run import train
from coocflow.storage import load_run


def _config(space, **extra):
    return resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, "model.space": space, **extra}.items()], seed=3)


def _agree(weights, grams, tolerance):
    """Every column the Gram run has equals the weight run's, relative to the column's scale."""
    assert set(weights) - set(grams) == set(neuron_only())
    for name, values in grams.items():
        reference = weights[name]
        scale = np.maximum(np.abs(reference), np.max(np.abs(reference)) * 1e-3) + 1e-300
        error = np.max(np.abs(values - reference) / scale)
        assert error <= tolerance, f"{name}: relative difference {error:.2e}"


@pytest.mark.parametrize("extra", [
    {"model.m": 40, "model.m1": 5},
    {"model.m": 3, "model.m1": 6, "data.random_tokens": "distinct", "data.d": 40, "init.scheme": "theory"},
], ids=["uniform-m-above-2d", "distinct-m-below-2d"])
def test_gradient_descent_in_gram_space_equals_weight_space(extra):
    weights = train(_config("weights", **extra))
    grams = train(_config("gram", **extra))
    assert gram_source(_config("gram", **extra)) == "weights"
    _agree(weights.trajectory.series, grams.trajectory.series, 1e-9)
    assert np.array_equal(weights.trajectory.t, grams.trajectory.t)


def test_the_flow_in_gram_space_equals_weight_space():
    extra = {"train.method": "flow", "train.t_end": 2.0, "solver.rtol": 1e-13, "solver.atol": 1e-15,
             "observe.points": 12, "observe.chunks": 1}
    weights = train(_config("weights", **extra))
    grams = train(_config("gram", **extra))
    _agree(weights.trajectory.series, grams.trajectory.series, 1e-9)


def test_a_million_wide_gram_flow_runs_and_says_what_is_absent(tmp_path):
    config = _config("gram", **{"model.m": 1_000_000, "model.m1": 1_000_000, "init.scheme": "theory",
                                "train.method": "flow", "train.t_end": 5.0, "observe.points": 10,
                                "observe.chunks": 1})
    assert gram_source(config) == "wishart"
    folder, result = run_and_write(config, tmp_path / "wide", figures=False)
    loss = result.trajectory.series["loss"][0]
    assert np.all(np.isfinite(loss)) and loss[-1] < loss[0]
    run = load_run(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["space"] == "gram" and manifest["gram_init"] == "wishart"
    assert manifest["absent_columns"] == neuron_only() and not set(neuron_only()) & set(run.metrics)
    assert int(run.state_init["m"]) == 1_000_000 and run.state_init["A"].shape == (16, 16)


def test_what_the_gram_space_cannot_follow_is_refused():
    with pytest.raises(ConfigError, match="train.method: adam is not expressible in the Gram space"):
        _config("gram", **{"train.method": "adam"})
    with pytest.raises(ConfigError, match="init.gram_from: applies with model.space=gram"):
        _config("weights", **{"init.gram_from": "sampled"})
    # a float32 Gram state beside its float64 widths: Diffrax failed inside its stage buffers (a traceback)
    with pytest.raises(ConfigError, match="^dtype: float32 is not solved by the flow in the Gram space"):
        _config("gram", **{"dtype": "float32", "train.method": "flow", "train.t_end": 1.0})
    assert _config("gram", **{"dtype": "float32", "train.method": "gd"}).dtype == "float32"
    with pytest.raises(ConfigError, match="use init.scheme=theory"):
        train(_config("gram", **{"model.m": 1_000_000, "model.m1": 1_000_000}))
