"""The Gram-matrix system (coocflow.model.gram) against the weight-space model it summarizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from coocflow.api import resolve_config
from coocflow.model import combine, logits, loss, loss_grad, partition, sample_losses, trainable_loss
from coocflow.model.gram import (GramState, gram_gd_step, gram_logits, gram_loss, gram_sample_losses, gram_velocity,
                                 grams_from_weights, score_and_value_gradients)
from coocflow.systems.eq1 import build_model, build_problem

from conftest import TINY

FIELDS = ("A", "P", "K", "V", "G", "s")
DISTINCT_D = 24
"""TINY's n = 12, L = 4 hold 20 random slots, so distinct tokens need d >= 23."""

CASES = [(m, tokens) for m in (3, 8, 40) for tokens in ("uniform", "distinct")]


def _setup(m=8, tokens="uniform", d=None, seed=3, **extra):
    d = d or (DISTINCT_D if tokens == "distinct" else TINY["data.d"])
    overrides = {**TINY, "model.m": m, "data.d": d, "data.random_tokens": tokens, **extra}
    config = resolve_config("paper", [f"{k}={v}" for k, v in overrides.items()], seed=seed)
    return build_model(config), build_problem(config).train


def _relative_error(got, want) -> float:
    """max |got - want| / max |want| over one array."""
    got, want = np.asarray(got), np.asarray(want)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def _assert_states_close(got: GramState, want: GramState, rtol: float):
    assert (got.m, got.m1) == (want.m, want.m1)
    errors = {name: _relative_error(getattr(got, name), getattr(want, name)) for name in FIELDS}
    assert max(errors.values()) <= rtol, errors


def _dense_velocity(state: GramState, M, c, trainable="all") -> dict:
    """The system of the module docstring with a dense M."""
    A, P, K, V, G, s, m1 = state.A, state.P, state.K, state.V, state.G, state.s, state.m1
    attention = trainable == "all"
    return {
        "A": -(K @ M + M @ P) if attention else 0 * A, "P": -(A.T @ M + M.T @ A) if attention else 0 * P,
        "K": -(A @ M.T + M @ A.T) if attention else 0 * K, "V": -(jnp.outer(c, G) + jnp.outer(G, c)),
        "G": -(m1 * V @ c + s * c), "s": -2 * m1 * G @ c,
    }


@pytest.mark.parametrize("m, tokens", CASES)
def test_gram_loss_equals_weight_space(m, tokens):
    model, data = _setup(m, tokens)
    state = grams_from_weights(model)
    np.testing.assert_allclose(gram_logits(state, data.tokens), logits(model, data.tokens), rtol=0, atol=1e-12)
    np.testing.assert_allclose(gram_sample_losses(state, data), sample_losses(model, data), rtol=0, atol=1e-12)
    np.testing.assert_allclose(gram_loss(state, data), loss(model, data), rtol=0, atol=1e-12)


@pytest.mark.parametrize("trainable", ["all", "mlp-value"])
@pytest.mark.parametrize("m, tokens", CASES)
def test_velocity_is_jvp_of_grams_along_weight_flow(m, tokens, trainable):
    """d/dt grams_from_weights(theta) along d(theta)/dt = -grad L equals gram_velocity."""
    model, data = _setup(m, tokens)
    params, frozen = partition(model, trainable)
    weight_velocity = jax.tree.map(jnp.negative, jax.grad(trainable_loss)(params, frozen, data))
    _, expected = jax.jvp(lambda p: grams_from_weights(combine(p, frozen)), (params,), (weight_velocity,))
    got = jax.jit(gram_velocity, static_argnums=2)(grams_from_weights(model), data, trainable)
    for name in FIELDS:
        want = getattr(expected, name)
        if trainable == "mlp-value" and name in ("A", "P", "K"):
            assert np.all(np.asarray(getattr(got, name)) == 0) and np.all(np.asarray(want) == 0), name
        else:
            assert _relative_error(getattr(got, name), want) <= 1e-10, name


@pytest.mark.parametrize("m, tokens", CASES)
def test_gd_on_grams_equals_gd_on_weights(m, tokens):
    """200 plain GD steps (lr 0.1) on the weights, then their Grams, equal 200 gram_gd_step's."""
    model, data = _setup(m, tokens)
    lr, steps = 0.1, 200

    def weight_step(_, weights):
        grads = loss_grad(weights, data)
        return jax.tree.map(lambda w, g: w if g is None else w - lr * g, weights, grads, is_leaf=lambda x: x is None)

    trained = jax.jit(lambda w: jax.lax.fori_loop(0, steps, weight_step, w))(model)
    evolved = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda _, x: gram_gd_step(x, data, lr), s))(
        grams_from_weights(model))
    assert float(loss(trained, data)) < float(loss(model, data))
    _assert_states_close(evolved, grams_from_weights(trained), 1e-9)


def test_gd_on_grams_equals_gd_on_weights_mlp_value():
    """With W_Q, W_K frozen the Gram step moves V, G, s only, and still matches the weights."""
    model, data = _setup(8, "uniform")
    lr, steps = 0.1, 200
    params, frozen = partition(model, "mlp-value")
    grad_fn = jax.grad(trainable_loss)

    def weight_step(_, p):
        return jax.tree.map(lambda w, g: w - lr * g, p, grad_fn(p, frozen, data))

    trained = combine(jax.jit(lambda p: jax.lax.fori_loop(0, steps, weight_step, p))(params), frozen)
    evolved = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda _, x: gram_gd_step(x, data, lr, "mlp-value"), s))(
        grams_from_weights(model))
    _assert_states_close(evolved, grams_from_weights(trained), 1e-9)


@pytest.mark.parametrize("tokens", ["uniform", "distinct"])
def test_sparse_products_equal_dense(tokens):
    model, data = _setup(8, tokens)
    state = grams_from_weights(model)
    d = state.A.shape[0]
    M_sparse, c = score_and_value_gradients(state, data)
    M = M_sparse.dense()
    dense_grads = jax.grad(gram_loss)(state, data)
    np.testing.assert_allclose(M, dense_grads.A, rtol=0, atol=1e-14)
    np.testing.assert_allclose(c, dense_grads.G, rtol=0, atol=1e-14)
    X = jax.random.normal(jax.random.PRNGKey(0), (d, d), dtype=jnp.float64)
    for got, want in [(M_sparse.left(X).as_rows(), M @ X), (M_sparse.left_transposed(X).as_rows(), M.T @ X),
                      (M_sparse.left_transposed(X.T).as_columns(), X @ M), (M_sparse.left(X.T).as_columns(), X @ M.T)]:
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)
    A, P, K, tokens = state.A, state.P, state.K, data.tokens
    products = {
        "K M": (M_sparse.left_transposed(K).as_columns(), K @ M), "M P": (M_sparse.left(P).as_rows(), M @ P),
        "A^T M": (M_sparse.left_transposed(A).as_columns(), A.T @ M),
        "M^T A": (M_sparse.left_transposed(A).as_rows(), M.T @ A),
        "A M^T": (M_sparse.left(A.T).as_columns(), A @ M.T), "M A^T": (M_sparse.left(A.T).as_rows(), M @ A.T),
        "M A^T M": (M_sparse.left_transposed_of_rows(M_sparse.left(A.T).transpose_rows(tokens)).as_columns(),
                    M @ A.T @ M),
        "M^T K M": (M_sparse.left_transposed_of_rows(M_sparse.left_transposed(K).transpose_rows(tokens)).as_rows(),
                    M.T @ K @ M),
        "M P M^T": (M_sparse.left_of_rows(M_sparse.left(P).transpose_rows(tokens)).as_rows(), M @ P @ M.T),
    }
    for name, (got, want) in products.items():
        assert _relative_error(got, want) <= 1e-13, name


def test_gd_step_second_order_terms_against_dense():
    """One gram_gd_step at a large step equals the dense formulas, h^2 terms included."""
    model, data = _setup(8, "distinct")
    state = grams_from_weights(model)
    M_sparse, c = score_and_value_gradients(state, data)
    M, (A, P, K, V, G, s), h, m1 = M_sparse.dense(), (state.A, state.P, state.K, state.V,
                                                                         state.G, state.s), 3.0, state.m1
    want = GramState(
        A=A - h * (K @ M + M @ P) + h**2 * M @ A.T @ M, P=P - h * (A.T @ M + M.T @ A) + h**2 * M.T @ K @ M,
        K=K - h * (A @ M.T + M @ A.T) + h**2 * M @ P @ M.T,
        V=V - h * (jnp.outer(c, G) + jnp.outer(G, c)) + h**2 * s * jnp.outer(c, c),
        G=G - h * (m1 * V @ c + s * c) + h**2 * m1 * c * (G @ c),
        s=s - 2 * h * m1 * G @ c + h**2 * m1**2 * c @ V @ c, m=state.m, m1=m1)
    _assert_states_close(gram_gd_step(state, data, h), want, 1e-13)


def test_large_vocabulary_velocity_matches_dense():
    """d = 200, distinct tokens (weight space reads scores from keys and queries here)."""
    model, data = _setup(8, "distinct", d=200)
    state = grams_from_weights(model)
    np.testing.assert_allclose(gram_loss(state, data), loss(model, data), rtol=0, atol=1e-12)
    got = jax.jit(gram_velocity)(state, data)
    M_sparse, c = score_and_value_gradients(state, data)
    want = _dense_velocity(state, M_sparse.dense(), c)
    for name in FIELDS:
        assert np.all(np.isfinite(np.asarray(getattr(got, name)))), name
        assert _relative_error(getattr(got, name), want[name]) <= 1e-12, name


def test_vmapped_over_seeds_equals_one_at_a_time():
    pairs = [_setup(8, "uniform", seed=seed) for seed in (3, 4)]
    states = [grams_from_weights(model) for model, _ in pairs]
    stacked_states = jax.tree.map(lambda *x: jnp.stack(x), *states)
    stacked_data = jax.tree.map(lambda *x: jnp.stack(x), *[data for _, data in pairs])
    velocities = jax.jit(jax.vmap(gram_velocity))(stacked_states, stacked_data)
    stepped = jax.jit(jax.vmap(gram_gd_step))(stacked_states, stacked_data, jnp.array([0.1, 0.2]))
    for index, ((_, data), state, lr) in enumerate(zip(pairs, states, (0.1, 0.2))):
        one_velocity, one_step = gram_velocity(state, data), gram_gd_step(state, data, lr)
        for name in FIELDS:
            np.testing.assert_allclose(getattr(velocities, name)[index], getattr(one_velocity, name), rtol=1e-13,
                                       atol=1e-15)
            np.testing.assert_allclose(getattr(stepped, name)[index], getattr(one_step, name), rtol=1e-13, atol=1e-15)


def test_unknown_trainable_set_is_refused():
    model, data = _setup()
    with pytest.raises(ValueError, match="trainable"):
        gram_velocity(grams_from_weights(model), data, "attention")


@pytest.mark.parametrize("d", [24, 200])
def test_token_rows_transpose(d):
    """TokenRows read as rows, as columns and as rows of the transpose, with n L above and below d."""
    model, data = _setup(8, "distinct", d=d)
    M, _ = score_and_value_gradients(grams_from_weights(model), data)
    rows = M.left(jax.random.normal(jax.random.PRNGKey(1), (d, d), dtype=jnp.float64))
    dense = rows.as_rows()
    assert int(np.sum(np.any(np.asarray(dense) != 0, axis=1))) <= len(np.unique(np.asarray(data.tokens)))
    np.testing.assert_array_equal(rows.as_columns(), dense.T)
    np.testing.assert_array_equal(rows.transpose_rows(data.tokens), dense.T[data.tokens])
