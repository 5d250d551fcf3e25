"""A two-layer linear network from small balanced init (Saxe, McClelland and Ganguli, ICLR 2014),
as a coocflow System with its theorem declared: the walk-through of docs/theorems.md.

The network y = W2 W1 x learns whitened inputs' input-output correlation Sigma = U diag(s) V^T
(three modes, strengths s_i = top * ratio^(i-1)) by the gradient flow on 1/2 ||Sigma - W2 W1||_F^2.
From the balanced start W1 = sqrt(u0) R V^T, W2 = sqrt(u0) U R^T (R a random orthonormal hidden
basis) the modes decouple exactly: mode i's strength u_i = U_i^T W2 W1 V_i follows
du/dt = 2 u (s_i - u), the sigmoid u_i(t) = s_i / (1 + (s_i/u0 - 1) exp(-2 s_i t)). So mode i is
half learned at t_i = log(s_i/u0 - 1) / (2 s_i): rate -1 in s_i with its log factor; stronger modes
are learned first; W2 W1 converges to Sigma; and W1 W1^T - W2^T W2 is conserved. `SaxeNetwork.theorem`
declares those claims; `coocflow verify examples/saxe.toml` judges them on a run and
`coocflow verify examples/saxe.toml --scaling settings.top` the rate over a sweep of the strength.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.systems import AbstractSystem
from coocflow.verify import Bound, Computed, Crossing, EventTime, Identity, Limit, Ordering, Premise, Rate, Theorem

MODES = 3


@dataclass(frozen=True)
class SaxeSettings:
    """The network's own settings ([settings] in a config, --set system.top=8)."""

    top: float = field(default=4.0, metadata={"help": "s_1, the strongest mode's singular value"})
    ratio: float = field(default=0.5, metadata={"help": "s_(i+1) / s_i, in (0, 1)"})
    u0: float = field(default=1e-3, metadata={"help": "every mode's initial strength (small)"})
    hidden: int = field(default=4, metadata={"help": "hidden units (>= 3 modes)"})
    inputs: int = field(default=5, metadata={"help": "input dimension (>= 3)"})
    outputs: int = field(default=4, metadata={"help": "output dimension (>= 3)"})


class Layers(eqx.Module):
    W1: jax.Array
    W2: jax.Array


class Correlation(eqx.Module):
    """Sigma = U diag(s) V^T and its singular vectors."""

    sigma: jax.Array
    U: jax.Array
    V: jax.Array


def orthonormal(rng: np.random.Generator, rows: int, columns: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((rows, columns)))
    return q * np.sign(np.diag(r))


def half_time(s: float, u0: float) -> float:
    """When the sigmoid u(t) = s / (1 + (s/u0 - 1) exp(-2 s t)) reaches s/2."""
    return math.log(s / u0 - 1) / (2 * s)


class SaxeNetwork(AbstractSystem):
    """A two-layer linear network learning Sigma from small balanced, aligned weights."""

    s: tuple[float, ...] = eqx.field(static=True)
    u0: float = eqx.field(static=True)
    hidden: int = eqx.field(static=True)
    inputs: int = eqx.field(static=True)
    outputs: int = eqx.field(static=True)

    name: ClassVar[str] = "saxe"
    Settings: ClassVar[type] = SaxeSettings
    methods: ClassVar[tuple[str, ...]] = ("gd", "flow")

    @classmethod
    def from_config(cls, config: Config) -> "SaxeNetwork":
        own = cls.settings_of(config)
        if not (own.top > 0 and 0 < own.ratio < 1 and 0 < own.u0 < own.top * own.ratio ** (MODES - 1) / 2):
            raise ConfigError("settings.top, settings.ratio, settings.u0: need top > 0, 0 < ratio < 1 and 0 < u0 below "
                              f"half the weakest strength (got {own.top}, {own.ratio}, {own.u0})")
        if min(own.hidden, own.inputs, own.outputs) < MODES:
            raise ConfigError(f"settings.hidden, settings.inputs, settings.outputs: each must be >= {MODES} (the modes)")
        return cls(tuple(own.top * own.ratio**i for i in range(MODES)), own.u0, own.hidden, own.inputs, own.outputs)

    def traced(self) -> "SaxeNetwork":
        """Without the strengths and u0, which only the data and the start read: every strength of a
        sweep reuses one compiled program (the loss and the observables see Sigma through the data)."""
        return SaxeNetwork((), 0.0, self.hidden, self.inputs, self.outputs)

    def singular_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """U (outputs x 3) and V (inputs x 3), orthonormal columns: fixed, so that every seed learns
        the same Sigma (a seed draws only its hidden basis R, which the modes do not see)."""
        rng = np.random.default_rng(7)
        return orthonormal(rng, self.outputs, MODES), orthonormal(rng, self.inputs, MODES)

    def data(self, seed: int) -> tuple[Correlation, Correlation]:
        U, V = self.singular_vectors()
        both = Correlation(jnp.asarray(U @ np.diag(self.s) @ V.T), jnp.asarray(U), jnp.asarray(V))
        return both, both

    def init(self, key: jax.Array) -> Layers:
        """Balanced and aligned: W1 = sqrt(u0) R V^T, W2 = sqrt(u0) U R^T, R the seed's random
        orthonormal hidden basis (hidden x 3), so every mode starts at strength u0."""
        U, V = self.singular_vectors()
        R = jnp.linalg.qr(jax.random.normal(key, (self.hidden, MODES)))[0]
        root = math.sqrt(self.u0)
        return Layers(W1=root * R @ jnp.asarray(V.T), W2=root * jnp.asarray(U) @ R.T)

    def loss(self, params: Layers, train: Correlation) -> jax.Array:
        return 0.5 * jnp.sum((train.sigma - params.W2 @ params.W1) ** 2)

    def observe(self, params: Layers, initial: Layers, train: Correlation, test: Correlation) -> dict[str, jax.Array]:
        product = params.W2 @ params.W1
        gap = params.W1 @ params.W1.T - params.W2.T @ params.W2
        gap0 = initial.W1 @ initial.W1.T - initial.W2.T @ initial.W2
        return {
            "loss": self.loss(params, train),
            "mode": jnp.einsum("oi,oj,ji->i", train.U, product, train.V),
            "product_error": jnp.linalg.norm(product - train.sigma) / jnp.linalg.norm(train.sigma),
            "balance_drift": jnp.linalg.norm(gap - gap0) / (jnp.sum(params.W1**2) + jnp.sum(params.W2**2)),
        }

    @classmethod
    def theorem(cls) -> Theorem:
        return THEOREM


def _premise_long_enough(system: SaxeNetwork, config: Config) -> bool:
    """The run lasts past three times the weakest mode's half time (so every mode has settled)."""
    return config.t_end >= 3 * half_time(system.s[-1], system.u0)


THEOREM = Theorem(
    name="Saxe, McClelland and Ganguli (2014): learning dynamics of a deep linear network",
    source="Exact solutions to the nonlinear dynamics of learning in deep linear neural networks, ICLR 2014, "
           "eq. (6)-(7) for the balanced decoupled start",
    events={f"learned_{i}": Crossing(f"mode_{i}", level=lambda system, i=i: system.s[i - 1] / 2)
            for i in range(1, MODES + 1)},
    quantities={
        **{f"t{i}": EventTime(f"learned_{i}") for i in range(1, MODES + 1)},
        "t1_closed_form": Computed(lambda run: half_time(run.system.s[0], run.system.u0),
                                   "log(s_1/u0 - 1) / (2 s_1)"),
        "balance_drift_max": Computed(lambda run: float(np.nanmax(run.series["balance_drift"])),
                                      "max over t of |D(t) - D(0)| / |W|^2, D = W1 W1^T - W2^T W2"),
    },
    premises=(Premise("T", "the run lasts at least 3 half times of the weakest mode", _premise_long_enough),),
    claims=(
        Ordering(id="S1", statement="modes are learned in order of their strength: t_1 < t_2 < t_3",
                 quantities=("t1", "t2", "t3")),
        Identity(id="S2", statement="mode 1 is half learned at t_1 = log(s_1/u0 - 1) / (2 s_1)",
                 left="t1", right="t1_closed_form", rtol=1e-3),
        Limit(id="S3", statement="W2 W1 converges to the input-output correlation Sigma",
              observable="product_error", to=0.0, tol=1e-6, premises=("T",)),
        Limit(id="S3.1", statement="mode 1's strength converges to s_1", observable="mode_1",
              to=lambda system: system.s[0], tol=1e-6, premises=("T",)),
        Rate(id="S4", statement="t_1 ~ s_1^-1 log(s_1/u0): rate -1 in s_1 with its log factor",
             quantity="t1", axis="settings.top", exponent=-1.0,
             divide_by=lambda system: math.log(system.s[0] / system.u0 - 1), design=(1.0, 2.0, 4.0, 8.0, 16.0)),
        Bound(id="I1", statement="the flow conserves W1 W1^T - W2^T W2", evidence="identity",
              quantity="balance_drift_max", upper=1e-6),
    ),
)
