"""The gradient flow d(theta)/dt = -grad L(theta) as an ODE, integrated with Diffrax.

An adaptive Runge-Kutta solver (Dopri8 by default; Tsit5 and Dopri5 selectable) with a PID
step-size controller follows the flow at the tolerances `rtol`, `atol`; `kvaerno5` is an implicit (stiff)
solver whose Newton steps use matrix-free GMRES on Hessian-vector products. Only the observables
are saved at the observation times (SaveAt with a function), never a trajectory of weights
(a chunk's weights at its own observed times are saved only to keep the snapshots among them).
The solve is vmapped over seeds; rtol and atol are traced arrays, so new tolerances do not
recompile. Phase 2 is slow (loss ~ 1/t), so the solver's steps grow with t and t = 1e6 costs
under a thousand gradient evaluations. Dopri8 is the default because at the same rtol (1e-6) it
reached t = 1e6 with a relative loss error of 6e-8 against Tsit5's 4e-6, in 0.89 s versus 0.65 s.
"""

from __future__ import annotations

from typing import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax
import numpy as np
import optimistix

from coocflow.config import TrainConfig
from coocflow.flow.discrete import TRACE_COUNTS, chunk_length
from coocflow.flow.trajectory import (Checkpoint, Trajectory, divergence_record, drive, finish_snapshots,
                                     map_seeds, over_seed_groups, record_snapshot, slot_table, snapshot_carry,
                                     take_seeds)
from coocflow.model import Transformer
from coocflow.model.state import dtype_of, join, split, step_error_norm, velocity
from coocflow.observables import Problem, observe

STAGES = {"tsit5": 6, "dopri5": 6, "dopri8": 13, "kvaerno5": 6}
"""Gradient evaluations per step of each solver (all four reuse their last stage: FSAL), used to
report the cost of a solve; for `kvaerno5` each implicit stage also takes Newton iterations of
Hessian-vector products, which this count leaves out."""


def make_solver(name: str, rtol, atol) -> diffrax.AbstractSolver:
    if name == "tsit5":
        return diffrax.Tsit5()
    if name == "dopri5":
        return diffrax.Dopri5()
    if name == "dopri8":
        return diffrax.Dopri8()
    if name == "kvaerno5":
        newton = optimistix.Newton(rtol=rtol, atol=atol, linear_solver=lineax.GMRES(rtol=1e-10, atol=1e-12))
        return diffrax.Kvaerno5(root_finder=newton)
    raise ValueError(f"unknown solver {name}")


class Solver(eqx.Module):
    """A solver section as Diffrax objects: the solver's name and step budget are static, the
    tolerances traced arrays (new tolerances reuse the compiled solve)."""

    name: str = eqx.field(static=True)
    rtol: jax.Array
    atol: jax.Array
    max_steps: int = eqx.field(static=True)

    @classmethod
    def of(cls, train: TrainConfig, dtype) -> "Solver":
        return cls(train.solver, jnp.asarray(train.rtol, dtype), jnp.asarray(train.atol, dtype), train.max_steps)

    def diffrax_solver(self) -> diffrax.AbstractSolver:
        return make_solver(self.name, self.rtol, self.atol)

    def controller(self, norm=None) -> diffrax.PIDController:
        extra = {} if norm is None else {"norm": norm}
        return diffrax.PIDController(rtol=self.rtol, atol=self.atol, **extra)


def vector_field(frozen: Transformer | None, problem: Problem, moving: str = "all"):
    """The right-hand side of the flow as a Diffrax term function: -grad L(theta) on the
    weights, or the closed Gram system (Appendix C) on the Grams."""

    def field(t, params, args):
        return velocity(params, frozen, problem.train, moving)

    return field


@eqx.filter_jit
def _solve_chunk(trainable, frozen, problem: Problem, snap, t0, ts, index, slot, rtol, atol, solver_name: str,
                 max_steps: int, moving: str = "all"):
    """Integrate every seed from t0 to ts[-1], observing at ts; returns the state at ts[-1].

    The weights at ts (the very ones observed) are saved too, and `record_snapshot` keeps those
    of observation `index[k]` in slot `slot[k]` and at the first all-correct observation."""
    TRACE_COUNTS["flow"] += 1

    def one_seed(y0, frozen, problem, snap):
        saveat = diffrax.SaveAt(subs=[
            diffrax.SubSaveAt(ts=ts, fn=lambda t, y, args: (observe(join(y, frozen), problem), y)),
            diffrax.SubSaveAt(t1=True),
        ])
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(vector_field(frozen, problem, moving)), make_solver(solver_name, rtol, atol),
            t0, ts[-1], None, y0, saveat=saveat,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol, norm=step_error_norm),
            max_steps=max_steps, throw=False,
        )
        (observed, states), last = solution.ys
        snap, _ = jax.lax.scan(lambda kept, marks: (record_snapshot(kept, *marks), None), snap,
                               (states, observed["min_margin"], index, slot))
        stats = {"num_steps": solution.stats["num_steps"],
                 "num_accepted_steps": solution.stats["num_accepted_steps"],
                 "num_rejected_steps": solution.stats["num_rejected_steps"],
                 "result": solution.result._value}
        return jax.tree.map(lambda a: a[0], last), observed, stats, snap

    return map_seeds(one_seed, trainable, frozen, problem, snap)


def integrate_flow(
    model: Transformer,
    problem: Problem,
    obs_times: np.ndarray,
    train: TrainConfig,
    seeds: tuple[int, ...],
    chunks: int = 25,
    progress: Callable[[float], None] | None = None,
    checkpoint: Checkpoint | None = None,
    snapshot_obs: np.ndarray = (),
) -> Trajectory:
    """Integrate the flow for every seed of the batched `model`, observing at `obs_times`.

    A seed stops early when its solver fails (maximum steps reached, or step size underflow:
    status `stopped`, with Diffrax's reason) or its values turn non-finite (`diverged`); it keeps
    the observations before that. Solver statistics per seed go into `stats`. Each chunk starts
    a fresh solve from the previous chunk's end, so a `checkpoint` (weights and flow time at a
    chunk boundary) resumes the flow exactly. The weights at the observations `snapshot_obs`
    (sorted indices into `obs_times`) and at the first all-correct observation come back in
    `Trajectory.snapshots`: the solver's interpolated solution at those times, which is what was
    observed there (a chunk briefly holds the weights at each of its observed times).
    """
    trainable, frozen = split(model, train.trainable)
    dtype = dtype_of(model)
    rtol, atol = jnp.asarray(train.rtol, dtype), jnp.asarray(train.atol, dtype)
    times = np.asarray(obs_times, dtype=np.float64)
    n_seeds = len(seeds)
    slots = slot_table(len(times), snapshot_obs)

    def advance(carry, block, index):
        params, t0, snap = carry
        marks = (jnp.asarray(t0, dtype), jnp.asarray(block, dtype), jnp.asarray(index), jnp.asarray(slots[index]),
                 rtol, atol)

        def group(seeds):
            return _solve_chunk(*take_seeds((params, frozen, problem, snap), seeds), *marks, train.solver,
                                train.max_steps, train.trainable)

        params, observed, stats, snap = over_seed_groups(group, n_seeds)
        return (params, np.float64(block[-1]), snap), observed, stats

    snap = snapshot_carry(trainable, n_seeds, len(snapshot_obs))
    series, final, alive, (bad_index, bad_quantity, good_obs), extras, last = drive(
        advance, (trainable, np.float64(0.0), snap), lambda carry: carry[0], times, chunk_length(len(times), chunks),
        n_seeds, pad=None, progress=progress, progress_of=lambda done: len(done) / len(times),
        checkpoint=checkpoint)
    n_obs = series["loss"].shape[1]
    stats = total_stats(extras, train.solver)
    status, divergence = [], []
    for s in range(n_seeds):
        failed = [int(code) for code in stats.pop(f"_results_{s}") if int(code) != 0]
        if alive[s]:
            status.append("completed")
            divergence.append(None)
            continue
        record = divergence_record(times, int(bad_index[s]), bad_quantity[s], int(good_obs[s]))
        if failed:
            status.append("stopped")
            record["reason"] = result_message(failed[0])
        else:
            status.append("diverged")
        divergence.append(record)
    return Trajectory(seeds=tuple(seeds), t=times[:n_obs], step=np.full(n_obs, -1, dtype=np.int64),
                      series=series, final=join(final, frozen), status=status,
                      divergence=divergence, stats=stats, snapshots=finish_snapshots(last[2], frozen, snapshot_obs))


def total_stats(extras: list[dict[str, np.ndarray]], solver: str) -> dict:
    """Solver statistics per seed summed over the chunks."""
    n_seeds = len(extras[0]["num_steps"])
    stats: dict = {"solver": solver}
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        stats[key] = [int(sum(int(e[key][s]) for e in extras)) for s in range(n_seeds)]
    stats["gradient_evaluations"] = [STAGES[solver] * n + len(extras) for n in stats["num_steps"]]
    for s in range(n_seeds):
        stats[f"_results_{s}"] = [int(e["result"][s]) for e in extras]
    return stats


def result_message(code: int) -> str:
    """A one-line reason for a Diffrax result code, with the fix where there is one."""
    names = {int(item._value): name for name, item in diffrax.RESULTS._name_to_item.items()}
    fixes = {"max_steps_reached": "raise train.max_steps or loosen train.rtol",
             "dt_min_reached": "the flow is too stiff for this solver; try train.solver=kvaerno5"}
    name = names.get(code, f"code {code}")
    return f"{name.replace('_', ' ')}" + (f": {fixes[name]}" if name in fixes else "")
