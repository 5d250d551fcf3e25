"""What every integrator returns, and the chunked driver they share.

All integrators work on a seed ensemble: every leaf of the model and the problem has a leading
seed axis (a single run is an ensemble of one), the compiled chunk maps the step function over it
(`map_seeds`: vmapped for the discrete methods, one seed after another for the flow), and the
series come back with shape (seeds, observed times). The host calls the compiled chunk function a
few times so a progress bar can move, checks each chunk for non-finite values, and keeps, per
seed, the observations before its first bad one and its last finite weights.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.storage.checkpoint import DriveState


SEED_GROUP_MAX = 32
"""The most seeds one vmapped call takes on the CPU: a larger ensemble is split into more groups
than cores, which the cores' threads take in turn. Measured on the 2-core CPU with 256 seeds a job,
against one group per core (128 seeds each), alternated: the 16 x 256 T1 table (the flow, Dopri8)
58.3, 70.8, 61.4, 59.9 s against 51.8, 61.6, 55.5, 54.3, 56.3 s (13% less CPU time); `run paper
--seeds 256` for 1000 GD steps 86.0, 77.8 s against 70.1, 64.3 s. A vmapped adaptive solve steps
as long as its slowest seed, and smaller batches stay in cache. (The flow's figures date from before
it ran a group's seeds one after another, `map_seeds(batched=False)`.)"""


def seed_groups(n_seeds: int, min_size: int = 1, max_size: int = SEED_GROUP_MAX) -> list[slice]:
    """How an ensemble's seeds are split for `over_seed_groups`: one group per CPU core (at
    most one per `min_size` seeds; more, of one size and at most about `max_size` seeds (0: no
    limit), where the seed count divides evenly), each a contiguous slice; a single group on
    accelerators, where one wide vmapped call is what the device wants.

    Measured on the 2-core CPU (paper configuration, GD, 8 seeds): one vmapped call of all seeds
    runs 1.4x one seed's throughput (XLA:CPU runs a batched step on one core), two threads each
    running a vmapped call of half the seeds 2.4x; one thread per seed 1.6x."""
    cores = os.cpu_count() or 1
    groups = max(1, min(cores, n_seeds // min_size))
    if groups > 1 and max_size and n_seeds > groups * max_size:
        # More groups only where they can be of one size: each size is a program to trace and compile.
        fewest = -(-n_seeds // max_size)
        groups = next((count for count in range(fewest, 2 * fewest + 1) if n_seeds % count == 0), groups)
    if jax.default_backend() != "cpu":
        groups = 1
    bounds = np.linspace(0, n_seeds, groups + 1).round().astype(int)
    return [slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


_POOL: list = []
_COMPILED: set = set()
"""Call sites and group sizes already run once: the first call runs the groups one after the
other, so each program is traced and compiled once, not by two threads at the same time."""


def over_seed_groups(fn: Callable[[slice], Any], n_seeds: int, min_size: int = 1,
                     max_size: int = SEED_GROUP_MAX) -> Any:
    """`fn(group)` for each group of `seed_groups(n_seeds, min_size, max_size)`, concurrently in one thread per
    core (a compiled call releases the GIL), with the results' leaves concatenated back along the seed
    axis. `fn` must return a pytree whose every leaf has the seed axis first."""
    groups = seed_groups(n_seeds, min_size, max_size)
    if len(groups) == 1:
        return fn(groups[0])
    seen = (fn.__code__, tuple(g.stop - g.start for g in groups))
    if seen not in _COMPILED:
        parts = [fn(group) for group in groups]
        _COMPILED.add(seen)
    else:
        futures = [_pool().submit(fn, group) for group in groups]
        parts = [future.result() for future in futures]
    # Joined on the host: the parts are read there (observations) or sliced again for the next call
    # (the carry), and an eager jnp.concatenate per leaf cost 14 ms a chunk of the T1 table's 64 seeds.
    return jax.tree.map(lambda *leaves: np.concatenate([np.asarray(leaf) for leaf in leaves], axis=0), *parts)


def _pool() -> ThreadPoolExecutor:
    """One thread per core, shared by every caller in the process."""
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="coocflow-seeds"))
    return _POOL[0]


def in_threads(fn: Callable[[Any], Any], items: Sequence[Any]) -> list:
    """`[fn(item) for item in items]`, the items shared among one thread per core: for work that
    spends its time inside JAX's compiled operations, which release the GIL (the first item runs
    here first, so each operation is compiled once, not by two threads at the same time)."""
    if len(items) <= 1:
        return [fn(item) for item in items]
    first = fn(items[0])
    return [first, *_pool().map(fn, items[1:])]


def map_seeds(fn: Callable, *args: Any, batched: bool = True) -> Any:
    """`fn` on every seed of `args` (the leading axis of every leaf), the results stacked along it:
    `jax.vmap(fn)` where `batched`, else one seed after another in one compiled loop (`jax.lax.map`),
    each seed's computation unbatched. A single seed is one unbatched call either way, with the axis
    put back, because tracing a vmapped Diffrax solve costs twice an unbatched one (measured on the
    paper's flow chunk: 4.1 s against 1.9 s), and the driver's seed groups are often of one seed.

    The flow takes `batched=False`: a vmapped adaptive solve turns every branch of its step and
    of its saving loop into a select over the whole batch, including the buffer of saved states,
    which it rewrites at each saved time. Measured on 2 cores (warm, training seconds): `run theory`
    with 8 seeds (neurons resolved, 200 saved states) 5.68 s vmapped against 1.72 s one after
    another; the T1 table's 64 seeds at one width (no neurons, d = 16) 0.40 s against 0.27 s."""
    leaves = jax.tree.leaves(args)
    if leaves and all(leaf.shape[:1] == (1,) for leaf in leaves):
        out = fn(*jax.tree.map(lambda leaf: leaf[0], args))
        return jax.tree.map(lambda leaf: jnp.expand_dims(leaf, 0), out)
    if batched:
        return jax.vmap(fn)(*args)
    return jax.lax.map(lambda seed_args: fn(*seed_args), args)


def take_seeds(tree: Any, group: slice) -> Any:
    """The leaves of a seed-batched pytree for the seeds of `group`."""
    return jax.tree.map(lambda leaf: leaf[group], tree)


def group_slicer(tree: Any) -> Callable[[slice], Any]:
    """`take_seeds(tree, group)`, taken once per group: for what every chunk passes unchanged (the initial
    parameters, the fixed ones, the data), which slicing at each chunk would copy again."""
    taken: dict[tuple[int, int], Any] = {}

    def of(group: slice) -> Any:
        key = (group.start, group.stop)
        if key not in taken:
            taken[key] = take_seeds(tree, group)
        return taken[key]

    return of


def first_bad(observed: dict[str, np.ndarray], watched: tuple[str, ...]) -> tuple[np.ndarray, list[str | None]]:
    """Per seed, the index of the first observation with a non-finite watched quantity (or -1),
    and the first watched quantity that is non-finite there (`watched`: (seeds, times) series,
    the system's `watched()`: its loss and weight scales)."""
    bad = {name: ~np.isfinite(np.asarray(observed[name])) for name in watched}
    any_bad = np.logical_or.reduce(list(bad.values()))
    index = np.where(any_bad.any(axis=1), np.argmax(any_bad, axis=1), -1)
    names = [None if i < 0 else next(n for n in watched if bad[n][s, i]) for s, i in enumerate(index)]
    return index, names


class SnapshotCarry(NamedTuple):
    """Weights the compiled driver keeps while it runs, per seed: those at the requested
    snapshot observations (`states`, leaves with a slot axis after the seed axis), and those at
    the first observation where every training sample is correct (`t1_state`, taken at
    observation `t1_obs`, -1 until then). It is part of the integrator's carry, so checkpoints
    hold it and a resumed run keeps the same weights."""

    states: Any
    t1_state: Any
    t1_obs: jax.Array


def snapshot_carry(trainable: Any, n_seeds: int, n_slots: int) -> SnapshotCarry:
    """An empty carry for `n_slots` snapshots of the batched `trainable` weights."""
    return SnapshotCarry(
        states=jax.tree.map(lambda leaf: jnp.zeros((leaf.shape[0], n_slots) + leaf.shape[1:], leaf.dtype), trainable),
        t1_state=jax.tree.map(jnp.zeros_like, trainable),
        t1_obs=jnp.full(n_seeds, -1, dtype=jnp.int32))


def record_snapshot(snap: SnapshotCarry, params: Any, reached: jax.Array, index: jax.Array,
                    slot: jax.Array) -> SnapshotCarry:
    """One seed, one observation (traced, inside the compiled driver): keep `params` in `slot`
    (-1: none), and as the event's parameters if this observation (`index`, -1 for padding) is the
    first where the system's event has `reached` (eq. (1): every training sample correct, the
    test `verify.paper.first_time_all_correct` applies to the series)."""
    states = snap.states
    n_slots = jax.tree.leaves(states)[0].shape[0] if jax.tree.leaves(states) else 0
    if n_slots:
        at = jnp.clip(slot, 0, n_slots - 1)
        states = jax.tree.map(lambda kept, p: kept.at[at].set(jnp.where(slot >= 0, p, kept[at])), states, params)
    hit = (snap.t1_obs < 0) & (index >= 0) & reached
    return SnapshotCarry(states=states,
                         t1_state=jax.tree.map(lambda kept, p: jnp.where(hit, p, kept), snap.t1_state, params),
                         t1_obs=jnp.where(hit, index.astype(snap.t1_obs.dtype), snap.t1_obs))


def slot_table(n_obs: int, snapshot_obs: np.ndarray) -> np.ndarray:
    """Per observation, the snapshot slot it fills (-1: none); `snapshot_obs` is sorted, unique."""
    table = np.full(n_obs + 1, -1, dtype=np.int32)  # the last entry answers padding (index -1)
    table[np.asarray(snapshot_obs, dtype=np.int64)] = np.arange(len(snapshot_obs), dtype=np.int32)
    return table


@dataclass
class Snapshots:
    """Weights kept by the driver (`SnapshotCarry`), as models with a leading seed axis.

    `states[k]` holds every seed's weights at observation `obs[k]`; `t1_state` each seed's
    weights at observation `t1_obs` (-1: never all correct, the weights are then meaningless).
    Weights of a seed that diverged or stopped before an observation are not valid there.
    """

    obs: np.ndarray
    states: list[Any]
    t1_obs: np.ndarray
    t1_state: Any


def _select(mask: np.ndarray, new, old):
    """Per seed, the leaves of `new` where mask is true, else those of `old`."""
    # NumPy on the CPU, where the arrays already are on the host (an eager jnp.where per leaf took 5 ms a
    # chunk of the T1 table's 64 seeds); on an accelerator the parameters stay on the device.
    xp = np if jax.default_backend() == "cpu" else jnp

    def pick(a, b):
        a, b = xp.asarray(a), xp.asarray(b)
        return xp.where(xp.asarray(mask).reshape((len(mask),) + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(pick, new, old)


class Checkpoint(Protocol):
    """Where `drive` sends its state at chunk boundaries, and takes it back from on resume;
    `resumed_from` says where a restored run continued from (None: from t = 0) and `elapsed_s` the
    training seconds so far, interrupted runs included (`storage.checkpoint.RunCheckpoint`)."""

    resumed_from: dict | None
    elapsed_s: float

    def restore(self, initial: DriveState) -> DriveState: ...

    def save(self, state: DriveState, n_obs: int, now: bool = False) -> None: ...


def drive(
    advance: Callable[[Any, np.ndarray, np.ndarray], tuple[Any, dict[str, jax.Array], dict[str, jax.Array]]],
    carry: Any,
    params_of: Callable[[Any], Any],
    plan: np.ndarray,
    chunk_len: int,
    n_seeds: int,
    pad: int | None,
    progress: Callable[[float], None] | None = None,
    progress_of: Callable[[np.ndarray], float] | None = None,
    checkpoint: Checkpoint | None = None,
    watched: tuple[str, ...] = ("loss",),
    arrived: Callable[[Any], np.ndarray] | None = None,
) -> DriveState:
    """Run `advance(carry, block, index)` over blocks of `plan`; returns observations and bookkeeping.

    `plan` is one entry per observed time (steps to take, or the time to reach); blocks are
    padded to `chunk_len` with the no-op entry `pad` (0 steps for a step plan; None repeats the block's
    last time for a time plan) so every call has the same shapes; `index` gives each entry's
    observation number (-1 for padding). With a `checkpoint`, the run
    starts from its restored state and offers it the state after every block (and, on Ctrl-C
    or SIGTERM, the last complete one); since blocks are fixed by the plan, a resumed run
    computes exactly what an uninterrupted one does. A seed diverges at its first observation
    where a `watched` quantity is non-finite (`first_bad`). With `arrived` (the carry -> which
    seeds have got where `train.stop_at` says), the run ends after the block in which the last
    live seed arrived.
    Returns the driver's state after the last block (`DriveState`: the series (seeds, n_obs),
    each seed's last finite params and the observation they belong to, the alive mask, the first
    bad observation and quantity per seed, the extra outputs per block, the last carry).
    """
    n_obs = len(plan)
    state = DriveState.start(carry, params_of, n_seeds)
    if checkpoint is not None:
        state = checkpoint.restore(state)
        if state.next_obs and progress is not None and progress_of is not None:
            progress(progress_of(plan[: state.next_obs]))
    def all_arrived(state: DriveState) -> bool:
        return arrived is not None and bool((np.asarray(arrived(state.carry)) | ~state.alive).all())

    try:
        while state.next_obs < n_obs and state.alive.any() and not all_arrived(state):
            state = _advance_block(advance, state, params_of, plan, chunk_len, pad, watched)
            if checkpoint is not None:
                checkpoint.save(state, n_obs)
            if progress is not None and progress_of is not None:
                progress(progress_of(plan if all_arrived(state) else plan[: state.next_obs]))
    except KeyboardInterrupt:
        if checkpoint is not None:
            checkpoint.save(state, n_obs, now=True)
        raise
    return state


def _advance_block(advance, state: DriveState, params_of, plan: np.ndarray, chunk_len: int,
                   pad: int | None, watched: tuple[str, ...]) -> DriveState:
    """The state after the next block of `plan`; `state` itself is left as it was, so an
    interrupt at any point leaves a consistent state to checkpoint."""
    start = state.next_obs
    block = plan[start : start + chunk_len]
    keep = len(block)
    if keep < chunk_len:
        filler = block[-1] if pad is None else pad
        block = np.concatenate([block, np.full(chunk_len - keep, filler, dtype=block.dtype)])
    index = np.arange(start, start + chunk_len, dtype=np.int32)
    index[keep:] = -1
    carry, observed, extra = advance(state.carry, block, index)
    observed = {k: np.array(v)[:, :keep] for k, v in observed.items()}
    bad, quantity = first_bad(observed, watched)
    bad_index, bad_quantity = state.bad_index.copy(), list(state.bad_quantity)
    newly = state.alive & (bad >= 0)
    for s in np.flatnonzero(newly):
        bad_index[s] = start + bad[s]
        bad_quantity[s] = quantity[s]
        for k in observed:
            observed[k][s, bad[s]:] = np.nan
    for s in np.flatnonzero(~state.alive):
        for k in observed:
            observed[k][s, :] = np.nan
    still = state.alive & ~newly
    return DriveState(
        next_obs=start + keep, carry=carry, good_params=_select(still, params_of(carry), state.good_params),
        good_obs=np.where(still, start + keep - 1, state.good_obs), alive=still, bad_index=bad_index,
        bad_quantity=bad_quantity,
        series={k: np.concatenate([state.series[k], v], axis=1) if state.series else v for k, v in observed.items()},
        extras=state.extras + [{k: np.asarray(v) for k, v in extra.items()}])


def divergence_record(times: np.ndarray, index: int, quantity: str | None, weights_index: int,
                      steps: np.ndarray | None = None) -> dict:
    """When and why a seed diverged: the first bad observation, the last good one, and the time
    of the weights kept for it (the last chunk boundary before it went bad)."""
    record = {"t": float(times[index]), "quantity": quantity, "observation": index,
              "last_finite_t": float(times[index - 1]) if index > 0 else None,
              "weights_t": float(times[weights_index])}
    if steps is not None:
        record["step"] = int(steps[index])
    return record
