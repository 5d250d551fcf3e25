"""The checks of the t = 0 and Phase-1 claims that read whole saved states (phases.checks_phase1):
each passes on a theory-regime run, in weight space and (where it needs no neurons) in Gram space,
and fails on a SeedData constructed so that its claim does not hold."""

import dataclasses

import numpy as np
import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.phases import checks_phase1
from coocflow.phases.checks import CHECKS, SeedData
from coocflow.phases.verify import seed_data
from coocflow.storage import load_run

PHASE1_CHECKS = ("lemmaD.1_init_concentration", "corD.2_uniform_attention", "lemmaD.4_init_outputs",
         "lemma4.1_neuron_alignment_rate", "lemmaE.6_other_neuron_rates", "lemmaE.7_neuron_value_change",
         "propE.12_neuron_gram_change", "thmE.14_neuron_rate_vs_P", "lemma4.2_common_token_rate",
         "propE.22_key_value_products", "thmE.26_T1_box", "eqE.18_exact")
NEURON_ONLY = {"lemmaE.6_other_neuron_rates", "lemmaE.7_neuron_value_change", "propE.12_neuron_gram_change",
               "thmE.14_neuron_rate_vs_P"}
INCONSISTENT = {"lemmaE.7_neuron_value_change"}
"""L. E.7's "< s0 s1 sqrt(m/L)" is below its own 4R/L term unless c0 c1 sqrt(m1) > 4: it fails in the
theory regime (test_e7_fails_by_its_own_middle_term)."""


def _first_seed(overrides, folder):
    path, _ = run_and_write(resolve_config("theory", overrides), folder, figures=False)
    return seed_data(load_run(path))[0][1]


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """The theory regime in weight space at m = 512 (T1 ~ 0.02)."""
    return _first_seed(["model.space=weights", "model.neurons=false", "model.m=512", "train.t_end=0.2", "observe.points=40"],
                       tmp_path_factory.mktemp("phase1") / "weights")


def _as_grams(state):
    """A weight-space state as the Gram-space run folder stores it (storage.run_folder.GRAM_STATE_KEYS)."""
    if state is None:
        return None
    u = state["W"].T @ state["a"]
    kept = {k: v for k, v in state.items() if k in ("tokens", "labels", "groups", "t", "step")}
    return kept | {"A": state["W_K"].T @ state["W_Q"], "P": state["W_Q"].T @ state["W_Q"],
                   "K": state["W_K"].T @ state["W_K"], "V": state["W_V"].T @ state["W_V"],
                   "G": state["W_V"].T @ u, "s": np.array(u @ u), "m": np.array(state["W_Q"].shape[0]),
                   "m1": np.array(state["W"].shape[0])}


@pytest.fixture(scope="module")
def grams(weights):
    """The same seed with its states in Gram space (what a Gram-space run saves)."""
    states = {name: _as_grams(state) for name, state in weights.states.items()}
    return SeedData(weights.series, weights.m, n=weights.n, L=weights.L, states=states, scales=weights.scales)


def _edited(data: SeedData, edit_states=None, **scale_changes) -> SeedData:
    """A copy of `data` whose states `edit_states(states)` changes in place (the arrays are copied
    lazily: an edit assigns new arrays) and whose scales take `scale_changes`."""
    states = {name: None if s is None else dict(s) for name, s in data.states.items()}
    if edit_states is not None:
        edit_states(states)
    scales = dataclasses.replace(data.scales, **scale_changes)
    return SeedData(data.series, data.m, A_init=data.A_init, A_final=data.A_final, n=data.n, L=data.L,
                    states=states, scales=scales)


def _exaggerate_t1(factor):
    """Move W and W_V at T1 `factor` times as far from their initial values."""
    def edit(states):
        for key in ("W", "W_V"):
            states["T1"][key] = states["init"][key] + factor * (states["T1"][key] - states["init"][key])
    return edit


def _scale(key, factor, state="init"):
    def edit(states):
        states[state][key] = states[state][key] * factor
    return edit


def _relabel_I4(states):
    labels = states["init"]["labels"].copy()
    labels[states["init"]["groups"] == 3] *= -1
    states["init"]["labels"] = labels


VIOLATIONS = {
    "lemmaD.1_init_concentration": lambda d: _edited(d, s0=d.scales.s0 / 2),
    "corD.2_uniform_attention": lambda d: _edited(d, _scale("W_Q", 1e8)),
    "lemmaD.4_init_outputs": lambda d: _edited(d, s1=d.scales.s1 / 100),
    "lemma4.1_neuron_alignment_rate": lambda d: _edited(d, _scale("labels", -1.0)),
    "lemmaE.6_other_neuron_rates": lambda d: _edited(d, s0=d.scales.s0 / 100, s1=d.scales.s1 / 100),
    "propE.12_neuron_gram_change": lambda d: _edited(d, _exaggerate_t1(1000.0)),
    "thmE.14_neuron_rate_vs_P": lambda d: _edited(d, s1=d.scales.s1 / 10),
    "lemma4.2_common_token_rate": lambda d: _edited(d, _relabel_I4),
    "propE.22_key_value_products": lambda d: _edited(d, s0=d.scales.s0 / 10),
    "thmE.26_T1_box": lambda d: _edited(d, _exaggerate_t1(100.0)),
}


def test_every_state_check_is_registered():
    assert set(PHASE1_CHECKS) <= set(CHECKS)
    assert set(VIOLATIONS) | INCONSISTENT | {"eqE.18_exact"} == set(PHASE1_CHECKS)


@pytest.mark.parametrize("name", sorted(set(PHASE1_CHECKS) - INCONSISTENT))
def test_passes_in_the_theory_regime_in_weight_space(weights, name):
    result = CHECKS[name](weights)
    assert result.passed is True, result.sentence


@pytest.mark.parametrize("name", sorted(set(PHASE1_CHECKS) - NEURON_ONLY))
def test_gram_space_checks_what_it_can(grams, name):
    result = CHECKS[name](grams)
    if name == "lemma4.1_neuron_alignment_rate":
        assert result.passed is None and 0.1 < result.measured["dG_mu1_dt_over_W0"] < 0.25, result.sentence
    else:
        assert result.passed is True, result.sentence


@pytest.mark.parametrize("name", sorted(set(PHASE1_CHECKS) - NEURON_ONLY - {"eqE.18_exact"}))
def test_both_spaces_measure_the_same_numbers(weights, grams, name):
    in_grams, in_weights = CHECKS[name](grams).measured, CHECKS[name](weights).measured
    for key, value in in_grams.items():
        np.testing.assert_allclose(value, in_weights[key], rtol=1e-6, atol=1e-12, err_msg=key)


@pytest.mark.parametrize("name", sorted(NEURON_ONLY))
def test_neuron_checks_say_they_need_weight_space(grams, name):
    result = CHECKS[name](grams)
    assert result.passed is None and "weight space" in result.sentence


def test_checks_without_saved_states_are_not_applicable(weights):
    bare = SeedData(weights.series, weights.m, n=weights.n, L=weights.L)
    for name in PHASE1_CHECKS:
        assert CHECKS[name](bare).passed is None, name


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_each_check_fails_where_its_claim_does_not_hold(weights, name):
    result = CHECKS[name](VIOLATIONS[name](weights))
    assert result.passed is False, result.sentence


def test_e7_fails_by_its_own_middle_term_and_passes_on_a_small_change(weights):
    """L. E.7 bounds the change by 4R/L + ... < s0 s1 sqrt(m/L); with R = 1/m1 the first step needs
    c0 c1 sqrt(m1) > 4, false in the theory regime (c0 c1 = 0.002): the measured change follows 4R/L."""
    name = "lemmaE.7_neuron_value_change"
    result = CHECKS[name](weights)
    assert result.passed is False and result.measured["four_R_over_L_over_bound"] > 1
    assert 0.1 < result.measured["ratio"] / result.measured["four_R_over_L_over_bound"] < 1
    assert CHECKS[name](_edited(weights, _exaggerate_t1(1e-3))).passed is True


def test_eq_e18_holds_at_every_saved_state_and_catches_a_wrong_factor(weights, grams, monkeypatch):
    for data in (weights, grams):
        result = CHECKS["eqE.18_exact"](data)
        assert result.passed is True and set(result.measured) == {"init", "T1", "final", "max"}, result.sentence
    exact = checks_phase1.token_P
    monkeypatch.setattr(checks_phase1, "token_P", lambda state: exact(state) * (1 + 1e-6))
    assert CHECKS["eqE.18_exact"](weights).passed is False


def test_neuron_rates_sum_to_the_mlp_rate(weights):
    """sum_j d(a_j w_j^T W_V mu)/dt = dG(mu)/dt, and the summed rate matches the recorded column."""
    state = weights.states["init"]
    summed = checks_phase1.neuron_rates(state).sum(axis=0)
    np.testing.assert_allclose(summed, checks_phase1.mlp_rate(state), rtol=1e-10)
    np.testing.assert_allclose(summed[0], weights.series["d_G_mu1_dt"][0], rtol=1e-8)


def _with_neurons(state):
    """A weight-space state as a Gram-space run with model.neurons stores it: the Grams and N, Z, a."""
    if state is None:
        return None
    W = state["W"]
    return _as_grams(state) | {"N": W @ W.T, "Z": W @ state["W_V"], "a": state["a"]}


@pytest.fixture(scope="module")
def neuron_grams(weights):
    """The same seed as a Gram-space run that resolves the neurons saves it."""
    states = {name: _with_neurons(state) for name, state in weights.states.items()}
    return SeedData(weights.series, weights.m, n=weights.n, L=weights.L, states=states, scales=weights.scales)


@pytest.mark.parametrize("name", sorted(PHASE1_CHECKS))
def test_gram_states_with_neurons_check_what_weights_check(weights, neuron_grams, name):
    """With N, Z, a every check, the neuron-level ones included, measures what weight space does
    (same keys, numbers to 1e-6 relative) and reaches the same verdict."""
    in_neurons, in_weights = CHECKS[name](neuron_grams), CHECKS[name](weights)
    assert in_neurons.passed == in_weights.passed, in_neurons.sentence
    assert set(in_neurons.measured) == set(in_weights.measured)
    for key, value in in_weights.measured.items():
        if isinstance(value, float):
            np.testing.assert_allclose(in_neurons.measured[key], value, rtol=1e-6, atol=1e-12, err_msg=key)


def test_neuron_rates_from_the_gram_velocity_equal_the_weights(weights, neuron_grams):
    """a_j dZ/dt from the neuron-resolved Gram velocity equals a_j d(w_j^T W_V mu)/dt of the weights."""
    np.testing.assert_allclose(checks_phase1.neuron_rates(neuron_grams.states["init"]),
                               checks_phase1.neuron_rates(weights.states["init"]), rtol=1e-9, atol=1e-15)
