"""The `deep` experiment: the multi-layer transformer's correctness and a tiny end-to-end run."""

import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest

from coocflow.config import Config
from coocflow.data.cooccurrence import make_train_set
from coocflow.errors import ConfigError
from coocflow.experiments.deep import deep, run_deep
from coocflow.model.deep import deep_loss, forward, init_deep_transformer

TINY_DEEP = {
    "data.n": 12, "data.L": 4, "data.d": 16, "data.n_test": 24, "model.m": 8, "model.m1": 8,
    "model.layers": 2, "model.heads": 2, "train.method": "adam", "train.lr": 0.01, "train.steps": 60,
    "seeds": [0, 1], "observe.points": 20,
}


def tiny_config(**overrides) -> Config:
    return Config(name="deep").replace({**TINY_DEEP, **overrides})


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
