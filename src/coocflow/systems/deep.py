"""The deep system: a standard multi-layer, multi-head transformer (model/deep.py) on the
co-occurrence task, as an `AbstractSystem` (its data, loss and observables).

Its observables are pure functions of (model, evaluated train set, evaluated test set), one
forward pass per dataset and observation (`Evaluated`); the `deep` study (experiments/deep.py)
reads them into its phase picture.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from coocflow.config import Config, DataConfig, ModelConfig
from coocflow.data import Dataset
from coocflow.data.cooccurrence import COMMON, MU1, MU2, make_test_set, make_train_set
from coocflow.errors import ConfigError
from coocflow.model.deep import DeepTransformer, deep_loss, forward, init_deep_transformer
from coocflow.systems.base import AbstractSystem
from coocflow.systems.cost import RunCost, weight_space_cost


class Evaluated(eqx.Module):
    """A dataset together with the model's logits and per-layer attention weights on it.

    `observe_deep` computes it once per dataset and observation and hands it to every
    observable: inside the compiled loop XLA does not merge the forward passes that each
    observable would otherwise repeat, which measured three times slower.
    """

    data: Dataset
    logits: jax.Array  # (n,)
    attentions: tuple[jax.Array, ...]  # per layer (n, heads, L_query, L_key)

    @property
    def margins(self) -> jax.Array:
        """y_i F(x_i), positive exactly where sample i is classified correctly."""
        return self.data.labels * self.logits


def evaluate(model: DeepTransformer, data: Dataset) -> Evaluated:
    logits, attentions = forward(model, data.tokens)
    return Evaluated(data, logits, tuple(attentions))


def _attention_to(evaluated: Evaluated, token: int, samples: jax.Array) -> jax.Array:
    """Per layer (layers,): the attention weight queries give to keys holding `token`, averaged
    over heads, queries and the samples where `samples` is true."""
    tokens = evaluated.data.tokens
    on_token = (tokens == token).astype(evaluated.logits.dtype)  # (n, L_key)
    sample_weights = samples.astype(on_token.dtype) / jnp.maximum(samples.sum(), 1)
    per_sample = [jnp.einsum("nhqk,nk->n", weights, on_token) / (weights.shape[1] * weights.shape[2])
                  for weights in evaluated.attentions]
    return jnp.stack([mass @ sample_weights for mass in per_sample])


def _is_i1(evaluated: Evaluated) -> jax.Array:
    return evaluated.data.groups == 0


def train_loss(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    return jnp.mean(jax.nn.softplus(-train.margins))


def train_accuracy(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    return jnp.mean(train.margins > 0)


def test_loss(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    return jnp.mean(jax.nn.softplus(-test.margins))


def test_accuracy(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    return jnp.mean(test.margins > 0)


def min_train_margin(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    """min_i y_i F(x_i): positive exactly when every training sample is classified correctly."""
    return jnp.min(train.margins)


def attention_mu1(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    """Per layer: attention to mu_1 keys in the I1 training samples (uniform would be 1/L)."""
    return _attention_to(train, MU1, _is_i1(train))


def attention_mu2(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    """Per layer: attention to mu_2 keys in the I1 training samples (uniform would be 1/L)."""
    return _attention_to(train, MU2, _is_i1(train))


def attention_targets(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    """Per layer: attention to mu_1 and mu_2 keys together in the I1 training samples (uniform: 2/L)."""
    return attention_mu1(model, train, test) + attention_mu2(model, train, test)


def attention_mu3(model: DeepTransformer, train: Evaluated, test: Evaluated) -> jax.Array:
    """Per layer: attention to the common token mu_3 over all training samples (uniform: 1/L)."""
    return _attention_to(train, COMMON, jnp.ones_like(train.data.labels, dtype=bool))


DEEP_OBSERVABLES: dict[str, Callable[[DeepTransformer, Evaluated, Evaluated], jax.Array]] = {
    "loss": train_loss,
    "train_acc": train_accuracy,
    "test_loss": test_loss,
    "test_acc": test_accuracy,
    "min_margin": min_train_margin,
    "attn_mu1": attention_mu1,
    "attn_mu2": attention_mu2,
    "attn_targets": attention_targets,
    "attn_mu3": attention_mu3,
}
"""Observables at every observed step, pure functions of (model, evaluated train set, evaluated
test set): scalars, or per-layer vectors (the `attn_*` ones), which become one column per layer
(`attn_mu1_L1`, `attn_mu1_L2`, ...) in the metrics table."""


def observe_deep(model: DeepTransformer, train: Dataset, test: Dataset) -> dict[str, jax.Array]:
    """Every observable of `DEEP_OBSERVABLES`, from one forward pass per dataset."""
    train_evaluated, test_evaluated = evaluate(model, train), evaluate(model, test)
    return {name: observable(model, train_evaluated, test_evaluated) for name, observable in DEEP_OBSERVABLES.items()}


class DeepSystem(AbstractSystem):
    """The deep transformer on eq. (1)'s data: weights from fold_in(PRNGKey(seed), 3), the seed's
    training and test sets (labels in the run's dtype), the logistic loss, `DEEP_OBSERVABLES`."""

    data_config: DataConfig = eqx.field(static=True)
    model_config: ModelConfig = eqx.field(static=True)
    dtype: str = eqx.field(static=True)

    name: ClassVar[str] = "deep"
    methods: ClassVar[tuple[str, ...]] = ("gd", "momentum", "adam", "adamw", "flow")
    key_stream: ClassVar[int] = 3

    @classmethod
    def cost(cls, config: Config) -> RunCost:
        """A rough guide: eq. (1)'s weight-space model over the same widths (`coocflow.systems.cost`)."""
        return weight_space_cost(config)

    @classmethod
    def from_config(cls, config: Config) -> "DeepSystem":
        """The deep transformer of `model.layers` blocks of `model.heads` heads (which divide `model.m`)."""
        model = config.model
        if model.layers < 1:
            raise ConfigError(f"model.layers: the deep system needs at least one block (got {model.layers})")
        if model.heads < 1 or model.m % model.heads:
            raise ConfigError(f"model.heads: must be >= 1 and divide model.m={model.m} (got {model.heads})")
        return cls(config.data, config.model, config.dtype)

    def init(self, key: jax.Array) -> DeepTransformer:
        return init_deep_transformer(Config(data=self.data_config, model=self.model_config, dtype=self.dtype), key)

    def data(self, seed: int) -> tuple[Dataset, Dataset]:
        def cast(data: Dataset) -> Dataset:
            return Dataset(data.tokens, data.labels.astype(jnp.dtype(self.dtype)), data.groups)

        return cast(make_train_set(self.data_config, seed)), cast(make_test_set(self.data_config, seed))

    def loss(self, params: DeepTransformer, train: Dataset) -> jax.Array:
        return deep_loss(params, train)

    def observe(self, params: DeepTransformer, initial: Any, train: Dataset, test: Dataset) -> dict[str, jax.Array]:
        return observe_deep(params, train, test)
