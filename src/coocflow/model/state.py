"""One interface to the two states a run can integrate: the weights (`Transformer`) and their
Grams (`GramState`, model.space = "gram").

Observables, integrators and the run folder read a state only through these functions, so every
quantity that is a function of (A, G, P, K, V, s) is computed the same way in both spaces; the
weight-space expressions are exactly the ones used before the Gram space existed (no change of
numbers). Quantities that need individual neurons (the rows w_j of W) exist in weight space and
in a Gram state that resolves them (`model.neurons`: N = W W^T, Z = W W_V).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optimistix

from coocflow.data import Dataset
from coocflow.model.gram import GramState, gram_loss, gram_sample_losses, gram_velocity
from coocflow.model.transformer import (Transformer, attention, combine, logits, partition, sample_losses,
                                        score_matrix, token_mlp, trainable_loss)

State = Transformer | GramState


def is_gram(state: State) -> bool:
    return isinstance(state, GramState)


def has_neurons(state: State) -> bool:
    """Whether the neurons' inner products and values can be read: always from weights, from a Gram
    state only when it resolves them (`model.neurons`)."""
    return not is_gram(state) or state.has_neurons


def neuron_gram_of(state: State) -> jnp.ndarray:
    """N = W W^T (m1 x m1): the neurons' inner products <w_j, w_k>."""
    return state.N if is_gram(state) else state.W @ state.W.T


def neuron_values_at(state: State, token: int) -> jnp.ndarray:
    """w_j^T W_V token for every neuron j, (m1,): a column of Z = W W_V."""
    return state.Z[:, token] if is_gram(state) else state.W @ state.W_V[:, token]


def dtype_of(state: State):
    return state.A.dtype if is_gram(state) else state.W.dtype


def m1_of(state: State) -> int:
    """Neurons of the MLP (a^T a)."""
    return state.m1 if is_gram(state) else state.a.shape[-1]


def scores_of(state: State) -> jnp.ndarray:
    """A = W_K^T W_Q (d x d): key token first, query token second."""
    return state.A if is_gram(state) else score_matrix(state)


def score_entry(state: State, key: int, query: int) -> jnp.ndarray:
    """A[key, query] = key^T W_K^T W_Q query."""
    return state.A[key, query] if is_gram(state) else state.W_K[:, key] @ state.W_Q[:, query]


def mlp_of(state: State) -> jnp.ndarray:
    """G over the vocabulary, G(x) = u^T W_V x."""
    return state.G if is_gram(state) else token_mlp(state)


def value_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    """a^T W_V^T W_V b."""
    return state.V[a, b] if is_gram(state) else state.W_V[:, a] @ state.W_V[:, b]


def key_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    """a^T W_K^T W_K b."""
    return state.K[a, b] if is_gram(state) else state.W_K[:, a] @ state.W_K[:, b]


def query_gram_entry(state: State, a: int, b: int) -> jnp.ndarray:
    """a^T W_Q^T W_Q b."""
    return state.P[a, b] if is_gram(state) else state.W_Q[:, a] @ state.W_Q[:, b]


def u_norm2_of(state: State) -> jnp.ndarray:
    """s = ||u||^2, u = W^T a (eq. (5))."""
    return state.s if is_gram(state) else state.u @ state.u


def attention_of(state: State, tokens: jnp.ndarray) -> jnp.ndarray:
    """p[i, h, l]: the weight the query at position l gives the key at position h."""
    if not is_gram(state):
        return attention(state, tokens)
    raw = state.A[tokens[:, :, None], tokens[:, None, :]]
    return jax.nn.softmax(raw / jnp.sqrt(state.m), axis=1)


def logits_of(state: State, tokens: jnp.ndarray) -> jnp.ndarray:
    """F(X) of eq. (1)."""
    if not is_gram(state):
        return logits(state, tokens)
    return jnp.einsum("nh,nhl->n", state.G[tokens], attention_of(state, tokens))


def sample_losses_of(state: State, data: Dataset) -> jnp.ndarray:
    """Per-sample logistic loss."""
    return gram_sample_losses(state, data) if is_gram(state) else sample_losses(state, data)


def split(state: State, trainable: str = "all"):
    """(moving part, fixed part): the weights' `partition`; a Gram state moves as a whole (which
    of its Grams stay fixed under `trainable` is the velocity's business), with no fixed part."""
    return (state, None) if is_gram(state) else partition(state, trainable)


def join(moving, fixed) -> State:
    """The inverse of `split`."""
    return moving if is_gram(moving) else combine(moving, fixed)


def velocity(moving, fixed, data: Dataset, trainable: str = "all"):
    """The flow's right-hand side at `moving`: -grad L for weights (over the trainable part),
    the closed Gram system for Grams (Appendix C)."""
    if is_gram(moving):
        return gram_velocity(moving, data, trainable)
    return jax.tree.map(jnp.negative, jax.grad(trainable_loss)(moving, fixed, data))


def step_error_norm(error) -> jnp.ndarray:
    """The norm the flow's step-size control takes of a step's scaled error (Diffrax's default RMS
    norm) over the integrated arrays, leaving a Gram state's neurons N, Z, a out: resolving them
    (`model.neurons`) then changes no step, so the Grams are computed exactly as without them, and
    N, Z follow at the accuracy those steps give (tests/test_neuron_gram.py measures it). The width
    m, a constant leaf of the state, is left out too."""
    return optimistix.rms_norm(error.grams() if is_gram(error) else error)


def loss_of(state: State, data: Dataset) -> jnp.ndarray:
    return gram_loss(state, data) if is_gram(state) else jnp.mean(sample_losses(state, data))
