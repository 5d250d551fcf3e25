"""Discrete optimizers as solutions of the flow, with one time convention: t = lr * steps.

Full-batch gradient descent is the explicit-Euler solution of d(theta)/dt = -grad L. The whole
trajectory runs in compiled calls: `lax.scan` over observation intervals, a `fori_loop` of
optimizer steps inside each, and the registry's observables evaluated at every observed step.
The host splits the grid into a few equal-length chunks only so a progress bar can move; the
learning rate is a traced array, so changing it does not recompile.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow.model import Transformer, combine, partition, trainable_loss
from coocflow.observables import Problem, observe


@dataclass
class Trajectory:
    """Observed series (column -> array over observed times) and the final weights."""

    series: dict[str, np.ndarray]
    final: Transformer
    status: str = "completed"
    divergence: dict | None = None
    timings: dict[str, float] = field(default_factory=dict)


def make_optimizer(method: str, lr: jax.Array) -> optax.GradientTransformation:
    """The optax transformation for `method`; `lr` may be a traced array."""
    if method == "gd":
        return optax.sgd(lr)
    raise ValueError(f"unknown method {method}")


TRACE_COUNTS: Counter = Counter()
"""How many times each compiled function was traced; tests assert it does not grow when only
array arguments (learning rate, seeds) change."""


@eqx.filter_jit
def _advance(trainable, frozen, opt_state, problem: Problem, lr, intervals, method: str):
    TRACE_COUNTS["advance"] += 1
    optimizer = make_optimizer(method, lr)
    grad_fn = jax.grad(trainable_loss)

    def step(_, carry):
        params, state = carry
        updates, state = optimizer.update(grad_fn(params, frozen, problem.train), state, params)
        return optax.apply_updates(params, updates), state

    def interval(carry, n_steps):
        carry = jax.lax.fori_loop(0, n_steps, step, carry)
        return carry, observe(combine(carry[0], frozen), problem)

    (trainable, opt_state), observed = jax.lax.scan(interval, (trainable, opt_state), intervals)
    return trainable, opt_state, observed


def _first_bad(observed: dict[str, np.ndarray], watch: tuple[str, ...]) -> tuple[int, str] | None:
    """Index of the first observation whose watched quantities are not finite, and which one."""
    n = len(next(iter(observed.values())))
    for i in range(n):
        for name in watch:
            if not np.isfinite(observed[name][i]):
                return i, name
    return None


def integrate_gd(
    model: Transformer,
    problem: Problem,
    obs_steps: np.ndarray,
    lr: float,
    method: str = "gd",
    chunks: int = 25,
    progress: Callable[[int], None] | None = None,
) -> Trajectory:
    """Run `method` from `model`, observing at the steps in `obs_steps` (which start at 0).

    Stops at the first observation with a non-finite loss or weight norm, keeping everything
    observed before it (status `diverged`).
    """
    trainable, frozen = partition(model)
    optimizer = make_optimizer(method, lr)
    opt_state = optimizer.init(trainable)
    intervals = np.diff(np.asarray(obs_steps, dtype=np.int64), prepend=0)
    chunk_len = int(np.ceil(len(intervals) / max(1, min(chunks, len(intervals)))))
    padded = np.zeros(chunk_len * int(np.ceil(len(intervals) / chunk_len)), dtype=np.int64)
    padded[: len(intervals)] = intervals
    lr_array = jnp.asarray(lr, dtype=model.W.dtype)
    pieces: list[dict[str, np.ndarray]] = []
    done = 0
    divergence = None
    for start in range(0, len(padded), chunk_len):
        block = padded[start : start + chunk_len]
        trainable_next, opt_state, observed = _advance(
            trainable, frozen, opt_state, problem, lr_array, jnp.asarray(block), method
        )
        observed = {k: np.asarray(v) for k, v in observed.items()}
        keep = min(chunk_len, len(intervals) - start)
        observed = {k: v[:keep] for k, v in observed.items()}
        bad = _first_bad(observed, ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1"))
        if bad is not None:
            index, quantity = bad
            pieces.append({k: v[:index] for k, v in observed.items()})
            step = int(obs_steps[start + index])
            divergence = {"step": step, "t": float(step * lr), "quantity": quantity,
                          "last_finite_step": int(obs_steps[start + index - 1]) if start + index > 0 else None}
            break
        trainable = trainable_next
        pieces.append(observed)
        done += int(block.sum())
        if progress is not None:
            progress(done)
    series = {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
    n_obs = len(series["loss"])
    series = {"t": obs_steps[:n_obs] * lr, "step": obs_steps[:n_obs].copy(), **series}
    return Trajectory(
        series=series,
        final=combine(trainable, frozen),
        status="diverged" if divergence else "completed",
        divergence=divergence,
    )
