"""The Markov system: next-token prediction on a random Markov chain with the one-layer model of
eq. (1), as an `AbstractSystem` (the `markov` study, experiments/markov.py, reads it).

The model keeps eq. (1)'s attention and MLP but reads out a vocabulary: the query is the last
position only, h = sum_k W_V x_k softmax_k(x_k^T W_K^T W_Q x_L / sqrt(m)), logits = B W h, with
W_Q, W_K, W_V and W trained and B (d x m1, fixed random +-1/sqrt(m1)) playing the role of the
fixed a. Without positions, the attention output depends on a context only through its token
counts and x_L, so the model is computed from those ((n, d) matmuls); a test checks it against
eq. (1) written out with one-hot tokens.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from coocflow.config import Config, DataConfig, InitConfig, ModelConfig
from coocflow.data.markov import (
    DIRICHLET_ALPHA,
    MarkovDataset,
    bayes_accuracy,
    bayes_loss,
    entropy_rate,
    make_markov_sets,
    stationary_entropy,
)
from coocflow.errors import ConfigError
from coocflow.model import init_model
from coocflow.systems.base import AbstractSystem
from coocflow.systems.cost import RunCost, weight_space_cost


class MarkovTransformer(eqx.Module):
    """Weights of the next-token model; `B` (the vocabulary readout) is held but never trained."""

    W_Q: jnp.ndarray  # (m, d)
    W_K: jnp.ndarray  # (m, d)
    W_V: jnp.ndarray  # (m, d)
    W: jnp.ndarray  # (m1, m)
    B: jnp.ndarray  # (d, m1)

    @property
    def m(self) -> int:
        return self.W_Q.shape[0]


def init_markov_model(config: Config, key: jax.Array) -> MarkovTransformer:
    """W_Q, W_K, W_V and W exactly as `init_model` draws them from `key` (config.init's scheme,
    c0, c1); B uniform on {+1, -1}/sqrt(m1) from its own key, so each logit starts O(|W W_V x|)."""
    base = init_model(config, key)
    m1, d = config.model.m1, config.data.d
    B = jax.random.rademacher(jax.random.fold_in(key, 7), (d, m1), dtype=base.W.dtype) / jnp.sqrt(m1)
    return MarkovTransformer(W_Q=base.W_Q, W_K=base.W_K, W_V=base.W_V, W=base.W, B=B)


def score_matrix(model: MarkovTransformer) -> jnp.ndarray:
    """A = W_K^T W_Q / sqrt(m): A[key token, query token] is the attention score."""
    return model.W_K.T @ model.W_Q / jnp.sqrt(model.m)


def encode(tokens: jnp.ndarray, d: int, dtype) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The context as (log token counts, one-hot query token x_L), each (n, d).

    Eq. (1) has no positional encoding, so positions holding the same token get the same score
    and their attention adds up: the model sees the context only through its token counts c
    (log c = -inf for absent tokens, which then get no attention). Built once per run, outside
    the training loop.
    """
    x = jax.nn.one_hot(tokens, d, dtype=dtype)
    return jnp.log(jnp.sum(x, axis=1)), x[:, -1]


def attended_tokens(model: MarkovTransformer, log_counts: jnp.ndarray, query: jnp.ndarray) -> jnp.ndarray:
    """sum_k p[i, k] x_k with p[i, k] = softmax_k(x_k^T A x_L): the attention-weighted token
    histogram of each context, (n, d); equal to softmax_v(A[v, x_L] + log c_v).

    Written with (n, d) matmuls instead of gathers at (n, L) positions: fewer operations, and no
    scatters in the gradient, which XLA runs slowly on CPU.
    """
    return jax.nn.softmax(query @ score_matrix(model).T + log_counts, axis=1)


def next_token_logits(model: MarkovTransformer, log_counts: jnp.ndarray, query: jnp.ndarray) -> jnp.ndarray:
    """logits[i] = B W h_i with h_i = W_V sum_k p[i, k] x_k; shape (n, d). B W W_V is d x d, so
    nothing of size n m is formed."""
    return attended_tokens(model, log_counts, query) @ (model.B @ model.W @ model.W_V).T


def cross_entropy(logits: jnp.ndarray, target: jnp.ndarray) -> jnp.ndarray:
    """Mean -log softmax(logits)[target] (nats), the target given one-hot (n, d)."""
    return jnp.mean(jax.nn.logsumexp(logits, axis=1) - jnp.sum(logits * target, axis=1))


def _vocabulary(model: MarkovTransformer) -> tuple[int, jnp.dtype]:
    return model.W_Q.shape[1], model.W_Q.dtype


def loss(model: MarkovTransformer, data: MarkovDataset) -> jnp.ndarray:
    """Mean cross-entropy of next-token prediction: the objective, comparable with the entropy rate."""
    d, dtype = _vocabulary(model)
    logits = next_token_logits(model, *encode(data.tokens, d, dtype))
    return cross_entropy(logits, jax.nn.one_hot(data.targets, d, dtype=dtype))


def accuracy(model: MarkovTransformer, data: MarkovDataset) -> jnp.ndarray:
    logits = next_token_logits(model, *encode(data.tokens, *_vocabulary(model)))
    return jnp.mean(jnp.argmax(logits, axis=1) == data.targets)


def same_token_attention(model: MarkovTransformer, data: MarkovDataset) -> jnp.ndarray:
    """Mean total attention the last query gives keys holding its own token (x_k = x_L)."""
    log_counts, query = encode(data.tokens, *_vocabulary(model))
    return jnp.mean(jnp.sum(attended_tokens(model, log_counts, query) * query, axis=1))


def same_token_fraction(data: MarkovDataset) -> jnp.ndarray:
    """Mean fraction of positions holding the query token: what uniform attention gives them."""
    return jnp.mean(data.tokens == data.tokens[:, -1:])


def score_gap(model: MarkovTransformer) -> jnp.ndarray:
    """Mean diagonal minus mean off-diagonal entry of A = W_K^T W_Q / sqrt(m): how much more a
    query attends to its own token than to another one."""
    A = score_matrix(model)
    d = A.shape[0]
    diagonal = jnp.trace(A)
    return diagonal / d - (jnp.sum(A) - diagonal) / (d * (d - 1))


def relative_change(now: jnp.ndarray, start: jnp.ndarray) -> jnp.ndarray:
    return jnp.linalg.norm(now - start) / jnp.linalg.norm(start)


def mlp_value_change(model: MarkovTransformer, start: MarkovTransformer) -> jnp.ndarray:
    """||(W, W_V)(t) - (W, W_V)(0)||_F / ||(W, W_V)(0)||_F: the bag-of-words part's change."""
    moved = jnp.sum((model.W - start.W) ** 2) + jnp.sum((model.W_V - start.W_V) ** 2)
    return jnp.sqrt(moved / (jnp.sum(start.W**2) + jnp.sum(start.W_V**2)))


OBSERVABLES: dict[str, Callable] = {
    "train_loss": lambda model, start, train, test: loss(model, train),
    "test_loss": lambda model, start, train, test: loss(model, test),
    "bayes_train_loss": lambda model, start, train, test: bayes_loss(train),
    "bayes_test_loss": lambda model, start, train, test: bayes_loss(test),
    "entropy_rate": lambda model, start, train, test: entropy_rate(train.chain),
    "stationary_entropy": lambda model, start, train, test: stationary_entropy(train.chain),
    "train_acc": lambda model, start, train, test: accuracy(model, train),
    "test_acc": lambda model, start, train, test: accuracy(model, test),
    "bayes_test_acc": lambda model, start, train, test: bayes_accuracy(test),
    "same_token_attention": lambda model, start, train, test: same_token_attention(model, train),
    "same_token_uniform": lambda model, start, train, test: same_token_fraction(train),
    "score_gap": lambda model, start, train, test: score_gap(model),
    "change_mlp_value": lambda model, start, train, test: mlp_value_change(model, start),
    "change_W": lambda model, start, train, test: relative_change(model.W, start.W),
    "change_W_V": lambda model, start, train, test: relative_change(model.W_V, start.W_V),
    "change_W_Q": lambda model, start, train, test: relative_change(model.W_Q, start.W_Q),
    "change_W_K": lambda model, start, train, test: relative_change(model.W_K, start.W_K),
}
"""Every recorded quantity, a scalar pure function of (model, initial model, train, test); the
metrics table has one column per name, in this order. Same-token attention is measured on the
training set from the last query; relative changes are Frobenius norms against t = 0."""


def observe(model, start, train, test) -> dict[str, jnp.ndarray]:
    return {name: fn(model, start, train, test) for name, fn in OBSERVABLES.items()}


@dataclass(frozen=True)
class MarkovSettings:
    """The task's own setting ([settings], --set system.alpha=1.0); the chain's size and the data's
    are `data.d`, `data.L`, `data.n`, `data.n_test`."""

    alpha: float = field(default=DIRICHLET_ALPHA, metadata={
        "help": "Dirichlet concentration of each row of the chain's transition matrix (small: nearly "
                "deterministic chains; large: nearly uniform ones)"})


class MarkovSystem(AbstractSystem):
    """Per seed its own chain and data (data/markov.py's PCG64 streams), weights from
    fold_in(PRNGKey(seed), 1) as in eq. (1)'s runs; B stays fixed, and `train.trainable=mlp-value`
    fixes W_Q, W_K too."""

    data_config: DataConfig = eqx.field(static=True)
    model_config: ModelConfig = eqx.field(static=True)
    init_config: InitConfig = eqx.field(static=True)
    dtype: str = eqx.field(static=True)
    attention_trains: bool = eqx.field(static=True)
    alpha: float = eqx.field(static=True, default=DIRICHLET_ALPHA)

    name: ClassVar[str] = "markov"
    listed_keys: ClassVar[tuple[str, ...]] = ("data.n", "data.L", "data.d")
    Settings: ClassVar[type] = MarkovSettings
    methods: ClassVar[tuple[str, ...]] = ("gd", "adam", "flow")
    loss_name: ClassVar[str] = "train_loss"

    @classmethod
    def cost(cls, config: Config) -> RunCost:
        """A rough guide: eq. (1)'s weight-space model over the same widths (`coocflow.systems.cost`)."""
        return weight_space_cost(config)

    @classmethod
    def from_config(cls, config: Config) -> "MarkovSystem":
        """A chain over `data.d` states, contexts of `data.L` tokens, `data.n` / `data.n_test` sequences."""
        if config.data.d < 2:
            raise ConfigError(f"data.d: a Markov chain needs at least two states (got {config.data.d})")
        if config.data.L < 1:
            raise ConfigError(f"data.L: a context holds at least one token (got {config.data.L})")
        alpha = cls.settings_of(config).alpha
        if not alpha > 0:
            raise ConfigError(f"settings.alpha: a Dirichlet concentration must be > 0 (got {alpha})")
        return cls(config.data, config.model, config.init, config.dtype, config.train.trainable == "all", alpha)

    def traced(self) -> "MarkovSystem":
        """Without alpha, which only the data read: every concentration reuses the compiled programs."""
        return dataclasses.replace(self, alpha=DIRICHLET_ALPHA)

    def _config(self) -> Config:
        return Config(data=self.data_config, model=self.model_config, init=self.init_config, dtype=self.dtype)

    def init(self, key: jax.Array) -> MarkovTransformer:
        return init_markov_model(self._config(), key)

    def data(self, seed: int) -> tuple[MarkovDataset, MarkovDataset]:
        c = self.data_config
        return make_markov_sets(c.d, c.L, c.n, c.n_test, seed, self.alpha, self.dtype)

    def loss(self, params: MarkovTransformer, train: MarkovDataset) -> jax.Array:
        return loss(params, train)

    def objective(self, train: MarkovDataset) -> Callable[[MarkovTransformer], jax.Array]:
        """The cross-entropy with the contexts encoded once (`encode`), outside the training loop."""
        d, dtype = self.data_config.d, jnp.dtype(self.dtype)
        context, target = encode(train.tokens, d, dtype), jax.nn.one_hot(train.targets, d, dtype=dtype)
        return lambda model: cross_entropy(next_token_logits(model, *context), target)

    def trainable(self, params: MarkovTransformer) -> MarkovTransformer:
        return MarkovTransformer(W_Q=self.attention_trains, W_K=self.attention_trains, W_V=True, W=True, B=False)

    def observe(self, params: MarkovTransformer, initial: MarkovTransformer, train: MarkovDataset,
                test: MarkovDataset) -> dict[str, jax.Array]:
        return observe(params, initial, train, test)
