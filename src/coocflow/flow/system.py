"""Training any `AbstractSystem` (issue 21, item 2): one compiled inner loop per kind of training.

`integrate_discrete(system, optimizer, ...)` takes Optax steps (`steps_then_observe`, the loop
eq. (1) uses too) and `integrate_flow(system, solver, ...)` solves d(params)/dt = velocity with
Diffrax, observing at the grid's times; both vmap one seed's program over the seed ensemble and
run under the chunked driver (`flow.trajectory.drive`), so a seed whose loss or weights turn
non-finite stops there and keeps what it had observed, and a checkpoint resumes bit for bit.
The optimizer and the solver are typed modules whose numbers are traced (`Optimizer`, `Solver`):
a new learning rate or tolerance reuses the compiled program. `integrate(system, config)` picks
the one `config.train` asks for, on the observation grid of `config.observe`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow import interrupts
from coocflow.config import Config
from coocflow.flow.discrete import Optimizer, chunk_length, optimizer_step, steps_then_observe
from coocflow.flow.grid import observation_steps, observation_times
from coocflow.flow.ode import Solver, result_message, total_stats
from coocflow.flow.trajectory import Checkpoint, divergence_record, drive
from coocflow.systems.base import AbstractSystem

WEIGHTS_NORM2 = "weights_norm2"
"""Sum of squares of the trained parameters, observed with the loss so that non-finite weights
stop a seed (the driver's watched quantities); dropped from the series that come back."""


def weights_norm2(params: Any) -> jax.Array:
    """The `WEIGHTS_NORM2` observable of one seed's trained parameters."""
    return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(params))


@dataclass
class EnsembleTraining:
    """A trained seed ensemble: `series[name]` is (seeds, observations[, entries]), NaN from a
    seed's first non-finite observation on; `steps` the optimizer steps observed (-1 for the
    flow) and `t` their times; per seed its status (`completed`, `diverged`, or `stopped` when
    the flow's solver gave up) and, if not completed, when and why (`divergence_record`, less
    `weights_t`). `initial` and `final` are the seed-stacked parameters at t = 0 and the last
    finite ones (None when read back from a study folder, which keeps no weights)."""

    seeds: tuple[int, ...]
    steps: np.ndarray
    t: np.ndarray
    series: dict[str, np.ndarray]
    status: list[str]
    divergence: list[dict | None]
    train_s: float
    resumed: dict | None = None
    stats: dict = field(default_factory=dict)
    initial: Any = None
    final: Any = None

    def kept(self, index: int) -> int:
        """How many observations of this seed are valid (all of them unless it stopped)."""
        record = self.divergence[index]
        return len(self.steps) if record is None else int(record["observation"])


def stacked_optimizer_state(optimizer: optax.GradientTransformation, params: Any) -> tuple[Any, Any]:
    """The initial optimizer state of the seed-stacked `params`, and its seed axes for vmap.

    Step counters (the integer leaves) are shared by all seeds, without a seed axis, as they are
    when the optimizer is initialized inside the vmapped loop (every seed takes the same steps);
    a per-seed counter changes how XLA fuses the update, and so the last bits of the series."""
    one_seed = optimizer.init(jax.tree.map(lambda leaf: leaf[0], params))

    def shared(leaf) -> bool:
        return jnp.issubdtype(leaf.dtype, jnp.integer)

    state = jax.tree.map(lambda stacked, single: single if shared(single) else stacked,
                         jax.vmap(optimizer.init)(params), one_seed)
    return state, jax.tree.map(lambda single: None if shared(single) else 0, one_seed)


def _stack(trees: list) -> Any:
    """Stack same-shaped pytrees along a new leading (seed) axis, in NumPy (eager jnp.stack
    compiles one program per leaf shape)."""
    return jax.tree.map(lambda *leaves: jnp.asarray(np.stack([np.asarray(leaf) for leaf in leaves])), *trees)


def build_ensemble(system: AbstractSystem, seeds: tuple[int, ...]) -> tuple[Any, Any, Any]:
    """Every seed's initial parameters (from fold_in(PRNGKey(seed), system.key_stream)), training
    set and test set, each stacked on a leading seed axis."""
    params = _stack([system.init(jax.random.fold_in(jax.random.PRNGKey(seed), system.key_stream)) for seed in seeds])
    sets = [system.data(seed) for seed in seeds]
    return params, _stack([train for train, _ in sets]), _stack([test for _, test in sets])


def _observed(system: AbstractSystem, moving: Any, fixed: Any, initial: Any, train: Any, test: Any) -> dict:
    return {**system.observe(eqx.combine(moving, fixed), initial, train, test), WEIGHTS_NORM2: weights_norm2(moving)}


@eqx.filter_jit
def _discrete_chunk(system: AbstractSystem, optimizer: Optimizer, moving, opt_state, state_axes, initial, fixed,
                    train, test, intervals):
    """For every seed (vmapped): `intervals[k]` optimizer steps then observe, for each k, in one scan."""
    transformation = optimizer.transformation()

    def one_seed(moving, state, initial, fixed, train, test):
        objective = system.objective(train)
        gradient = jax.grad(lambda p: objective(eqx.combine(p, fixed)))

        def observe(stepped, kept, _):
            return kept, _observed(system, stepped[0], fixed, initial, train, test)

        (carry, _), observations = steps_then_observe(optimizer_step(transformation, gradient), observe,
                                                      (moving, state), (), intervals)
        return carry, observations

    return jax.vmap(one_seed, in_axes=(0, state_axes, 0, 0, 0, 0), out_axes=((0, state_axes), 0))(
        moving, opt_state, initial, fixed, train, test)


@eqx.filter_jit
def _flow_chunk(system: AbstractSystem, solver: Solver, moving, initial, fixed, train, test, t0, ts):
    """For every seed (vmapped): the flow from t0 to ts[-1], observed at ts; the state at ts[-1]."""

    def one_seed(y0, initial, fixed, train, test):
        objective = system.objective(train)
        saveat = diffrax.SaveAt(subs=[
            diffrax.SubSaveAt(ts=ts, fn=lambda t, y, args: _observed(system, y, fixed, initial, train, test)),
            diffrax.SubSaveAt(t1=True)])
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: system.velocity(objective, y, fixed)), solver.diffrax_solver(),
            t0, ts[-1], None, y0, saveat=saveat, stepsize_controller=solver.controller(),
            max_steps=solver.max_steps, throw=False)
        observed, last = solution.ys
        stats = {key: solution.stats[key] for key in ("num_steps", "num_accepted_steps", "num_rejected_steps")}
        return jax.tree.map(lambda a: a[0], last), observed, {**stats, "result": solution.result._value}

    return jax.vmap(one_seed)(moving, initial, fixed, train, test)


def _drive(advance: Callable, carry: Any, plan: np.ndarray, pad: int | None, system: AbstractSystem,
           seeds: tuple[int, ...], chunks: int, checkpoint: Checkpoint | None,
           progress: Callable[[float], None] | None, progress_of: Callable[[np.ndarray], float]):
    """`drive` over `plan` in `chunks` chunks of at least two observations (XLA inlines a one-step
    scan, which rounds differently from the loop). Between chunks an interrupt becomes a
    KeyboardInterrupt (coocflow.interrupts), so the driver checkpoints the last chunk."""
    chunk_len = min(len(plan), max(2, chunk_length(len(plan), chunks)))
    with contextlib.ExitStack() as between_chunks:
        calls = {"n": 0}

        def report(done: float) -> None:
            calls["n"] += 1
            restored = checkpoint is not None and getattr(checkpoint, "resumed_from", None) is not None
            if calls["n"] == int(restored) + 1:
                between_chunks.enter_context(interrupts.deferred())
            if progress:
                progress(done)

        return drive(advance, carry, lambda carry: carry[0], plan, chunk_len, len(seeds), pad=pad, progress=report,
                     progress_of=progress_of, checkpoint=checkpoint, watched=(system.loss_name, WEIGHTS_NORM2))


def _training(seeds, steps, t, series, alive, bad_index, bad_quantity, started, checkpoint, initial, final, fixed,
              stats=None, failures=None) -> EnsembleTraining:
    status, divergence = [], []
    for s, ok in enumerate(alive):
        if ok:
            status.append("completed")
            divergence.append(None)
            continue
        record = divergence_record(t, int(bad_index[s]), bad_quantity[s], 0, steps)
        del record["weights_t"]
        reason = (failures or {}).get(s)
        if reason:
            record["reason"] = reason
        status.append("stopped" if reason else "diverged")
        divergence.append(record)
    return EnsembleTraining(
        seeds=tuple(seeds), steps=steps, t=t,
        series={name: _pad(values, len(t)) for name, values in series.items() if name != WEIGHTS_NORM2},
        status=status, divergence=divergence,
        train_s=checkpoint.elapsed_s if checkpoint is not None else time.perf_counter() - started,
        resumed=getattr(checkpoint, "resumed_from", None), stats=stats or {}, initial=initial,
        final=eqx.combine(final, fixed))


def integrate_discrete(system: AbstractSystem, optimizer: Optimizer, steps: np.ndarray, lr: float,
                       seeds: tuple[int, ...], chunks: int = 25, checkpoint: Checkpoint | None = None,
                       progress: Callable[[float], None] | None = None) -> EnsembleTraining:
    """Train every seed of `system` with `optimizer` (full batch), observing after the optimizer
    steps `steps` (starting at 0); time is t = lr x steps (nominal for Adam)."""
    started = time.perf_counter()
    initial, train, test = build_ensemble(system, seeds)
    moving, fixed = eqx.partition(initial, system.trainable(jax.tree.map(lambda leaf: leaf[0], initial)))
    opt_state, state_axes = stacked_optimizer_state(optimizer.transformation(), moving)
    intervals = np.diff(np.asarray(steps, dtype=np.int64), prepend=0)
    total = max(1, int(intervals.sum()))

    def advance(carry, block, index):
        moving, opt_state = carry
        (moving, opt_state), observed = _discrete_chunk(system, optimizer, moving, opt_state, state_axes, initial,
                                                        fixed, train, test, jnp.asarray(block))
        return (moving, opt_state), observed, {}

    series, final, alive, (bad_index, bad_quantity, _), _, _ = _drive(
        advance, (moving, opt_state), intervals, 0, system, seeds, chunks, checkpoint, progress,
        lambda done: float(np.sum(done)) / total)
    steps = np.asarray(steps, dtype=np.int64)
    return _training(seeds, steps, steps * lr, series, alive, bad_index, bad_quantity, started, checkpoint, initial,
                     final, fixed)


def integrate_flow(system: AbstractSystem, solver: Solver, times: np.ndarray, seeds: tuple[int, ...],
                   chunks: int = 25, checkpoint: Checkpoint | None = None,
                   progress: Callable[[float], None] | None = None) -> EnsembleTraining:
    """Follow the flow d(params)/dt = `system.velocity` for every seed with `solver`, observing at
    `times` (starting at 0). A seed stops where its solver gives up (status `stopped`, with
    Diffrax's reason) or a watched value turns non-finite (`diverged`); solver statistics per seed
    are in `stats`. Each chunk is a fresh solve from the last one's end, so a checkpoint (the
    parameters and the time at a chunk boundary) resumes exactly."""
    started = time.perf_counter()
    initial, train, test = build_ensemble(system, seeds)
    moving, fixed = eqx.partition(initial, system.trainable(jax.tree.map(lambda leaf: leaf[0], initial)))
    times = np.asarray(times, dtype=np.float64)
    dtype = jax.tree.leaves(initial)[0].dtype

    def advance(carry, block, index):
        moving, t0 = carry
        moving, observed, stats = _flow_chunk(system, solver, moving, initial, fixed, train, test,
                                              jnp.asarray(t0, dtype), jnp.asarray(block, dtype))
        return (moving, np.float64(block[-1])), observed, stats

    series, final, alive, (bad_index, bad_quantity, _), extras, _ = _drive(
        advance, (moving, np.float64(0.0)), times, None, system, seeds, chunks, checkpoint, progress,
        lambda done: len(done) / len(times))
    stats = total_stats(extras, solver.name) if extras else {}
    failures = {}
    for s in range(len(seeds)):
        codes = [code for code in stats.pop(f"_results_{s}", []) if code != 0]
        if codes and not alive[s]:
            failures[s] = result_message(codes[0])
    return _training(seeds, np.full(len(times), -1, dtype=np.int64), times, series, alive, bad_index, bad_quantity,
                     started, checkpoint, initial, final, fixed, stats, failures)


def observation_grid(config: Config) -> np.ndarray:
    """Where a system's run observes: optimizer steps from 0 for a discrete method, flow times from
    0 (geometric from `Config.flow_start`) for the flow."""
    o = config.observe
    if config.is_flow:
        return observation_times(config.t_end, config.flow_start, o.points, o.spacing)
    return observation_steps(config.train.steps, o.points, o.spacing)


def integrate(system: AbstractSystem, config: Config, checkpoint: Checkpoint | None = None,
              progress: Callable[[float], None] | None = None) -> EnsembleTraining:
    """Train `system` as `config.train` says (its optimizer, or the flow with its solver) on every
    seed of `config`, observed on `observation_grid(config)`."""
    system.check_training(config)
    dtype = jnp.dtype(config.dtype)
    grid = observation_grid(config)
    if config.is_flow:
        return integrate_flow(system, Solver.of(config.train, dtype), grid, config.seed_list, config.observe.chunks,
                              checkpoint, progress)
    return integrate_discrete(system, Optimizer.of(config.train, dtype), grid, config.train.lr, config.seed_list,
                              config.observe.chunks, checkpoint, progress)


def _pad(values: np.ndarray, n_obs: int) -> np.ndarray:
    """NaN observations after the driver stopped early (every seed diverged)."""
    missing = n_obs - values.shape[1]
    if not missing:
        return values
    return np.concatenate([values, np.full((values.shape[0], missing) + values.shape[2:], np.nan, values.dtype)], axis=1)
