"""What a run will cost before it starts, from its System's cost model (`AbstractSystem.cost`).

`coocflow run` prints the estimate when a run looks long (`LONG_RUN_SECONDS`) and, where the System
knows a faster equivalent (eq. (1)'s Gram space for a weight-space run it follows exactly), how long
that would take; work estimated over `CONFIRM_SECONDS` asks before it starts in a terminal. eq. (1)'s
model and its measured constants are in `coocflow.systems.cost`. A System without a model of its own
gets no estimate (`estimate` returns None) rather than another model's guess.

An estimate is a guide within a factor of a few, not a promise; it exists so that a width that
would take hours says so at once instead of showing a progress bar stuck at 0%.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.systems.cost import BUILT_IN_COSTS, RunCost

LONG_RUN_SECONDS = 60.0
"""A run estimated to take longer than this gets its estimate printed before it starts."""
CONFIRM_SECONDS = 1800.0
"""Work (a run, a sweep's pending jobs, a width sweep's runs) estimated over this asks before it starts
in a terminal (`--yes` skips the question)."""


@dataclass(frozen=True)
class Estimate:
    """A run's expected wall time (s) and peak memory (bytes), and, where its System knows one, the time
    of a faster equivalent (`faster_seconds`) and how to ask for it (`faster`)."""

    seconds: float
    bytes: float
    faster_seconds: float | None = None
    faster: str = ""

    @property
    def long(self) -> bool:
        return self.seconds > LONG_RUN_SECONDS

    def sentence(self) -> str:
        """One line: the estimate and, where it would help, the faster way's."""
        text = f"estimated {duration(self.seconds)} and {self.bytes / 2**30:.2g} GiB (cost model: coocflow.estimate)"
        if self.faster_seconds is not None and self.faster_seconds < self.seconds / 10:
            how, _, flag = self.faster.rpartition(": ")
            text += f"; {how} in about {duration(self.faster_seconds)}: {flag}" if how else f"; {flag}"
        return text


def duration(seconds: float) -> str:
    """A wall time in the unit a person reads it in (s, min, h)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(config: Config) -> Estimate | None:
    """The cost `config`'s System expects of this run (`AbstractSystem.cost`); None where the System has
    no cost model."""
    cost_of = BUILT_IN_COSTS.get(config.system)
    if cost_of is not None:
        cost = cost_of(config)
    else:
        from coocflow.systems.registry import system_class  # lazy: imports JAX, which a built-in's estimate needs not

        cls = system_class(config.system)
        try:
            cost = cls.cost(config)
        except Exception as err:  # a user's own code: one line, not a traceback
            raise ConfigError(f"system: {cls.__name__}.cost raised {type(err).__name__}: {err}; fix it, or drop "
                              "cost (no estimate)") from None
        if cost is not None and not isinstance(cost, RunCost):
            raise ConfigError(f"system: {cls.__name__}.cost returned {type(cost).__name__}; return a "
                              "coocflow.systems.cost.RunCost(seconds, bytes) or None")
    return None if cost is None else Estimate(cost.seconds, cost.bytes, cost.faster_seconds, cost.faster)


def total_seconds(configs: Iterable[Config]) -> float:
    """What the runs of `configs` are estimated to take together, counting those whose System has a model."""
    return sum(cost.seconds for cost in map(estimate, configs) if cost is not None)
