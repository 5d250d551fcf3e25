"""What a run will cost before it starts: a System's `cost` hook returns a `RunCost`, and eq. (1)'s
System answers with the cost model below, measured here.

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

The deep and Markov systems use the weight-space part, counted over eq. (1)'s widths, as a rough
guide (`BUILT_IN_COSTS`). A System without a model of its own (the default) gets no estimate: eq. (1)'s constants
applied to another model were 1000x off (20 M steps of a two-parameter regression estimated at
57 minutes took 4 s).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from coocflow.config import GRAM_METHODS, Config

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
class RunCost:
    """A run's expected wall time (s) and peak memory (bytes) on this kind of machine; `faster_seconds`
    the time of an equivalent way to run it and `faster` how (a `--set` and why), where there is one."""

    seconds: float
    bytes: float
    faster_seconds: float | None = None
    faster: str = ""


def updates(config: Config) -> int:
    """Gradient evaluations: the steps of a discrete method, about `FLOW_EVALUATIONS` for the flow."""
    return FLOW_EVALUATIONS if config.is_flow else config.train.steps


def parallel_share(config: Config) -> float:
    """Seeds run in groups, one per core: the wall time of a seed's work times this."""
    seeds = len(config.seed_list)
    return seeds / min(seeds, os.cpu_count() or 1)


def gram_applies(config: Config) -> bool:
    """Whether the Gram space follows this run exactly (full-batch GD or the flow of eq. (1))."""
    return config.train.method in GRAM_METHODS and not config.train.batch_size and config.model.layers == 1


def weight_space_cost(config: Config) -> RunCost:
    """The weight-space model over eq. (1)'s widths: 3 ns a step per entry of W and the three m x d
    matrices, the neuron observables' W W^T at every observation."""
    m, m1, d = config.model.m, config.model.m1, config.data.d
    entries = m * m1 + 3 * m * d
    step = SECONDS_PER_W_ENTRY * entries
    observation = 2.0 * m1 * m1 * m * SECONDS_PER_OBSERVATION_FLOP + step
    seconds = COMPILE_SECONDS + parallel_share(config) * (updates(config) * step + config.observe.points * observation)
    return RunCost(seconds, 8.0 * len(config.seed_list) * (WEIGHT_COPIES * entries + m1 * m1))


def gram_space_cost(config: Config) -> RunCost:
    """The Gram-space model of eq. (1): a width-free step, plus the resolved neurons' Grams."""
    m1, d = config.model.m1, config.data.d
    per_update = GRAM_SECONDS_PER_RHS if config.is_flow else GRAM_SECONDS_PER_STEP
    if config.model.neurons:
        per_update += GRAM_SECONDS_PER_NEURON_ENTRY * m1 * (m1 + d)
    seconds = COMPILE_SECONDS + parallel_share(config) * (
        updates(config) * per_update + config.observe.points * GRAM_SECONDS_PER_OBSERVATION)
    held = 8.0 * len(config.seed_list) * WEIGHT_COPIES * (4 * d * d + (m1 * (m1 + d) if config.model.neurons else 0))
    return RunCost(seconds, held)


def eq1_cost(config: Config) -> RunCost:
    """eq. (1)'s run in its space; in weight space, the Gram space's time too where it follows the run
    exactly."""
    gram = gram_space_cost(config)
    if config.model.space == "gram":
        return gram
    weights = weight_space_cost(config)
    if not (gram_applies(config) and math.isfinite(gram.seconds)):
        return weights
    return RunCost(weights.seconds, weights.bytes, gram.seconds,
                   "the Gram space follows this run exactly: --set model.space=gram")


BUILT_IN_COSTS = {"eq1": eq1_cost, "deep": weight_space_cost, "markov": weight_space_cost}
"""The built-in Systems' `cost`, read without importing them (and JAX), as `coocflow.systems.traits` is:
`coocflow sweep`'s parent process estimates eq. (1)'s jobs without training anything."""
