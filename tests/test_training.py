"""Discrete training: one step, time convention, grid, determinism, divergence, no recompiles."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY
from typer.testing import CliRunner

from coocflow.api import resolve_config
from coocflow.cli import app
from coocflow.config import Config, OptimizerConfig
from coocflow.errors import CoocflowError
from coocflow.flow import discrete, integrate_discrete, observation_steps
from coocflow.flow.discrete import Optimizer
from coocflow.model import loss_grad
from coocflow.systems.eq1 import build_model, build_problem
from coocflow.run.eq1 import stack, unstack
from coocflow.run import train
from coocflow.storage import load_run
from coocflow.systems.eq1 import Eq1System


def tiny_config(seed=1, **extra):
    return resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, **extra}.items()],
                          seed=None if "seeds" in extra else seed)


def run_single(model, problem, grid, lr, chunks=3):
    """One seed of eq. (1) by GD from `model` on `problem` through the system integrator; returns
    (final weights, 1-D series, the training)."""
    optimizer = OptimizerConfig(lr=lr)
    system = Eq1System.from_config(Config(optimizer=optimizer))
    training = integrate_discrete(system, Optimizer.of("gd", optimizer, model.dtype), grid, lr, (0,), chunks=chunks,
                                  ensemble=(stack([model]), stack([problem.train]), stack([problem.test])))
    return unstack(training.final, 0), {k: v[0] for k, v in training.series.items()}, training


def test_one_step_is_params_minus_lr_grad():
    config = tiny_config()
    model, problem = build_model(config), build_problem(config)
    lr = 0.37
    grads = loss_grad(model, problem.train)
    final, _, _ = run_single(model, problem, np.array([0, 1]), lr, chunks=1)
    for name in ("W_Q", "W_K", "W_V", "W"):
        expected = getattr(model, name) - lr * getattr(grads, name)
        np.testing.assert_allclose(getattr(final, name), expected, rtol=1e-13, atol=1e-16, err_msg=name)


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
    _, one, trajectory = run_single(model, problem, grid, 0.1, chunks=1)
    _, many, _ = run_single(model, problem, grid, 0.1, chunks=7)
    np.testing.assert_allclose(trajectory.t, grid * 0.1)
    np.testing.assert_array_equal(trajectory.steps, grid)
    for key in one:
        np.testing.assert_array_equal(one[key], many[key], err_msg=key)


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
    t1 = result.t1[0]
    assert t1 is not None and 0 < t1 <= result.series["t"][-1]
    first = np.flatnonzero(result.series["min_margin"] > 0)[0]
    assert t1 == result.series["t"][first]


def test_float32_is_selectable():
    result = train(tiny_config(dtype="float32"))
    assert result.trajectory.final.W.dtype == jnp.float32
    assert result.series["loss"].dtype == np.float32


def test_divergence_stops_and_keeps_observations():
    config = tiny_config(**{"optimizer.lr": 1e6, "train.steps": 400, "observe.points": 40})
    result = train(config)
    assert result.trajectory.status == ["diverged"]
    info = result.trajectory.divergence[0]
    kept = result.series["t"]
    assert 0 < len(kept) < 40
    assert np.all(np.isfinite(result.series["loss"]))
    assert info["t"] > kept[-1] and info["last_finite_t"] == kept[-1]
    assert info["quantity"] in ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1")
    final = unstack(result.trajectory.final, 0)
    assert all(np.isfinite(np.asarray(getattr(final, k))).all() for k in ("W_Q", "W_K", "W_V", "W"))


def test_float32_overflow_stops_the_run_and_float64_would_go_on(tmp_path):
    """At lr = 20 the float32 run's scores reach ~1e12 and its softmax overflows at step 4. It
    must stop at that first non-finite observation, keep the finite ones, keep its weights of
    step 3 (one chunk per observation here) and say to use float64; the same step taken from
    those weights in float64 stays finite, so float32's range, not the dynamics, stopped it."""
    settings = {"optimizer.lr": 20, "train.steps": 400, "observe.points": 40, "observe.chunks": 40}
    single = train(tiny_config(seed=0, dtype="float32", **settings))
    assert single.trajectory.status == ["diverged"]
    record = single.trajectory.divergence[0]
    bad = record["observation"]
    kept = single.series
    assert bad > 0 and len(kept["t"]) == bad and record["last_finite_t"] == kept["t"][-1]
    assert all(np.all(np.isfinite(kept[k])) for k in ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1"))
    assert record["weights_t"] == kept["t"][-1] and record["step"] == kept["step"][-1] + 1

    weights, problem = unstack(single.trajectory.final, 0), unstack(single.problem, 0)
    assert weights.W.dtype == jnp.float32
    same_step = (np.array([0, 1]), 20.0)
    _, narrow, again = run_single(weights, problem, *same_step, chunks=1)
    assert again.status == ["diverged"] and narrow["loss"][0] == kept["loss"][-1]
    _, wide, onward = run_single(to_float64(weights), to_float64(problem), *same_step, chunks=1)
    assert onward.status == ["completed"] and np.isfinite(wide["loss"][1]) and wide["loss"][1] > wide["loss"][0]

    sets = [x for k, v in {**TINY, **settings, "dtype": "float32"}.items() for x in ("--set", f"{k}={v}")]
    done = CliRunner().invoke(app, ["run", "paper", *sets, "--seed", "0", "--out", str(tmp_path / "f32"),
                                    "--no-figures"])
    message = str(done.exception)
    assert isinstance(done.exception, CoocflowError) and "1 of 1 seeds diverged" in message
    assert "dtype=float64" in message and f"at t={record['t']:g}" in message
    folder = load_run(tmp_path / "f32")
    assert len(folder.metrics["t"]) == bad and folder.manifest["divergence"]["weights_t"] == record["weights_t"]


def to_float64(tree):
    return jax.tree.map(lambda x: x.astype(jnp.float64) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def test_changing_hyperparameters_or_seeds_does_not_recompile():
    config = tiny_config(seeds=[1, 2])
    train(config)
    traced = discrete.TRACE_COUNTS["advance"]
    train(config.replace({"optimizer.lr": 0.05}))
    train(config.replace({"seeds": [5, 9]}))
    assert discrete.TRACE_COUNTS["advance"] == traced


@pytest.mark.parametrize("method", ["sgd", "momentum", "adam", "adamw"])
def test_every_optimizer_trains(method):
    extra = {"train.method": method, "train.steps": 600}
    if method == "sgd":
        extra["train.batch_size"] = 4
    if method in ("adam", "adamw"):
        extra["optimizer.lr"] = 0.01
    result = train(tiny_config(**extra))
    assert result.trajectory.status == ["completed"]
    assert result.series["loss"][-1] < 0.5 * result.series["loss"][0]


def test_full_batch_sgd_is_gd_and_minibatches_differ():
    base = tiny_config()
    gd = train(base)
    full = train(base.replace({"train.method": "sgd"}))
    np.testing.assert_array_equal(gd.series["loss"], full.series["loss"])
    mini = train(base.replace({"train.method": "sgd", "train.batch_size": 6}))
    assert not np.allclose(gd.series["loss"][-1], mini.series["loss"][-1])


def test_minibatches_cover_each_epoch_once():
    config = tiny_config()
    data = build_problem(config).train
    key = discrete.jax.random.PRNGKey(0)
    batch = 4
    seen = []
    for step in range(3):
        picked = discrete.minibatch(data, key, jnp.asarray(step), batch)
        seen.append(np.asarray(picked.tokens))
    epoch = np.concatenate(seen)
    rows = {tuple(r) for r in np.asarray(data.tokens)}
    assert len({tuple(r) for r in epoch}) == len(rows) == 12, "one epoch visits every sample once"
    next_epoch = np.asarray(discrete.minibatch(data, key, jnp.asarray(3), batch).tokens)
    assert not np.array_equal(next_epoch, seen[0]), "the next epoch reshuffles"


def test_ensemble_equals_separate_runs():
    both = train(tiny_config(seeds=[3, 4]))
    alone = train(tiny_config(seed=4))
    np.testing.assert_allclose(both.trajectory.series["loss"][1], alone.series["loss"], rtol=1e-12)
    np.testing.assert_allclose(both.trajectory.series["A_mu1_mu2"][1], alone.series["A_mu1_mu2"], rtol=1e-10)


def test_only_diverged_seeds_are_marked():
    config = tiny_config(**{"optimizer.lr": 1.6, "train.steps": 300})
    result = train(config.replace({"seeds": list(range(8))}))
    statuses = result.trajectory.status
    if "diverged" not in statuses or "completed" not in statuses:
        pytest.fail(f"the setting must mix diverged and completed seeds, got {statuses}")
    table = result.table()
    for i, seed in enumerate(result.seeds):
        rows = table["seed"] == seed
        assert np.all(np.isfinite(table["loss"][rows]))
        if statuses[i] == "completed":
            assert rows.sum() == len(result.trajectory.t)
        else:
            assert rows.sum() < len(result.trajectory.t)


def test_the_optimizer_section_holds_exactly_the_optimizers_hyperparameters():
    assert {f.name for f in dataclasses.fields(OptimizerConfig)} == set(discrete.HYPERPARAMETERS)
