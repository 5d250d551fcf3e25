"""What a run will cost before it starts: wall time and memory from a cost model measured here.

`coocflow run` prints the estimate when a run looks long (`LONG_RUN_SECONDS`) and, when the run
is in weight space and the Gram space can follow it exactly, how long the Gram space would take.
The constants were measured on the 2-core development machine (float64, 2026-12-01):

- weight space, one gradient step of eq. (1): 0.9-3 ns per entry of W (m1 x m) once W leaves the
  cache (m = m1 = 2048: 3.7 ms a step; 8192: 202 ms, benchmarks/README.md `gram`); the model takes
  3 ns, the upper end.
- weight space, one observation: the neuron observables form W W^T, 2 m1^2 m flops at about
  22 GFLOP/s (m = m1 = 4096 with 11 observations: 67 s; 2048: 8.4 s).
- the Gram space: about 200 us a GD step and 130 us a flow right-hand side at any width (benchmarks
  `gram`), 1e-3 s an observation; resolved neurons add about 6e-8 s per entry of their m1 x (m1 + d)
  Grams to each (`GRAM_SECONDS_PER_NEURON_ENTRY`).
- the flow takes about 2,000 right-hand sides to t = 300 on the paper's data (Dopri8: 1,858 at
  m = 10^6), and compiling a run about 4 s.

An estimate is a guide within a factor of a few, not a promise; it exists so that a width that
would take hours says so at once instead of showing a progress bar stuck at 0%.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from coocflow.config import GRAM_METHODS, Config

LONG_RUN_SECONDS = 60.0
"""A run estimated to take longer than this gets its estimate printed before it starts."""
CONFIRM_SECONDS = 1800.0
"""Work (a run, a sweep's pending jobs, a width sweep's runs) estimated over this asks before it starts
in a terminal (`--yes` skips the question)."""
SECONDS_PER_W_ENTRY = 3e-9
SECONDS_PER_OBSERVATION_FLOP = 1 / 22e9
GRAM_SECONDS_PER_STEP = 200e-6
GRAM_SECONDS_PER_RHS = 130e-6
GRAM_SECONDS_PER_OBSERVATION = 1e-3
GRAM_SECONDS_PER_NEURON_ENTRY = 6e-8
"""With `model.neurons`, a flow right-hand side also moves the m1 x (m1 + d) neuron Grams: measured on
the theory m1 sweep (`verify theory --scaling m1`, 8 seeds on 2 cores): 9 min at m1 = 1024, where this
term is 0.066 s a right-hand side; 81 s at m1 = 64, where compiling dominates."""
FLOW_EVALUATIONS = 2000
COMPILE_SECONDS = 4.0
WEIGHT_COPIES = 6
"""Copies of the weights a step holds: the weights, their gradient, the optimizer's or solver's
state and XLA's temporaries (the flow's stages add more; Dopri8 has 13)."""


@dataclass(frozen=True)
class Estimate:
    """A run's expected wall time (s) and peak memory (bytes), and the Gram space's time for the
    same run where it applies (None where it does not, or the run already is in the Gram space)."""

    seconds: float
    bytes: float
    gram_seconds: float | None

    @property
    def long(self) -> bool:
        return self.seconds > LONG_RUN_SECONDS

    def sentence(self) -> str:
        """One line: the estimate and, where it would help, the Gram space's."""
        text = f"estimated {duration(self.seconds)} and {self.bytes / 2**30:.2g} GiB (cost model: coocflow.estimate)"
        if self.gram_seconds is not None and self.gram_seconds < self.seconds / 10:
            text += (f"; the Gram space follows this run exactly in about {duration(self.gram_seconds)}: "
                     "--set model.space=gram")
        return text


def duration(seconds: float) -> str:
    """A wall time in the unit a person reads it in (s, min, h)."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _updates(config: Config) -> int:
    """Gradient evaluations: the steps of a discrete method, about `FLOW_EVALUATIONS` for the flow."""
    return FLOW_EVALUATIONS if config.is_flow else config.train.steps


def _parallel_share(config: Config) -> float:
    """Seeds run in groups, one per core: the wall time of a seed's work times this."""
    seeds = len(config.seed_list)
    return seeds / min(seeds, os.cpu_count() or 1)


def gram_applies(config: Config) -> bool:
    """Whether the Gram space follows this run exactly (full-batch GD or the flow of eq. (1))."""
    return config.train.method in GRAM_METHODS and not config.train.batch_size and config.model.layers == 1


def estimate(config: Config) -> Estimate:
    """The cost model above applied to `config` (eq. (1), weight or Gram space)."""
    m, m1, d = config.model.m, config.model.m1, config.data.d
    points = config.observe.points
    share = _parallel_share(config)
    gram_per_update = GRAM_SECONDS_PER_RHS if config.is_flow else GRAM_SECONDS_PER_STEP
    if config.model.neurons:
        gram_per_update += GRAM_SECONDS_PER_NEURON_ENTRY * m1 * (m1 + d)
    gram_seconds = COMPILE_SECONDS + share * (_updates(config) * gram_per_update + points * GRAM_SECONDS_PER_OBSERVATION)
    gram_bytes = 8.0 * len(config.seed_list) * WEIGHT_COPIES * (4 * d * d + (m1 * (m1 + d) if config.model.neurons else 0))
    if config.model.space == "gram":
        return Estimate(gram_seconds, gram_bytes, None)
    entries = m * m1 + 3 * m * d
    step = SECONDS_PER_W_ENTRY * entries
    observation = 2.0 * m1 * m1 * m * SECONDS_PER_OBSERVATION_FLOP + step
    seconds = COMPILE_SECONDS + share * (_updates(config) * step + points * observation)
    memory = 8.0 * len(config.seed_list) * (WEIGHT_COPIES * entries + m1 * m1)
    return Estimate(seconds, memory, gram_seconds if gram_applies(config) and math.isfinite(gram_seconds) else None)
