"""The ODE flow: agreement with gradient descent as lr -> 0, with tighter tolerances, exact
identities along the computed trajectory, early stops, and no recompilation."""

import os

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from conftest import TINY

from coocflow.api import resolve_config
from coocflow.flow import discrete, vector_field
from coocflow.model import combine, partition
from coocflow.observables import OBSERVABLES
from coocflow.observables.registry import loss_weights, margins
from coocflow.systems.eq1 import build_model, build_problem
from coocflow.run import train

FLOW = {**TINY, "train.method": "flow", "train.t_end": 3.0, "optimizer.lr": 0.1, "observe.points": 40}


def flow_config(seed=1, **extra):
    return resolve_config("paper", [f"{k}={v}" for k, v in {**FLOW, **extra}.items()],
                          seed=None if "seeds" in extra else seed)


def test_gradient_descent_converges_to_the_flow_linearly_in_lr():
    reference = train(flow_config(**{"solver.rtol": 1e-11, "solver.atol": 1e-13}))
    t_ref, loss_ref = reference.series["t"], reference.series["loss"]
    errors = []
    for lr in (0.02, 0.01, 0.005):
        gd = train(flow_config(**{"train.method": "gd", "train.t_end": 0.0, "optimizer.lr": lr,
                                  "train.steps": int(round(3.0 / lr))}))
        at_end = np.interp(3.0, gd.series["t"], gd.series["loss"])
        errors.append(abs(at_end - loss_ref[-1]) / loss_ref[-1])
        shared = np.intersect1d(np.round(gd.series["t"], 12), np.round(t_ref, 12))
        assert len(shared) >= 5, "GD and the flow share observation times"
    ratios = np.array(errors[:-1]) / np.array(errors[1:])
    assert np.all((ratios > 1.8) & (ratios < 2.2)), (errors, ratios)
    assert errors[-1] < 1e-2


def test_flow_matches_a_tighter_tolerance_solution():
    loose = train(flow_config(**{"solver.rtol": 1e-6, "solver.atol": 1e-9}))
    tight = train(flow_config(**{"solver.rtol": 1e-11, "solver.atol": 1e-13}))
    np.testing.assert_array_equal(loose.series["t"], tight.series["t"])
    relative = np.abs(loose.series["loss"] - tight.series["loss"]) / tight.series["loss"]
    assert relative.max() < 1e-5, relative.max()
    assert loose.trajectory.stats["num_steps"][0] < tight.trajectory.stats["num_steps"][0]


def test_eq5_holds_along_the_computed_trajectory():
    """||u(t)||^2 - ||u(0)||^2 equals the integral of (2 m1 / n) sum_i g_i y_i F_i, to tolerance."""
    config = flow_config()
    model, problem = build_model(config), build_problem(config)
    trainable, frozen = partition(model)
    field = vector_field(frozen, problem)
    scale = 2 * config.model.m1 / config.data.n

    def augmented(t, state, args):
        params, _ = state
        current = combine(params, frozen)
        rate = scale * jnp.sum(loss_weights(current, problem.train) * margins(current, problem.train))
        return field(t, params, args), rate

    ts = jnp.array([0.5, 1.0, 3.0])
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(augmented), diffrax.Tsit5(), 0.0, 3.0, None, (trainable, jnp.zeros(())),
        saveat=diffrax.SaveAt(ts=ts, fn=lambda t, s, a: (OBSERVABLES["u_norm2"].fn(combine(s[0], frozen), problem), s[1])),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12), max_steps=100000)
    norms, integral = solution.ys
    u0 = OBSERVABLES["u_norm2"].fn(model, problem)
    np.testing.assert_allclose(norms - u0, integral, rtol=1e-7)
    assert float(norms[-1] - u0) > 0.1, "u grows, so the check is not vacuous"


def test_flow_is_exact_for_the_run_path_too():
    """The run's own saved u_norm2 agrees with the independently integrated Eq. (5)."""
    result = train(flow_config(**{"solver.rtol": 1e-10, "solver.atol": 1e-12}))
    series = result.series
    assert np.all(np.diff(series["u_norm2"][series["t"] > 0.2]) > 0)
    assert result.trajectory.stats["num_steps"][0] > 0
    assert result.trajectory.stats["gradient_evaluations"][0] >= 13 * result.trajectory.stats["num_steps"][0]


def test_tolerances_and_seeds_do_not_recompile():
    train(flow_config(seeds=[1, 2]))
    traced = discrete.TRACE_COUNTS["flow"]
    train(flow_config(seeds=[1, 2], **{"solver.rtol": 1e-8, "solver.atol": 1e-11}))
    train(flow_config(seeds=[7, 8]))
    assert discrete.TRACE_COUNTS["flow"] == traced


def test_max_steps_stops_early_and_says_why():
    result = train(flow_config(**{"solver.max_steps": 3, "observe.chunks": 1}))
    assert result.trajectory.status == ["stopped"]
    record = result.trajectory.divergence[0]
    assert "max steps reached" in record["reason"] and "solver.max_steps" in record["reason"]
    assert len(result.series["t"]) < len(result.trajectory.t) or len(result.trajectory.t) < 40
    assert np.all(np.isfinite(result.series["loss"]))


def test_other_solvers_agree():
    """Each solver make_solver builds (the implicit Kvaerno5 with matrix-free GMRES included)
    follows the same vector field to the same loss; only the loss is saved, to keep this fast."""
    from coocflow.flow.ode import make_solver
    from coocflow.model import loss

    config = flow_config()
    model, problem = build_model(config), build_problem(config)
    trainable, frozen = partition(model)
    ts = jnp.array([0.1, 0.5])
    finals = {}
    for solver in ("dopri8", "tsit5", "dopri5", "kvaerno5"):
        rtol, atol = jnp.asarray(1e-9), jnp.asarray(1e-11)
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(vector_field(frozen, problem)), make_solver(solver, rtol, atol), 0.0, 0.5, None,
            trainable, saveat=diffrax.SaveAt(ts=ts, fn=lambda t, y, a: loss(combine(y, frozen), problem.train)),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol), max_steps=10000)
        finals[solver] = np.asarray(solution.ys)
    for solver, values in finals.items():
        np.testing.assert_allclose(values, finals["dopri8"], rtol=1e-7, err_msg=solver)


def test_flow_ensemble_matches_single_seed():
    both = train(flow_config(seeds=[2, 5]))
    alone = train(flow_config(seed=5))
    np.testing.assert_allclose(both.trajectory.series["loss"][1], alone.series["loss"], rtol=1e-9)


def test_a_flow_seed_is_the_same_alone_and_in_an_ensemble():
    """The flow runs a group's seeds one after another, each unbatched (`map_seeds(batched=False)`),
    so what a seed computes does not depend on the ensemble it runs in: equal bit for bit, on one
    machine. One seed more than the cores puts two seeds in one group."""
    seeds = list(range((os.cpu_count() or 1) + 1))
    ensemble = train(flow_config(seeds=seeds)).trajectory
    for k, seed in enumerate(seeds):
        alone = train(flow_config(seed=seed))
        assert set(alone.series) - set(ensemble.series) == {"t", "step"}
        for name, values in ensemble.series.items():
            assert np.array_equal(values[k], alone.series[name], equal_nan=True), (seed, name)


def test_flow_uses_jax_float64():
    assert jax.config.jax_enable_x64


def test_a_flat_state_gives_back_the_parameters_and_solves_as_the_pytree_does():
    """`FlatState` (the flow's chunk and the locator solve one vector): the parameters come back exactly,
    leaf types and shapes kept, and a Dopri8 solve of the vector takes the pytree solve's steps to the
    same numbers (the stages combine the same numbers, one vector instead of leaf by leaf)."""
    from coocflow.flow.ode import FlatState
    from coocflow.model.gram import grams_from_weights
    from coocflow.systems.eq1 import Eq1System

    config = flow_config()
    system, train_set = Eq1System.from_config(config), build_problem(config, 1).train
    for params in (build_model(config, 1), grams_from_weights(build_model(config, 1))):
        moving, fixed = system.split(params)
        flat = FlatState(moving)
        assert flat.y.ndim == 1 and flat.y.size == sum(leaf.size for leaf in jax.tree.leaves(moving))
        back = flat.tree(flat.y)
        assert jax.tree.structure(back) == jax.tree.structure(moving)
        for a, b in zip(jax.tree.leaves(back), jax.tree.leaves(moving)):
            assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)

        def velocity(y):
            return system.velocity(None, y, fixed, train_set)

        def solve(y0, term, norm):
            return diffrax.diffeqsolve(diffrax.ODETerm(term), diffrax.Dopri8(), 0.0, 2.0, None, y0,
                                       stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10, norm=norm),
                                       saveat=diffrax.SaveAt(t1=True))

        tree = solve(moving, lambda t, y, args: velocity(y), system.error_norm)
        vector = solve(flat.y, flat.field(velocity), flat.norm(system.error_norm))
        assert int(vector.stats["num_steps"]) == int(tree.stats["num_steps"]) > 3
        for a, b in zip(jax.tree.leaves(flat.states(vector.ys)), jax.tree.leaves(tree.ys)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15 * float(np.max(np.abs(b))))
    # parameters of two dtypes (float32 Grams beside the float64 widths) stay the pytree they are
    grams32 = jax.tree.map(lambda leaf: leaf.astype(np.float32) if leaf.ndim else leaf,
                           grams_from_weights(build_model(config, 1)))
    mixed = FlatState(grams32)
    assert not mixed.flat and mixed.y is grams32 and mixed.tree(mixed.y) is grams32
