"""The gradient flow d(theta)/dt = -grad L(theta) as an ODE, integrated with Diffrax (imported where
used, so that discrete training never loads it).

An adaptive Runge-Kutta solver (Dopri8 by default; Tsit5 and Dopri5 selectable) with a PID
step-size controller follows the flow at the tolerances `rtol`, `atol`; `kvaerno5` is an implicit (stiff)
solver whose Newton steps use matrix-free GMRES on Hessian-vector products. A chunk saves its
weights at its own observation times and evaluates the observables on them after the solve, all
at once (inside Diffrax's save loop they doubled the chunk's compile time); a run keeps only the
observables, and of the weights only its snapshots.
Each seed's solve carries its parameters as one flat vector (`FlatState`), the seeds of a group one
after another; rtol and atol are traced arrays, so new tolerances do not recompile. Phase 2 is slow
(loss ~ 1/t), so the solver's steps grow with t and t = 1e6 costs under a thousand gradient
evaluations. Dopri8 is the default because at the same rtol (1e-6) it
reached t = 1e6 with a relative loss error of 6e-8 against Tsit5's 4e-6, in 0.89 s versus 0.65 s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from coocflow.config import SolverConfig
from coocflow.model import Transformer
from coocflow.model.state import velocity
from coocflow.observables import Problem

if TYPE_CHECKING:
    import diffrax

STAGES = {"tsit5": 6, "dopri5": 6, "dopri8": 13, "kvaerno5": 6}
"""Gradient evaluations per step of each solver (all four reuse their last stage: FSAL), used to
report the cost of a solve; for `kvaerno5` each implicit stage also takes Newton iterations of
Hessian-vector products, which this count leaves out."""


def make_solver(name: str, rtol, atol) -> diffrax.AbstractSolver:
    """The Diffrax solver named `name` (Diffrax, Optimistix and Lineax are imported here, not with
    the module: discrete training never needs them)."""
    import diffrax  # lazy: 0.4 s with Optimistix and Lineax, which discrete training never needs
    import lineax  # lazy: see above
    import optimistix  # lazy: see above

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
    def of(cls, solver: SolverConfig, dtype) -> "Solver":
        return cls(solver.name, jnp.asarray(solver.rtol, dtype), jnp.asarray(solver.atol, dtype), solver.max_steps)

    def diffrax_solver(self) -> diffrax.AbstractSolver:
        return make_solver(self.name, self.rtol, self.atol)

    def controller(self, norm=None, dtmax=None) -> diffrax.PIDController:
        import diffrax  # lazy: see make_solver

        extra = {} if norm is None else {"norm": norm}
        return diffrax.PIDController(rtol=self.rtol, atol=self.atol, dtmax=dtmax, **extra)


class FlatState:
    """One seed's moving parameters as the one vector a Diffrax solve carries (`jax.flatten_util.ravel_pytree`).

    Diffrax combines a Runge-Kutta step's stages leaf by leaf, a few operations per leaf and stage; on a
    state of many small leaves (the Gram state: four d x d Grams, G, s, m, m1) those operations, not the
    arithmetic, are the step. Measured on 2 cores, a bare Dopri8 solve of the T1 table's Gram state (d =
    16, one seed after another): 228 us a step as a pytree, 137 us as one vector (the vector field itself
    is 87 us of it), the same numbers. The vector field, the error norm and the saved states see the
    parameters as the system's own pytree. Parameters of more than one dtype stay a pytree (`flat` is
    False): one vector would hold them all in the widest dtype, and the solver's arithmetic would no
    longer be the run's."""

    def __init__(self, params: Any):
        self.flat = len({jnp.result_type(leaf) for leaf in jax.tree.leaves(params)}) == 1
        self.y, self._unravel = ravel_pytree(params) if self.flat else (params, lambda y: y)

    def tree(self, y: Any) -> Any:
        """The parameters of a flat vector."""
        return self._unravel(y)

    def states(self, ys: Any) -> Any:
        """The parameters of flat vectors stacked on a leading axis (the saved states), stacked likewise."""
        return jax.vmap(self._unravel)(ys) if self.flat else ys

    def field(self, velocity: Callable[[Any], Any]) -> Callable:
        """A Diffrax term function on flat vectors from `velocity(params) -> d(params)/dt`."""
        if not self.flat:
            return lambda t, y, args: velocity(y)
        return lambda t, y, args: ravel_pytree(velocity(self._unravel(y)))[0]

    def norm(self, error_norm: Callable[[Any], jax.Array]) -> Callable[[Any], jax.Array]:
        """The system's error norm, read on a flat error vector."""
        return lambda error: error_norm(self._unravel(error))


def vector_field(frozen: Transformer | None, problem: Problem, moving: str = "all"):
    """The right-hand side of the flow as a Diffrax term function: -grad L(theta) on the
    weights, or the closed Gram system (Appendix C) on the Grams."""

    def field(t, params, args):
        return velocity(params, frozen, problem.train, moving)

    return field


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
    import diffrax  # lazy: see make_solver

    names = {int(item._value): name for name, item in diffrax.RESULTS._name_to_item.items()}
    fixes = {"max_steps_reached": "raise solver.max_steps or loosen solver.rtol",
             "dt_min_reached": "the flow is too stiff for this solver; try solver.name=kvaerno5"}
    name = names.get(code, f"code {code}")
    return f"{name.replace('_', ' ')}" + (f": {fixes[name]}" if name in fixes else "")


@eqx.filter_jit
def velocity_of(system, objective, moving, fixed, train):
    """`system.velocity` as one traced call. Diffrax traces a solve's step two or three times (to learn
    which of its outputs are static, then for the loop) and evaluates the vector field in several
    places of each, and every evaluation would trace the System's velocity again; a jitted call is
    traced once per argument structure and reused (a theory flow's velocity traces 14 -> 8). XLA
    inlines the call: the compiled arithmetic is unchanged, bit for bit."""
    return system.velocity(objective, moving, fixed, train)
