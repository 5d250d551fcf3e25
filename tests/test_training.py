"""Gradient-descent training: one step, time convention, grid, determinism, divergence."""

import jax.numpy as jnp
import numpy as np

from coocflow.api import resolve_config
from coocflow.flow import integrate_gd, observation_steps
from coocflow.flow import discrete
from coocflow.model import loss_grad
from coocflow.runner import build_model, build_problem, train

from conftest import TINY


def tiny_config(seed=1, **extra):
    return resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, **extra}.items()], seed=seed)


def test_one_step_is_params_minus_lr_grad():
    config = tiny_config()
    model, problem = build_model(config), build_problem(config)
    lr = 0.37
    grads = loss_grad(model, problem.train)
    trajectory = integrate_gd(model, problem, np.array([0, 1]), lr, chunks=1)
    for name in ("W_Q", "W_K", "W_V", "W"):
        expected = getattr(model, name) - lr * getattr(grads, name)
        np.testing.assert_allclose(getattr(trajectory.final, name), expected, rtol=1e-13, atol=1e-16, err_msg=name)


def test_observation_grid_default_and_coverage():
    steps = observation_steps(30000, 200)
    assert len(steps) >= 200
    assert steps[0] == 0 and steps[-1] == 30000
    assert np.all(np.diff(steps) > 0)
    assert np.all(steps[:11] == np.arange(11)), "dense early: every one of the first steps is observed"
    assert np.max(np.diff(steps)) <= 30000 / 40, "the tail is observed evenly, not only at the end"
    assert len(observation_steps(5, 200)) == 6
    log_only = observation_steps(10000, 50, "log")
    assert len(log_only) >= 50 and log_only[-1] == 10000


def test_time_is_lr_times_steps_and_chunking_does_not_change_results():
    config = tiny_config()
    model, problem = build_model(config), build_problem(config)
    grid = observation_steps(120, 25)
    one = integrate_gd(model, problem, grid, 0.1, chunks=1)
    many = integrate_gd(model, problem, grid, 0.1, chunks=7)
    np.testing.assert_allclose(one.series["t"], grid * 0.1)
    np.testing.assert_array_equal(one.series["step"], grid)
    for key in one.series:
        np.testing.assert_array_equal(one.series[key], many.series[key], err_msg=key)


def test_same_seed_gives_identical_numbers():
    a, b = train(tiny_config()), train(tiny_config())
    for key in a.series:
        np.testing.assert_array_equal(a.series[key], b.series[key], err_msg=key)
    c = train(tiny_config(seed=2))
    assert not np.array_equal(a.series["loss"], c.series["loss"])


def test_loss_decreases_and_all_correct_at_the_end():
    result = train(tiny_config(**{"train.steps": 2000}))
    loss = result.series["loss"]
    assert loss[-1] < 0.05 * loss[0]
    assert result.series["train_acc"][-1] == 1.0
    assert result.t1 is not None and 0 < result.t1 <= result.series["t"][-1]
    first = np.flatnonzero(result.series["min_margin"] > 0)[0]
    assert result.t1 == result.series["t"][first]


def test_float32_is_selectable():
    result = train(tiny_config(dtype="float32"))
    assert result.trajectory.final.W.dtype == jnp.float32
    assert result.series["loss"].dtype == np.float32


def test_divergence_stops_and_keeps_observations():
    config = tiny_config(**{"train.lr": 1e6, "train.steps": 400, "observe.points": 40})
    result = train(config)
    assert result.trajectory.status == "diverged"
    info = result.trajectory.divergence
    kept = result.series["t"]
    assert 0 < len(kept) < 40
    assert np.all(np.isfinite(result.series["loss"]))
    assert info["step"] > kept[-1] / config.train.lr - 1e-9
    assert info["quantity"] in ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1")


def test_changing_lr_does_not_recompile():
    config = tiny_config()
    model, problem = build_model(config), build_problem(config)
    grid = observation_steps(50, 10)
    integrate_gd(model, problem, grid, 0.1, chunks=2)
    traced = discrete.TRACE_COUNTS["advance"]
    integrate_gd(model, problem, grid, 0.05, chunks=2)
    integrate_gd(model, problem, grid, 0.2, chunks=2)
    assert discrete.TRACE_COUNTS["advance"] == traced
