"""The in-context regression example's theorem (Zhang, Frei and Bartlett, JMLR 2024, "Trained
transformers learn linear models in-context", Theorem 4.1 with Lambda = I), as a System whose truth
is known exactly, with its theorem declared.

Their theorem is about the gradient flow on the population loss (infinitely many prompts) from the
initialization of their Assumption 3.3: W_PV(0) = sigma e_{d+1} e_{d+1}^T and W_KQ(0) = sigma
[[Theta Theta^T, 0], [0, 0]] with ||Theta Theta^T||_F = 1. From there the flow stays where only
the top-left block U of W_KQ and the corner u of W_PV move, the prediction on a prompt of N
examples is y_q = x_q^T Gamma (1/N) sum_i y_i x_i with the preconditioner Gamma = u U, and the
population loss is R(Gamma) = 1/2 (c_N ||Gamma||_F^2 - 2 tr Gamma + d), c_N = 1 + (d+1)/N (the
fourth moment of Gaussian contexts). This System follows exactly that flow, on (U, u). Their
theorem: Gamma converges to I / c_N = (1 + (d+1)/N)^-1 I, whose risk is d (d+1) / (2 (N+d+1)):
Theta(1/N) in the context length. The flow also conserves u^2 - ||U||_F^2 (a product's balance).

`examples/icl_regression.py` trains the same model on finitely many sampled prompts from a random
start, outside both premises; there the preconditioner settles elsewhere (docs/theorems.md).
Verify with `coocflow verify examples/icl_theorem.toml --scaling system.N`.
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
from coocflow.verify import Bound, Computed, Limit, Rate, Sign, Theorem, ValueAt


@dataclass(frozen=True)
class PopulationSettings:
    """The theorem's setting ([settings] in a config, --set system.N=40)."""

    N: int = field(default=20, metadata={"help": "examples per prompt (the context length)"})
    d: int = field(default=5, metadata={"help": "input dimension"})
    sigma: float = field(default=0.1, metadata={"help": "the initial scale sigma of Assumption 3.3"})


class Preconditioner(eqx.Module):
    """What moves under Assumption 3.3's start: W_KQ's top-left block U and W_PV's corner u."""

    U: jax.Array
    u: jax.Array


def fourth_moment(N: int, d: int) -> float:
    """c_N = 1 + (d+1)/N: E[S^2] = c_N I for the empirical covariance S of N standard Gaussian x."""
    return 1.0 + (d + 1) / N


def limit_risk(N: int, d: int) -> float:
    """The population loss at Gamma = I / c_N: d (d+1) / (2 (N+d+1))."""
    return d * (d + 1) / (2 * (N + d + 1))


class PopulationICL(AbstractSystem):
    """Linear self-attention on the population loss of in-context linear regression, from the
    initialization of Zhang, Frei and Bartlett's Assumption 3.3."""

    N: int = eqx.field(static=True)
    d: int = eqx.field(static=True)
    sigma: float = eqx.field(static=True)

    name: ClassVar[str] = "icl-population"
    Settings: ClassVar[type] = PopulationSettings
    methods: ClassVar[tuple[str, ...]] = ("gd", "flow")

    @classmethod
    def from_config(cls, config: Config) -> "PopulationICL":
        own = cls.settings_of(config)
        if own.N < 1 or own.d < 1 or not own.sigma > 0:
            raise ConfigError(f"settings.N, settings.d, settings.sigma: need N >= 1, d >= 1 and sigma > 0 (got {own.N}, "
                              f"{own.d}, {own.sigma})")
        return cls(own.N, own.d, own.sigma)

    def traced(self) -> "PopulationICL":
        """N reaches the loss through the data (c_N) and sigma only the start: one program for all."""
        return PopulationICL(0, self.d, 0.0)

    def init(self, key: jax.Array) -> Preconditioner:
        """U = sigma Theta Theta^T / ||Theta Theta^T||_F (Theta the seed's Gaussian d x d), u = sigma."""
        theta = jax.random.normal(key, (self.d, self.d))
        gram = theta @ theta.T
        return Preconditioner(U=self.sigma * gram / jnp.linalg.norm(gram), u=jnp.asarray(self.sigma))

    def data(self, seed: int) -> tuple[jax.Array, jax.Array]:
        """The population has no samples: what the loss needs of it is c_N."""
        moment = jnp.asarray(fourth_moment(self.N, self.d))
        return moment, moment

    def loss(self, params: Preconditioner, train: jax.Array) -> jax.Array:
        gamma = params.u * params.U
        return 0.5 * (train * jnp.sum(gamma**2) - 2 * jnp.trace(gamma) + self.d)

    def observe(self, params: Preconditioner, initial: Preconditioner, train: jax.Array,
                test: jax.Array) -> dict[str, jax.Array]:
        gamma = params.u * params.U
        optimum = jnp.eye(self.d) / train
        balance = params.u**2 - jnp.sum(params.U**2)
        balance0 = initial.u**2 - jnp.sum(initial.U**2)
        return {"loss": self.loss(params, train),
                "gamma_error": jnp.linalg.norm(gamma - optimum) / jnp.linalg.norm(optimum),
                "gamma_trace": jnp.trace(gamma),
                "u": params.u,
                "balance_drift": jnp.abs(balance - balance0) / (params.u**2 + jnp.sum(params.U**2))}

    @classmethod
    def theorem(cls) -> Theorem:
        return THEOREM


THEOREM = Theorem(
    name="Zhang, Frei and Bartlett (2024), Theorem 4.1 (Lambda = I): trained linear attention learns a linear model in-context",
    source="Trained transformers learn linear models in-context, JMLR 25 (2024), Theorem 4.1 and its Corollary "
           "(prediction risk), for the gradient flow on the population loss from Assumption 3.3's start",
    quantities={
        "risk_end": Computed(lambda run: float(run.series["loss"][np.isfinite(run.series["loss"])][-1]),
                                    "the population loss at the run's end"),
        "u_end": ValueAt("u", "end"),
        "balance_drift_max": Computed(lambda run: float(np.nanmax(run.series["balance_drift"])),
                                      "max over t of |u^2 - ||U||^2 - (its start)| / (u^2 + ||U||^2)"),
    },
    claims=(
        Limit(id="Z1", statement="the preconditioner u U converges to (1 + (d+1)/N)^-1 I", observable="gamma_error",
              to=0.0, tol=1e-6),
        Limit(id="Z2", statement="the population loss converges to d (d+1) / (2 (N+d+1))", observable="loss",
              to=lambda system: limit_risk(system.N, system.d), tol=1e-6),
        Rate(id="Z3", statement="the converged risk is Theta(1/N) in the context length N",
             quantity="risk_end", axis="settings.N", exponent=-1.0,
             divide_by=lambda system: system.N / (system.N + system.d + 1), design=(10, 20, 40, 80, 160)),
        Sign(id="Z4", statement="the value weight u stays positive (the model does not flip its sign)",
             quantity="u_end"),
        Bound(id="I1", statement="the flow conserves u^2 - ||U||_F^2", evidence="identity",
              quantity="balance_drift_max", upper=1e-6),
    ),
)
