"""The Gram space with the MLP's neurons resolved (model.neurons): N = W W^T, Z = W W_V and a ride
along the Grams, exactly, and leave every run without them as it was."""

import json
import math

import jax
import numpy as np
import pytest
from conftest import TINY
from test_gram_init import Z_TOLERANCE, assert_moments

from coocflow.api import resolve_config, run_and_write
from coocflow.errors import ConfigError
from coocflow.model import loss, loss_grad
from coocflow.model.gram import GramState, gram_gd_step, grams_from_weights
from coocflow.model.gram_init import sample_theory_grams, sample_theory_neuron_grams
from coocflow.observables.registry import neuron_only
from coocflow.systems.eq1 import build_model, build_problem
from coocflow.run import train
from coocflow.run.eq1 import unstack
from coocflow.storage import load_run
from coocflow.systems.eq1 import state_from_arrays

FIELDS = ("A", "P", "K", "V", "G", "s", "N", "Z")
THEORY_LIKE = {"data.n": 24, "data.L": 3, "data.d": 67, "data.n_test": 24, "model.m": 64, "model.m1": 4,
               "init.c0": 0.5, "init.c1": 1.0, "train.method": "gd", "train.t_end": 0.0,
               "train.steps": 300}
"""The theory experiment's data and Condition 1 init at a width weight space affords; c0 = 0.5 so
that the scores move visibly within the test's steps."""
CONFIGS = {
    "tiny": ("tiny", {}, 0.1),
    "theory-like": ("theory", THEORY_LIKE, 2.0),
}
"""name: (experiment, overrides, GD learning rate)."""


def _configs(experiment: str, overrides: dict, seed: int = 3):
    """The same run in weight space and in the Gram space with neurons resolved."""
    weights = resolve_config(experiment, {**overrides, "model.space": "weights", "model.neurons": False}, seed=seed)
    grams = resolve_config(experiment, {**overrides, "model.space": "gram", "model.neurons": True}, seed=seed)
    return weights, grams


def _relative_error(got, want) -> float:
    got, want = np.asarray(got), np.asarray(want)
    return float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300))


def _errors(got: GramState, want: GramState) -> dict[str, float]:
    return {name: _relative_error(getattr(got, name), getattr(want, name)) for name in FIELDS}


def _assert_consistent(state: GramState, rtol: float = 1e-12) -> None:
    """G = Z^T a and s = a^T N a: the neurons' Grams and the six Grams describe the same weights."""
    assert _relative_error(state.Z.T @ state.a, state.G) <= rtol
    assert _relative_error(state.a @ state.N @ state.a, state.s) <= rtol


@pytest.mark.parametrize("name", CONFIGS)
def test_gd_with_neurons_equals_gd_on_weights(name):
    """300 GD steps in the neuron-resolved Gram space equal 300 on the weights: every Gram,
    N and Z included, to 1e-9 relative (measured 2e-15 on tiny, 4e-13 on theory-like)."""
    experiment, overrides, lr = CONFIGS[name]
    weight_config, gram_config = _configs(experiment, overrides)
    model, state = build_model(weight_config), build_model(gram_config)
    data = build_problem(weight_config).train
    start = grams_from_weights(model, neurons=True)
    assert all(np.array_equal(getattr(state, k), getattr(start, k)) for k in FIELDS + ("a",))
    steps = 300

    def weight_step(_, weights):
        grads = loss_grad(weights, data)
        return jax.tree.map(lambda w, g: w if g is None else w - lr * g, weights, grads, is_leaf=lambda x: x is None)

    trained = jax.jit(lambda w: jax.lax.fori_loop(0, steps, weight_step, w))(model)
    evolved = jax.jit(lambda s: jax.lax.fori_loop(0, steps, lambda _, x: gram_gd_step(x, data, lr), s))(state)
    want = grams_from_weights(trained, neurons=True)
    assert float(loss(trained, data)) < float(loss(model, data))
    assert _relative_error(want.N, start.N) > 1e-6 and _relative_error(want.Z, start.Z) > 1e-3
    errors = _errors(evolved, want)
    assert max(errors.values()) <= 1e-9, errors
    np.testing.assert_array_equal(evolved.a, state.a)
    _assert_consistent(evolved)


def test_flow_with_neurons_equals_flow_on_weights():
    """The flow (dopri8 at rtol 1e-13) in the neuron-resolved Gram space ends where the weight
    flow does: final Grams, N and Z included, to 1e-8 relative (measured 8e-15); the neuron columns of the
    metrics (now present) agree with weight space's to 1e-9."""
    extra = {**TINY, "train.method": "flow", "train.t_end": 2.0, "solver.rtol": 1e-13, "solver.atol": 1e-15,
             "observe.points": 12, "observe.chunks": 1}
    weight_config, gram_config = _configs("paper", extra)
    weights, grams = train(weight_config), train(gram_config)
    got = unstack(grams.trajectory.final, 0)
    want = grams_from_weights(unstack(weights.trajectory.final, 0), neurons=True)
    assert _relative_error(want.Z, grams_from_weights(unstack(weights.initial, 0), neurons=True).Z) > 1e-3
    errors = _errors(got, want)
    assert max(errors.values()) <= 1e-8, errors
    _assert_consistent(got, rtol=1e-11)
    for column in neuron_only():
        assert _relative_error(grams.trajectory.series[column], weights.trajectory.series[column]) <= 1e-9, column


N_DRAWS = 4000
D, L, M1, C0, C1 = 3, 5, 4, 1.3, 0.7


@pytest.mark.parametrize("m", [5, 40, 10**6])
def test_wishart_neuron_grams_have_condition_1_moments(m):
    """Over 4000 draws: N = W W^T, Z = W W_V, V, A, G, s have Condition 1's Wishart moments
    (m = 5 < 3d + m1 draws the Gaussian, the others Bartlett), a is +-1 with mean 0, and every
    draw has G = Z^T a, s = a^T N a to rounding."""
    keys = jax.random.split(jax.random.key(m), N_DRAWS)
    batch = jax.vmap(lambda key: sample_theory_neuron_grams(key, D, m, M1, L, C0, C1))(keys)
    samples = {k: np.asarray(getattr(batch, k)) for k in FIELDS + ("a",)}
    v0, v1 = C0**2 / (L * m), C1**2 / M1  # sigma0^2, sigma1^2
    eye_n, eye_d = np.eye(M1), np.eye(D)
    assert_moments(samples["N"], m * v1 * eye_n, (2 * eye_n + (1 - eye_n)) * m * v1**2, f"N at m={m}")
    assert_moments(samples["Z"], 0.0, m * v0 * v1, f"Z at m={m}")
    assert_moments(samples["V"], m * v0 * eye_d, (2 * eye_d + (1 - eye_d)) * m * v0**2, f"V at m={m}")
    assert_moments(samples["A"], 0.0, m * v0**2, f"A at m={m}")
    assert_moments(samples["G"], 0.0, m * v0 * M1 * v1, f"G at m={m}")
    assert_moments(samples["s"], m * M1 * v1, 2 * m * (M1 * v1) ** 2, f"s at m={m}")
    assert set(np.unique(samples["a"])) == {-1.0, 1.0}
    assert abs(samples["a"].mean()) < Z_TOLERANCE / math.sqrt(samples["a"].size)
    G_from_neurons = np.einsum("rjd,rj->rd", samples["Z"], samples["a"])
    s_from_neurons = np.einsum("rj,rjk,rk->r", samples["a"], samples["N"], samples["a"])
    np.testing.assert_allclose(G_from_neurons, samples["G"], rtol=0, atol=1e-12 * np.abs(samples["G"]).max())
    np.testing.assert_allclose(s_from_neurons, samples["s"], rtol=1e-12)
    np.testing.assert_array_equal(samples["N"], np.swapaxes(samples["N"], 1, 2))


def test_runs_without_neurons_are_unchanged():
    """Resolving the neurons adds N, Z, a and the neuron columns and changes nothing else: the
    Gram run's series (G, s, loss, every shared column) are bit for bit those without them, for
    gd and the flow; without neurons the state holds none, and the Wishart sampler is the old one."""
    for extra in ({}, {"train.method": "flow", "train.t_end": 1.0, "observe.points": 8, "observe.chunks": 1}):
        overrides = {**TINY, "model.space": "gram", **extra}
        plain = train(resolve_config("paper", overrides, seed=3))
        resolved = train(resolve_config("paper", {**overrides, "model.neurons": True}, seed=3))
        assert set(resolved.trajectory.series) - set(plain.trajectory.series) == set(neuron_only())
        for name, values in plain.trajectory.series.items():
            np.testing.assert_array_equal(resolved.trajectory.series[name], values, err_msg=name)
        assert not unstack(plain.trajectory.final, 0).has_neurons
    theory = resolve_config("theory", {"model.m": 10**6, "model.m1": 4, "model.neurons": False}, seed=0)
    old = sample_theory_grams(jax.random.fold_in(jax.random.PRNGKey(0), 1), theory.data.d, 10**6, 4, theory.data.L,
                              theory.init.c0, theory.init.c1)
    new = build_model(theory)
    assert new.N is None and new.Z is None and new.a is None
    assert all(np.array_equal(getattr(new, k), getattr(old, k)) for k in FIELDS[:6])


def test_a_run_folder_with_neurons_saves_and_reloads(tmp_path):
    """State files and snapshots carry N, Z, a; they reload into a neuron-resolved state equal to
    the run's; the manifest lists no absent column; a folder without neurons still loads."""
    overrides = {**TINY, "model.space": "gram", "model.neurons": True, "observe.snapshots": [5.0, 10.0],
                 "data.random_tokens": "distinct", "data.d": 24}
    folder, result = run_and_write(resolve_config("paper", overrides, seed=2), tmp_path / "neurons", figures=False)
    run = load_run(folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["absent_columns"] == [] and set(neuron_only()) <= set(run.metrics)
    final = state_from_arrays(run.state_final)
    want = unstack(result.trajectory.final, 0)
    assert final.has_neurons and final.N.shape == (8, 8) and final.Z.shape == (8, 24)
    for name in FIELDS + ("a",):
        np.testing.assert_array_equal(getattr(final, name), getattr(want, name), err_msg=name)
    initial = state_from_arrays(run.state_init)
    assert initial.has_neurons and not np.array_equal(initial.Z, final.Z)
    snapshots = run.state_snapshots
    assert snapshots["N"].shape == (2, 8, 8) and snapshots["Z"].shape == (2, 8, 24) and snapshots["a"].shape == (2, 8)
    np.testing.assert_array_equal(snapshots["a"][0], final.a)
    if run.state_t1 is not None:
        assert state_from_arrays(run.state_t1).has_neurons

    plain_folder, _ = run_and_write(resolve_config("paper", {**overrides, "model.neurons": False}, seed=2),
                                    tmp_path / "plain", figures=False)
    plain = load_run(plain_folder)
    assert "N" not in plain.state_final and not state_from_arrays(plain.state_final).has_neurons


def test_neurons_are_refused_where_they_do_not_apply():
    """One line each: in weight space (always resolved), and for Kaiming Grams drawn in row chunks."""
    with pytest.raises(ConfigError, match="model.neurons: applies with model.space=gram"):
        resolve_config("paper", {**TINY, "model.neurons": True})
    with pytest.raises(ConfigError, match="model.neurons: expected true or false"):
        resolve_config("paper", {**TINY, "model.space": "gram", "model.neurons": "yes"})
    chunked = resolve_config("paper", {**TINY, "model.space": "gram", "model.neurons": True,
                                       "init.gram_from": "sampled"})
    with pytest.raises(ConfigError, match="model.neurons: init.scheme=kaiming"):
        build_model(chunked)


def test_gram_widths_share_one_compiled_solve_and_sampler():
    """m is a traced leaf of the Gram state: a width sweep compiles the
    flow and the Wishart sampler once, not once per width, and the saved m stays the width."""
    from coocflow.flow import discrete
    from coocflow.model.gram_init import _sample_wide

    overrides = {**THEORY_LIKE, "model.space": "gram", "model.neurons": True, "train.method": "flow",
                 "train.t_end": 1.0, "observe.points": 8, "observe.chunks": 1}
    first = train(resolve_config("theory", {**overrides, "model.m": 10**6}, seed=0))
    traced, sampled = discrete.TRACE_COUNTS["flow"], _sample_wide._cache_size()
    for m in (10**7, 10**8):
        result = train(resolve_config("theory", {**overrides, "model.m": m}, seed=0))
        assert float(unstack(result.trajectory.final, 0).m) == m
        assert not np.array_equal(result.trajectory.series["loss"], first.trajectory.series["loss"])
    assert discrete.TRACE_COUNTS["flow"] == traced
    assert _sample_wide._cache_size() == sampled
