"""What every state of eq. (1) answers, whichever space it lives in.

`AbstractState` is the abstract base (Equinox's pattern: abstract methods here, final
implementations below it) of the two states a run integrates: the weights (`Transformer`) and
their Grams (`GramState`, `model.space = "gram"`). Observables, integrators, the checks and the
run folder read a state only through these methods (or the functions of `model.state` that call
them), so a quantity is computed one way per space, by the class that owns it, instead of by
`is_gram` branches.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax.numpy as jnp

from coocflow.data import Dataset


class AbstractState(eqx.Module):
    """A model of eq. (1): its scores, MLP outputs, Grams, attention, loss and flow."""

    @abc.abstractmethod
    def scores(self) -> jnp.ndarray:
        """A = W_K^T W_Q (d x d): key token first, query token second."""

    @abc.abstractmethod
    def score_entry(self, key: int, query: int) -> jnp.ndarray:
        """A[key, query] = key^T W_K^T W_Q query."""

    @abc.abstractmethod
    def mlp(self) -> jnp.ndarray:
        """G over the vocabulary, G(x) = u^T W_V x, u = W^T a."""

    @abc.abstractmethod
    def value_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        """a^T W_V^T W_V b."""

    @abc.abstractmethod
    def key_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        """a^T W_K^T W_K b."""

    @abc.abstractmethod
    def query_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        """a^T W_Q^T W_Q b."""

    @abc.abstractmethod
    def value_gram(self) -> jnp.ndarray:
        """V = W_V^T W_V (d x d)."""

    @abc.abstractmethod
    def key_gram(self) -> jnp.ndarray:
        """K = W_K^T W_K (d x d)."""

    @abc.abstractmethod
    def query_gram(self) -> jnp.ndarray:
        """Q = W_Q^T W_Q (d x d), the Gram state's P."""

    @abc.abstractmethod
    def u_norm2(self) -> jnp.ndarray:
        """s = ||u||^2, u = W^T a (eq. (5))."""

    @abc.abstractmethod
    def attention(self, tokens: jnp.ndarray) -> jnp.ndarray:
        """p[i, h, l]: the weight the query at position l gives the key at position h."""

    @abc.abstractmethod
    def logits(self, tokens: jnp.ndarray) -> jnp.ndarray:
        """F(X) of eq. (1)."""

    @abc.abstractmethod
    def sample_losses(self, data: Dataset) -> jnp.ndarray:
        """Per-sample logistic loss log(1 + exp(-y F))."""

    @abc.abstractmethod
    def loss(self, data: Dataset) -> jnp.ndarray:
        """Mean logistic loss, the potential of the flow."""

    @property
    @abc.abstractmethod
    def has_neurons(self) -> bool:
        """Whether the neurons' inner products and values can be read (always from weights)."""

    @abc.abstractmethod
    def neuron_gram(self) -> jnp.ndarray:
        """N = W W^T (m1 x m1): the neurons' inner products <w_j, w_k>."""

    @abc.abstractmethod
    def neuron_values_at(self, token: int) -> jnp.ndarray:
        """w_j^T W_V token for every neuron j, (m1,): a column of Z = W W_V."""

    @abc.abstractmethod
    def neuron_values(self) -> jnp.ndarray:
        """Z = W W_V (m1 x d): Z[j, mu] = w_j^T W_V mu, the neurons' values."""

    @abc.abstractmethod
    def readout(self) -> jnp.ndarray | None:
        """a (m1,), the fixed +-1 output weights (None where the neurons are not resolved)."""

    @abc.abstractmethod
    def mlp_rate(self, velocity: "AbstractState") -> jnp.ndarray:
        """dG/dt over the vocabulary (d,) along `velocity`, the time derivative of this state's
        moving part (`velocity`)."""

    @abc.abstractmethod
    def neuron_value_rates(self, velocity: "AbstractState") -> jnp.ndarray:
        """dZ/dt (m1 x d) along `velocity`: the rates of the neurons' values w_j^T W_V mu."""

    @abc.abstractmethod
    def neuron_count(self) -> int | jnp.ndarray:
        """m1, the neurons of the MLP (a^T a): an int where it is a shape (weights), a scalar
        array where it is a traced value (Grams)."""

    @abc.abstractmethod
    def width(self) -> int:
        """m, the width of W_Q, W_K and W_V (host side: not under a trace)."""

    @abc.abstractmethod
    def vocabulary(self) -> int:
        """d, the number of tokens."""

    @property
    @abc.abstractmethod
    def dtype(self):
        """The floating-point type the state is held in."""

    @abc.abstractmethod
    def split(self, trainable: str = "all") -> tuple["AbstractState", "AbstractState | None"]:
        """(moving part, fixed part) under `trainable` (`all` or `mlp-value`)."""

    @abc.abstractmethod
    def join(self, fixed: "AbstractState | None") -> "AbstractState":
        """The whole state from this moving part and the fixed part `split` gave."""

    @abc.abstractmethod
    def velocity(self, fixed: "AbstractState | None", data: Dataset, trainable: str = "all") -> "AbstractState":
        """d(this moving part)/dt along the gradient flow (Appendix C)."""

    @abc.abstractmethod
    def error_norm(self) -> jnp.ndarray:
        """The RMS norm the flow's step control takes of a step's scaled error of this shape."""

    @abc.abstractmethod
    def arrays(self) -> dict[str, jnp.ndarray]:
        """The state's arrays under the run folder's keys (golden keys for weights, Gram keys for Grams)."""
