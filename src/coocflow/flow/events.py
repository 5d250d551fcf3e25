"""Event times located between observations: the first time an observable
reaches a level, to the solver's tolerance rather than to the observation grid.

A system declares its events (`AbstractSystem.events`: eq. (1)'s first all-correct time, T0.5,
T', T*). While the flow runs, the compiled driver keeps, per seed and event, the parameters at the
last observation before the event first holds (`EventCarry`, part of the checkpointed carry).
After the run one compiled program (`flow.locate.locate`, in its own module so that discrete
training never imports Diffrax) restarts the flow from there to the next
observation with a Diffrax event on the event's gap, `value - level`, whose root a bisection
(`flow.locate.IntervalBisection`) finds on the solver's own dense interpolation. So an event time moves with the solver's
tolerance, not with `observe.points`: tests/test_events.py holds 100 and 400 observations to
1e-6 relative. Discrete training (GD, Adam) has no time between its steps: its events are the
first observed step, as on the grid.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.storage.checkpoint import AddedLater
from coocflow.systems.base import FirstHit


class EventCarry(eqx.Module, AddedLater):
    """Per seed (leading axis) and event: the parameters at the last observation before the
    event first held (`before`, an event axis after the seed axis), that observation (`before_obs`)
    and the first one where it held (`hit_obs`), -1 until known. Part of the flow's checkpointed
    carry; a checkpoint written before events existed resumes with it empty, and events that held
    before the resume then keep their grid time."""

    before: Any
    before_obs: jax.Array
    hit_obs: jax.Array


def event_carry(trainable: Any, n_seeds: int, n_events: int) -> EventCarry:
    """Empty bookkeeping for `n_events` events of the seed-batched `trainable` parameters."""
    return EventCarry(
        before=jax.tree.map(lambda leaf: jnp.zeros((leaf.shape[0], n_events) + leaf.shape[1:], leaf.dtype), trainable),
        before_obs=jnp.full((n_seeds, n_events), -1, dtype=jnp.int32),
        hit_obs=jnp.full((n_seeds, n_events), -1, dtype=jnp.int32))


def record_events(carry: EventCarry, params: Any, holds: jax.Array, index: jax.Array, t, events: tuple[FirstHit, ...],
                  ends: jax.Array, closing: tuple[int, ...]) -> EventCarry:
    """One seed, one observation at time `t` (traced): `holds` (events,) says which events hold at
    observation `index` (-1: padding, ignored). A first-hit event keeps the parameters of every
    observation before its first hit; a `last_entry` event those of every observation inside its
    window (t <= `ends`, and up to the first hit of event `closing` where that is >= 0) where it
    does not hold."""
    real = index >= 0
    first = (carry.hit_obs < 0) & holds & real
    hit_obs = jnp.where(first, index.astype(carry.hit_obs.dtype), carry.hit_obs)
    entry = jnp.asarray([e.last_entry for e in events], dtype=bool)
    closed_by = jnp.asarray([hit_obs[c] if c >= 0 else -1 for c in closing], dtype=hit_obs.dtype)
    in_window = (t > 0) & (t <= ends) & ((closed_by < 0) | (index <= closed_by))
    waiting = real & jnp.where(entry, ~holds & in_window, hit_obs < 0)
    hit_obs = jnp.where(entry, -1, hit_obs)

    def keep(kept, p):
        mask = waiting.reshape((-1,) + (1,) * p.ndim)
        return jnp.where(mask, p[None], kept)

    return EventCarry(before=jax.tree.map(keep, carry.before, params),
                      before_obs=jnp.where(waiting, index.astype(carry.before_obs.dtype), carry.before_obs),
                      hit_obs=hit_obs)


def event_holds(events: tuple[FirstHit, ...], observed: dict[str, jax.Array], levels: jax.Array, t) -> jax.Array:
    """Which of `events` hold at one observation at time `t` (traced), (events,) booleans."""
    if not events:
        return jnp.zeros((0,), dtype=bool)
    return jnp.stack([e.holds(observed, levels[k]) & ((t > 0) | (not e.after_start)) for k, e in enumerate(events)])


def event_settings(event: FirstHit) -> dict:
    """What fixes an event besides its name, as the manifest records it (`event_settings`) and
    verify compares before it reads a located time: its level, a last entry's window, and the
    fields of a dataclass `value` (Lemma 4.3's C)."""
    settings = {"level": float(event.level)}
    if event.last_entry:
        settings["window_end"] = float(event.window_end) if np.isfinite(event.window_end) else None
        settings["window_event"] = event.window_event
    if dataclasses.is_dataclass(event.value):
        settings.update(dataclasses.asdict(event.value))
    return settings


def closing_events(events: dict[str, FirstHit]) -> tuple[int, ...]:
    """Per event, the index of the event whose first hit closes its window (-1: none)."""
    names = list(events)
    return tuple(names.index(e.window_event) if e.window_event else -1 for e in events.values())


def traced_shapes(events: dict[str, FirstHit]) -> tuple[FirstHit, ...]:
    """The events as the compiled programs see them: levels and window ends are traced inputs."""
    return tuple(dataclasses.replace(e, level=0.0, window_end=0.0) for e in events.values())
