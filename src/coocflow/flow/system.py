"""Training any `AbstractSystem`: one compiled inner loop per kind of training.

`integrate_discrete(system, optimizer, ...)` takes Optax steps (`steps_then_observe`, the loop
eq. (1) uses too) and `integrate_flow(system, solver, ...)` solves d(params)/dt = velocity with
Diffrax, observing at the grid's times; both vmap one seed's program over the seeds of each
per-core group (`flow.trajectory.over_seed_groups`, the measured way) and run under the chunked driver (`flow.trajectory.drive`), so a seed whose loss or weights turn
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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow import interrupts
from coocflow.config import Config, ObserveConfig
from coocflow.flow.events import (
    closing_events,
    event_carry,
    event_holds,
    event_settings,
    record_events,
    traced_shapes,
)
from coocflow.flow.discrete import TRACE_COUNTS, Optimizer, chunk_length, minibatch, steps_then_observe
from coocflow.flow.grid import observation_steps, observation_times
from coocflow.flow.ode import FlatState, Solver, result_message, total_stats, velocity_of
from coocflow.flow.trajectory import (
    Checkpoint,
    SnapshotCarry,
    Snapshots,
    divergence_record,
    drive,
    group_slicer,
    map_seeds,
    over_seed_groups,
    record_snapshot,
    slot_table,
    snapshot_carry,
    take_seeds,
)
from coocflow.storage.checkpoint import DriveState
from coocflow.systems.base import STOP_AT_REACHED, WEIGHTS_NORM2, AbstractSystem, FirstHit


def weights_norm2(params: Any) -> jax.Array:
    """The `WEIGHTS_NORM2` observable of one seed's moving parameters."""
    return sum(jnp.sum(jnp.square(leaf)) for leaf in jax.tree.leaves(params))


@dataclass
class EnsembleTraining:
    """A trained seed ensemble: `series[name]` is (seeds, observations[, entries]), NaN from a
    seed's first non-finite observation on; `steps` the optimizer steps observed (-1 for the
    flow) and `t` their times; per seed its status (`completed`, `diverged`, or `stopped` when
    the flow's solver gave up) and, if not completed, when and why (`divergence_record`).
    `initial` and `final` are the seed-stacked parameters at t = 0 and the last finite ones,
    `train` and `test` the seed-stacked data, `snapshots` the parameters kept at the requested
    observations and at the system's `reached` event (all None when read back from a study
    folder, which keeps no weights)."""

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
    train: Any = None
    test: Any = None
    snapshots: Snapshots | None = None
    events: dict[str, np.ndarray] = field(default_factory=dict)
    """The system's event times per seed (`AbstractSystem.events`), NaN where a seed never reached
    one; `events_located` says which were located between observations (the flow; else the first
    observation where the event holds), `event_settings` what each was declared with (level, window;
    `flow.events.event_settings`)."""
    events_located: dict[str, np.ndarray] = field(default_factory=dict)
    event_settings: dict[str, dict] = field(default_factory=dict)

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    def kept(self, index: int) -> int:
        """How many observations of this seed are valid (all of them unless it stopped)."""
        record = self.divergence[index]
        return len(self.steps) if record is None else int(record["observation"])


def event_record(training: EnsembleTraining, index: int) -> dict:
    """A seed's event times for its manifest entry: {"events": {name: t or None}, "events_located":
    [names located between observations]}; empty for a training without events."""
    if not training.events:
        return {}
    times = {name: (float(v[index]) if np.isfinite(v[index]) else None) for name, v in training.events.items()}
    return {"events": times, "events_located": [name for name, v in training.events_located.items() if v[index]]}


def stack_seeds(trees: list) -> Any:
    """Stack same-shaped pytrees along a new leading (seed) axis, in NumPy (eager jnp.stack
    compiles one program per leaf shape, and dispatches one operation per seed: 1.45 s for 256
    seeds of eq. (1) against a copy in NumPy)."""
    return jax.tree.map(lambda *leaves: jnp.asarray(np.stack([np.asarray(leaf) for leaf in leaves])), *trees)


def build_ensemble(system: AbstractSystem, seeds: tuple[int, ...]) -> tuple[Any, Any, Any]:
    """Every seed's initial parameters (from fold_in(PRNGKey(seed), system.key_stream)), training
    set and test set, each stacked on a leading seed axis."""
    params = stack_seeds([system.init(jax.random.fold_in(jax.random.PRNGKey(seed), system.key_stream)) for seed in seeds])
    sets = [system.data(seed) for seed in seeds]
    return params, stack_seeds([train for train, _ in sets]), stack_seeds([test for _, test in sets])


def _observed_only(system: AbstractSystem, names: frozenset[str] | None, moving: Any, fixed: Any, initial: Any,
                   train: Any, test: Any) -> dict:
    """The observables `names` (all when None) of one seed's moving parameters: what an event reads."""
    params = system.join(moving, fixed)
    return (system.observe(params, initial, train, test) if names is None
            else system.observe_only(names, params, initial, train, test))


def recorded_observables(system: AbstractSystem, only: tuple[str, ...]) -> frozenset[str] | None:
    """What a run records (`observe.only`): every observable (None) when `only` is empty, else those
    and what the run itself reads: the loss, the divergence watch and every event's `needs` (every
    observable when an event does not say what it reads)."""
    if not only:
        return None
    events = system.events().values()
    if any(not event.needs for event in events):
        return None
    needed = {name for event in events for name in event.needs}
    return frozenset(only) | {system.loss_name} | (set(system.watched()) - {WEIGHTS_NORM2}) | needed


def _observed(system: AbstractSystem, recorded: frozenset[str] | None, moving: Any, fixed: Any, initial: Any,
              train: Any, test: Any) -> dict:
    """What one seed's observation records: every observable, or those `recorded` names
    (`recorded_observables`), and the parameters' squared norm where the divergence watch reads it."""
    params = system.join(moving, fixed)
    observed = (system.observe(params, initial, train, test) if recorded is None
                else system.observe_only(recorded, params, initial, train, test))
    if WEIGHTS_NORM2 in system.watched():
        observed = {**observed, WEIGHTS_NORM2: weights_norm2(moving)}
    return observed


@eqx.filter_jit
def _discrete_chunk(system: AbstractSystem, optimizer: Optimizer, recorded: frozenset[str] | None, moving, opt_state,
                    step, snap, keys, initial, fixed, train, test, intervals, index, slot, batch_size: int):
    """For every seed: `intervals[k]` steps then observe (keeping the parameters `record_snapshot`
    asks for: observation `index[k]` in slot `slot[k]`), for each k, in one scan; mini-batches of
    `batch_size` (0: the full batch) drawn from the seed's `keys` and step counter."""
    TRACE_COUNTS["advance"] += 1
    transformation = optimizer.transformation()

    def one_seed(moving, state, step, snap, key, initial, fixed, train, test):
        whole = system.objective(train) if batch_size == 0 else None

        def take_step(_, carry):
            moving, state, step = carry
            data = train if batch_size == 0 else minibatch(train, key, step, batch_size)
            objective = whole if batch_size == 0 else system.objective(data)
            moving, state = system.step(transformation, optimizer.hyper, objective, moving, state, fixed, data)
            return moving, state, step + 1

        def observe(stepped, snap, marks):
            _, at, into = marks
            observed = _observed(system, recorded, stepped[0], fixed, initial, train, test)
            return record_snapshot(snap, stepped[0], system.reached(observed), at, into), observed

        ((moving, state, step), snap), observed = steps_then_observe(
            take_step, observe, (moving, state, step), snap, (intervals, index, slot), steps_of=lambda marks: marks[0])
        return (moving, state, step, snap), observed

    (moving, opt_state, step, snap), observed = map_seeds(one_seed, moving, opt_state, step, snap, keys, initial,
                                                          fixed, train, test)
    return moving, opt_state, step, snap, observed


@eqx.filter_jit
def _flow_chunk(system: AbstractSystem, solver: Solver, events: tuple[FirstHit, ...], closing: tuple[int, ...],
                recorded: frozenset[str] | None, moving, snap, found, initial, fixed, train, test, t0, ts, index, slot,
                levels, ends):
    """For every seed: the flow from t0 to ts[-1], observed at ts; returns the state at ts[-1]. The
    parameters at ts (the very ones observed) are saved too, and `record_snapshot` keeps those of
    observation `index[k]` in slot `slot[k]` and at the system's `reached` event; `record_events`
    those just before each of `events` (at `levels`) first holds."""
    import diffrax  # lazy: discrete training never imports Diffrax (0.4 s of a warm `run tiny`)

    TRACE_COUNTS["flow"] += 1

    def one_seed(y0, snap, found, initial, fixed, train, test):
        objective = system.objective(train)
        saveat = diffrax.SaveAt(subs=[
            diffrax.SubSaveAt(ts=ts),
            diffrax.SubSaveAt(t1=True)])
        # A seed that starts non-finite (diverged before this chunk, or drawn so) is not solved: its solver
        # would reject every step until max_steps (a million steps, 30 s), then report "max steps" instead
        # of the divergence. It integrates zeros instead and observes NaN, which the driver reads as a
        # divergence at the chunk's first observation. A finite seed's numbers are unchanged.
        finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(y0)]))
        flat = FlatState(jax.tree.map(lambda leaf: jnp.where(finite, leaf, 0), y0))
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(flat.field(lambda y: velocity_of(system, objective, y, fixed, train))),
            solver.diffrax_solver(), t0, ts[-1], None, flat.y, saveat=saveat,
            stepsize_controller=solver.controller(flat.norm(system.error_norm)), max_steps=solver.max_steps,
            throw=False)
        states, last = jax.tree.map(
            lambda leaf: jnp.where(finite, leaf, jnp.nan) if jnp.issubdtype(leaf.dtype, jnp.inexact) else leaf,
            [flat.states(ys) for ys in solution.ys])
        # Observed after the solve, all times at once: inside Diffrax's save loop the observables
        # doubled the chunk's compile time (theory's chunk 5.3 s -> 2.9 s, tracing 2.1 s -> 1.1 s).
        observed = jax.vmap(lambda y: _observed(system, recorded, y, fixed, initial, train, test))(states)

        def keep(carry, marks):
            kept, found = carry
            params, seen, at, into, t = marks
            kept = record_snapshot(kept, params, system.reached(seen), at, into)
            found = record_events(found, params, event_holds(events, seen, levels, t), at, t, events, ends, closing)
            return (kept, found), None

        (snap, found), _ = jax.lax.scan(keep, (snap, found), (states, observed, index, slot, ts))
        stats = {key: solution.stats[key] for key in ("num_steps", "num_accepted_steps", "num_rejected_steps")}
        return jax.tree.map(lambda a: a[0], last), observed, {**stats, "result": solution.result._value}, snap, found

    return map_seeds(one_seed, moving, snap, found, initial, fixed, train, test, batched=False)


def _drive(advance: Callable, carry: Any, plan: np.ndarray, pad: int | None, system: AbstractSystem,
           seeds: tuple[int, ...], chunks: int, checkpoint: Checkpoint | None,
           progress: Callable[[float], None] | None, progress_of: Callable[[np.ndarray], float],
           arrived: Callable[[Any], np.ndarray] | None = None) -> DriveState:
    """`drive` over `plan` in `chunks` chunks of at least two observations (XLA inlines a one-step
    scan, which rounds differently from the loop). Between chunks an interrupt becomes a
    KeyboardInterrupt (coocflow.interrupts), so the driver checkpoints the last chunk."""
    chunk_len = min(len(plan), max(2, chunk_length(len(plan), chunks)))
    with contextlib.ExitStack() as between_chunks:
        calls = {"n": 0}

        def report(done: float) -> None:
            calls["n"] += 1
            restored = checkpoint is not None and checkpoint.resumed_from is not None
            if calls["n"] == int(restored) + 1:
                between_chunks.enter_context(interrupts.deferred())
            if progress:
                progress(done)

        return drive(advance, carry, lambda carry: carry[0], plan, chunk_len, len(seeds), pad=pad, progress=report,
                     progress_of=progress_of, checkpoint=checkpoint, watched=system.watched(), arrived=arrived)


def _snapshots(system: AbstractSystem, snap: SnapshotCarry, fixed: Any, snapshot_obs: np.ndarray) -> Snapshots:
    return Snapshots(
        obs=np.asarray(snapshot_obs, dtype=np.int64),
        states=[system.join(jax.tree.map(lambda leaf: leaf[:, k], snap.states), fixed) for k in range(len(snapshot_obs))],
        t1_obs=np.asarray(snap.t1_obs, dtype=np.int64), t1_state=system.join(snap.t1_state, fixed))


@dataclass
class _Ensemble:
    """What both integrators start from and hand back with the result."""

    system: AbstractSystem
    seeds: tuple[int, ...]
    initial: Any
    train: Any
    test: Any
    snapshot_obs: np.ndarray
    started: float

    def result(self, steps: np.ndarray, t: np.ndarray, driven: DriveState, snap: SnapshotCarry, fixed: Any,
               checkpoint: Checkpoint | None, stats: dict | None = None, failures: dict[int, str] | None = None
               ) -> EnsembleTraining:
        series, status, divergence = driven.series, [], []
        for s, ok in enumerate(driven.alive):
            if ok:
                status.append("completed")
                divergence.append(None)
                continue
            record = divergence_record(t, int(driven.bad_index[s]), driven.bad_quantity[s], int(driven.good_obs[s]),
                                       steps if steps[0] >= 0 else None)
            reason = (failures or {}).get(s)
            if reason:
                record["reason"] = reason
            status.append("stopped" if reason else "diverged")
            divergence.append(record)
        n_obs = next(iter(series.values())).shape[1]
        return EnsembleTraining(
            seeds=tuple(self.seeds), steps=steps[:n_obs], t=t[:n_obs],
            series={name: values for name, values in series.items() if name != WEIGHTS_NORM2},
            status=status, divergence=divergence,
            train_s=checkpoint.elapsed_s if checkpoint is not None else time.perf_counter() - self.started,
            resumed=checkpoint.resumed_from if checkpoint is not None else None, stats=stats or {},
            initial=self.initial, final=self.system.join(driven.good_params, fixed), train=self.train,
            test=self.test, snapshots=_snapshots(self.system, snap, fixed, self.snapshot_obs))


def _ensemble(system, seeds, ensemble, snapshot_obs) -> _Ensemble:
    started = time.perf_counter()
    initial, train, test = ensemble if ensemble is not None else build_ensemble(system, seeds)
    return _Ensemble(system, tuple(seeds), initial, train, test, np.asarray(snapshot_obs, dtype=np.int64), started)


def integrate_discrete(system: AbstractSystem, optimizer: Optimizer, steps: np.ndarray, lr: float,
                       seeds: tuple[int, ...], chunks: int = 25, checkpoint: Checkpoint | None = None,
                       progress: Callable[[float], None] | None = None, batch_size: int = 0,
                       snapshot_obs: np.ndarray = (), ensemble: tuple[Any, Any, Any] | None = None,
                       stop_at: str = "", only: tuple[str, ...] = ()) -> EnsembleTraining:
    """Train every seed of `system` with `optimizer`, observing after the optimizer steps `steps`
    (which start at 0); time is t = lr x steps (nominal for Adam). `batch_size` > 0 takes
    mini-batches (epoch e of a seed is the permutation drawn from fold_in(fold_in(PRNGKey(seed),
    2), e), so the seed and the step counter fix every batch). The parameters at the observations
    `snapshot_obs` and at the system's `reached` event come back in `snapshots`. `ensemble` gives
    the seed-stacked (initial parameters, training set, test set) instead of `build_ensemble`'s.
    `stop_at="reached"` ends the run once every seed has reached the system's `reached`; `only` names the
    observables it records (`recorded_observables`; empty: all)."""
    run = _ensemble(system, seeds, ensemble, snapshot_obs)
    compiled = system.traced()
    recorded = recorded_observables(system, only)
    moving, fixed = system.split(run.initial)
    opt_state = jax.vmap(optimizer.transformation().init)(moving)
    step = jnp.zeros(len(seeds), dtype=jnp.int64)
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 2))(jnp.asarray(seeds))
    intervals = np.diff(np.asarray(steps, dtype=np.int64), prepend=0)
    slots = slot_table(len(intervals), run.snapshot_obs)
    total = max(1, int(intervals.sum()))
    unchanged = group_slicer((keys, run.initial, fixed, run.train, run.test))

    def advance(carry, block, index):
        moving, opt_state, step, snap = carry
        marks = jnp.asarray(block), jnp.asarray(index), jnp.asarray(slots[index])

        def group(members):
            return _discrete_chunk(compiled, optimizer, recorded, *take_seeds((moving, opt_state, step, snap), members),
                                   *unchanged(members), *marks, batch_size)

        moving, opt_state, step, snap, observed = over_seed_groups(group, len(seeds))
        return (moving, opt_state, step, snap), observed, {}

    snap = snapshot_carry(moving, len(seeds), len(run.snapshot_obs))
    arrived = (lambda carry: np.asarray(carry[3].t1_obs) >= 0) if stop_at == STOP_AT_REACHED else None
    driven = _drive(advance, (moving, opt_state, step, snap), intervals, 0, system, seeds, chunks, checkpoint,
                    progress, lambda done: float(np.sum(done)) / total, arrived)
    steps = np.asarray(steps, dtype=np.int64)
    return run.result(steps, steps * lr, driven, driven.carry[-1], fixed, checkpoint)


def integrate_flow(system: AbstractSystem, solver: Solver, times: np.ndarray, seeds: tuple[int, ...],
                   chunks: int = 25, checkpoint: Checkpoint | None = None,
                   progress: Callable[[float], None] | None = None, snapshot_obs: np.ndarray = (),
                   ensemble: tuple[Any, Any, Any] | None = None, stop_at: str = "",
                   locate_only: tuple[str, ...] = (), only: tuple[str, ...] = (),
                   locate_steps: int = ObserveConfig.locate_steps) -> EnsembleTraining:
    """Follow the flow d(params)/dt = `system.velocity` for every seed with `solver`, observing at
    `times` (starting at 0). A seed stops where its solver gives up (status `stopped`, with
    Diffrax's reason) or a watched value turns non-finite (`diverged`); solver statistics per seed
    are in `stats`. Each chunk is a fresh solve from the last one's end, so a checkpoint (the
    parameters and the time at a chunk boundary) resumes exactly. Snapshots are the solver's
    solution at the observed times, as observed. `ensemble` as for `integrate_discrete`; `stop_at`
    (`reached` or a first-hit event's name) ends the run after the chunk in which every seed got there;
    `locate_only` names the events located between observations (empty: all; `observe.locate`), `locate_steps`
    the fewest steps of each locating solve (`observe.locate_steps`); `only` the observables it records
    (`recorded_observables`; empty: all)."""
    run = _ensemble(system, seeds, ensemble, snapshot_obs)
    compiled = system.traced()
    recorded = recorded_observables(system, only)
    moving, fixed = system.split(run.initial)
    times = np.asarray(times, dtype=np.float64)
    dtype = jax.tree.leaves(run.initial)[0].dtype
    slots = slot_table(len(times), run.snapshot_obs)

    events = system.events()
    shapes, closing = traced_shapes(events), closing_events(events)
    levels = jnp.asarray([e.level for e in events.values()], dtype)
    ends = jnp.asarray([e.window_end for e in events.values()], dtype)
    unchanged = group_slicer((run.initial, fixed, run.train, run.test))

    def advance(carry, block, index):
        moving, t0, snap, found = carry
        marks = (jnp.asarray(t0, dtype), jnp.asarray(block, dtype), jnp.asarray(index), jnp.asarray(slots[index]),
                 levels, ends)

        def group(members):
            return _flow_chunk(compiled, solver, shapes, closing, recorded, *take_seeds((moving, snap, found), members),
                               *unchanged(members), *marks)

        moving, observed, stats, snap, found = over_seed_groups(group, len(seeds))
        return (moving, np.float64(block[-1]), snap, found), observed, stats

    snap = snapshot_carry(moving, len(seeds), len(run.snapshot_obs))
    found = event_carry(moving, len(seeds), len(events))
    driven = _drive(advance, (moving, np.float64(0.0), snap, found), times, None, system, seeds, chunks, checkpoint,
                    progress, lambda done: len(done) / len(times), _arrival(stop_at, list(events)))
    stats = total_stats(driven.extras, solver.name) if driven.extras else {}
    failures = {}
    for s in range(len(seeds)):
        codes = [code for code in stats.pop(f"_results_{s}", []) if code != 0]
        if codes and not driven.alive[s]:
            failures[s] = result_message(codes[0])
    result = run.result(np.full(len(times), -1, dtype=np.int64), times, driven, driven.carry[2], fixed, checkpoint, stats,
                        failures)
    if events:
        from coocflow.flow.locate import locate  # lazy: imports Diffrax, which discrete training never needs

        located = locate(compiled, solver, _observed_only, events, np.asarray(levels), driven.carry[3], times,
                         driven.series, fixed, run.initial, run.train, run.test, locate_only or None, locate_steps)
        result.events = {name: located.times[:, k] for k, name in enumerate(events)}
        result.events_located = {name: located.located[:, k] for k, name in enumerate(events)}
        result.event_settings = {name: event_settings(e) for name, e in events.items()}
    return result


def _arrival(stop_at: str, events: list[str]) -> Callable[[Any], np.ndarray] | None:
    """Which seeds of the flow's carry (moving, t, snapshots, events) have got to `stop_at`."""
    if not stop_at:
        return None
    if stop_at == STOP_AT_REACHED:
        return lambda carry: np.asarray(carry[2].t1_obs) >= 0
    k = events.index(stop_at)
    return lambda carry: np.asarray(carry[3].hit_obs)[:, k] >= 0


def observation_grid(config: Config) -> np.ndarray:
    """Where a system's run observes: optimizer steps from 0 for a discrete method, flow times from
    0 (geometric from `Config.flow_start`) for the flow."""
    o = config.observe
    if config.is_flow:
        return observation_times(config.t_end, config.flow_start, o.points, o.spacing)
    return observation_steps(config.train.steps, o.points, o.spacing)


def integrate(system: AbstractSystem, config: Config, checkpoint: Checkpoint | None = None,
              progress: Callable[[float], None] | None = None, grid: np.ndarray | None = None,
              snapshot_obs: np.ndarray = (), ensemble: tuple[Any, Any, Any] | None = None) -> EnsembleTraining:
    """Train `system` as `config.train` says (its optimizer, or the flow with its solver) on every
    seed of `config`, observed on `grid` (default `observation_grid(config)`)."""
    system.check_training(config)
    dtype = jnp.dtype(config.dtype)
    grid = observation_grid(config) if grid is None else grid
    if config.is_flow:
        return integrate_flow(system, Solver.of(config.solver, dtype), grid, config.seed_list, config.observe.chunks,
                              checkpoint, progress, snapshot_obs, ensemble, config.train.stop_at, config.observe.locate,
                              config.observe.only, config.observe.locate_steps)
    train = config.train
    batch_size = 0 if train.method == "gd" or train.batch_size in (0, config.data.n) else train.batch_size
    return integrate_discrete(system, Optimizer.of(train.method, config.optimizer, dtype), grid, config.optimizer.lr, config.seed_list,
                              config.observe.chunks, checkpoint, progress, batch_size, snapshot_obs, ensemble,
                              config.train.stop_at, config.observe.only)
