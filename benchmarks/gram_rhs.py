"""Time the Gram-space flow field against the weight-space gradient: `python benchmarks/gram_rhs.py`.

For each case: `gram_velocity` (the right-hand side of the Gram system, coocflow.model.gram)
and `gram_gd_step`, jitted, timed after a warm-up call over `--repeats` calls (median and
minimum), and the weight-space gradient `loss_grad` at m = 128, m1 = 256 (the paper's widths)
the same way. `in loop` is gram_velocity evaluated 20 times inside one compiled fori_loop, as
an ODE solver runs it. A single call allocates its d x d outputs afresh, and where a page fault
is slow that allocation, not the arithmetic, dominates it: on the 2-core development VM (about
20 us per first-touched 4 KiB page) d = 1000, n = 60 took 10-20 ms per call with glibc's
defaults and 3-5 ms with MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824,
against 2.6-4.7 ms in the loop either way. The target is gram_velocity under 5 ms at d = 1000
with distinct tokens (n = 60, L = 5), judged on the in-loop time.
"""

from __future__ import annotations

import argparse
import time

import coocflow  # noqa: F401  (float64)
import jax
import numpy as np

from coocflow.api import resolve_config
from coocflow.bench import LOOP_EVALUATIONS, repeated_velocity
from coocflow.config import random_slots
from coocflow.model import loss_grad
from coocflow.model.gram import gram_gd_step, gram_velocity, grams_from_weights
from coocflow.systems.eq1 import build_model, build_problem

CASES = (
    ("d=64 uniform n=60 L=5", {"data.n": 60, "data.L": 5, "data.d": 64, "data.random_tokens": "uniform"}),
    ("d=1000 distinct n=60 L=5", {"data.n": 60, "data.L": 5, "data.d": 1000, "data.random_tokens": "distinct"}),
    ("d=1000 distinct n=300 L=5", {"data.n": 300, "data.L": 5, "data.d": 1000, "data.random_tokens": "distinct"}),
)
"""n = 60, L = 5 hold 160 random slots and n = 300, L = 5 hold 800 (config.random_slots), so
both fit distinct tokens in d = 1000; the second uses 803 of the 1000 tokens."""
TARGET_MS = 5.0


def call_ms(fn, *args, repeats: int) -> tuple[float, float]:
    """(median, minimum) wall time of `fn(*args)` in ms, after one warm-up (compiling) call."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times)), 1e3 * float(np.min(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    velocity, step, gradient = jax.jit(gram_velocity), jax.jit(gram_gd_step), jax.jit(loss_grad)
    print("ms per call, median / min over", args.repeats, "calls")
    print(f"{'case':27s} {'tokens':>6s} {'gram_velocity':>15s} {'in loop':>13s} {'gram_gd_step':>15s} "
          f"{'loss_grad m=128':>15s}")
    for name, overrides in CASES:
        config = resolve_config("paper", {**overrides, "model.m": 128, "model.m1": 256}, seed=0)
        model, data = build_model(config), build_problem(config).train
        used = len(np.unique(np.asarray(data.tokens)))
        assert config.data.random_tokens != "distinct" or used == random_slots(config.data.n, config.data.L) + 3
        state = grams_from_weights(model)
        v_med, v_min = call_ms(velocity, state, data, repeats=args.repeats)
        loop_med, loop_min = call_ms(repeated_velocity, state, data, repeats=max(3, args.repeats // 4))
        s_med, s_min = call_ms(step, state, data, 0.01, repeats=args.repeats)
        g_med, g_min = call_ms(gradient, model, data, repeats=args.repeats)
        verdict = ""
        if config.data.d >= 1000 and config.data.n == 60:
            verdict = "  target met" if loop_med / LOOP_EVALUATIONS < TARGET_MS else "  target missed"
        print(f"{name:27s} {used:6d} {v_med:7.2f} /{v_min:6.2f} {loop_med / LOOP_EVALUATIONS:5.2f} /"
              f"{loop_min / LOOP_EVALUATIONS:6.2f} {s_med:7.2f} /{s_min:6.2f} {g_med:7.2f} /{g_min:6.2f}{verdict}")


if __name__ == "__main__":
    main()
