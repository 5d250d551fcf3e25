"""In-context linear regression with one linear self-attention layer, as a coocflow system.

The task of Zhang, Frei and Bartlett (JMLR 2024, "Trained transformers learn linear models
in-context"), which analyses its gradient flow as the paper does eq. (1)'s. A prompt holds N
examples (x_i, w^T x_i) and a query x_q, with x ~ N(0, I_d) and a fresh task w ~ N(0, I_d) per
prompt; the embedding is Z = [[x_1 .. x_N, x_q], [y_1 .. y_N, 0]] ((d+1) x (N+1)) and the model
predicts y_q = [Z + W_PV Z Z^T W_KQ Z / N] at (d+1, N+1) = w_pv^T (Z Z^T / N) W_KQ z_q, with
w_pv the last row of W_PV. Their theorem: from a suitable small init the flow converges to a
model whose preconditioner Gamma = W_PV[d, d] W_KQ[:d, :d] is (1 + (d+1)/N)^-1 I, one step of
preconditioned gradient descent on the context; `gamma_error` tracks the distance to it. That
theorem is about the population loss from a structured start; `examples/icl_theorem.py` follows
that flow exactly and declares it (docs/theorems.md). This System, on sampled prompts from a random
start, is outside its premises and declares none.

Its own settings are `[settings]` (`ICLSettings`: N examples per prompt, d the input dimension,
scale the initial scale; `coocflow keys --system examples/icl_regression.py:InContextRegression`);
data.n and data.n_test are the numbers of training and test prompts.
docs/systems.md walks through this file; run it with `coocflow run examples/icl_regression.toml`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.systems import AbstractSystem


class LinearAttention(eqx.Module):
    """The trained matrices, both (d+1) x (d+1)."""

    W_KQ: jax.Array
    W_PV: jax.Array


class Prompts(eqx.Module):
    """Embedded prompts Z (n, d+1, N+1) and the query's label y_q (n,)."""

    Z: jax.Array
    target: jax.Array


def make_prompts(n: int, N: int, d: int, rng: np.random.Generator) -> Prompts:
    """n prompts of N examples; each prompt its own task w."""
    w = rng.standard_normal((n, d))
    x = rng.standard_normal((n, N + 1, d))
    y = np.einsum("nkd,nd->nk", x, w)
    Z = np.concatenate([x, np.concatenate([y[:, :N], np.zeros((n, 1))], axis=1)[:, :, None]], axis=2)
    return Prompts(jnp.asarray(Z.transpose(0, 2, 1)), jnp.asarray(y[:, N]))


def predict(params: LinearAttention, prompts: Prompts) -> jax.Array:
    """y_q = w_pv^T (Z Z^T / N) W_KQ z_q for every prompt."""
    N = prompts.Z.shape[2] - 1
    moments = jnp.einsum("nik,njk->nij", prompts.Z, prompts.Z) / N
    return jnp.einsum("i,nij,jk,nk->n", params.W_PV[-1], moments, params.W_KQ, prompts.Z[:, :, -1])


def preconditioner(params: LinearAttention) -> jax.Array:
    """Gamma = W_PV[d, d] W_KQ[:d, :d]: how the model weighs the context's sum_i y_i x_i."""
    return params.W_PV[-1, -1] * params.W_KQ[:-1, :-1]


@dataclass(frozen=True)
class ICLSettings:
    """The task's own settings ([settings] in a config, --set system.N=40)."""

    N: int = field(default=20, metadata={"help": "examples per prompt (the context length)"})
    d: int = field(default=5, metadata={"help": "input dimension of x and of the task w"})
    scale: float = field(default=0.3, metadata={"help": "initial scale: W_KQ, W_PV ~ N(0, scale^2 / (d+1))"})


class InContextRegression(AbstractSystem):
    """Linear self-attention trained on in-context linear regression (squared loss)."""

    d: int = eqx.field(static=True)
    N: int = eqx.field(static=True)
    n: int = eqx.field(static=True)
    n_test: int = eqx.field(static=True)
    scale: float = eqx.field(static=True)

    name: ClassVar[str] = "icl-regression"
    listed_keys: ClassVar[tuple[str, ...]] = ("data.n",)  # it reads data.n too: `coocflow ls` shows it
    Settings: ClassVar[type] = ICLSettings

    @classmethod
    def from_config(cls, config: Config) -> "InContextRegression":
        own = cls.settings_of(config)
        if config.dtype != "float64" or own.N < 1 or own.d < 1 or own.scale <= 0:
            raise ConfigError("dtype, settings.N, settings.d, settings.scale: the example runs in float64 on prompts of "
                              f"N >= 1 examples of dimension d >= 1 from a scale > 0 (got {config.dtype}, {own.N}, "
                              f"{own.d}, {own.scale})")
        return cls(own.d, own.N, config.data.n, config.data.n_test, own.scale)

    def init(self, key: jax.Array) -> LinearAttention:
        """Both matrices N(0, scale^2 / (d+1)): a small random start near the saddle at zero."""
        kq, pv = jax.random.split(key)
        shape, std = (self.d + 1, self.d + 1), self.scale / np.sqrt(self.d + 1)
        return LinearAttention(std * jax.random.normal(kq, shape), std * jax.random.normal(pv, shape))

    def data(self, seed: int) -> tuple[Prompts, Prompts]:
        return (make_prompts(self.n, self.N, self.d, np.random.default_rng([seed, 1])),
                make_prompts(self.n_test, self.N, self.d, np.random.default_rng([seed, 2])))

    def loss(self, params: LinearAttention, train: Prompts) -> jax.Array:
        return 0.5 * jnp.mean((predict(params, train) - train.target) ** 2)

    def observe(self, params: LinearAttention, initial: LinearAttention, train: Prompts,
                test: Prompts) -> dict[str, jax.Array]:
        gamma = preconditioner(params)
        optimum = jnp.eye(self.d) / (1 + (self.d + 1) / self.N)
        return {
            "loss": self.loss(params, train),
            "test_loss": self.loss(params, test),
            "gamma_error": jnp.linalg.norm(gamma - optimum) / jnp.linalg.norm(optimum),
            "gamma_diagonal": jnp.diagonal(gamma),
            "pv_to_x": jnp.linalg.norm(params.W_PV[-1, :-1]),
            "kq_to_y": jnp.linalg.norm(params.W_KQ[:, -1]),
        }
