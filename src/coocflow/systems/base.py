"""What a task implements to get training, resume, sweeps, compare and report (issue 21, item 1).

`AbstractSystem` is the abstract base (Equinox's pattern: abstract methods here, final
implementations below it) of the tasks coocflow trains through `coocflow.flow.system`: the deep
transformer (`systems.deep`), the Markov next-token task (`systems.markov`) and any task a user
writes (docs/systems.md; `examples/icl_regression.py`). A system is built from a run's `Config`
by `from_config`, which validates the settings it reads and keeps them as static fields; the
optimizer and the solver are not part of it, so a new learning rate or tolerance reuses every
compiled program. Its parameters are any pytree of arrays; all of a system's functions are pure
and see one seed (the integrators vmap them over the seed ensemble).
"""

from __future__ import annotations

import abc
from typing import Any, Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.errors import ConfigError

FULL_BATCH_METHODS = ("gd", "momentum", "adam", "adamw", "flow")
"""What a system trains with unless it says otherwise: every full-batch Optax method and the flow."""


class AbstractSystem(eqx.Module):
    """A task: its parameters, data, loss, named observables and which parameters train."""

    name: ClassVar[str] = "system"
    methods: ClassVar[tuple[str, ...]] = FULL_BATCH_METHODS
    """The `train.method`s it supports (checked by `check_training`)."""
    loss_name: ClassVar[str] = "loss"
    """The observable that is the training loss: a seed whose value of it (or of its weights' norm)
    turns non-finite has diverged there."""
    key_stream: ClassVar[int] = 1
    """The initial parameters of seed s come from fold_in(PRNGKey(s), key_stream)."""

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: Config) -> "AbstractSystem":
        """The system a run's configuration describes; refuses settings it cannot use (ConfigError)."""

    @abc.abstractmethod
    def init(self, key: jax.Array) -> Any:
        """One seed's initial parameters, drawn from `key`."""

    @abc.abstractmethod
    def data(self, seed: int) -> tuple[Any, Any]:
        """One seed's (training set, test set), any pytrees of arrays."""

    @abc.abstractmethod
    def loss(self, params: Any, train: Any) -> jax.Array:
        """The training objective; the flow is d(params)/dt = -grad loss."""

    @abc.abstractmethod
    def observe(self, params: Any, initial: Any, train: Any, test: Any) -> dict[str, jax.Array]:
        """Every named observable at `params` (scalars, or vectors that become one column per
        entry); `initial` are the parameters at t = 0. Must include `loss_name`."""

    def objective(self, train: Any) -> Callable[[Any], jax.Array]:
        """The loss as a function of the parameters alone: where a system precomputes what the
        loss needs from the data (once per seed, outside the training loop), it overrides this."""
        return lambda params: self.loss(params, train)

    def trainable(self, params: Any) -> Any:
        """A filter spec for `eqx.partition`: True where a parameter trains (default: all)."""
        return jax.tree.map(lambda _: True, params)

    def velocity(self, objective: Callable[[Any], jax.Array], moving: Any, fixed: Any) -> Any:
        """d(moving)/dt along the flow: -grad of the objective by default; a system with an exact
        velocity of its own (as eq. (1)'s Gram space has) overrides it."""
        return jax.tree.map(jnp.negative, jax.grad(lambda p: objective(eqx.combine(p, fixed)))(moving))

    def check_training(self, config: Config) -> None:
        """Refuse a training the system does not support, with the fix."""
        method = config.train.method
        if method not in self.methods:
            raise ConfigError(f"train.method: the {self.name} system trains with {', '.join(self.methods)} "
                              f"(full batch), not '{method}'; try train.method={self.methods[0]}")
        if config.train.batch_size not in (0, config.data.n):
            raise ConfigError(f"train.batch_size: the {self.name} system trains on the full batch; set "
                              f"train.batch_size=0 (got {config.train.batch_size})")

    def arrays(self, params: Any) -> dict[str, np.ndarray]:
        """The parameters as named arrays (pytree paths, e.g. `blocks.0.W_Q`), for run folders."""
        return named_arrays(params)


def named_arrays(tree: Any) -> dict[str, np.ndarray]:
    """Every array leaf of `tree` under its dotted pytree path."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {".".join(_part(key) for key in path) or "value": np.asarray(leaf) for path, leaf in leaves}


def _part(key: Any) -> str:
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)
