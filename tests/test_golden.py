"""The definition of correct: the model reproduces ../shared/golden/*.npz to 1e-10."""

import jax.numpy as jnp
import numpy as np
import pytest

from coocflow.data import Dataset
from coocflow.config import TrainConfig
from coocflow.flow import integrate_discrete
from coocflow.model import Transformer, loss, loss_grad, logits, sample_losses, score_matrix, token_mlp
from coocflow.model import transformer as transformer_module
from coocflow.observables import Problem
from coocflow.runner import stack, unstack

TOL = 1e-10


def golden_model(g) -> Transformer:
    return Transformer(W_Q=jnp.asarray(g["W_Q"]), W_K=jnp.asarray(g["W_K"]), W_V=jnp.asarray(g["W_V"]),
                       W=jnp.asarray(g["W"]), a=jnp.asarray(g["a"]))


def golden_data(g) -> Dataset:
    return Dataset(jnp.asarray(g["tokens"]), jnp.asarray(g["labels"]), jnp.asarray(g["groups"]))


@pytest.fixture(params=["vocabulary", "token"])
def formulation(request, monkeypatch):
    """Both ways of computing the scores must match the golden values."""
    ratio = 0 if request.param == "token" else 10**9
    monkeypatch.setattr(transformer_module, "VOCABULARY_LEVEL_RATIO", ratio)
    return request.param


def test_golden_forward(golden, formulation):
    model, data = golden_model(golden), golden_data(golden)
    np.testing.assert_allclose(logits(model, data.tokens), golden["expected_F"], rtol=0, atol=TOL)
    np.testing.assert_allclose(sample_losses(model, data), golden["expected_sample_loss"], rtol=0, atol=TOL)
    np.testing.assert_allclose(loss(model, data), golden["expected_loss"], rtol=0, atol=TOL)
    np.testing.assert_allclose(score_matrix(model), golden["expected_score_matrix"], rtol=0, atol=TOL)
    np.testing.assert_allclose(token_mlp(model), golden["expected_G"], rtol=0, atol=TOL)


def test_golden_gradients(golden, formulation):
    grads = loss_grad(golden_model(golden), golden_data(golden))
    for name in ("W_Q", "W_K", "W_V", "W"):
        np.testing.assert_allclose(getattr(grads, name), golden[f"expected_grad_{name}"], rtol=0, atol=TOL,
                                   err_msg=name)
    assert grads.a is None, "the readout a must not be trained"


def test_golden_gradient_descent(golden, formulation):
    data = golden_data(golden)
    steps = int(golden["gd_steps"])
    train = TrainConfig(method="gd", lr=float(golden["gd_lr"]), steps=steps)
    trajectory = integrate_discrete(stack([golden_model(golden)]), stack([Problem(data, data)]),
                                    np.array([0, steps]), train, seeds=(0,), chunks=1)
    final = unstack(trajectory.final, 0)
    for name in ("W_Q", "W_K", "W_V", "W"):
        np.testing.assert_allclose(getattr(final, name), golden[f"expected_after_gd_{name}"],
                                   rtol=0, atol=TOL, err_msg=name)
    np.testing.assert_allclose(trajectory.series["loss"][0, -1], golden["expected_loss_after_gd"], rtol=0, atol=TOL)
    np.testing.assert_allclose(trajectory.series["loss"][0, 0], golden["expected_loss"], rtol=0, atol=TOL)
    np.testing.assert_array_equal(np.asarray(final.a), golden["a"])
