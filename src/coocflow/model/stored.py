"""eq. (1)'s quantities from a run folder's state arrays, in NumPy (issue 21, item 3: storage reads
and writes the arrays, the model owns what they mean).

A loaded state (`storage.run_folder.read_state`) is a dict of arrays: the weights under the golden
keys, or the Grams (A, P, K, V, G, s, m, m1; N, Z, a when the neurons are resolved). These
functions read either kind, with NumPy alone, so the checks, premises and reports compute on a
finished run exactly as they always have (float64, no JAX tracing).
"""

from __future__ import annotations

import numpy as np


def score_matrix_of(state: dict[str, np.ndarray]) -> np.ndarray:
    """A = W_K^T W_Q from a loaded state (either kind), with the seed axis first if it has one."""
    if "A" in state:
        return np.asarray(state["A"])
    return np.swapaxes(state["W_K"], -1, -2) @ state["W_Q"]


def width_of(state: dict[str, np.ndarray]) -> int:
    """m, the width of W_Q, W_K, W_V, from a loaded state (either kind)."""
    return int(np.ravel(state["m"])[0]) if "m" in state else int(np.shape(state["W_Q"])[-2])


def mlp_of(state: dict[str, np.ndarray]) -> np.ndarray:
    """G over the vocabulary, (W^T a)^T W_V, from one seed's loaded state (either kind)."""
    if "G" in state:
        return np.asarray(state["G"])
    return (state["W"].T @ state["a"]) @ state["W_V"]


def grams_of(state: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A, K, Q (= the Gram-state key P), V (d x d), G (d,) and s = ||u||^2 of one seed's loaded
    state (either kind), in NumPy."""
    if "A" in state:
        return {"A": np.asarray(state["A"]), "K": np.asarray(state["K"]), "Q": np.asarray(state["P"]),
                "V": np.asarray(state["V"]), "G": np.asarray(state["G"]), "s": float(np.ravel(state["s"])[0])}
    W_Q, W_K, W_V = (np.asarray(state[k]) for k in ("W_Q", "W_K", "W_V"))
    u = np.asarray(state["W"]).T @ np.asarray(state["a"])
    return {"A": W_K.T @ W_Q, "K": W_K.T @ W_K, "Q": W_Q.T @ W_Q, "V": W_V.T @ W_V, "G": u @ W_V, "s": float(u @ u)}


def has_neurons(state: dict[str, np.ndarray]) -> bool:
    """Whether one seed's loaded state has the MLP's neurons: weights, or a Gram state that
    resolves them (model.neurons)."""
    return "W" in state or "N" in state


def neuron_grams(state: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(N, Z, a) of one seed's loaded state: N = W W^T (m1 x m1) the neurons' inner products
    <w_j, w_k>, Z = W W_V (m1 x d) their values w_j^T W_V mu, a the output signs; from the weights,
    or from a Gram state that resolves the neurons (model.neurons); None for one that does not."""
    if "N" in state:
        return np.asarray(state["N"]), np.asarray(state["Z"]), np.asarray(state["a"])
    if "W" not in state:
        return None
    W = np.asarray(state["W"])
    return W @ W.T, W @ np.asarray(state["W_V"]), np.asarray(state["a"])


def attention_of(state: dict[str, np.ndarray], tokens: np.ndarray) -> np.ndarray:
    """p[..., h, l]: the weight the query at position l gives the key at position h, a softmax
    over h of A[x_h, x_l] / sqrt(m) (model.transformer.attention), for one seed's loaded state and
    tokens of one sample (L,) or of several (n, L). NumPy only: readers of a run folder need no JAX."""
    tokens = np.asarray(tokens)
    scores = score_matrix_of(state)[tokens[..., :, None], tokens[..., None, :]] / np.sqrt(width_of(state))
    weights = np.exp(scores - scores.max(axis=-2, keepdims=True))
    return weights / weights.sum(axis=-2, keepdims=True)
