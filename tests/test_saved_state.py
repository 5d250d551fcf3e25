"""Saved states in the system's own type (`verify.paper.saved.SavedState`): decoded once by eq. (1)'s
codec, read through the state's methods, the same quantities from weights and from their Grams."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import TINY

from coocflow.api import resolve_config
from coocflow.model import Transformer
from coocflow.model.gram import GramState
from coocflow.verify.paper.saved import SavedState, seed_arrays, seed_states
from coocflow.systems.eq1 import build_model, build_problem


@pytest.fixture(scope="module")
def weights():
    config = resolve_config("paper", {**TINY, "model.m": 12, "model.m1": 6})
    model, problem = build_model(config), build_problem(config)
    data = problem.train
    arrays = {k: np.asarray(v) for k, v in model.arrays().items()}
    return SavedState.of({**arrays, "tokens": np.asarray(data.tokens), "labels": np.asarray(data.labels),
                          "groups": np.asarray(data.groups)})


def gram_image(saved: SavedState, neurons: bool) -> SavedState:
    """The state a Gram-space run with the same weights would save (with or without the neurons)."""
    w = saved.arrays()
    u = w["W"].T @ w["a"]
    grams = {"A": w["W_K"].T @ w["W_Q"], "P": w["W_Q"].T @ w["W_Q"], "K": w["W_K"].T @ w["W_K"],
             "V": w["W_V"].T @ w["W_V"], "G": u @ w["W_V"], "s": np.asarray(u @ u),
             "m": np.asarray(w["W_Q"].shape[0]), "m1": np.asarray(w["W"].shape[0])}
    if neurons:
        grams |= {"N": w["W"] @ w["W"].T, "Z": w["W"] @ w["W_V"], "a": w["a"]}
    return SavedState.of({**grams, "tokens": saved.tokens, "labels": saved.labels, "groups": saved.groups})


def test_a_saved_state_is_the_systems_type_with_numpy_leaves(weights):
    assert isinstance(weights.params, Transformer)
    assert all(isinstance(leaf, np.ndarray) and leaf.dtype == np.float64 for leaf in jax.tree.leaves(weights.params))
    assert isinstance(gram_image(weights, False).params, GramState)


def test_the_grams_are_numpys_products_of_the_weights(weights):
    """NumPy leaves: the Grams of a saved weight state are exactly the NumPy matrix products."""
    w = weights.arrays()
    u = w["W"].T @ w["a"]
    expected = {"A": w["W_K"].T @ w["W_Q"], "K": w["W_K"].T @ w["W_K"], "Q": w["W_Q"].T @ w["W_Q"],
                "V": w["W_V"].T @ w["W_V"], "G": u @ w["W_V"]}
    for key, value in expected.items():
        assert np.array_equal(weights.grams[key], value), key
    assert weights.grams["s"] == float(u @ u)
    N, Z, a = weights.neurons
    assert np.array_equal(N, w["W"] @ w["W"].T) and np.array_equal(Z, w["W"] @ w["W_V"]) and np.array_equal(a, w["a"])


@pytest.mark.parametrize("neurons", [False, True])
def test_weights_and_their_grams_read_the_same(weights, neurons):
    grams = gram_image(weights, neurons)
    for key in ("A", "K", "Q", "V", "G"):
        np.testing.assert_allclose(grams.grams[key], weights.grams[key], rtol=0, atol=0, err_msg=key)
    np.testing.assert_allclose(grams.training_attention, weights.training_attention, rtol=1e-12, atol=1e-15)
    assert (grams.width, grams.vocabulary, grams.neuron_count) == (weights.width, weights.vocabulary, weights.neuron_count)
    assert grams.has_neurons is neurons and (grams.neurons is None) is (not neurons)
    if neurons:
        for mine, theirs in zip(grams.neurons, weights.neurons):
            assert np.array_equal(mine, theirs)


def test_attention_is_the_models_and_one_sample_reads_as_a_row_of_all(weights):
    model = jax.tree.map(jnp.asarray, weights.params)
    np.testing.assert_array_equal(weights.training_attention, np.asarray(model.attention(jnp.asarray(weights.tokens))))
    np.testing.assert_array_equal(weights.attention(weights.tokens[3]), weights.training_attention[3])
    assert np.allclose(weights.training_attention.sum(axis=1), 1.0)


def test_an_ensembles_arrays_split_by_seed_and_round_trip(weights):
    arrays = weights.arrays()
    stacked = {k: np.stack([v, v + (1.0 if k.startswith("W") else 0)]) for k, v in arrays.items()}
    first, second = seed_states(stacked)
    assert all(np.array_equal(first.arrays()[k], arrays[k]) for k in arrays)
    assert np.array_equal(second.arrays()["W_Q"], arrays["W_Q"] + 1.0)
    gram = gram_image(weights, True).arrays()
    shared = seed_arrays({**{k: np.stack([v, v]) for k, v in gram.items() if k not in ("m", "m1")},
                          "m": gram["m"], "m1": gram["m1"]})
    assert [int(s["m"]) for s in shared] == [weights.width] * 2
    again = SavedState.of({**arrays, "t": np.asarray(0.25)})
    assert again.t == 0.25 and again.arrays()["t"] == 0.25
