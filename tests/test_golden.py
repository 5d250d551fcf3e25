"""The definition of correct: the model reproduces the golden files tests/golden/*.npz to 1e-10.

What the files hold is described in docs/definitions.md ("Golden files"). They were copied
byte for byte from the project's reference material; where that material is present (a folder
named by the environment variable COOCFLOW_SHARED, by default `shared` beside the checkout),
`test_golden_files_equal_the_reference_copy` checks the copy has not drifted.
"""

import os
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from conftest import GOLDEN_DIR, GOLDEN_NAMES, REPO

from coocflow.config import Config, OptimizerConfig, TrainConfig
from coocflow.data import Dataset
from coocflow.flow import integrate_discrete
from coocflow.flow.discrete import Optimizer
from coocflow.model import Transformer, logits, loss, loss_grad, sample_losses, score_matrix, token_mlp
from coocflow.model import transformer as transformer_module
from coocflow.run.eq1 import stack, unstack
from coocflow.systems.eq1 import Eq1System

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
    optimizer = OptimizerConfig(lr=float(golden["gd_lr"]))
    config = Config(train=TrainConfig(method="gd", steps=steps), optimizer=optimizer)
    trajectory = integrate_discrete(Eq1System.from_config(config), Optimizer.of("gd", optimizer, jnp.float64),
                                    np.array([0, steps]), optimizer.lr, (0,), chunks=1,
                                    ensemble=(stack([golden_model(golden)]), stack([data]), stack([data])))
    final = unstack(trajectory.final, 0)
    for name in ("W_Q", "W_K", "W_V", "W"):
        np.testing.assert_allclose(getattr(final, name), golden[f"expected_after_gd_{name}"],
                                   rtol=0, atol=TOL, err_msg=name)
    np.testing.assert_allclose(trajectory.series["loss"][0, -1], golden["expected_loss_after_gd"], rtol=0, atol=TOL)
    np.testing.assert_allclose(trajectory.series["loss"][0, 0], golden["expected_loss"], rtol=0, atol=TOL)
    np.testing.assert_array_equal(np.asarray(final.a), golden["a"])


def reference_golden_dir() -> Path:
    """The reference copy's `golden` folder: inside the folder COOCFLOW_SHARED names, else inside
    a folder `shared` beside the checkout (present in the project's own workspace, absent in a
    user's clone)."""
    return Path(os.environ.get("COOCFLOW_SHARED", REPO.parent / "shared")) / "golden"


def test_golden_files_are_in_the_repository():
    """The golden tests need nothing outside the repository."""
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.npz")) == sorted(GOLDEN_NAMES)


def test_golden_files_equal_the_reference_copy():
    """The in-repository golden files are byte-identical to the reference copy they came from."""
    reference = reference_golden_dir()
    if not reference.is_dir():
        pytest.skip(f"no reference golden folder at {reference} (outside the project's workspace the "
                    f"in-repository copy tests/golden/ is the reference; set COOCFLOW_SHARED to compare)")
    assert sorted(p.name for p in reference.glob("*.npz")) == sorted(p.name for p in GOLDEN_DIR.glob("*.npz"))
    for path in sorted(reference.glob("*.npz")):
        assert (GOLDEN_DIR / path.name).read_bytes() == path.read_bytes(), \
            f"tests/golden/{path.name} differs from {path}"
