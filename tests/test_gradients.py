"""Gradients against central finite differences, and the exact identity Eq. (5)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.api import resolve_config
from coocflow.model import combine, loss, loss_grad, partition, trainable_loss
from coocflow.observables import OBSERVABLES
from coocflow.observables.registry import margins, loss_weights
from coocflow.systems.eq1 import build_model, build_problem

from conftest import TINY


def _tiny(**extra):
    overrides = [f"{k}={v}" for k, v in {**TINY, **extra}.items()]
    return resolve_config("paper", overrides, seed=3)


def test_gradient_matches_finite_differences():
    config = _tiny()
    model, problem = build_model(config), build_problem(config)
    grads = loss_grad(model, problem.train)
    rng = np.random.default_rng(0)
    eps = 1e-6
    for name in ("W_Q", "W_K", "W_V", "W"):
        weights = np.asarray(getattr(model, name))
        for _ in range(6):
            index = tuple(rng.integers(0, s) for s in weights.shape)
            plus, minus = weights.copy(), weights.copy()
            plus[index] += eps
            minus[index] -= eps
            up = loss(eqx.tree_at(lambda m: getattr(m, name), model, jnp.asarray(plus)), problem.train)
            down = loss(eqx.tree_at(lambda m: getattr(m, name), model, jnp.asarray(minus)), problem.train)
            numeric = (up - down) / (2 * eps)
            analytic = np.asarray(getattr(grads, name))[index]
            assert abs(numeric - analytic) <= 1e-7 * max(1.0, abs(analytic)), (name, index, numeric, analytic)


def test_eq5_norm_of_u_exact_along_flow():
    """d/dt ||u||^2 = (2 m1 / n) sum_i g_i y_i F_i (Eq. (5)), via a JVP along -grad L."""
    config = _tiny(**{"init.scheme": "theory"})
    model, problem = build_model(config), build_problem(config)
    trainable, frozen = partition(model)
    velocity = jax.tree.map(lambda g: -g, jax.grad(trainable_loss)(trainable, frozen, problem.train))

    def u_norm2(params):
        return OBSERVABLES["u_norm2"].fn(combine(params, frozen), problem)

    _, rate = jax.jvp(u_norm2, (trainable,), (velocity,))
    g, yF = loss_weights(model, problem.train), margins(model, problem.train)
    predicted = 2 * config.model.m1 / config.data.n * jnp.sum(g * yF)
    np.testing.assert_allclose(rate, predicted, rtol=1e-12)


def test_dense_embedding_logits_equal_token_logits():
    """The noise experiment's dense-input model is eq. (1) itself on one-hot rows."""
    import jax

    from coocflow.model import logits, logits_embedded

    config = _tiny()
    model, data = build_model(config), build_problem(config).train
    dense = jax.nn.one_hot(data.tokens, config.data.d, dtype=model.W.dtype)
    np.testing.assert_allclose(logits_embedded(model, dense), logits(model, data.tokens), rtol=0, atol=1e-13)


def test_score_formulations_agree_at_a_large_vocabulary(monkeypatch):
    """Above the crossover the scores come from per-token keys and queries; both give one loss."""
    from coocflow.model import loss
    from coocflow.model import transformer as transformer_module

    config = _tiny(**{"data.d": 200})
    model, data = build_model(config), build_problem(config).train
    assert not transformer_module.uses_score_matrix(200, data.n, config.data.L)
    by_tokens = loss(model, data)
    monkeypatch.setattr(transformer_module, "VOCABULARY_LEVEL_RATIO", 10**9)
    np.testing.assert_allclose(loss(model, data), by_tokens, rtol=1e-13)
