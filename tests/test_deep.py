"""The `deep` experiment: the multi-layer transformer's correctness, a tiny end-to-end run, training
on the chunked driver (same series as before, divergence) and a killed study resumed bit for bit."""

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from conftest import coocflow_here
from coocflow.cli import app
from coocflow.config import Config
from coocflow.data import Dataset
from coocflow.data.cooccurrence import make_test_set, make_train_set
from coocflow.errors import ConfigError
from coocflow.experiments.deep import deep, run_deep, train_deep
from coocflow.flow.discrete import hyperparameters, make_optimizer
from coocflow.model.deep import deep_loss, forward, init_deep_transformer
from coocflow.systems.deep import observe_deep

BIN = Path(sys.executable).parent / "coocflow"

TINY_DEEP = {
    "data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
    "model.layers": 2, "model.heads": 2, "train.method": "adam", "optimizer.lr": 0.01, "train.steps": 60,
    "seeds": [0, 1], "observe.points": 20,
}


def tiny_config(**overrides) -> Config:
    return Config(name="deep", system="deep").replace({**TINY_DEEP, **overrides})


compiled_forward = jax.jit(forward)


def tiny_model_and_data():
    config = tiny_config()
    return init_deep_transformer(config, jax.random.PRNGKey(7)), make_train_set(config.data, 0)


def test_deep_smoke(tmp_path):
    """A tiny ensemble end to end: figure, summary with a table, metrics rows for every seed."""
    result = deep(tiny_config(), tmp_path / "deep")
    figure = result.figures[0]
    assert figure.is_file() and figure.stat().st_size > 10_000
    assert result.summary.startswith("# deep") and "| --- |" in result.summary
    assert [row["seed"] for row in result.rows] == [0, 1]
    metrics = pq.read_table(tmp_path / "deep" / "metrics.parquet").to_pydict()
    assert set(metrics["seed"]) == {0, 1}
    assert {"t", "step", "loss", "test_acc", "min_margin", "attn_targets_L1", "attn_mu3_L2"} <= set(metrics)
    assert len(metrics["seed"]) == 2 * len(set(metrics["step"]))


def test_attention_rows_are_distributions():
    model, data = tiny_model_and_data()
    _, attentions = compiled_forward(model, data.tokens)
    assert len(attentions) == 2
    for weights in attentions:
        assert weights.shape == (data.n, 2, 4, 4)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
        assert bool(jnp.all(weights >= 0))


def test_logits_ignore_token_positions():
    """No positional embedding: permuting each sample's positions leaves its logit unchanged."""
    model, data = tiny_model_and_data()
    rng = np.random.default_rng(0)
    permuted = np.stack([row[rng.permutation(len(row))] for row in np.asarray(data.tokens)])
    assert not np.array_equal(permuted, np.asarray(data.tokens))
    logits, permuted_logits = compiled_forward(model, data.tokens)[0], compiled_forward(model, jnp.asarray(permuted))[0]
    np.testing.assert_allclose(permuted_logits, logits, rtol=1e-12, atol=1e-12)


def test_gradient_matches_central_difference():
    """<grad L, v> against (L(w + eps v) - L(w - eps v)) / (2 eps) for a random direction v, in float64."""
    model, data = tiny_model_and_data()
    rng = np.random.default_rng(1)
    direction = jax.tree.map(lambda leaf: jnp.asarray(rng.standard_normal(leaf.shape)), model)
    eps = 1e-5

    @jax.jit
    def analytic_and_numeric():
        gradient = jax.grad(deep_loss)(model, data)
        analytic = sum(jnp.vdot(g, v) for g, v in zip(jax.tree.leaves(gradient), jax.tree.leaves(direction)))
        shifted = [deep_loss(jax.tree.map(lambda w, v: w + sign * eps * v, model, direction), data) for sign in (1, -1)]
        return analytic, (shifted[0] - shifted[1]) / (2 * eps)

    analytic, numeric = analytic_and_numeric()
    assert model.embedding.dtype == jnp.float64
    assert abs(float(numeric - analytic)) < 1e-6 * abs(float(analytic))


def test_seed_does_not_depend_on_the_ensemble():
    """Seed 1 trained alone equals seed 1 trained next to seed 0."""
    alone = run_deep(tiny_config(seeds=[1]))
    both = run_deep(tiny_config())
    in_pair = both["seed"] == 1
    for name, values in alone.items():
        np.testing.assert_allclose(both[name][in_pair], values, rtol=1e-12, atol=1e-12, err_msg=name)


def test_unsupported_method_is_refused():
    with pytest.raises(ConfigError, match="train.method"):
        run_deep(tiny_config(**{"train.method": "sgd", "train.batch_size": 6}))


# The series the hand-written loop this experiment had before it moved onto the chunked driver
# produced for `tiny_config()` (float64, XLA CPU): per seed, the last value and the sum over the
# 20 observations.
LOOP_BEFORE_DRIVER = {
    "loss": ([0.0043372614481019325, 0.0017462026753636301], [5.739332848265619, 2.8594379899555844]),
    "test_loss": ([0.30272200422985285, 0.464287324901213], [9.273177831361826, 7.2878672629422745]),
    "min_margin": ([5.40524820245537, 6.209617216104071], [29.133727186608397, 46.98545771884795]),
    "attn_targets_L1": ([0.6944214909758359, 0.6398325123314055], [12.721891592476625, 11.664820046478281]),
    "attn_targets_L2": ([0.867885006155433, 0.41553834479622853], [13.518675287643832, 9.143695552533723]),
    "attn_mu3_L2": ([0.19333943156099404, 0.2337931926145822], [4.4643888454389025, 4.546353045758462]),
}


def test_training_matches_the_loop_it_replaced():
    columns = run_deep(tiny_config())
    for name, (last, total) in LOOP_BEFORE_DRIVER.items():
        per_seed = columns[name].reshape(2, -1)
        np.testing.assert_allclose(per_seed[:, -1], last, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(per_seed.sum(axis=1), total, rtol=1e-12, err_msg=name)


def test_training_matches_a_step_by_step_loop():
    """The driver's chunks against one jitted Adam step at a time, observed at the same steps."""
    config = tiny_config()
    training = train_deep(config)
    seed_index, seed = 1, config.seed_list[1]
    model = init_deep_transformer(config, jax.random.fold_in(jax.random.PRNGKey(seed), 3))
    train, test = (Dataset(d.tokens, d.labels.astype(jnp.float64), d.groups)
                   for d in (make_train_set(config.data, seed), make_test_set(config.data, seed)))
    optimizer = make_optimizer("adam", hyperparameters(config.optimizer, jnp.float64))
    state = optimizer.init(model)

    @jax.jit
    def step(model, state):
        updates, state = optimizer.update(jax.grad(deep_loss)(model, train), state, model)
        return optax.apply_updates(model, updates), state

    observe = jax.jit(observe_deep)
    observed_steps = set(training.steps.tolist())
    observed = []
    for k in range(config.train.steps + 1):
        if k in observed_steps:
            observed.append(observe(model, train, test))
        model, state = step(model, state)
    for name in observed[0]:
        expected = np.stack([np.asarray(o[name]) for o in observed])
        np.testing.assert_allclose(training.series[name][seed_index], expected, rtol=1e-12, atol=1e-15, err_msg=name)


def test_a_diverging_seed_stops_and_keeps_its_finite_observations(tmp_path):
    """At lr 1e8 both seeds' loss overflows within a few steps: each stops at its first
    non-finite observation, the record says when and why, metrics after it are NaN and the
    seed's row comes from the observations before."""
    config = tiny_config(**{"train.method": "gd", "optimizer.lr": 1e8})
    result = deep(config, tmp_path / "deep")
    training = train_deep(config)
    assert training.status == ["diverged", "diverged"]
    for i, (record, row) in enumerate(zip(training.divergence, result.rows)):
        kept = record["observation"]
        loss = training.series["loss"][i]
        assert 0 < kept < len(loss) and record["quantity"] == "loss"
        assert record["t"] == training.t[kept] == 1e8 * record["step"]
        assert np.all(np.isfinite(loss[:kept])) and np.all(np.isnan(loss[kept:]))
        assert np.all(np.isnan(training.series["attn_targets"][i, kept:]))
        assert row["final_loss"] == loss[kept - 1]
        assert f"seed {config.seed_list[i]} diverged: loss became non-finite" in result.summary
    metrics = pq.read_table(tmp_path / "deep" / "metrics.parquet").to_pydict()
    assert np.isnan(metrics["train_acc"][-1]) and len(metrics["seed"]) == 2 * len(training.steps)


def _flags(settings: dict) -> list[str]:
    return [flag for key, value in settings.items() for flag in ("--set", f"{key}={value}")]


def _without_times(summary: str) -> str:
    return re.sub(r"[Tt]rained in [0-9.]+ s", "trained in - s", summary)


def assert_same_study(a: Path, b: Path, figure: str) -> None:
    """Every output of two study folders equal bit for bit: metrics (NaN where both are),
    figure, manifest rows and records, and the summary but for its wall time."""
    assert sorted(p.name for p in a.iterdir()) == sorted(p.name for p in b.iterdir())
    x, y = pq.read_table(a / "metrics.parquet"), pq.read_table(b / "metrics.parquet")
    assert x.schema.equals(y.schema) and x.num_rows == y.num_rows
    for column in x.column_names:
        assert np.array_equal(x[column].to_numpy(), y[column].to_numpy(), equal_nan=True), column
    assert (a / figure).read_bytes() == (b / figure).read_bytes()
    first, second = (json.loads((folder / "manifest.json").read_text()) for folder in (a, b))
    assert first["rows"] == second["rows"] and first["status"] == second["status"]
    for variant, record in first["variants"].items():
        other = second["variants"][variant]
        assert {k: record[k] for k in ("seeds", "status", "divergence")} == {k: other[k] for k in ("seeds", "status", "divergence")}
    assert _without_times((a / "summary.md").read_text()) == _without_times((b / "summary.md").read_text())


def sigkill_then_resume(tmp_path: Path, study: str, settings: dict, figure: str) -> None:
    """Start `coocflow run STUDY` with a checkpoint at every chunk, SIGKILL it once its first
    checkpoint is on disk, continue it with `coocflow run --resume`, and compare every output
    with the same study run uninterrupted."""
    flags = _flags({**settings, "observe.checkpoint_every_s": 0})
    out = tmp_path / "killed"
    process = subprocess.Popen([str(BIN), "run", study, *flags, "--out", str(out)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    checkpoint = out / f"checkpoint-{study}.npz"
    deadline = time.monotonic() + 240
    while not checkpoint.exists():
        assert process.poll() is None, f"the study ended before its first checkpoint: {process.stderr.read()}"
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "manifest.json").exists() and not (out / f"variant-{study}.npz").exists(), \
        "the study finished training before it was killed; lengthen it"
    with np.load(checkpoint, allow_pickle=False) as saved:
        meta = json.loads(str(saved["meta"]))
    assert 0 < meta["next_obs"] < meta["n_obs"]

    resumed = coocflow_here("run", "--resume", out)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{study} has a checkpoint at observation {meta['next_obs']} of {meta['n_obs']}" in resumed.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["variants"][study]["resumed"]["observation"] == meta["next_obs"]

    reference = tmp_path / "reference"
    done = CliRunner().invoke(app, ["run", study, *flags, "--out", str(reference)])
    assert done.exit_code == 0, done.output
    assert_same_study(out, reference, figure)
    again = CliRunner().invoke(app, ["run", "--resume", str(out)])
    assert again.exit_code == 0 and "nothing to resume" in again.output


def test_sigkill_then_resume_equals_the_uninterrupted_study(tmp_path):
    settings = {**TINY_DEEP, "train.steps": 6000, "observe.points": 40, "observe.chunks": 40}
    sigkill_then_resume(tmp_path, "deep", settings, "deep.png")
