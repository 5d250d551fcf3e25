"""What every integrator returns, and the chunked driver they share.

All integrators work on a seed ensemble: every leaf of the model and the problem has a leading
seed axis (a single run is an ensemble of one), the compiled step function is vmapped over it,
and the series come back with shape (seeds, observed times). The host calls the compiled chunk
function a few times so a progress bar can move, checks each chunk for non-finite values, and
keeps, per seed, the observations before its first bad one and its last finite weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.model import Transformer

WATCHED = ("loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1")
"""Quantities whose first non-finite value marks a seed as diverged (loss and weight scales)."""


@dataclass
class Trajectory:
    """Observed series of an ensemble and its final weights.

    `series[name]` has shape (seeds, times) and is NaN after a seed diverged; `t` and `step`
    are shared by all seeds (`step` is -1 for the ODE flow, which takes no fixed steps).
    """

    seeds: tuple[int, ...]
    t: np.ndarray
    step: np.ndarray
    series: dict[str, np.ndarray]
    final: Transformer
    status: list[str]
    divergence: list[dict | None]
    stats: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    def kept(self, seed_index: int) -> int:
        """How many observations of this seed are valid (all of them unless it diverged)."""
        finite = np.isfinite(self.series["loss"][seed_index])
        return len(finite) if finite.all() else int(np.argmin(finite))


def first_bad(observed: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str | None]]:
    """Per seed, the index of the first observation with a non-finite watched quantity (or -1),
    and the first watched quantity that is non-finite there."""
    bad = {name: ~np.isfinite(np.asarray(observed[name])) for name in WATCHED}
    any_bad = np.logical_or.reduce(list(bad.values()))
    index = np.where(any_bad.any(axis=1), np.argmax(any_bad, axis=1), -1)
    names = [None if i < 0 else next(n for n in WATCHED if bad[n][s, i]) for s, i in enumerate(index)]
    return index, names


def _select(mask: np.ndarray, new, old):
    """Per seed, the leaves of `new` where mask is true, else those of `old`."""
    def pick(a, b):
        shape = (len(mask),) + (1,) * (a.ndim - 1)
        return jnp.where(jnp.asarray(mask).reshape(shape), a, b)

    return jax.tree.map(pick, new, old)


def drive(
    advance: Callable[[Any, np.ndarray], tuple[Any, dict[str, jax.Array], dict[str, jax.Array]]],
    carry: Any,
    params_of: Callable[[Any], Any],
    plan: np.ndarray,
    chunk_len: int,
    n_seeds: int,
    pad: int | None,
    progress: Callable[[float], None] | None = None,
    progress_of: Callable[[np.ndarray], float] | None = None,
):
    """Run `advance(carry, block)` over blocks of `plan`; returns observations and bookkeeping.

    `plan` is one entry per observed time (steps to take, or the time to reach); blocks are
    padded to `chunk_len` with the no-op entry `pad` (0 steps for a step plan; None repeats the block's
    last time for a time plan) so every call has the same shapes.
    Returns (series (seeds, n_obs), last finite params, alive mask, per-seed index of the first
    bad observation (-1 if none) and the quantity that went bad, the extra outputs per block).
    """
    n_obs = len(plan)
    pieces: list[dict[str, np.ndarray]] = []
    extras: list[dict[str, np.ndarray]] = []
    alive = np.ones(n_seeds, dtype=bool)
    bad_index = np.full(n_seeds, -1)
    bad_quantity: list[str | None] = [None] * n_seeds
    good_params = params_of(carry)
    for start in range(0, n_obs, chunk_len):
        block = plan[start : start + chunk_len]
        keep = len(block)
        if keep < chunk_len:
            filler = block[-1] if pad is None else pad
            block = np.concatenate([block, np.full(chunk_len - keep, filler, dtype=block.dtype)])
        carry, observed, extra = advance(carry, block)
        observed = {k: np.array(v)[:, :keep] for k, v in observed.items()}
        extras.append({k: np.asarray(v) for k, v in extra.items()})
        bad, quantity = first_bad(observed)
        newly = alive & (bad >= 0)
        for s in np.flatnonzero(newly):
            bad_index[s] = start + bad[s]
            bad_quantity[s] = quantity[s]
            for k in observed:
                observed[k][s, bad[s]:] = np.nan
        for s in np.flatnonzero(~alive):
            for k in observed:
                observed[k][s, :] = np.nan
        still = alive & ~newly
        good_params = _select(still, params_of(carry), good_params)
        alive = still
        pieces.append(observed)
        if progress is not None and progress_of is not None:
            progress(progress_of(plan[: start + keep]))
        if not alive.any():
            break
    series = {k: np.concatenate([p[k] for p in pieces], axis=1) for k in pieces[0]}
    return series, good_params, alive, (bad_index, bad_quantity), extras



def divergence_record(times: np.ndarray, index: int, quantity: str | None,
                      steps: np.ndarray | None = None) -> dict:
    """When and why a seed diverged: the first bad observation and the last good one."""
    record = {"t": float(times[index]), "quantity": quantity, "observation": index,
              "last_finite_t": float(times[index - 1]) if index > 0 else None}
    if steps is not None:
        record["step"] = int(steps[index])
    return record
