"""Where a T1-table run's solve spends its time: `python benchmarks/solver_step.py`.

The T1 table (benchmarks/t1_table.toml: n = 12, L = 3, d = 16, the Gram space) integrates a state of
4 d x d Grams, G, s, m and m1 (1043 float64 per seed) with Dopri8. This script separates the two
costs of one solver step, per seed, for seed batches of B = 1, 8, 32 and 128 seeds (`jax.vmap`, one
thread, as one of the driver's seed groups runs):

1. the right-hand side: `gram_velocity` on the table's data (m = 65536), evaluated 100 times inside
   one compiled `fori_loop`, microseconds per seed and evaluation;
2. the solver's own arithmetic: a Diffrax solve (Dopri8, then Tsit5; PID controller at rtol = atol =
   1e-9, the RMS norm) of the linear field dy/dt = -1e6 y on a pytree of the Gram state's shapes, so
   that the right-hand side costs next to nothing; microseconds per seed and accepted-or-rejected step.

A step of Dopri8 evaluates the right-hand side 12 times (13 stages, the last reused), so step cost =
(2) + 12 x (1). Each number is the second call of a compiled program (the first compiles).
"""

from __future__ import annotations

import argparse
import json
import time

import coocflow  # noqa: F401  (float64)
import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import optimistix

from coocflow.api import resolve_config
from coocflow.model.gram import gram_velocity
from coocflow.run.eq1 import build_ensemble

TABLE = {"model.space": "gram", "model.neurons": False, "init.scheme": "theory", "init.c0": 0.004,
         "init.c1": 1.0, "init.gram_from": "sampled", "data.n": 12, "data.L": 3, "data.d": 16, "data.n_test": 12,
         "data.random_tokens": "distinct", "model.m": 65536, "model.m1": 8192}
"""The T1 table's configuration at one of its widths (benchmarks/t1_table.toml)."""


def timed(fn, *args) -> float:
    jax.block_until_ready(fn(*args))
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def velocity_us(batch: int, evaluations: int = 100) -> float:
    """(1): microseconds per seed and evaluation of the Gram right-hand side."""
    state, problem = build_ensemble(resolve_config("theory", TABLE, n_seeds=batch))

    def run(state, train):
        def body(_, s):
            return jax.tree.map(lambda a, b: a + 1e-12 * b, s, gram_velocity(s, train))
        return jax.lax.fori_loop(0, evaluations, body, state)

    return timed(jax.jit(jax.vmap(run)), state, problem.train) / evaluations / batch * 1e6


def solver_us(batch: int, solver: diffrax.AbstractSolver) -> tuple[float, float]:
    """(2): microseconds per seed and step of `solver` on a linear field over the Gram state's
    shapes, and the mean number of steps."""
    rng = np.random.default_rng(0)
    shapes = [(16, 16)] * 4 + [(16,)] + [()] * 3
    y0 = [jnp.asarray(rng.standard_normal((batch, *shape))) for shape in shapes]

    def solve(y):
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(lambda t, y, args: jax.tree.map(lambda a: -1e6 * a, y)), solver, 0.0, 9e-5, None, y,
            saveat=diffrax.SaveAt(t1=True), max_steps=4096, throw=False,
            stepsize_controller=diffrax.PIDController(rtol=1e-9, atol=1e-9, norm=optimistix.rms_norm))
        return solution.ys, solution.stats["num_steps"]

    program = jax.jit(jax.vmap(solve))
    seconds = timed(program, y0)
    steps = float(np.mean(np.asarray(program(y0)[1])))
    return seconds / batch / steps * 1e6, steps


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,8,32,128", help="seed batch sizes, comma-separated")
    parser.add_argument("--json", default=None, help="also write the numbers here")
    args = parser.parse_args(argv)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        dopri8, dopri8_steps = solver_us(batch, diffrax.Dopri8())
        tsit5, tsit5_steps = solver_us(batch, diffrax.Tsit5())
        rows.append({"batch": batch, "velocity_us": velocity_us(batch), "dopri8_step_us": dopri8,
                     "dopri8_steps": dopri8_steps, "tsit5_step_us": tsit5, "tsit5_steps": tsit5_steps})
        row = rows[-1]
        print(f"B = {batch:4d}: right-hand side {row['velocity_us']:7.1f} us, Dopri8's own step {dopri8:7.1f} us "
              f"({dopri8_steps:.0f} steps), Tsit5's {tsit5:6.1f} us ({tsit5_steps:.0f} steps), per seed", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(rows, out, indent=1)
    return {"rows": rows}


if __name__ == "__main__":
    main()
