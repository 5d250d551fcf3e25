"""The model of the paper's eq. (1), computed from token indices (docs/definitions.md section 3).

`W @ onehot(x)` is the column `W[:, x]`, so every per-token quantity is a gather: keys and
queries are rows of `W_K.T` and `W_Q.T`, and the MLP is one vector over the vocabulary,
G = u^T W_V with u = W^T a, read at the tokens. Nothing dense in the vocabulary is formed on
the training path. Scores come either from A = W_K^T W_Q read at token pairs (small
vocabularies) or from per-token keys and queries (large ones); both are the same function.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from coocflow.data import Dataset
from coocflow.model.base import AbstractState


class Transformer(AbstractState):
    """Weights of eq. (1). `a` (the fixed +-1 readout) is held here but never trained. The final
    weight-space implementation of `AbstractState`: each method is the expression eq. (1) gives."""

    W_Q: jnp.ndarray  # (m, d)
    W_K: jnp.ndarray  # (m, d)
    W_V: jnp.ndarray  # (m, d)
    W: jnp.ndarray  # (m1, m)
    a: jnp.ndarray  # (m1,)

    @property
    def m(self) -> int:
        return self.W_Q.shape[0]

    @property
    def u(self) -> jnp.ndarray:
        """u = W^T a, so that G(x) = u^T W_V x. Written a @ W: XLA on CPU computes W.T @ a through a
        transposed operand, 55 us against 30 us for the paper's 256 x 128 W at XLA's default level (226
        against 68 us at the test suite's level), a quarter of a GD step of the paper's configuration; the
        sum is the same up to its rounding order (the paper's 30,000 GD steps move by 1.3e-13 of a column's
        scale at most)."""
        return self.a @ self.W

    def scores(self) -> jnp.ndarray:
        return score_matrix(self)

    def score_entry(self, key: int, query: int) -> jnp.ndarray:
        return self.W_K[:, key] @ self.W_Q[:, query]

    def mlp(self) -> jnp.ndarray:
        return token_mlp(self)

    def value_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.W_V[:, a] @ self.W_V[:, b]

    def key_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.W_K[:, a] @ self.W_K[:, b]

    def query_gram_entry(self, a: int, b: int) -> jnp.ndarray:
        return self.W_Q[:, a] @ self.W_Q[:, b]

    def value_gram(self) -> jnp.ndarray:
        return self.W_V.T @ self.W_V

    def key_gram(self) -> jnp.ndarray:
        return self.W_K.T @ self.W_K

    def query_gram(self) -> jnp.ndarray:
        return self.W_Q.T @ self.W_Q

    def u_norm2(self) -> jnp.ndarray:
        return self.u @ self.u

    def attention(self, tokens: jnp.ndarray) -> jnp.ndarray:
        return attention(self, tokens)

    def logits(self, tokens: jnp.ndarray) -> jnp.ndarray:
        return logits(self, tokens)

    def sample_losses(self, data: Dataset) -> jnp.ndarray:
        return sample_losses(self, data)

    def loss(self, data: Dataset) -> jnp.ndarray:
        return jnp.mean(sample_losses(self, data))

    @property
    def has_neurons(self) -> bool:
        return True

    def neuron_gram(self) -> jnp.ndarray:
        return self.W @ self.W.T

    def neuron_values_at(self, token: int) -> jnp.ndarray:
        return self.W @ self.W_V[:, token]

    def neuron_values(self) -> jnp.ndarray:
        return self.W @ self.W_V

    def readout(self) -> jnp.ndarray:
        return self.a

    def mlp_rate(self, velocity: "Transformer") -> jnp.ndarray:
        """G = W_V^T u, u = W^T a with a fixed: dG = dW_V^T u + W_V^T (dW^T a)."""
        return velocity.W_V.T @ self.u + self.W_V.T @ (velocity.W.T @ self.a)

    def neuron_value_rates(self, velocity: "Transformer") -> jnp.ndarray:
        """Z = W W_V: dZ = dW W_V + W dW_V."""
        return velocity.W @ self.W_V + self.W @ velocity.W_V

    def neuron_count(self) -> int:
        return self.a.shape[-1]

    def width(self) -> int:
        return int(self.W_Q.shape[-2])

    def vocabulary(self) -> int:
        return int(self.W_Q.shape[-1])

    @property
    def dtype(self):
        return self.W.dtype

    def split(self, trainable: str = "all") -> tuple["Transformer", "Transformer"]:
        return partition(self, trainable)

    def join(self, fixed: "Transformer | None") -> "Transformer":
        return combine(self, fixed)

    def velocity(self, fixed: "Transformer | None", data: Dataset, trainable: str = "all") -> "Transformer":
        """-grad L over the trainable weights."""
        return jax.tree.map(jnp.negative, jax.grad(trainable_loss)(self, fixed, data))

    def error_norm(self) -> jnp.ndarray:
        import optimistix  # lazy: only the flow's step-size control needs it; discrete training never imports it

        return optimistix.rms_norm(self)

    def arrays(self) -> dict[str, jnp.ndarray]:
        return {"W_Q": self.W_Q, "W_K": self.W_K, "W_V": self.W_V, "W": self.W, "a": self.a}


def trainable_spec(model: Transformer, trainable: str = "all") -> Transformer:
    """Filter spec for eqx.partition: W_Q, W_K, W_V, W train and `a` stays fixed (`all`, the
    paper); `mlp-value` also freezes W_Q and W_K, the frozen-attention ablation."""
    attention_trains = trainable == "all"
    return Transformer(W_Q=attention_trains, W_K=attention_trains, W_V=True, W=True, a=False)


def partition(model: Transformer, trainable: str = "all") -> tuple[Transformer, Transformer]:
    """Split into (trainable, frozen) pytrees; the trainable part is the state of the flow."""
    return eqx.partition(model, trainable_spec(model, trainable))


def combine(trainable: Transformer, frozen: Transformer) -> Transformer:
    return eqx.combine(trainable, frozen)


def token_mlp(model: Transformer) -> jnp.ndarray:
    """G over the whole vocabulary, shape (d,): G(x) = sum_j a_j w_j^T W_V x."""
    return model.u @ model.W_V


def score_matrix(model: Transformer) -> jnp.ndarray:
    """A = W_K^T W_Q (d x d); A[nu, mu] is the score of key token nu for query token mu."""
    return model.W_K.T @ model.W_Q


VOCABULARY_LEVEL_RATIO = 12
"""Scores are read from A = W_K^T W_Q (m d^2 flops, two matmuls back) while d^2 <= RATIO n L^2,
else from per-token keys and queries (n L^2 m flops, but a scatter of n L rows of width m back,
which XLA on CPU runs slowly). Measured gradient times for n = 60, L = 5, m = 128: d = 64,
844 us versus 1210 us (A wins); d = 128, 1097 versus 1219; d = 223, 2629 versus 1210; d = 892,
38386 versus 3474 (tokens win). See benchmarks/README.md."""


def uses_score_matrix(d: int, n: int, L: int) -> bool:
    """Whether `scores` reads A = W_K^T W_Q (small vocabularies) or per-token keys and queries."""
    return d * d <= VOCABULARY_LEVEL_RATIO * n * L * L


def scores(model: Transformer, tokens: jnp.ndarray) -> jnp.ndarray:
    """s[i, h, l] = k(x_h) . q(x_l) / sqrt(m) for key position h and query position l."""
    n, L = tokens.shape[-2:]
    if uses_score_matrix(model.W_Q.shape[1], n, L):
        A = score_matrix(model)
        return A[tokens[:, :, None], tokens[:, None, :]] / jnp.sqrt(model.m)
    keys = model.W_K.T[tokens]  # (n, L, m)
    queries = model.W_Q.T[tokens]  # (n, L, m)
    return jnp.einsum("nhk,nlk->nhl", keys, queries) / jnp.sqrt(model.m)


def attention(model: Transformer, tokens: jnp.ndarray) -> jnp.ndarray:
    """Attention p[i, h, l]: the weight the query at position l gives the key at position h
    (softmax over keys h of the scores)."""
    return jax.nn.softmax(scores(model, tokens), axis=1)


def logits(model: Transformer, tokens: jnp.ndarray) -> jnp.ndarray:
    """F(X) = sum over queries l and keys h of G(x_h) p_l[h] (eq. (1)); shape (n,)."""
    g_tokens = token_mlp(model)[tokens]  # (n, L)
    return jnp.einsum("nh,nhl->n", g_tokens, attention(model, tokens))


def logits_embedded(model: Transformer, X: jnp.ndarray) -> jnp.ndarray:
    """eq. (1) on dense inputs X (n, L, d) instead of one-hot tokens: equal to `logits` on
    one-hot rows, and defined for perturbed embeddings (the `noise` experiment)."""
    values = jnp.einsum("nld,d->nl", X, token_mlp(model))
    keys = jnp.einsum("md,nld->nlm", model.W_K, X)
    queries = jnp.einsum("md,nld->nlm", model.W_Q, X)
    p = jax.nn.softmax(jnp.einsum("nhk,nlk->nhl", keys, queries) / jnp.sqrt(model.m), axis=1)
    return jnp.einsum("nh,nhl->n", values, p)


def sample_losses(model: Transformer, data: Dataset) -> jnp.ndarray:
    """Per-sample logistic loss log(1 + exp(-y F))."""
    return jax.nn.softplus(-data.labels * logits(model, data.tokens))


def loss(model: Transformer, data: Dataset) -> jnp.ndarray:
    """Mean logistic loss over the samples (the objective of the flow)."""
    return jnp.mean(sample_losses(model, data))


def trainable_loss(trainable: Transformer, frozen: Transformer, data: Dataset) -> jnp.ndarray:
    """The loss as a function of the trainable part only: the potential of the flow."""
    return loss(combine(trainable, frozen), data)


def loss_grad(model: Transformer, data: Dataset) -> Transformer:
    """Gradient of the loss with respect to W_Q, W_K, W_V, W (`a` is None in the result)."""
    trainable, frozen = partition(model)
    return jax.grad(trainable_loss)(trainable, frozen, data)
