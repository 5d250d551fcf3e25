"""Locating an event between two observations of the flow (`flow.events` keeps, per seed and
event, the parameters at the last observation before the event first held): one compiled program
restarts the flow from there with a Diffrax event on the event's gap, `value - level`, and a
bisection (`IntervalBisection`) finds its root on the solver's own dense interpolation.

Apart from `flow.events` so that discrete training (GD, Adam), whose events are observed steps,
never imports Diffrax and Optimistix (0.4 s of a warm `coocflow run tiny`).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix

from coocflow.config import ObserveConfig
from coocflow.flow.discrete import TRACE_COUNTS
from coocflow.flow.events import EventCarry, traced_shapes
from coocflow.flow.ode import FlatState, velocity_of
from coocflow.flow.trajectory import over_seed_groups, seed_groups, take_seeds
from coocflow.systems.base import FirstHit

ROOT_RTOL = 1e-13
"""Relative width of the bracket at which the bisection for an event's time on the solver's interpolation stops:
far below any solver rtol, so the located time is as good as the solution it is read from."""

LOCATE_STEPS = ObserveConfig.locate_steps
"""The solve that locates an event takes at least this many steps between its two observations
(the default of `observe.locate_steps`, a traced input of the program, so another value compiles nothing):
a root found on a step's interpolation is only as good as the interpolant inside the step, which
for the flow's late, long steps is far worse than the step's own error (T* at m = 2^15 moved
1.5e-6 relative between 100 and 199 observations where the loss itself agreed to 1.2e-8)."""


class IntervalBisection(optimistix.Bisection):
    """Bisection on an event's gap that stops when the bracket is narrower than atol + rtol |t|.

    Optimistix's own also waits for |gap| < atol, which the gap's units make meaningless (at atol
    1e-300 it never stops). Against Newton, which the locator used before, measured on two theory
    runs (m = 8 at rtol 1e-6, and a 100-point run): locating 6.4 s -> 5.1 s and 6.2 s -> 4.8 s,
    mostly tracing (no derivative of the observables); the second run's times agree to 2e-13 and
    1.8e-9 relative; on the first, the first all-correct time of a solve at rtol 1e-12 is
    0.65715351, Newton gave 0.65715420 (1.0e-6 off, where min-margin's minimizing sample changes)
    and bisection 0.65715355 (5e-8 off)."""

    def terminate(self, fn, y, args, options, state, tags):
        del fn, args, options, tags
        narrow = jnp.abs(state.lower - state.upper) < self.atol + self.rtol * jnp.abs(y)
        return narrow, optimistix.RESULTS.successful


class Located(NamedTuple):
    """Per seed (rows) and event (columns): the event's time (NaN: never on the observed grid) and
    whether it was located between observations (False: the grid time, which is then exact only
    to the grid)."""

    times: np.ndarray
    located: np.ndarray


LOCATE_MIN_GROUP = 2
"""The fewest pairs a thread's locating program maps over (`over_seed_groups`): a map of one pair
would be inlined by XLA and round differently from the loop."""

LOCATE_MAX_STEPS = 64 * LOCATE_STEPS
"""A locating solve that needs more steps than this gives up, and the event keeps its grid time."""


@eqx.filter_jit
def _event_gaps(system, observe: Callable, events: tuple[FirstHit, ...], signs: tuple[float, ...], needs, y, fixed,
                initial, train, test, levels):
    """Every event's signed gap to its level at one seed's parameters `y`, as one traced call: Diffrax
    and the bisection evaluate the event's condition in several places of the locating solve, and
    each evaluation would trace the observables again."""
    observed = observe(system, needs, y, fixed, initial, train, test)
    return jnp.stack([signs[k] * (e.value(observed) - levels[k]) for k, e in enumerate(events)])


@eqx.filter_jit
def _locate_program(system, solver, observe: Callable, events: tuple[FirstHit, ...], before, t_lo, t_hi, which,
                    active, levels, steps, fixed, initial, train, test):
    """For every (seed, event) pair (leading axis of every argument but `levels` and `steps`): the flow from
    `t_lo` (parameters `before`) towards `t_hi`, stopped where event `which`'s gap crosses zero
    (its root bracketed by `IntervalBisection` on the solver's interpolation). A pair that is not `active` only pads
    the program's shape: it takes one step, not `steps` (at least: each step is at most 1/`steps` of the
    pair's interval), and its result is ignored."""
    TRACE_COUNTS["locate"] += 1
    signs = tuple(1.0 if e.rising else -1.0 for e in events)
    needs = None if any(not e.needs for e in events) else frozenset(n for e in events for n in e.needs)

    def one_pair(y0, t0, t1, which, active, fixed, initial, train, test):
        objective = system.objective(train)
        flat = FlatState(y0)

        def gap(t, y, args, **kwargs):
            return _event_gaps(system, observe, events, signs, needs, flat.tree(y), fixed, initial, train, test,
                               levels)[which]

        root = IntervalBisection(rtol=ROOT_RTOL, atol=0.0)
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(flat.field(lambda y: velocity_of(system, objective, y, fixed, train))),
            solver.diffrax_solver(), t0, t1, None, flat.y, saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=solver.controller(flat.norm(system.error_norm),
                                                  jnp.where(active, (t1 - t0) / steps, t1 - t0)),
            max_steps=LOCATE_MAX_STEPS, throw=False, event=diffrax.Event(gap, root_finder=root, direction=True))
        return solution.ts[-1], solution.event_mask

    # One pair after another (lax.map): the solves are short, and tracing a vmapped Diffrax solve with
    # an event costs about twice an unbatched one.
    return jax.lax.map(lambda args: one_pair(*args), (before, t_lo, t_hi, which, active, fixed, initial, train, test))


def locate(system, solver, observe: Callable, events: dict[str, FirstHit], levels: np.ndarray, carry: EventCarry,
           times: np.ndarray, series: dict[str, np.ndarray], fixed, initial, train, test,
           only: tuple[str, ...] | None = None, steps: int = LOCATE_STEPS) -> Located:
    """Every event's time per seed: located between the observations that bracket its first hit
    when the driver kept the parameters before it (`carry`), else the grid time (an event at the
    first observation, or one that held before a resume from a checkpoint without events).

    `series` are the run's observations (seeds, observed times), `times` the observed times;
    `observe(system, names, params, fixed, initial, train, test)` gives the observables `names`
    (all when None) of one seed's parameters. `only` names the events to locate (None: all); the
    others keep their grid times (the program keeps its shape: their pairs take one step and are
    ignored). `steps`: the fewest steps of a locating solve (`observe.locate_steps`)."""
    names = tuple(events)
    before_obs, hit_obs = np.asarray(carry.before_obs), np.asarray(carry.hit_obs)
    n_seeds = len(hit_obs)
    times = np.asarray(times, dtype=np.float64)
    grid = np.full((n_seeds, len(names)), np.nan)
    bracket = np.zeros((n_seeds, len(names)), dtype=bool)
    order = sorted(range(len(names)), key=lambda k: events[names[k]].last_entry)  # windows after their closers
    series = {name: np.asarray(values) for name, values in series.items()}
    t = times[: next(iter(series.values())).shape[1]] if series else times
    seeds = np.arange(n_seeds)
    for k in order:
        event = events[names[k]]
        end = np.full(n_seeds, event.window_end, dtype=np.float64)
        if event.window_event is not None:
            closer = grid[:, names.index(event.window_event)]
            end = np.where(np.isfinite(closer), np.minimum(end, closer), -np.inf)
        index = event.first_indices(t, series, float(levels[k]), end)
        hit = index >= 0
        grid[:, k] = np.where(hit, t[np.maximum(index, 0)], np.nan)
        first_hit = np.full(n_seeds, True) if event.last_entry else hit_obs[seeds, k] == index
        bracket[:, k] = hit & (index > 0) & first_hit & (before_obs[seeds, k] == index - 1) & (
            only is None or names[k] in only)
    if not bracket.any():
        return Located(grid, np.zeros_like(bracket))
    # One solve per (seed, located event) pair; pairs without a bracket repeat the first one (the
    # program's shape stays seeds x located events, so it compiles once per run's shape) with a single
    # step, and are ignored. Events not located (`only`) have no pairs: as padding they had cost a
    # solve each (the T1 table locates 1 of eq. (1)'s 5 events: 500 seeds' locating 0.46 -> 0.13 s with
    # only the pairs it locates). The pairs are split into one group per core, each solved in its own
    # thread (`over_seed_groups`; the pairs are a sequential map, so smaller groups would only add
    # calls), of at least `LOCATE_MIN_GROUP` pairs.
    columns = np.asarray([k for k in range(len(names)) if only is None or names[k] in only])
    located = bracket[:, columns]
    pairs = np.argwhere(located)
    flat = np.arange(located.size).reshape(located.shape)
    pick = np.where(located.ravel(), flat.ravel(), flat[tuple(pairs[0])])
    groups = len(seed_groups(pick.size, LOCATE_MIN_GROUP, max_size=0))
    padded = max(-(-pick.size // groups), LOCATE_MIN_GROUP) * groups
    active = np.concatenate([located.ravel(), np.zeros(padded - pick.size, dtype=bool)])
    pick = np.concatenate([pick, np.full(padded - pick.size, pick[0])])
    seed_of, column_of = np.unravel_index(pick, located.shape)
    event_of = columns[column_of]
    lo = times[before_obs[seed_of, event_of]]
    hi = grid[seed_of, event_of]
    # Gathered on the host (an eager gather per leaf cost 40 ms for the T1 table's 64 seeds).
    per_pair = jax.tree.map(lambda leaf: np.asarray(leaf)[seed_of], (fixed, initial, train, test))
    start = jax.tree.map(lambda leaf: np.asarray(leaf)[seed_of, event_of], carry.before)
    shapes, levels = traced_shapes(events), jnp.asarray(levels, dtype=jnp.asarray(lo).dtype)
    fewest = np.asarray(steps, dtype=np.asarray(lo).dtype)

    def group(members: slice):
        mine = take_seeds((start, lo, hi, event_of, active, *per_pair), members)
        return _locate_program(system, solver, observe, shapes, *mine[:5], levels, fewest, *mine[5:])

    found, fired = over_seed_groups(group, padded, LOCATE_MIN_GROUP, max_size=0)
    times_found = np.full(bracket.shape, np.nan)
    use = np.zeros_like(bracket)
    found, fired, lo, hi = (np.asarray(a)[: located.size] for a in (found, fired, lo, hi))
    rows, cols = seed_of[: located.size], event_of[: located.size]
    good = active[: located.size] & fired & np.isfinite(found) & (found >= lo) & (found <= hi)
    times_found[rows[good], cols[good]] = found[good]
    use[rows[good], cols[good]] = True
    return Located(np.where(use, times_found, grid), use)
