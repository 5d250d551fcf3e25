"""Discrete optimizers through Optax, with one time convention: t = lr * steps.

Full-batch gradient descent (`gd`) is the explicit-Euler solution of d(theta)/dt = -grad L.
`sgd` takes mini-batches of `batch_size` samples, reshuffled every epoch from the seed;
`momentum` is heavy-ball SGD (its effective flow time is about t / (1 - momentum));
`adam` and `adamw` rescale each coordinate, so their t is nominal. The trajectory runs in
compiled calls: `lax.scan` over observation intervals, a `fori_loop` of steps inside each, the
observables at every observed step, all vmapped over the seeds. Hyperparameters are traced
arrays, so changing the learning rate (or any other one) does not recompile.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow.config import TrainConfig
from coocflow.data import Dataset
from coocflow.flow.trajectory import (Checkpoint, Trajectory, divergence_record, drive, finish_snapshots,
                                     map_seeds, over_seed_groups, record_snapshot, slot_table, snapshot_carry,
                                     take_seeds)
from coocflow.model import Transformer, trainable_loss
from coocflow.model.gram import gram_gd_step
from coocflow.model.state import dtype_of, is_gram, join, split
from coocflow.observables import Problem, observe

TRACE_COUNTS: Counter = Counter()
"""How many times each compiled function was traced; tests assert it does not grow when only
array arguments (learning rate, tolerances, seeds) change."""

HYPERPARAMETERS = ("lr", "momentum", "b1", "b2", "eps", "weight_decay")


def hyperparameters(train: TrainConfig, dtype) -> dict[str, jax.Array]:
    return {name: jnp.asarray(getattr(train, name), dtype=dtype) for name in HYPERPARAMETERS}


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
    def of(cls, train: TrainConfig, dtype) -> "Optimizer":
        return cls(train.method, hyperparameters(train, dtype))

    def transformation(self) -> optax.GradientTransformation:
        return make_optimizer(self.method, self.hyper)


def minibatch(data: Dataset, key: jax.Array, step: jax.Array, batch_size: int) -> Dataset:
    """The samples of optimizer step `step`: a slice of this epoch's permutation of the data.

    Epoch e = step // (n // batch_size) uses the permutation drawn from fold_in(key, e); the
    last n mod batch_size samples of each permutation are dropped.
    """
    per_epoch = data.n // batch_size
    epoch, within = step // per_epoch, step % per_epoch
    order = jax.random.permutation(jax.random.fold_in(key, epoch), data.n)
    index = jax.lax.dynamic_slice_in_dim(order, within * batch_size, batch_size)
    return Dataset(data.tokens[index], data.labels[index], data.groups[index])


def optimizer_step(optimizer: optax.GradientTransformation, gradient):
    """`take_step` for a (params, optimizer state) carry: one update of `optimizer` along
    `gradient(params)`, the step of every discrete training (eq. (1), the deep and Markov studies)."""
    def take_step(_, carry):
        params, state = carry
        updates, state = optimizer.update(gradient(params), state, params)
        return optax.apply_updates(params, updates), state

    return take_step


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


@eqx.filter_jit
def _advance(trainable, frozen, opt_state, step, snap, keys, problem: Problem, h, intervals, index, slot,
             method: str, batch_size: int, moving: str = "all"):
    """Take `intervals[k]` steps then observe (and keep snapshots: `record_snapshot` with
    observation `index[k]` and `slot[k]`), for each k; vmapped over the seed axis. In the Gram
    space a step is the exact image of a gradient step on the weights (`gram_gd_step`), with
    `moving` naming the trainable set."""
    TRACE_COUNTS["advance"] += 1
    optimizer = make_optimizer(method, h)
    grad_fn = jax.grad(trainable_loss)

    def one_seed(params, frozen, state, step, snap, key, problem):
        def take_step(_, carry):
            params, state, step = carry
            data = problem.train if batch_size == 0 else minibatch(problem.train, key, step, batch_size)
            if is_gram(params):
                return gram_gd_step(params, data, h["lr"], moving), state, step + 1
            updates, state = optimizer.update(grad_fn(params, frozen, data), state, params)
            return optax.apply_updates(params, updates), state, step + 1

        def observed_and_kept(stepped, snap, marks):
            params, _, _ = stepped
            _, at, into = marks
            observed = observe(join(params, frozen), problem)
            return record_snapshot(snap, params, observed["min_margin"], at, into), observed

        ((params, state, step), snap), observed = steps_then_observe(
            take_step, observed_and_kept, (params, state, step), snap, (intervals, index, slot),
            steps_of=lambda marks: marks[0])
        return (params, state, step, snap), observed

    (trainable, opt_state, step, snap), observed = map_seeds(one_seed, trainable, frozen, opt_state, step, snap, keys,
                                                                      problem)
    return trainable, opt_state, step, snap, observed


def chunk_length(n_obs: int, chunks: int) -> int:
    return int(np.ceil(n_obs / max(1, min(chunks, n_obs))))


def integrate_discrete(
    model: Transformer,
    problem: Problem,
    obs_steps: np.ndarray,
    train: TrainConfig,
    seeds: tuple[int, ...],
    chunks: int = 25,
    progress: Callable[[float], None] | None = None,
    checkpoint: Checkpoint | None = None,
    snapshot_obs: np.ndarray = (),
) -> Trajectory:
    """Run `train.method` on every seed of the batched `model` and `problem`.

    Observes at the steps in `obs_steps` (which start at 0); `progress` gets the fraction done. A seed whose loss or weights turn
    non-finite is marked diverged at its first bad observation and keeps what came before;
    the run stops early only when every seed has diverged. A `checkpoint` saves the weights,
    optimizer state and step counter (which, with the seeds, fixes the mini-batch RNG) at
    chunk boundaries and resumes from the last one. The weights at the observations
    `snapshot_obs` (sorted indices into `obs_steps`) and at the first all-correct observation
    come back in `Trajectory.snapshots`.
    """
    trainable, frozen = split(model, train.trainable)
    h = hyperparameters(train, dtype_of(model))
    optimizer = make_optimizer(train.method, h)
    opt_state = jax.vmap(optimizer.init)(trainable)
    n_seeds = len(seeds)
    step = jnp.zeros(n_seeds, dtype=jnp.int64)
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 2))(jnp.asarray(seeds))
    batch_size = 0 if train.method == "gd" or train.batch_size in (0, problem.train.tokens.shape[1]) else train.batch_size
    intervals = np.diff(np.asarray(obs_steps, dtype=np.int64), prepend=0)
    slots = slot_table(len(intervals), snapshot_obs)

    def advance(carry, block, index):
        params, state, step, snap = carry
        marks = jnp.asarray(block), jnp.asarray(index), jnp.asarray(slots[index])

        def group(seeds):
            return _advance(*take_seeds((params, frozen, state, step, snap, keys, problem), seeds), h, *marks,
                            train.method, batch_size, train.trainable)

        params, state, step, snap, observed = over_seed_groups(group, n_seeds)
        return (params, state, step, snap), observed, {}

    snap = snapshot_carry(trainable, n_seeds, len(snapshot_obs))
    series, final, alive, (bad_index, bad_quantity, good_obs), _, last = drive(
        advance, (trainable, opt_state, step, snap), lambda carry: carry[0], intervals,
        chunk_length(len(intervals), chunks), n_seeds, pad=0, progress=progress,
        progress_of=lambda done: float(np.sum(done)) / max(1, int(np.sum(intervals))), checkpoint=checkpoint)
    n_obs = series["loss"].shape[1]
    steps = np.asarray(obs_steps[:n_obs], dtype=np.int64)
    return Trajectory(
        seeds=tuple(seeds), t=steps * train.lr, step=steps, series=series,
        final=join(final, frozen),
        status=["completed" if a else "diverged" for a in alive],
        snapshots=finish_snapshots(last[3], frozen, snapshot_obs),
        divergence=[None if a else divergence_record(obs_steps * train.lr, int(i), q, int(g), obs_steps)
                    for a, i, q, g in zip(alive, bad_index, bad_quantity, good_obs)],
    )
