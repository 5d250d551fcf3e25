"""One seed's saved state of an eq. (1) run, in the system's own type.

A run folder's state files (state_init.npz, state_t1.npz, state_final.npz, a snapshot) are
decoded once, by eq. (1)'s codec (`systems.eq1.state_from_arrays`), into a `Transformer` or a
`GramState`; the checks, premises, scaling fits and reports then read every quantity through the
state's own methods (`model.base.AbstractState`), never by sniffing array names. The leaves stay
NumPy, so the Grams, MLP outputs and neurons are the NumPy products a folder's reader always
computed; attention is the model's own (JAX) function.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

import jax.numpy as jnp
import numpy as np

from coocflow.data import Dataset
from coocflow.model.state import State
from coocflow.systems.eq1 import state_from_arrays

DATA_KEYS = ("tokens", "labels", "groups")
SHARED_KEYS = ("m", "m1")
"""A Gram state's widths: scalars shared by the seeds of an ensemble."""


@dataclass(frozen=True, eq=False)
class SavedState:
    """One seed's parameters (weights or Grams), the training data saved with them, and the flow
    time the state was taken at (None for the initial and final states, which carry none)."""

    params: State
    tokens: np.ndarray
    labels: np.ndarray
    groups: np.ndarray
    t: float | None = None

    @classmethod
    def of(cls, arrays: Mapping[str, np.ndarray]) -> "SavedState":
        """Decode one seed's arrays of a state file (`storage.run_folder.read_state`)."""
        t = float(np.ravel(arrays["t"])[0]) if "t" in arrays else None
        return cls(state_from_arrays(dict(arrays), leaves="numpy"), *(np.asarray(arrays[k]) for k in DATA_KEYS), t=t)

    @cached_property
    def grams(self) -> dict[str, np.ndarray | float]:
        """A = W_K^T W_Q, K = W_K^T W_K, Q = W_Q^T W_Q, V = W_V^T W_V (d x d), G = W_V^T u (d,) and
        s = ||u||^2 (u = W^T a): the quantities the loss and the theory's Grams read."""
        p = self.params
        return {"A": _numpy(p.scores()), "K": _numpy(p.key_gram()), "Q": _numpy(p.query_gram()),
                "V": _numpy(p.value_gram()), "G": _numpy(p.mlp()), "s": float(p.u_norm2())}

    @property
    def scores(self) -> np.ndarray:
        """A = W_K^T W_Q (d x d): key token first, query token second."""
        return self.grams["A"]

    @property
    def mlp(self) -> np.ndarray:
        """G over the vocabulary (d,)."""
        return self.grams["G"]

    @property
    def has_neurons(self) -> bool:
        """Whether the MLP's neurons can be read: weights, or a Gram state with model.neurons."""
        return self.params.has_neurons

    @cached_property
    def neurons(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(N, Z, a): N = W W^T the neurons' inner products, Z = W W_V their values, a the output
        signs; None where the state does not resolve the neurons."""
        if not self.has_neurons:
            return None
        p = self.params
        return _numpy(p.neuron_gram()), _numpy(p.neuron_values()), _numpy(p.readout())

    @property
    def width(self) -> int:
        return self.params.width()

    @property
    def vocabulary(self) -> int:
        return self.params.vocabulary()

    @property
    def neuron_count(self) -> int:
        return int(np.ravel(np.asarray(self.params.neuron_count()))[0])

    def attention(self, tokens: np.ndarray) -> np.ndarray:
        """p[..., h, l] for the tokens of one sample (L,) or of several (n, L): the model's attention."""
        tokens = np.asarray(tokens)
        if tokens.ndim == 1:
            return self.attention(tokens[None])[0]
        if tokens.shape == self.tokens.shape and np.array_equal(tokens, self.tokens):
            return self.training_attention
        return _numpy(self.params.attention(jnp.asarray(tokens)))

    @cached_property
    def training_attention(self) -> np.ndarray:
        """p on the training tokens (n, L, L), computed once."""
        return _numpy(self.params.attention(jnp.asarray(self.tokens)))

    @cached_property
    def dataset(self) -> Dataset:
        """The training set as the model's `Dataset` (JAX, float64 labels)."""
        return Dataset(jnp.asarray(self.tokens), jnp.asarray(self.labels, dtype=jnp.float64), jnp.asarray(self.groups))

    def arrays(self) -> dict[str, np.ndarray]:
        """The state's arrays under the run folder's keys, the data and `t` included."""
        out = {**{k: np.asarray(v) for k, v in self.params.arrays().items()},
               "tokens": self.tokens, "labels": self.labels, "groups": self.groups}
        return out if self.t is None else {**out, "t": np.asarray(self.t)}


def _numpy(x) -> np.ndarray:
    return np.asarray(x)


def seed_arrays(state: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """One dict of arrays per seed: an ensemble's arrays carry a leading seed axis (tokens are
    (S, n, L)); the widths m, m1 of a Gram state are shared scalars."""
    tokens = np.asarray(state["tokens"])
    if tokens.ndim == 2:
        return [{k: np.asarray(v) for k, v in state.items()}]
    count = tokens.shape[0]
    return [{k: (np.asarray(v)[s] if np.ndim(v) > 0 and np.shape(v)[0] == count and k not in SHARED_KEYS
                 else np.asarray(v)) for k, v in state.items()} for s in range(count)]


def seed_states(state: Mapping[str, np.ndarray]) -> list[SavedState]:
    """Each seed's `SavedState` of a state file."""
    return [SavedState.of(arrays) for arrays in seed_arrays(state)]
