"""eq. (1), the paper's system, as an `AbstractSystem`: in weight space and in the Gram space.

The state is an `AbstractState` (model/base.py): the weights (`Transformer`) or their Grams
(`GramState`, `model.space = "gram"`). Each answers its own split, velocity (-grad L on the
weights, the closed Gram system of Appendix C on the Grams), step-error norm and arrays, so the
system itself holds no branch on the space except for the discrete step, where the Gram space
takes the exact image of a gradient step on the weights (`gram_gd_step`) instead of an Optax update.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable, ClassVar, Literal

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow.config import (
    TRAIN_METHODS,
    Config,
    ObserveConfig,
    OptimizerConfig,
    SolverConfig,
    TrainConfig,
    VerifyConfig,
)
from coocflow.data import Dataset, make_test_set, make_train_set
from coocflow.errors import ConfigError
from coocflow.model import Transformer, init_model
from coocflow.model.gram import GramState, gram_gd_step, grams_from_weights
from coocflow.model.gram_init import (
    NEURON_ARRAY_KEYS,
    accumulate_kaiming_grams,
    check_kaiming_affordable,
    sample_wide_theory_grams,
)
from coocflow.model.state import State
from coocflow.observables import OBSERVABLES, Problem, observe
from coocflow.systems.base import PROGRAM_INPUTS, AbstractSystem, FirstHit
from coocflow.systems.cost import RunCost, eq1_cost

WATCHED = ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1")
"""Quantities whose first non-finite value marks a seed of eq. (1) as diverged (loss and weight scales)."""


def _min_margin(observed):
    return observed["min_margin"]


def _catch_up(observed):
    """-dG(mu_3)/dt - max(dG(mu_1)/dt, dG(mu_2)/dt): >= 0 once the common token's alignment moves
    at least as fast as either target's (Lemma 4.3; `verify.paper.boundaries.common_token_catch_up`)."""
    return -observed["d_G_mu3_dt"] - jnp.maximum(observed["d_G_mu1_dt"], observed["d_G_mu2_dt"])


def _min_margin_i2_i3(observed):
    return observed["min_margin_I2_I3"]


def _loss(observed):
    return observed["loss"]


@dataclasses.dataclass(frozen=True)
class Sandwich:
    """Lemma 4.3's sandwich with constant `c`, (1+C) max(dG(mu_1), dG(mu_2)) <= -dG(mu_3) <= (1-C)
    (dG(mu_1) + dG(mu_2)), as one continuous gap: the smaller of the two inequalities' slacks, >= 0
    exactly where both hold (`verify.paper.boundaries.sandwich_start`)."""

    c: float

    def __call__(self, observed):
        g1, g2, g3 = (observed[f"d_G_mu{k}_dt"] for k in (1, 2, 3))
        return jnp.minimum(-g3 - (1 + self.c) * jnp.maximum(g1, g2), (1 - self.c) * (g1 + g2) + g3)


EVENTS = {
    "all_correct": FirstHit(_min_margin, 0.0, rising=True, strict=True, needs=("min_margin",)),
    "T0.5": FirstHit(_catch_up, 0.0, rising=True, after_start=True, needs=("d_G_mu1_dt", "d_G_mu2_dt", "d_G_mu3_dt")),
    "T_prime": FirstHit(_min_margin_i2_i3, 0.0, rising=True, strict=True, needs=("min_margin_I2_I3",)),
    "T_star": FirstHit(_loss, float("nan"), rising=False, needs=("loss",)),
}
"""eq. (1)'s event times, as `verify.paper` reads them off the grid: the first all-correct time
(Thm 3.1), T0.5 (Lemma 4.3, the catch-up time), T' (Cor. E.20: I2 and I3 all correct) and
T* (Thm F.20: the first loss <= m^-k, k = `verify.loss_exponent`, its level set per run); with
Lemma 4.3's C declared (`verify.sandwich_c`) also `T0.5_sandwich`, the start of the sandwich's
last stretch up to T1 (`Eq1System.events`)."""

WEIGHT_ENTRIES_FOR_GRAMS = 20_000_000
"""`init.gram_from = "auto"` draws the weights and takes their Grams while the weights have at
most this many entries (160 MB in float64: m = m1 = 4000 at d = 64), so a Gram run starts where
the weight run of the same seed does; beyond it, it samples the Grams directly."""


def _cast(data: Dataset, dtype) -> Dataset:
    return Dataset(data.tokens, data.labels.astype(dtype), data.groups)


def build_problem(config: Config, seed: int | None = None, host: bool = False) -> Problem:
    """Training and test sets of one seed (default `config.seed`); of NumPy arrays when `host` (an
    ensemble's, stacked and converted once)."""
    seed = config.seed if seed is None else seed
    dtype = jnp.dtype(config.dtype)
    train = make_train_set(config.data, seed, host)
    return Problem(train=_cast(train, dtype), test=_cast(make_test_set(config.data, seed, train, host), dtype),
                   trainable=config.train.trainable)


def gram_source(config: Config) -> str:
    """Where a Gram run's initial Grams come from: `weights` (the Grams of the seed's drawn
    weights), `wishart` (exact Gaussian sampling, any width) or `chunked` (Kaiming, accumulated
    over row chunks)."""
    m, m1, d = config.model.m, config.model.m1, config.data.d
    source = config.init.gram_from
    if source == "auto":
        source = "weights" if m * (3 * d) + m1 * m <= WEIGHT_ENTRIES_FOR_GRAMS else "sampled"
    if source == "weights":
        return "weights"
    return "wishart" if config.init.scheme == "theory" else "chunked"


def initial_state(config: Config, key: jax.Array) -> State:
    """Initial state drawn from `key`: the weights, or in the Gram space their Grams (from
    `gram_source`), with the neurons' N, Z, a under `model.neurons`."""
    if config.model.space == "weights":
        return init_model(config, key)
    source, neurons = gram_source(config), config.model.neurons
    if source == "weights":
        return grams_from_weights(init_model(config, key), neurons)
    m, m1, d, L, c0, c1 = (config.model.m, config.model.m1, config.data.d, config.data.L, config.init.c0,
                           config.init.c1)
    dtype = jnp.dtype(config.dtype)
    if source == "wishart":
        return sample_wide_theory_grams(key, d, m, m1, L, c0, c1, neurons, dtype)
    if neurons:
        raise ConfigError(f"model.neurons: init.scheme=kaiming at model.m={m} draws its Grams in row chunks, which do "
                          "not resolve the neurons; use init.scheme=theory or init.gram_from=weights")
    check_kaiming_affordable(d, m, m1)
    return accumulate_kaiming_grams(key, d, m, m1, c0, c1, dtype)


GRAM_KEYS = ("A", "P", "K", "V", "G", "s")
WEIGHT_KEYS = ("W_Q", "W_K", "W_V", "W", "a")


def state_from_arrays(arrays: dict[str, np.ndarray], leaves: Literal["jax", "numpy"] = "jax") -> State:
    """The state a run folder's arrays hold (`AbstractState.arrays`' inverse), float64: the weights,
    or the Grams with the neurons' N, Z, a when the run resolved them.

    `leaves="numpy"` keeps NumPy arrays as the leaves, for readers of a finished run: the state's
    matrix products (its Grams, MLP outputs, neurons) then run in NumPy, as they always have there,
    while what the model writes with JAX functions (attention, logits) still runs in JAX."""
    convert = (lambda x: np.asarray(x, dtype=np.float64)) if leaves == "numpy" else (
        lambda x: jnp.asarray(x, dtype=jnp.float64))
    if "A" in arrays:
        keys = GRAM_KEYS + (NEURON_ARRAY_KEYS if "N" in arrays else ())
        grams = {k: convert(arrays[k]) for k in keys}
        return GramState(**grams, m=int(np.ravel(arrays["m"])[0]), m1=int(np.ravel(arrays["m1"])[0]))
    return Transformer(**{k: convert(arrays[k]) for k in WEIGHT_KEYS})


def build_model(config: Config, seed: int | None = None) -> State:
    """Initial state of one seed (default `config.seed`), from fold_in(PRNGKey(seed), 1)."""
    seed = config.seed if seed is None else seed
    return initial_state(config, seed_key(seed))


def seed_key(seed) -> jax.Array:
    """Where seed `seed`'s initial state is drawn from: fold_in(PRNGKey(seed), 1)."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), Eq1System.key_stream)


def seed_keys(seeds: tuple[int, ...]) -> np.ndarray:
    """`seed_key` of every seed, derived in one vmapped call (the same integer arithmetic, so the same
    keys) and held on the host, one row per seed: deriving them seed by seed dispatched two operations
    a seed."""
    return np.asarray(jax.vmap(seed_key)(jnp.asarray(seeds)))


class Eq1System(AbstractSystem):
    """The one-layer transformer of eq. (1) on the co-occurrence data (docs/definitions.md)."""

    section: Config | None = eqx.field(static=True)
    """The run's configuration less its training, observation and verification settings, which
    `init` and `data` read; None in the `traced` system the compiled loops see."""
    moving_set: str = eqx.field(static=True)
    """`train.trainable`: `all`, or `mlp-value` (W_Q, W_K fixed at init)."""
    t_star_level: float | None = eqx.field(static=True, default=None)
    """T*'s loss level m^-k (k = `verify.loss_exponent`); None in the `traced` system."""
    sandwich_c: float = eqx.field(static=True, default=0.0)
    """Lemma 4.3's C when declared (`verify.sandwich_c`), else 0."""
    t1_declared: float | None = eqx.field(static=True, default=None)
    """The paper's T1 = C_T1 / U0 when declared (`Config.paper_t1`): where T0.5's window ends."""

    name: ClassVar[str] = "eq1"
    methods: ClassVar[tuple[str, ...]] = TRAIN_METHODS
    run_type: ClassVar[str] = "coocflow.run.eq1:Eq1TrainedRun"

    @classmethod
    def from_config(cls, config: Config) -> "Eq1System":
        section = dataclasses.replace(config, name="eq1", seed=0, seeds=(), train=TrainConfig(),
                                      optimizer=OptimizerConfig(), solver=SolverConfig(),
                                      observe=ObserveConfig(), verify=VerifyConfig())
        return cls(section, config.train.trainable, float(config.model.m) ** -config.verify.loss_exponent,
                   config.verify.sandwich_c, config.paper_t1)

    @classmethod
    def cost(cls, config: Config) -> RunCost:
        """eq. (1)'s measured cost model (`coocflow.systems.cost`), with the Gram space's time for a
        weight-space run it follows exactly."""
        return eq1_cost(config)

    @classmethod
    def program_inputs(cls, config: Config) -> tuple[str, ...]:
        """Besides `PROGRAM_INPUTS`: the init's scales and source, which tokens are drawn (values of
        the data, not its shapes), T*'s loss level, and in the Gram space without resolved neurons the
        widths m and m1 (traced leaves of `GramState`). Not `verify.c_t1`: whether it is declared
        decides which event closes T0.5's window, a static of the programs."""
        own = ("init.scheme", "init.c0", "init.c1", "init.gram_from", "data.random_tokens", "data.test_tokens",
               "verify.loss_exponent")
        widths = ("model.m", "model.m1") if config.model.space == "gram" and not config.model.neurons else ()
        return PROGRAM_INPUTS + own + widths

    def traced(self) -> "Eq1System":
        """Without `section`: the widths and data settings shape the ensemble, not the compiled loops
        (a Gram state carries m as a traced leaf), so every width reuses one compiled solve."""
        return Eq1System(None, self.moving_set)

    def init(self, key: jax.Array) -> State:
        return initial_state(self.section, key)

    def data(self, seed: int) -> tuple[Dataset, Dataset]:
        problem = build_problem(self.section, seed)
        return problem.train, problem.test

    def loss(self, params: State, train: Dataset) -> jax.Array:
        return params.loss(train)

    def observe(self, params: State, initial: State, train: Dataset, test: Dataset) -> dict[str, jax.Array]:
        return observe(params, Problem(train, test, self.moving_set))

    def observe_only(self, names: frozenset[str], params: State, initial: State, train: Dataset, test: Dataset
                     ) -> dict[str, jax.Array]:
        return observe(params, Problem(train, test, self.moving_set), only=names)

    def observable_names(self) -> tuple[str, ...]:
        """The registry's names (docs/metrics.md), without tracing a hundred observables; those of the
        neurons only where the run resolves them."""
        neurons = self.section is None or self.section.model.space == "weights" or self.section.model.neurons
        return tuple(name for name, obs in OBSERVABLES.items() if neurons or not obs.neurons)

    def split(self, params: State) -> tuple[Any, Any]:
        return params.split(self.moving_set)

    def join(self, moving: Any, fixed: Any) -> State:
        return moving.join(fixed)

    def velocity(self, objective: Callable[[Any], jax.Array], moving: Any, fixed: Any, train: Dataset) -> Any:
        return moving.velocity(fixed, train, self.moving_set)

    def step(self, optimizer: optax.GradientTransformation, hyper: dict[str, jax.Array],
             objective: Callable[[Any], jax.Array], moving: Any, state: Any, fixed: Any, data: Dataset
             ) -> tuple[Any, Any]:
        if isinstance(moving, GramState):
            return gram_gd_step(moving, data, hyper["lr"], self.moving_set), state
        return super().step(optimizer, hyper, objective, moving, state, fixed, data)

    def error_norm(self, error: Any) -> jax.Array:
        return error.error_norm()

    def reached(self, observed: dict[str, jax.Array]) -> jax.Array:
        """Every training sample correct (min_i y_i F(x_i) > 0): the observation of T1."""
        return observed["min_margin"] > 0

    def events(self) -> dict[str, FirstHit]:
        level = float("nan") if self.t_star_level is None else self.t_star_level
        events = {**EVENTS, "T_star": dataclasses.replace(EVENTS["T_star"], level=level)}
        if self.sandwich_c > 0:
            events["T0.5_sandwich"] = FirstHit(
                Sandwich(self.sandwich_c), 0.0, last_entry=True, needs=EVENTS["T0.5"].needs,
                window_end=float("inf") if self.t1_declared is None else self.t1_declared,
                window_event="all_correct" if self.t1_declared is None else None)
        return events

    def watched(self) -> tuple[str, ...]:
        return WATCHED

    def arrays(self, params: State) -> dict[str, jax.Array]:
        return params.arrays()

    def from_arrays(self, arrays: dict[str, np.ndarray]) -> State:
        """The weights (golden keys) or the Grams (with N, Z, a when the run resolved the neurons), float64."""
        return state_from_arrays(arrays)

    @classmethod
    def theorem(cls) -> Any:
        """The paper's theorem, declared with the public API in the verifier's package
        (`coocflow.verify.paper.theorem.THEOREM`). Bound by name when asked for, as an entry point
        is: the verifier sits above the Systems' layer, and a System module never imports it."""
        return importlib.import_module("coocflow.verify.paper.theorem").THEOREM
