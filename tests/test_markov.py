"""The `markov` experiment: the chain and its entropies, the next-token model and its gradient,
the seed ensemble, and a tiny end-to-end run."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest

from coocflow.config import Config
from coocflow.data.markov import (
    bayes_loss,
    bayes_losses,
    entropy_rate,
    random_chain,
    sample_dataset,
    sample_sequences,
    stationary_entropy,
)
from coocflow.errors import ConfigError
from coocflow.experiments.markov import (
    OBSERVABLES,
    build_markov_ensemble,
    loss,
    markov,
    next_token_logits,
    encode,
    train_markov_ensemble,
    trainable_spec,
)

SMOKE = {
    "data.d": 8, "data.L": 4, "data.n": 24, "data.n_test": 24, "model.m": 8, "model.m1": 8,
    "train.lr": 0.5, "train.steps": 60, "observe.points": 20,
}


def _config(**extra) -> Config:
    return Config(name="markov").replace({**SMOKE, "seeds": [0, 1], **extra})


def test_smoke_run_writes_figure_summary_and_metrics(tmp_path):
    messages = []
    result = markov(_config(), tmp_path / "markov", progress=messages.append)
    figure = tmp_path / "markov" / "markov.png"
    assert result.figures == [figure] and figure.stat().st_size > 10_000
    assert result.summary.startswith("# markov\n") and "| --- |" in result.summary
    assert [row["seed"] for row in result.rows] == [0, 1] and messages
    table = pq.read_table(tmp_path / "markov" / "metrics.parquet").to_pydict()
    assert set(table["seed"]) == {0, 1}
    assert {"seed", "step", "t", *OBSERVABLES} <= set(table)
    assert len(table["seed"]) == 2 * len(set(table["step"]))
    assert np.all(np.isfinite(table["train_loss"]))


def test_other_methods_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="train.method"):
        markov(_config(**{"train.method": "sgd"}), tmp_path)


def test_chain_rows_stationary_distribution_and_entropies():
    chain = random_chain(12, seed=4)
    P, pi = np.asarray(chain.transition), np.asarray(chain.stationary)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pi @ P, pi, rtol=0, atol=1e-12)
    assert np.all(pi >= 0) and abs(pi.sum() - 1) < 1e-12
    H, H_pi = float(entropy_rate(chain)), float(stationary_entropy(chain))
    assert 0 < H < H_pi < np.log(12)


def test_empirical_transitions_and_start_approach_the_chain():
    chain = random_chain(6, seed=1)
    P, pi = np.asarray(chain.transition), np.asarray(chain.stationary)
    sequences = sample_sequences(chain, 4000, 40, np.random.default_rng(0))
    counts = np.zeros((6, 6))
    np.add.at(counts, (sequences[:, :-1].ravel(), sequences[:, 1:].ravel()), 1)
    visits = counts.sum(axis=1, keepdims=True)
    tolerance = 5 * np.sqrt(P * (1 - P) / visits) + 1e-3
    assert np.all(np.abs(counts / visits - P) <= tolerance)
    start = np.bincount(sequences[:, 0], minlength=6) / len(sequences)
    assert np.all(np.abs(start - pi) <= 5 * np.sqrt(pi * (1 - pi) / len(sequences)) + 1e-3)


def test_bayes_loss_approaches_the_entropy_rate():
    chain = random_chain(10, seed=2)
    data = sample_dataset(chain, 100_000, 3, np.random.default_rng(5))
    per_sample = np.asarray(bayes_losses(data))
    tolerance = 5 * per_sample.std() / np.sqrt(len(per_sample))
    assert abs(float(bayes_loss(data)) - float(entropy_rate(chain))) < tolerance


def _one_seed(config: Config):
    model, train, _ = build_markov_ensemble(config)
    return jax.tree.map(lambda leaf: leaf[0], (model, train))


def test_logits_match_eq1_with_a_last_position_query():
    """The count-based logits equal eq. (1) written out with one-hot tokens, sample by sample."""
    config = _config(seeds=[3])
    model, data = _one_seed(config)
    W_Q, W_K, W_V, W, B = (np.asarray(getattr(model, name)) for name in ("W_Q", "W_K", "W_V", "W", "B"))
    d, m = W_Q.shape[1], W_Q.shape[0]
    logits = np.asarray(next_token_logits(model, *encode(data.tokens, d, model.W_Q.dtype)))
    for i, tokens in enumerate(np.asarray(data.tokens)):
        X = np.eye(d)[:, tokens]  # (d, L): columns are x_1..x_L
        scores = X.T @ W_K.T @ W_Q @ X[:, -1] / np.sqrt(m)
        p = np.exp(scores - scores.max())
        h = W_V @ X @ (p / p.sum())
        np.testing.assert_allclose(logits[i], B @ W @ h, rtol=1e-12, atol=1e-12)


def test_gradient_matches_central_finite_difference():
    config = _config(seeds=[3], **{"init.c0": 3.0})
    model, data = _one_seed(config)
    trainable, frozen = eqx.partition(model, trainable_spec(config))

    @jax.jit
    def objective(params):
        return loss(eqx.combine(params, frozen), data)

    @jax.jit
    def check(params, direction, eps):
        numeric = (objective(jax.tree.map(lambda w, v: w + eps * v, params, direction))
                   - objective(jax.tree.map(lambda w, v: w - eps * v, params, direction))) / (2 * eps)
        grad = jax.grad(objective)(params)
        analytic = sum(jnp.vdot(g, v) for g, v in zip(jax.tree.leaves(grad), jax.tree.leaves(direction)))
        return numeric, analytic, [jnp.abs(g).max() for g in jax.tree.leaves(grad)]

    rng = np.random.default_rng(0)
    direction = jax.tree.map(lambda leaf: jnp.asarray(rng.normal(size=leaf.shape)), trainable)
    numeric, analytic, largest = check(trainable, direction, 1e-5)
    assert abs(float(numeric - analytic)) < 1e-6 * abs(float(analytic))
    assert all(float(g) > 0 for g in largest)


def test_a_seed_does_not_depend_on_the_rest_of_the_ensemble():
    first = train_markov_ensemble(_config(seeds=[0, 1]))
    second = train_markov_ensemble(_config(seeds=[1, 5]))
    assert not np.allclose(first["train_loss"][0], second["train_loss"][1])
    for name in OBSERVABLES:
        np.testing.assert_allclose(first[name][1], second[name][0], rtol=1e-10, atol=1e-14, err_msg=name)
