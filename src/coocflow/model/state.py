"""The functions observables, integrators and the run folder call on a state of eq. (1): each is
the method of `model.base.AbstractState` that the state's own class implements, the weights
(`Transformer`) or their Grams (`GramState`, model.space = "gram"), written as a function so that
it can be named in an observable or mapped over seeds. The weight-space expressions are exactly
the ones used before the Gram space existed (no change of numbers). Quantities that need
individual neurons (the rows w_j of W) exist in weight space and in a Gram state that resolves
them (`model.neurons`: N = W W^T, Z = W W_V).
"""

from __future__ import annotations

import jax.numpy as jnp

from coocflow.data import Dataset
from coocflow.model.base import AbstractState

State = AbstractState
"""Either final implementation: `Transformer` (weights) or `GramState` (their Grams)."""


def has_neurons(state: State) -> bool:
    """Whether the neurons' inner products and values can be read: always from weights, from a Gram
    state only when it resolves them (`model.neurons`)."""
    return state.has_neurons


def neuron_gram_of(state: State) -> jnp.ndarray:
    return state.neuron_gram()


def neuron_values_at(state: State, token: int) -> jnp.ndarray:
    return state.neuron_values_at(token)


def dtype_of(state: State):
    return state.dtype


def m1_of(state: State) -> int | jnp.ndarray:
    return state.neuron_count()


def scores_of(state: State) -> jnp.ndarray:
    return state.scores()


def score_entry(state: State, key: int, query: int) -> jnp.ndarray:
    return state.score_entry(key, query)


def mlp_of(state: State) -> jnp.ndarray:
    return state.mlp()


def value_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    return state.value_gram_entry(a, b)


def key_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    return state.key_gram_entry(a, b)


def query_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    return state.query_gram_entry(a, b)


def u_norm2_of(state: State) -> jnp.ndarray:
    return state.u_norm2()


def attention_of(state: State, tokens: jnp.ndarray) -> jnp.ndarray:
    return state.attention(tokens)


def logits_of(state: State, tokens: jnp.ndarray) -> jnp.ndarray:
    return state.logits(tokens)


def sample_losses_of(state: State, data: Dataset) -> jnp.ndarray:
    return state.sample_losses(data)


def split(state: State, trainable: str = "all"):
    """(moving part, fixed part); a Gram state moves as a whole, with no fixed part."""
    return state.split(trainable)


def join(moving, fixed) -> State:
    """The inverse of `split`."""
    return moving.join(fixed)


def velocity(moving, fixed, data: Dataset, trainable: str = "all"):
    """The flow's right-hand side at `moving`: -grad L for weights (over the trainable part),
    the closed Gram system for Grams (Appendix C)."""
    return moving.velocity(fixed, data, trainable)

