"""Training and test sets of the paper's data model (Definition 2.1, Assumption 2.3).

Tokens are vocabulary indices: 0 is mu_1, 1 is mu_2, 2 is the common token mu_3 and 3..d-1
are the random tokens R. Groups are 0..3 for I1..I4. Everything is drawn from a seed with
NumPy's PCG64 generator, so a dataset is a pure function of (config, seed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from coocflow.config import DataConfig, random_slots
from coocflow.errors import ConfigError

MU1, MU2, COMMON, FIRST_RANDOM = 0, 1, 2, 3
GROUP_NAMES = ("I1", "I2", "I3", "I4")
GROUP_PROBS = (1 / 2, 1 / 6, 1 / 6, 1 / 6)
_SPECIAL = {0: (MU1, MU2), 1: (MU1,), 2: (MU2,), 3: ()}


class Dataset(eqx.Module):
    """Samples as token indices: tokens (n, L) int, labels (n,) +-1, groups (n,) in 0..3."""

    tokens: jnp.ndarray
    labels: jnp.ndarray
    groups: jnp.ndarray

    @property
    def n(self) -> int:
        return self.tokens.shape[0]


def _layout(rng: np.random.Generator, groups: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
    """Place mu_3 and the group's target words at distinct random positions.

    Returns the token array with -1 in the random slots, and the mask of those slots.
    """
    n = len(groups)
    tokens = np.full((n, L), -1, dtype=np.int64)
    for i, group in enumerate(groups):
        special = (COMMON,) + _SPECIAL[int(group)]
        positions = rng.choice(L, size=len(special), replace=False)
        tokens[i, positions] = special
    return tokens, tokens < 0


def _labels(groups: np.ndarray) -> np.ndarray:
    return np.where(groups == 0, 1.0, -1.0)


def _dataset(tokens: np.ndarray, groups: np.ndarray, host: bool) -> Dataset:
    """The samples as a Dataset of JAX arrays, or of NumPy arrays when `host` (an ensemble of many
    seeds stacks them on the host and converts once: a conversion per seed and array took a third
    of building 256 seeds' sets)."""
    convert = np.asarray if host else jnp.asarray
    return Dataset(convert(tokens), convert(_labels(groups)), convert(groups))


DRAWN_KEPT_BYTES = 64 * 2**20
"""How many bytes of drawn samples a process keeps (`_remembered`), the least recently used dropped
first: a sweep's jobs differ in width, not in data, so every job after the first finds its seeds' sets
here. Drawing a set is a Python loop over its samples (`_layout`): 2.3 ms a seed for the T1 table's
n = 12, 64 seeds 0.15 s of a job's 0.8 s, measured 2026-12-07."""

_DRAWN: OrderedDict[tuple, tuple[np.ndarray, np.ndarray]] = OrderedDict()
_DRAWN_LOCK = threading.Lock()
_DRAWN_BYTES = [0]


def _remembered(key: tuple, draw: Callable[[], tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """`draw()` (a data set's tokens and groups, a pure function of `key`) once per process while it is
    among the last `DRAWN_KEPT_BYTES` drawn; the arrays are read-only, so no caller can change what
    the next one is handed."""
    with _DRAWN_LOCK:
        if key in _DRAWN:
            _DRAWN.move_to_end(key)
            return _DRAWN[key]
    tokens, groups = draw()
    for array in (tokens, groups):
        array.setflags(write=False)
    with _DRAWN_LOCK:
        if key not in _DRAWN:
            _DRAWN[key] = (tokens, groups)
            _DRAWN_BYTES[0] += tokens.nbytes + groups.nbytes
        while len(_DRAWN) > 1 and _DRAWN_BYTES[0] > DRAWN_KEPT_BYTES:
            old_tokens, old_groups = _DRAWN.popitem(last=False)[1]
            _DRAWN_BYTES[0] -= old_tokens.nbytes + old_groups.nbytes
        return _DRAWN[key] if key in _DRAWN else (tokens, groups)


def make_train_set(cfg: DataConfig, seed: int, host: bool = False) -> Dataset:
    """Training set with exact group sizes n/2, n/6, n/6, n/6 (Assumption 2.3 (i)).

    `distinct` mode gives every random slot its own token (Assumption 2.3 (ii)); `uniform` mode
    draws each slot i.i.d. from R (the authors' relaxation). `host`: NumPy arrays (`_dataset`).
    """
    tokens, groups = _remembered(("train", cfg.n, cfg.L, cfg.d, cfg.random_tokens, int(seed)),
                                 lambda: _draw_train(cfg, seed))
    return _dataset(tokens, groups, host)


def _draw_train(cfg: DataConfig, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 0])
    sizes = (cfg.n // 2, cfg.n // 6, cfg.n // 6, cfg.n // 6)
    groups = np.repeat(np.arange(4), sizes)
    tokens, random_mask = _layout(rng, groups, cfg.L)
    slots = int(random_mask.sum())
    assert slots == random_slots(cfg.n, cfg.L)
    n_random = cfg.d - FIRST_RANDOM
    if cfg.random_tokens == "distinct":
        if n_random < slots:
            raise ConfigError(f"data.d: 'distinct' random tokens need d - 3 >= {slots} (got d={cfg.d})")
        fill = FIRST_RANDOM + rng.permutation(n_random)[:slots]
    elif cfg.random_tokens == "uniform":
        fill = rng.integers(FIRST_RANDOM, cfg.d, size=slots)
    else:
        raise ConfigError(f"data.random_tokens: must be distinct or uniform (got {cfg.random_tokens!r})")
    tokens[random_mask] = fill
    return tokens, groups


def random_token_pool(cfg: DataConfig, train: Dataset) -> np.ndarray:
    """The random tokens test samples draw from: those the training set holds (`seen`) or
    the rest of R (`unseen`)."""
    train_tokens = np.asarray(train.tokens)
    seen = np.unique(train_tokens[train_tokens >= FIRST_RANDOM])
    if cfg.test_tokens == "seen":
        return seen
    pool = np.setdiff1d(np.arange(FIRST_RANDOM, cfg.d), seen)
    if not pool.size:
        raise ConfigError(f"data.test_tokens: the training set holds every random token, so none is unseen; "
                          f"raise data.d above {cfg.d} (distinct mode needs d > {random_slots(cfg.n, cfg.L) + 3})")
    return pool


def make_test_set(cfg: DataConfig, seed: int, train: Dataset | None = None, host: bool = False) -> Dataset:
    """I.i.d. test samples: types by probabilities 1/2, 1/6, 1/6, 1/6, random tokens uniform on R
    (`fresh`, docs/definitions.md section 2) or on the random tokens `train` holds (`seen`) or lacks
    (`unseen`). `host`: NumPy arrays (`_dataset`)."""
    pool = None
    if cfg.test_tokens != "fresh":
        if train is None:
            raise ValueError("test_tokens 'seen' and 'unseen' need the training set")
        pool = random_token_pool(cfg, train)
    key = ("test", cfg.n_test, cfg.L, cfg.d, cfg.test_tokens, int(seed), None if pool is None else pool.tobytes())
    tokens, groups = _remembered(key, lambda: _draw_test(cfg, seed, pool))
    return _dataset(tokens, groups, host)


def _draw_test(cfg: DataConfig, seed: int, pool: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, 1])
    groups = np.sort(rng.choice(4, size=cfg.n_test, p=GROUP_PROBS))
    tokens, random_mask = _layout(rng, groups, cfg.L)
    slots = int(random_mask.sum())
    if pool is None:
        tokens[random_mask] = rng.integers(FIRST_RANDOM, cfg.d, size=slots)
    else:
        tokens[random_mask] = pool[rng.integers(0, pool.size, size=slots)]
    return tokens, groups
