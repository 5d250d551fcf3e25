"""The checks of verify/paper/checks_phase2.py: each gives the same numbers in weight and Gram space;
each statement passes on a run that satisfies its claim, passes on that run's state edited just
inside its threshold and fails on it edited just beyond; each diagnostic reports with no verdict."""

import copy

import numpy as np
import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.verify.paper import checks_phase2 as phase2
from coocflow.verify.paper.checks import CHECKS, EVIDENCE, SeedData
from coocflow.verify.paper.saved import SavedState
from coocflow.verify.paper.reading import seed_data
from coocflow.storage import load_run

NAMES = ("lemmaE.9_value_change", "lemmaE.23_score_change", "corE.24_attention_change", "lemmaE.25_key_query_change",
         "thmE.27_at_T1", "defF.1_invariants_states", "corF.2_within_group_balance", "lemmaF.3_at_T1",
         "lemmaF.11_exact", "lemmaF.14_random_token_outputs", "lemma4.7_random_score_change",
         "lemmaF.19_key_query_after_T1", "thmF.20_margins_grow", "thm3.3_target_change_vs_Cs")
IDENTITIES = ("lemmaF.11_exact",)
"""Holds for any state of either space, so no edit of a state breaks it: a wrong closed form must."""


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A short weight-space run of the theory's data layout (distinct random tokens), wide enough
    init (c0 = 0.3) that v0 dominates the O(1/m) Phase-1 changes, stopped at t = 0.2 ~ 2 T1 so
    that the Phase-2 changes are still of their 1/U0 scales."""
    config = resolve_config("theory", ["model.space=weights", "model.neurons=false", "model.m=256", "data.n=48", "data.d=35",
                                       "data.n_test=48", "init.c0=0.3", "train.t_end=0.2", "observe.points=30"])
    folder, _ = run_and_write(config, tmp_path_factory.mktemp("phase2") / "weights", figures=False)
    return seed_data(load_run(folder))[0][1]


def _as_grams(saved):
    """The Gram-space state of a weight-space one (as a Gram-space run folder stores it, decoded)."""
    state = saved.arrays()
    W_Q, W_K, W_V, W, a = (np.asarray(state[k]) for k in ("W_Q", "W_K", "W_V", "W", "a"))
    u = W.T @ a
    grams = {"A": W_K.T @ W_Q, "P": W_Q.T @ W_Q, "K": W_K.T @ W_K, "V": W_V.T @ W_V, "G": u @ W_V,
             "s": np.asarray(u @ u), "m": np.asarray(W_Q.shape[0]), "m1": np.asarray(W.shape[0])}
    return SavedState.of({**{k: v for k, v in state.items() if k in ("tokens", "labels", "groups", "t")}, **grams})


@pytest.fixture(scope="module")
def grams(weights):
    return SeedData(weights.series, weights.m, n=weights.n, L=weights.L, scales=weights.scales,
                    states={name: _as_grams(state) for name, state in weights.states.items()})


@pytest.mark.parametrize("name", NAMES)
def test_check_passes_where_its_claim_holds(weights, name):
    result = CHECKS[name](weights)
    if name in DIAGNOSTICS:
        assert result.passed is None and result.measured is not None and "No verdict: " in result.sentence
    else:
        assert result.passed is True, result.sentence


def _numbers(measured, prefix=""):
    """Every float of a (nested) measured dict, keyed by path; rounding-level errors left out."""
    if isinstance(measured, dict):
        return {k: v for key, value in measured.items() if key != "relative_error"
                for k, v in _numbers(value, f"{prefix}{key}.").items()}
    return {prefix: float(measured)}


@pytest.mark.parametrize("name", NAMES)
def test_both_spaces_give_the_same_numbers(weights, grams, name):
    in_weights, in_grams = _numbers(CHECKS[name](weights).measured), _numbers(CHECKS[name](grams).measured)
    assert in_weights.keys() == in_grams.keys()
    for key, value in in_weights.items():
        assert in_grams[key] == pytest.approx(value, rel=1e-6, abs=1e-300), key


def _random_token_of(state, group):
    """A random token of the first training sample of `group`, that sample's index and its label."""
    i = int(np.flatnonzero(np.asarray(state["groups"]) == group)[0])
    tokens = np.asarray(state["tokens"])[i]
    return int(tokens[tokens >= phase2.FIRST_RANDOM][0]), i, float(state["labels"][i])


def _value_gram_scaled(factor):
    """The final value Gram V times `factor` (value vectors sqrt(factor) longer, as a larger c0
    gives): Def. F.1 (d)'s value path m1 V^T P grows with it."""
    def edit(states, d):
        states["final"]["V"] = factor * states["final"]["V"]
    return edit


def _d_ratio(data):
    return phase2.invariants_at(data.states["final"], data.states["init"], data.scales)["d_ratio"]


def _target_change_reversed(state_name, since, index, share):
    """The change of A[index] from `since` to `state_name` replaced by -share x itself: for a small
    share, a slight move the wrong way."""
    def edit(states, d):
        change = states[state_name]["A"][index] - states[since]["A"][index]
        states[state_name]["A"][index] = states[since]["A"][index] - share * change
    return edit


def _S2_over_S3(state):
    g, groups = phase2.loss_weights(SavedState.of(state)), np.asarray(state["groups"])
    return float(np.sum(g[groups == 1]) / np.sum(g[groups == 2]))


def _I2_margins_up(target):
    """G moved at the random tokens of the I2 samples (each by amount y_i) so that S2/S3 at T1 is
    `target`: the I2 samples' margins a little larger than the I3 samples' (bisection on the amount)."""
    def edit(states, d):
        base = {k: v.copy() for k, v in states["T1"].items()}
        low, high = 0.0, 10.0
        for _ in range(60):
            amount = (low + high) / 2
            trial = {**base, "G": base["G"].copy()}
            _move_outputs({"T1": trial}, "T1", 1, amount)
            low, high = (amount, high) if _S2_over_S3(trial) > target else (low, amount)
        states["T1"] = trial
    return edit


def _move_outputs(states, name, group, amount):
    """Add amount * y_i to G at the random tokens of the samples of `group`: their margins grow."""
    state = states[name]
    for i in np.flatnonzero(np.asarray(state["groups"]) == group):
        tokens = np.asarray(state["tokens"])[i]
        state["G"][tokens[tokens >= phase2.FIRST_RANDOM]] += amount * state["labels"][i]


def _one_margin_back(share):
    """One I4 sample's final margin moved back by `share` of its growth since T1 (through G at one of
    its random tokens, which no other sample holds): share > 1 leaves it below its T1 value."""
    def edit(states, d):
        final = states["final"]
        token, i, label = _random_token_of(final, 3)
        margins = {name: phase2.sample_margins(SavedState.of(states[name]))[i] for name in ("final", "T1")}
        growth = margins["final"] - margins["T1"]
        probe = {**final, "G": final["G"].copy()}
        probe["G"][token] += label
        per_unit = phase2.sample_margins(SavedState.of(probe))[i] - margins["final"]
        final["G"][token] -= label * share * growth / per_unit
    return edit


CONSTRUCTED_FAILURES = {
    "defF.1_invariants_states": lambda s, d: _value_gram_scaled(2.0 / _d_ratio(d))(s, d),
    "lemmaF.3_at_T1": _I2_margins_up(0.45),
    "lemma4.7_random_score_change": _target_change_reversed("final", "T1", (phase2.MU1, phase2.MU2), 0.1),
    "thmF.20_margins_grow": _one_margin_back(1.1),
    "thm3.3_target_change_vs_Cs": _target_change_reversed("final", "init", (phase2.MU3, phase2.MU1), 0.1),
}
"""One realistic violation per statement check, just beyond its threshold, editing the data: Def.
F.1 (d) at 2x its bound through longer value vectors; S2/S3 = 0.45 at T1 (the bound is 1/2); one
target score change 10% of its size the wrong way; one margin ending 10% of its growth below its
T1 value."""
NEAR_PASSES = {
    "defF.1_invariants_states": lambda s, d: _value_gram_scaled(0.5 / _d_ratio(d))(s, d),
    "lemmaF.3_at_T1": _I2_margins_up(0.55),
    "lemma4.7_random_score_change": _target_change_reversed("final", "T1", (phase2.MU1, phase2.MU2), -0.1),
    "thmF.20_margins_grow": _one_margin_back(0.9),
    "thm3.3_target_change_vs_Cs": _target_change_reversed("final", "init", (phase2.MU3, phase2.MU1), -0.1),
}
"""The same edits on the passing side of each threshold."""
DIAGNOSTICS = ("lemmaE.9_value_change", "lemmaE.23_score_change", "corE.24_attention_change",
               "lemmaE.25_key_query_change", "thmE.27_at_T1", "corF.2_within_group_balance",
               "lemmaF.14_random_token_outputs", "lemmaF.19_key_query_after_T1")
"""Constants the paper hides (O, O~, Theta) or by-construction parts: reported, no verdict."""


def _edited(data: SeedData, edit, series=None) -> SeedData:
    states = {name: None if s is None else copy.deepcopy(s.arrays()) for name, s in data.states.items()}
    edit(states, data)
    return SeedData(series or data.series, data.m, n=data.n, L=data.L, scales=data.scales,
                    states={name: None if s is None else SavedState.of(s) for name, s in states.items()})


def test_every_check_has_a_constructed_failure():
    assert set(CONSTRUCTED_FAILURES) | set(DIAGNOSTICS) | set(IDENTITIES) == set(NAMES)
    assert {name for name in NAMES if EVIDENCE[name] == "diagnostic"} == set(DIAGNOSTICS)
    assert set(NAMES) <= set(CHECKS)


@pytest.mark.parametrize("name", sorted(CONSTRUCTED_FAILURES))
def test_each_check_fails_just_beyond_its_threshold(grams, name):
    near = CHECKS[name](_edited(grams, NEAR_PASSES[name]))
    assert near.passed is True, near.sentence
    result = CHECKS[name](_edited(grams, CONSTRUCTED_FAILURES[name]))
    assert result.passed is False, result.sentence


def _theorem_33_seed(grams, sign_31=-1.0):
    """A seed whose final scores moved as Theorem 3.3 says: targets by +-2 Cs, random-token
    entries by Cr, and a test loss below 1/m."""
    sc = grams.scales

    def edit(states, d):
        change = np.full_like(states["init"]["A"], sc.Cr)
        change[:3, :3] = 0.0
        for index, sign in (((0, 1), 1.0), ((1, 0), 1.0), ((2, 0), sign_31), ((2, 1), -1.0)):
            change[index] = 2 * sign * sc.Cs
        states["final"]["A"] = states["init"]["A"] + change

    series = {**grams.series, "test_loss": np.full_like(grams.series["test_loss"], 0.1 / sc.m)}
    return _edited(grams, edit, series)


def test_theorem_33_passes_on_the_pattern_it_states_and_fails_on_a_wrong_sign(grams):
    assert CHECKS["thm3.3_target_change_vs_Cs"](_theorem_33_seed(grams)).passed is True
    assert CHECKS["thm3.3_target_change_vs_Cs"](_theorem_33_seed(grams, sign_31=1.0)).passed is False


def test_value_gram_identity_catches_a_wrong_factor(grams, monkeypatch):
    """The closed form dV = G P^T + P G^T holds to rounding; P off by 3e-8 (3x the tolerance) is caught."""
    exact = phase2.token_P
    monkeypatch.setattr(phase2, "token_P", lambda state: exact(state) * (1 + 3e-8))
    result = CHECKS["lemmaF.11_exact"](grams)
    assert result.passed is False and max(result.measured["relative_error"].values()) > 1e-8


def test_checks_without_a_T1_state_are_not_applicable(grams):
    no_t1 = _edited(grams, lambda s, d: s.__setitem__("T1", None))
    for name in NAMES:
        result = CHECKS[name](no_t1)
        if name in ("lemmaF.11_exact", "thm3.3_target_change_vs_Cs"):
            assert result.passed is not None, name
        else:
            assert result.passed is None and "T1" in result.sentence, name
