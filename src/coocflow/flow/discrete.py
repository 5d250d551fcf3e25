"""Discrete optimizers through Optax, with one time convention: t = lr * steps.

Full-batch gradient descent (`gd`) is the explicit-Euler solution of d(theta)/dt = -grad L.
`sgd` takes mini-batches of `batch_size` samples, reshuffled every epoch from the seed;
`momentum` is heavy-ball SGD (its effective flow time is about t / (1 - momentum));
`adam` and `adamw` rescale each coordinate, so their t is nominal. `flow.system.integrate_discrete`
runs them on any system in compiled calls: `lax.scan` over observation intervals, a `fori_loop` of
steps inside each (`steps_then_observe`), the observables at every observed step, vmapped over the
seeds. Hyperparameters are traced arrays (`Optimizer`), so changing the learning rate (or any other
one) does not recompile.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow.config import OptimizerConfig

TRACE_COUNTS: Counter = Counter()
"""How many times each compiled function was traced; tests assert it does not grow when only
array arguments (learning rate, tolerances, seeds) change."""

HYPERPARAMETERS = ("lr", "momentum", "b1", "b2", "eps", "weight_decay")


def hyperparameters(optimizer: OptimizerConfig, dtype) -> dict[str, jax.Array]:
    return {name: jnp.asarray(getattr(optimizer, name), dtype=dtype) for name in HYPERPARAMETERS}


def make_optimizer(method: str, h: dict[str, jax.Array]) -> optax.GradientTransformation:
    """The Optax transformation for `method`; every hyperparameter may be a traced array."""
    if method in ("gd", "sgd"):
        return optax.sgd(h["lr"])
    if method == "momentum":
        return optax.sgd(h["lr"], momentum=h["momentum"])
    if method == "adam":
        return optax.adam(h["lr"], b1=h["b1"], b2=h["b2"], eps=h["eps"])
    if method == "adamw":
        return optax.adamw(h["lr"], b1=h["b1"], b2=h["b2"], eps=h["eps"], weight_decay=h["weight_decay"])
    raise ValueError(f"unknown discrete method {method}")


class Optimizer(eqx.Module):
    """An optimizer section as an Optax transformation: `method` is static, every hyperparameter a
    traced array, so a compiled training loop taking an `Optimizer` serves every learning rate."""

    method: str = eqx.field(static=True)
    hyper: dict[str, jax.Array]

    @classmethod
    def of(cls, method: str, optimizer: OptimizerConfig, dtype) -> "Optimizer":
        return cls(method, hyperparameters(optimizer, dtype))

    def transformation(self) -> optax.GradientTransformation:
        return make_optimizer(self.method, self.hyper)


def minibatch(data: Any, key: jax.Array, step: jax.Array, batch_size: int) -> Any:
    """The samples of optimizer step `step`: a slice of this epoch's permutation of the data (any
    pytree whose every leaf has the samples on its leading axis).

    Epoch e = step // (n // batch_size) uses the permutation drawn from fold_in(key, e); the
    last n mod batch_size samples of each permutation are dropped.
    """
    n = jax.tree.leaves(data)[0].shape[0]
    per_epoch = n // batch_size
    epoch, within = step // per_epoch, step % per_epoch
    order = jax.random.permutation(jax.random.fold_in(key, epoch), n)
    index = jax.lax.dynamic_slice_in_dim(order, within * batch_size, batch_size)
    return jax.tree.map(lambda leaf: leaf[index], data)


def steps_then_observe(take_step, observe, stepped, kept, marks, steps_of=lambda mark: mark):
    """The inner loop of every discrete training, for one seed in one compiled call: for each mark,
    `steps_of(mark)` steps of `take_step` on the `stepped` carry (a `fori_loop`), then
    `observe(stepped, kept, mark) -> (kept, observations)`, which may update what the steps leave
    alone (`kept`: the snapshots of a run); one `lax.scan` over the marks. Returns the final
    (stepped, kept) and the stacked observations."""
    def interval(carry, mark):
        stepped, kept = carry
        stepped = jax.lax.fori_loop(0, steps_of(mark), take_step, stepped)
        kept, observed = observe(stepped, kept, mark)
        return (stepped, kept), observed

    return jax.lax.scan(interval, (stepped, kept), marks)


def chunk_length(n_obs: int, chunks: int) -> int:
    return int(np.ceil(n_obs / max(1, min(chunks, n_obs))))
