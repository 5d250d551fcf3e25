"""What a task implements to get training, resume, sweeps, compare and report.

`AbstractSystem` is the abstract base (Equinox's pattern: abstract methods here, final
implementations below it) of the tasks coocflow trains through `coocflow.flow.system`: the deep
transformer (`systems.deep`), the Markov next-token task (`systems.markov`) and any task a user
writes (docs/systems.md; `examples/icl_regression.py`). A system is built from a run's `Config`
by `from_config`, which validates the settings it reads and keeps them as static fields; the
optimizer and the solver are not part of it, so a new learning rate or tolerance reuses every
compiled program. Its parameters are any pytree of arrays; all of a system's functions are pure
and see one seed (the integrators vmap them over the seed ensemble).
"""

from __future__ import annotations

import abc
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from coocflow.config import Config, build_table
from coocflow.errors import ConfigError
from coocflow.systems.cost import RunCost

FULL_BATCH_METHODS = ("gd", "momentum", "adam", "adamw", "flow")
"""What a system trains with unless it says otherwise: every full-batch Optax method and the flow
(a system whose data has the samples on the leading axis of every leaf may add `sgd`)."""

WEIGHTS_NORM2 = "weights_norm2"
"""Sum of squares of the moving parameters, observed with the loss so that non-finite weights stop
a seed (the driver's watched quantities); dropped from the series that come back."""


PROGRAM_INPUTS = ("name", "seed", "seeds", "train.t_end", "optimizer.lr", "optimizer.momentum", "optimizer.b1",
                  "optimizer.b2", "optimizer.eps", "optimizer.weight_decay", "solver.rtol", "solver.atol",
                  "observe.start", "observe.checkpoint_every_s", "observe.locate_steps")
"""Config keys whose values the compiled loops take as inputs, never as shapes or static settings:
the seeds' values (not their number), the learning rate and the optimizer's other hyperparameters,
the solver's tolerances, the flow's end and its first observed time (the observation grid's
values), how often to checkpoint, the fewest steps of a locating solve. Runs that differ only in these share
one compiled program.
Snapshots are not among them: their number shapes the carry and the grid."""


STOP_AT_REACHED = "reached"
"""`train.stop_at` for the System's `reached` (eq. (1): every training sample correct)."""


def stop_events(events: dict[str, "FirstHit"]) -> list[str]:
    """The events a run can stop at (`train.stop_at`): the first-hit ones, whose time is known
    once it holds (a `last_entry` event is known only at the end of its window)."""
    return [name for name, event in events.items() if not event.last_entry]


@dataclass(frozen=True)
class FirstHit:
    """The first observed time at which `value(observed)` is above `level` (`rising`) or below it
    (not `rising`); `strict` excludes equality, `after_start` ignores t = 0 (so an event that
    holds at the start is the first observation after it). `value` reads one observation (the dict
    a system's `observe` returns) and must be continuous in time, so that its crossing of `level`
    can be located.

    With `last_entry`, the event is instead the start of the last stretch of observations, in
    (0, window end], over which it holds without a break, when it holds at the window's last
    observation (Lemma 4.3's T0.5 for a declared C: the sandwich holds from T0.5 to T1). The window
    ends at `window_end` or, with `window_event`, at the first observation of that event."""

    value: Callable[[dict[str, jax.Array]], jax.Array]
    level: float = 0.0
    rising: bool = True
    strict: bool = False
    after_start: bool = False
    needs: tuple[str, ...] = ()
    """The observables `value` reads: locating the event computes only these (`observe_only`);
    empty: every observable."""
    last_entry: bool = False
    window_end: float = float("inf")
    window_event: str | None = None

    def gap(self, observed: dict[str, Any], level) -> Any:
        """How far past the level an observation is: >= 0 (> 0 when `strict`) once the event holds."""
        value = self.value(observed)
        return value - level if self.rising else level - value

    def holds(self, observed: dict[str, Any], level) -> Any:
        gap = self.gap(observed, level)
        return gap > 0 if self.strict else gap >= 0

    def first_index(self, t: np.ndarray, series: dict[str, np.ndarray], level: float,
                    window_end: float = float("inf")) -> int | None:
        """The observation at which the event first holds on the grid (one seed's series), or None;
        with `last_entry`, where its last unbroken stretch up to `window_end` starts."""
        series = {name: np.asarray(values)[None] for name, values in series.items()}
        found = int(self.first_indices(t, series, level, np.asarray([window_end], dtype=np.float64))[0])
        return None if found < 0 else found

    def first_indices(self, t: np.ndarray, series: Mapping[str, np.ndarray], level: float,
                      window_end: np.ndarray | float = float("inf")) -> np.ndarray:
        """`first_index` for every seed at once: `series` are (seeds, observations) arrays, `window_end`
        one end per seed (or one for all); -1 where a seed has none. `value` is applied to the whole
        arrays, one call per event instead of one per seed (a sweep of 1024 seeds spent 6.6 s in the
        per-seed calls); a `value` that does not broadcast over the seed axis is applied seed by seed."""
        t = np.asarray(t, dtype=np.float64)
        n_seeds = len(next(iter(series.values()))) if series else 0
        ends = np.broadcast_to(np.asarray(window_end, dtype=np.float64), (n_seeds,))
        with np.errstate(invalid="ignore"):
            try:
                held = np.asarray(self.holds(series, level), dtype=bool)
            except (TypeError, ValueError, IndexError):
                held = None
            if held is None or held.shape != (n_seeds, len(t)):
                held = np.stack([np.asarray(self.holds({name: values[s] for name, values in series.items()}, level),
                                            dtype=bool) for s in range(n_seeds)]) if n_seeds else np.zeros((0, len(t)), bool)
        held = held & np.isfinite(t)
        if self.last_entry:
            inside = (t > 0) & (t <= ends[:, None])
            last = np.where(inside.any(axis=1), len(t) - 1 - np.argmax(inside[:, ::-1], axis=1), -1)
            closed = ~(np.isfinite(ends) & (ends > t[-1])) & (last >= 0)
            closed &= held[np.arange(n_seeds), np.maximum(last, 0)]
            broken = inside & ~held
            last_broken = np.where(broken.any(axis=1), len(t) - 1 - np.argmax(broken[:, ::-1], axis=1), -1)
            first_inside = np.argmax(inside, axis=1)
            return np.where(closed, np.where(last_broken >= 0, last_broken + 1, first_inside), -1)
        if self.after_start:
            held = held & (t > 0)
        return np.where(held.any(axis=1), np.argmax(held, axis=1), -1)


class AbstractSystem(eqx.Module):
    """A task: its parameters, data, loss, named observables and which parameters train."""

    name: ClassVar[str] = "system"
    methods: ClassVar[tuple[str, ...]] = FULL_BATCH_METHODS
    """The `train.method`s it supports (checked by `check_training`)."""
    loss_name: ClassVar[str] = "loss"
    """The observable that is the training loss: a seed whose value of it (or of its weights' norm)
    turns non-finite has diverged there."""
    listed_keys: ClassVar[tuple[str, ...]] = ()
    """The built-in config keys (dotted, `data.n`) this System reads besides its own `[settings]`, which
    `coocflow ls` shows beside them (each run's manifest records them, so the listing imports nothing);
    empty: its settings alone (the data's n, L, d for a System without settings)."""
    run_type: ClassVar[str] = "coocflow.run.base:TrainedRun"
    """The `coocflow.run.TrainedRun` class of this System's runs, as 'package.module:ClassName' or
    'path/to/file.py:ClassName': what its run folder holds and how its figures are drawn (the generic
    run by default; eq. (1)'s adds its T1 state, test set and Figure 1). Named, not imported: a
    System knows nothing of run folders."""
    key_stream: ClassVar[int] = 1
    """The initial parameters of seed s come from fold_in(PRNGKey(s), key_stream)."""
    Settings: ClassVar[type | None] = None
    """The System's own parameters: a frozen dataclass whose typed fields (with defaults, and help
    text as `field(metadata={"help": ...})`) are read from the config's `[settings]` (`--set
    system.KEY=V`), typed and checked by `settings_of`, listed by `coocflow keys --system SPEC`.
    None: the System reads only the built-in sections."""

    @classmethod
    def theorem(cls) -> Any:
        """The theorem the System declares (a `coocflow.verify.Theorem`), which `coocflow verify`
        judges on its runs; None (the default): it declares none (docs/theorems.md)."""
        return None

    @classmethod
    def cost(cls, config: Config) -> RunCost | None:
        """What a run of this System at `config` is expected to cost (a `coocflow.systems.cost.RunCost`:
        seconds and bytes on this kind of machine), which `coocflow run` prints when it is long and asks
        about past 30 minutes, and a sweep adds up over its jobs; None (the default): no cost model, so
        nothing is estimated and nothing asked."""
        return None

    @classmethod
    def settings_of(cls, config: Config) -> Any:
        """The config's `[settings]` as the System's `Settings` (defaults filled in): one line naming
        `settings.KEY` for an unknown key (with a did-you-mean) or a value of the wrong type."""
        if cls.Settings is None:
            if config.settings:
                raise ConfigError(f"settings: the {cls.name} system declares no settings of its own; drop "
                                  + ", ".join(f"settings.{key}" for key in config.settings))
            return None
        return build_table(cls.Settings, "settings", dict(config.settings))

    @classmethod
    def program_inputs(cls, config: Config) -> tuple[str, ...]:
        """The config keys (dotted) whose values this System's compiled programs take as inputs at
        `config`: `PROGRAM_INPUTS`, plus those the System's `traced` form drops (eq. (1) adds its init
        scales and, in the Gram space, its widths). A sweep groups its jobs by the rest
        (`coocflow.sweep.spec.program_key`), so jobs that share a program run one after another in
        one process; a wrong entry costs only time, and the sweep reports the programs it traced."""
        return PROGRAM_INPUTS

    @classmethod
    @abc.abstractmethod
    def from_config(cls, config: Config) -> "AbstractSystem":
        """The system a run's configuration describes; refuses settings it cannot use (ConfigError)."""

    @abc.abstractmethod
    def init(self, key: jax.Array) -> Any:
        """One seed's initial parameters, drawn from `key`."""

    @abc.abstractmethod
    def data(self, seed: int) -> tuple[Any, Any]:
        """One seed's (training set, test set), any pytrees of arrays."""

    @abc.abstractmethod
    def loss(self, params: Any, train: Any) -> jax.Array:
        """The training objective; the flow is d(params)/dt = -grad loss."""

    @abc.abstractmethod
    def observe(self, params: Any, initial: Any, train: Any, test: Any) -> dict[str, jax.Array]:
        """Every named observable at `params` (scalars, or vectors that become one column per
        entry); `initial` are the parameters at t = 0. Must include `loss_name`."""

    def objective(self, train: Any) -> Callable[[Any], jax.Array]:
        """The loss as a function of the parameters alone: where a system precomputes what the
        loss needs from the data (once per seed, outside the training loop), it overrides this."""
        return lambda params: self.loss(params, train)

    def trainable(self, params: Any) -> Any:
        """A filter spec for `eqx.partition`: True where a parameter trains (default: all)."""
        return jax.tree.map(lambda _: True, params)

    def split(self, params: Any) -> tuple[Any, Any]:
        """(moving part, fixed part) of the (possibly seed-stacked) parameters: by `trainable` by
        default; eq. (1) splits by its own rule (a Gram state moves as a whole)."""
        return eqx.partition(params, self.trainable(params))

    def join(self, moving: Any, fixed: Any) -> Any:
        """The inverse of `split`."""
        return eqx.combine(moving, fixed)

    def gradient(self, objective: Callable[[Any], jax.Array], moving: Any, fixed: Any) -> Any:
        """grad of the objective over the moving part."""
        return jax.grad(lambda p: objective(self.join(p, fixed)))(moving)

    def velocity(self, objective: Callable[[Any], jax.Array], moving: Any, fixed: Any, train: Any) -> Any:
        """d(moving)/dt along the flow: -grad of the objective by default; a system with an exact
        velocity of its own (eq. (1)'s Gram space, Appendix C) overrides it."""
        return jax.tree.map(jnp.negative, self.gradient(objective, moving, fixed))

    def step(self, optimizer: optax.GradientTransformation, hyper: dict[str, jax.Array],
             objective: Callable[[Any], jax.Array], moving: Any, state: Any, fixed: Any, data: Any) -> tuple[Any, Any]:
        """One discrete step: `optimizer`'s update along the gradient by default; eq. (1)'s Gram
        space takes the exact image of a gradient step on the weights instead."""
        updates, state = optimizer.update(self.gradient(objective, moving, fixed), state, moving)
        return optax.apply_updates(moving, updates), state

    def error_norm(self, error: Any) -> jax.Array:
        """The norm the flow's step-size control takes of a step's scaled error (RMS by default)."""
        import optimistix  # lazy: only the flow's step-size control needs it; discrete training never imports it

        return optimistix.rms_norm(error)

    def reached(self, observed: dict[str, jax.Array]) -> jax.Array:
        """Whether an observation is the event whose parameters the run keeps (`state_t1.npz`):
        every training sample correct for eq. (1); never by default."""
        return jnp.asarray(False)

    def observe_only(self, names: frozenset[str], params: Any, initial: Any, train: Any, test: Any
                     ) -> dict[str, jax.Array]:
        """The observables `names` (at least): what locating an event evaluates at every Newton
        iteration, so a system whose `observe` is large may compute just these. All of them by default."""
        return self.observe(params, initial, train, test)

    def events(self) -> dict[str, FirstHit]:
        """Named event times the flow locates between observations (`flow.events`): the first time
        an observable reaches a level. None by default; eq. (1): the first all-correct time, T0.5,
        T' and T*. The compiled programs take the levels as inputs, so `traced()` may keep
        placeholders for levels that depend on dropped settings."""
        return {}

    def watched(self) -> tuple[str, ...]:
        """The observables whose first non-finite value marks a seed as diverged: the loss and the
        parameters' squared norm by default."""
        return (self.loss_name, WEIGHTS_NORM2)

    def traced(self) -> "AbstractSystem":
        """The system as the compiled loops see it (it keys their programs): a system whose settings
        only building the ensemble reads drops them here, so that a new value of one reuses the
        compiled programs (eq. (1)'s Gram space at another width m)."""
        return self

    def check_training(self, config: Config) -> None:
        """Refuse a training the system does not support, with the fix."""
        method = config.train.method
        if method not in self.methods:
            raise ConfigError(f"train.method: the {self.name} system trains with {', '.join(self.methods)} "
                              f"(full batch), not '{method}'; try train.method={self.methods[0]}")
        if "sgd" not in self.methods and config.train.batch_size not in (0, config.data.n):
            raise ConfigError(f"train.batch_size: the {self.name} system trains on the full batch; set "
                              f"train.batch_size=0 (got {config.train.batch_size})")
        self.check_stop_at(config)

    def check_stop_at(self, config: Config) -> None:
        """`train.stop_at` names `reached` or, for the flow, one of the system's first-hit events;
        a run that stops early cannot keep weights at later `observe.snapshots`."""
        stop_at = config.train.stop_at
        if not stop_at or stop_at == STOP_AT_REACHED:
            pass
        elif not config.is_flow:
            raise ConfigError(f"train.stop_at: a discrete method stops only at '{STOP_AT_REACHED}' (its events are "
                              f"read off the observed steps after the run), not '{stop_at}'")
        elif stop_at not in stop_events(self.events()):
            names = ", ".join([STOP_AT_REACHED, *stop_events(self.events())])
            raise ConfigError(f"train.stop_at: {stop_at!r} is not an event of the {self.name} system that a run "
                              f"can stop at; use one of: {names}")
        if stop_at and config.observe.snapshots:
            raise ConfigError("train.stop_at: a run that stops at an event keeps no weights at observe.snapshots "
                              "after it; drop one of the two")
        unknown = [name for name in config.observe.locate if name not in self.events()]
        if unknown:
            raise ConfigError(f"observe.locate: {unknown[0]!r} is not an event of the {self.name} system; use some of: "
                              + (", ".join(self.events()) or "(it declares none)"))
        self.check_observed(config)

    def observable_names(self) -> tuple[str, ...]:
        """The names `observe` returns, read off its shapes at seed 0 (nothing is computed)."""
        params = jax.eval_shape(self.init, jax.random.PRNGKey(0))
        train, test = self.data(0)
        return tuple(jax.eval_shape(lambda p: self.observe(p, p, train, test), params))

    def check_observed(self, config: Config) -> None:
        """`observe.only` names observables of the system: one line naming the first that is not, with the
        closest name."""
        if not config.observe.only:
            return
        names = self.observable_names()
        unknown = [name for name in config.observe.only if name not in names]
        if unknown:
            close = difflib.get_close_matches(unknown[0], names, n=1, cutoff=0.6)
            raise ConfigError(f"observe.only: {unknown[0]!r} is not an observable of the {self.name} system"
                              + (f"; did you mean {close[0]}?" if close else
                                 f"; it records {', '.join(names[:8])}{', ...' if len(names) > 8 else ''}"))

    def arrays(self, params: Any) -> dict[str, np.ndarray]:
        """The parameters as named arrays (pytree paths, e.g. `blocks.0.W_Q`), for run folders."""
        return named_arrays(params)

    def from_arrays(self, arrays: dict[str, np.ndarray]) -> Any:
        """The inverse of `arrays`: the system's own parameter type with the named arrays as its
        leaves (a leading seed axis, if they have one, is kept), the one codec between a run folder
        and the system. The structure is `init`'s, traced without computing anything."""
        template = jax.eval_shape(self.init, jax.random.PRNGKey(0))
        paths, treedef = jax.tree_util.tree_flatten_with_path(template)
        names = [_name(path) for path, _ in paths]
        missing = [name for name in names if name not in arrays]
        if missing:
            raise ValueError(f"the {self.name} system's parameters need arrays {missing} (found {sorted(arrays)})")
        return jax.tree_util.tree_unflatten(treedef, [jnp.asarray(arrays[name]) for name in names])


def named_arrays(tree: Any) -> dict[str, np.ndarray]:
    """Every array leaf of `tree` under its dotted pytree path."""
    leaves, _ = jax.tree_util.tree_flatten_with_path(tree)
    return {_name(path): np.asarray(leaf) for path, leaf in leaves}


def _name(path: tuple) -> str:
    return ".".join(_part(key) for key in path) or "value"


def _part(key: Any) -> str:
    for attribute in ("name", "key", "idx"):
        if hasattr(key, attribute):
            return str(getattr(key, attribute))
    return str(key)
