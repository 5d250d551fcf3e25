"""The recorded rates d_*_dt follow the flow the run trains, frozen parameters included."""

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.api import resolve_config
from coocflow.model import partition, trainable_loss
from coocflow.model.state import join
from coocflow.observables import observe
from coocflow.systems.eq1 import build_model, build_problem
from conftest import TINY


def _rates_and_step(trainable: str, h: float = 1e-7):
    """The rates at init, and the same quantities after one tiny GD step of the trained set,
    differenced: (X(h) - X(0)) / h approximates dX/dt along the flow that is trained."""
    config = resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, "train.trainable": trainable}.items()])
    model, problem = build_model(config), build_problem(config)
    moving, frozen = partition(model, trainable)
    grads = jax.grad(trainable_loss)(moving, frozen, problem.train)
    stepped = join(jax.tree.map(lambda w, g: w - h * g, moving, grads), frozen)
    before, after = observe(model, problem), observe(stepped, problem)
    return before, {k: (float(after[k]) - float(before[k])) / h for k in before}


def test_frozen_attention_rates_follow_the_trained_flow():
    rates, differenced = _rates_and_step("mlp-value")
    for name in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2"):
        assert float(rates[f"d_{name}_dt"]) == 0.0
    for name in ("loss", "G_mu1", "G_mu3", "V_mu1_mu2", "u_norm2"):
        exact, approx = float(rates[f"d_{name}_dt"]), differenced[name]
        assert abs(exact - approx) <= 1e-5 * max(abs(exact), 1e-8), (name, exact, approx)


def test_full_training_rates_move_the_scores():
    rates, differenced = _rates_and_step("all")
    exact, approx = float(rates["d_A_mu1_mu2_dt"]), differenced["A_mu1_mu2"]
    assert exact != 0.0 and abs(exact - approx) <= 1e-4 * abs(exact)
    assert np.isfinite(float(jnp.asarray(rates["d_loss_dt"])))
