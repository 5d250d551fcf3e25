"""Checks of the claims about T1 and Phase 2 that need whole matrices or per-sample values
(docs/claims.md rows E9-T3.3), read from a seed's saved states (initial, T1 and final).

Every quantity is computed the same way in both spaces: the Grams A, K, Q (= P of a Gram
state), V, G and u2 = ||u||^2 are read off the weights or taken as saved, and rates are the JVP
of a function of the state along the flow's velocity at that state (`model.state.velocity`),
never finite differences. D0 X = X(t) - X(0), D1 X = X(t) - X(T1). Tokens: 0 = mu1, 1 = mu2,
2 = mu3, >= 3 random; A[key, query].
"""

from __future__ import annotations

import math

import numpy as np

from coocflow.verify.paper.check_registry import IDENTITY_TOLERANCE, SeedData, bound_parts, check
from coocflow.verify.paper.premises import FIRST_RANDOM, MU1, MU2, MU3
from coocflow.verify.paper.saved import SavedState
from coocflow.verify.paper.state_values import (
    RESOLUTION_ULPS,
    log_loss_weights,
    loss_weights,
    pair_counts,
    rates_at,
    resolved_changes,
    sample_margins,
    state_time,
    token_counts,
    token_P,
)

ROUNDING_TOLERANCE = 1e-9
"""Score entries no training sample touches never move: |D0 A| there is at most this times max |A(0)|."""
S2_S3_BAND = (0.5, 2.0)
"""Lemma F.3: 1/2 < S2/S3 < 2 at T1."""


# ---- shared helpers: one seed's saved state -> the claims' quantities -------------------------

def random_token_output(state: SavedState) -> np.ndarray:
    """The random-token part of F_i, sum_l sum_{h: x_h random} G(x_h) p[i, h, l], per sample."""
    tokens = state.tokens
    values = np.where(tokens >= FIRST_RANDOM, state.mlp[tokens], 0.0)
    return np.einsum("nh,nhl->n", values, state.training_attention)


def invariants_at(state: SavedState, init: SavedState, sc) -> dict[str, float]:
    """Def. F.1 (a), (b), (d), (e), (i) at one saved state (rates from the velocity there).

    (a) max |D0 K|, |D0 Q| / (v0/sqrt m); (b) max |D0 p| L^2; (d) max_mu |dG(mu) - u2 P(mu)| / u2
    over (1/L) Sg/n; (e) max_i |sum_{h,l} G(x_h) dp_{h,l}| / u2 over Sg/n; (i) max |random part
    of F_i|. Also the two rate ratios against Sg/n alone (Lemma F.3's forms of (d), (e))."""
    now, start = state.grams, init.grams
    tokens = state.tokens
    rates = rates_at(state)
    G, u2 = now["G"], now["s"]
    mean_g = float(np.mean(loss_weights(state)))
    moved_kq = max(np.max(np.abs(now["K"] - start["K"])), np.max(np.abs(now["Q"] - start["Q"])))
    moved_p = np.max(np.abs(state.attention(tokens) - init.attention(tokens)))
    value_path = _ratio(np.max(np.abs(rates["dG"] - u2 * token_P(state))), u2 * mean_g)
    attention_path = _ratio(np.max(np.abs(np.einsum("nh,nhl->n", G[tokens], rates["dp"]))), u2 * mean_g)
    return {"a_KQ_change_over_v0_sqrt_m": float(moved_kq / (sc.v0 / math.sqrt(sc.m))),
            "b_p_change_times_L2": float(moved_p * sc.L**2),
            "d_over_Sg_n": float(value_path), "d_ratio": float(value_path * sc.L),
            "e_ratio": float(attention_path),
            "i_random_output": float(np.max(np.abs(random_token_output(state))))}


def _invariants_hold(values: dict[str, float]) -> bool:
    return values["b_p_change_times_L2"] < 1 and values["d_ratio"] < 1 and values["e_ratio"] < 1


def loss_integral(d: SeedData, start: float) -> float:
    """U0 times the integral of the training loss from `start` to the end of the run (trapezoid
    over the observed times): the factor by which the Phase-2 changes exceed their 1/U0 scales
    (Lh = 1/(Theta(U0)(t - T1) + 1/Lh(T1)), Thm F.8, integrates to log(poly(m))/Theta(U0):
    docs/claims.md typo 8). Reported beside the fitted constants so that their polylog is visible."""
    t, loss = d.t, d.series["loss"]
    keep = t >= start
    t, loss = t[keep], loss[keep]
    return float(d.scales.U0 * np.sum(np.diff(t) * (loss[1:] + loss[:-1]) / 2))


def loss_integral_after_t1(d: SeedData) -> float:
    """`loss_integral` from the T1 state's time."""
    return loss_integral(d, state_time(d.states["T1"], d.bounds["T1"]))



def _ratio(numerator, denominator) -> float:
    """numerator / denominator as a float, inf (or NaN for 0/0) instead of an error when the
    denominator vanishes (a seed whose loss underflowed)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(numerator) / np.float64(denominator))


def _max_over(values: np.ndarray, mask: np.ndarray) -> float:
    return float(np.max(values[mask])) if mask.any() else 0.0


def _unavailable(d: SeedData, *names: str) -> tuple | None:
    """The not-applicable answer when the scales or a saved state a check reads are missing."""
    if d.scales is None:
        return (None, "", None, "needs the run configuration's scales (coocflow verify passes them)")
    for name in names:
        if d.states.get(name) is None:
            return (None, "", None, f"needs the saved {name} state, which this seed does not have")
    return None




# ---- Phase 1 at T1 (Appendix E) --------------------------------------------------------------

@check("lemmaE.9_value_change",
       "Lemma E.9: on [0, T1], |D0 V_ab| <= t ((c_a + c_b)/n) O(1); |V_ab| = O~(v0/sqrt m) (a != b); V_aa = Theta(v0)",
       "diagnostic", needs_t1=True, no_verdict="O(1), O~ and Theta(v0) hide their constants; the width sweep's "
       "value_gram_change_at_T1 judges the m-dependence.")
def value_change(d: SeedData) -> tuple:
    """Lemma E.9 at T1, all token pairs of the vocabulary: the value Gram moves only through the
    tokens' sample counts, |D0 V_ab| <= T1 (c_a + c_b)/n O(1) (fitted over pairs with c_a + c_b > 0;
    a pair no sample holds does not move, dV_ab = G(b) P(a) + G(a) P(b) = 0), its off-diagonal stays
    at the init scale v0/sqrt m and its diagonal at v0."""
    if (missing := _unavailable(d, "init", "T1")) is not None:
        return missing
    sc, init, t1_state = d.scales, d.states["init"], d.states["T1"]
    t1 = state_time(t1_state, d.bounds["T1"])
    V0, V1 = init.grams["V"], t1_state.grams["V"]
    counts = pair_counts(token_counts(init, V0.shape[0]))
    off = ~np.eye(V0.shape[0], dtype=bool)
    rate_scale = t1 * counts / sc.n
    change = _max_over(np.abs(V1 - V0) / np.where(counts > 0, rate_scale, 1.0), off & (counts > 0))
    off_diagonal = float(np.max(np.abs(V1[off]))) / (sc.v0 / math.sqrt(sc.m))
    diagonal = np.diag(V1) / sc.v0
    measured = {"change_constant": change, "off_diagonal_constant": off_diagonal,
                "diagonal_over_v0_min": float(diagonal.min()), "diagonal_over_v0_max": float(diagonal.max()), "T1": t1}
    return (measured, "fitted constants of |D0 V_ab| against T1 (c_a+c_b)/n, of |V_ab| against v0/sqrt m, V_aa/v0",
            None,
            f"At T1 = {t1:.3g}: |D0 V_ab| is at most {change:.3g} x T1 (c_a+c_b)/n, |V_ab| (a != b) at most "
            f"{off_diagonal:.3g} x v0/sqrt m, and V_aa/v0 lies in [{diagonal.min():.3g}, {diagonal.max():.3g}].")


@check("lemmaE.23_score_change",
       "Lemma E.23: on [0, T1], |D0 A[nu,mu]| <= t m^-0.5 ((c_mu + c_nu)/n) O~(1/L + m^-0.5)", "diagnostic",
       needs_t1=True, no_verdict="O~ hides its constant (the rows omit v0: docs/claims.md section 4 item 5); the width "
       "sweep's score_rate_at_0 and score_change_at_T1 judge the m-dependence.")
def score_change(d: SeedData) -> tuple:
    """Lemma E.23 at T1 over every token pair: the fitted constant of |D0 A[nu,mu]| against
    T1 m^-0.5 ((c_mu + c_nu)/n)(1/L + m^-0.5). A pair that no training sample holds (c_mu + c_nu
    = 0) has dA = -(K M + M P) = 0 exactly (M lives on training tokens), so it must not move at all."""
    if (missing := _unavailable(d, "init", "T1")) is not None:
        return missing
    sc, init, t1_state = d.scales, d.states["init"], d.states["T1"]
    t1 = state_time(t1_state, d.bounds["T1"])
    A0, A1 = init.grams["A"], t1_state.grams["A"]
    counts = pair_counts(token_counts(init, A0.shape[0]))
    moved = np.abs(A1 - A0)
    bound = t1 / math.sqrt(sc.m) * (counts / sc.n) * (1 / sc.L + 1 / math.sqrt(sc.m))
    constant = _max_over(moved / np.where(counts > 0, bound, 1.0), counts > 0)
    untouched = _max_over(moved, counts == 0)
    rounding = ROUNDING_TOLERANCE * float(np.max(np.abs(A0)))
    return ({"constant": constant, "untouched_max_change": untouched, "untouched_pairs": int(np.sum(counts == 0)),
             "untouched_still": bool(untouched <= rounding), "T1": t1},
            f"fitted constant; pairs no sample holds against {ROUNDING_TOLERANCE:g} max |A(0)| = {rounding:.3g}", None,
            f"At T1 = {t1:.3g}, |D0 A| is at most {constant:.3g} x T1 m^-0.5 ((c_mu+c_nu)/n)(1/L + m^-0.5); the "
            f"{int(np.sum(counts == 0))} pairs no sample holds moved by at most {untouched:.3g}.")


@check("corE.24_attention_change",
       "Corollary E.24 (and Prop. E.3): on [0, T1], |D0 p| <= O~((1/L+1/n)(1/(L m^2))(1/L+m^-0.5)) between random "
       "tokens, O~((1/(L m^2))(1/L+m^-0.5)) otherwise; R_P = O(1/(sqrt(m) L) + L/m)", "diagnostic", needs_t1=True,
       no_verdict="O~ and Prop. E.3's O hide their constants; the width sweep's attention_change_at_T1 judges them.")
def attention_change(d: SeedData) -> tuple:
    """Corollary E.24 at T1 over every training sample and position pair, in the form of its proof
    (docs/claims.md typo 4): fitted constants of max |D0 p| against (1/L + 1/n)(1/(L m^2))(1/L + m^-0.5)
    when key and query tokens are both random and against (1/(L m^2))(1/L + m^-0.5) otherwise;
    and the ratio to Prop. E.3's stated R_P bound 1/(sqrt(m) L) + L/m."""
    if (missing := _unavailable(d, "init", "T1")) is not None:
        return missing
    sc, init, t1_state = d.scales, d.states["init"], d.states["T1"]
    tokens = init.tokens
    moved = resolved_changes(init.attention(tokens), t1_state.attention(tokens))
    random = tokens >= FIRST_RANDOM
    both_random = random[:, :, None] & random[:, None, :]
    other_bound = (1 / (sc.L * sc.m**2)) * (1 / sc.L + 1 / math.sqrt(sc.m))
    random_bound = (1 / sc.L + 1 / sc.n) * other_bound
    stated = 1 / (math.sqrt(sc.m) * sc.L) + sc.L / sc.m
    random_constant = _max_over(moved, both_random) / random_bound
    other_constant = _max_over(moved, ~both_random) / other_bound
    e3_ratio = float(moved.max()) / stated
    constants = {name: value for name, value in (("random_constant", random_constant), ("other_constant", other_constant))
                 if value > 0}
    return ({**constants, "E3_ratio": e3_ratio, "max_change": float(moved.max())},
            f"fitted constants and max |D0 p| / (1/(sqrt(m) L) + L/m) (changes within {RESOLUTION_ULPS} ulps are "
            "rounding: 0)", None,
            f"At T1, |D0 p| between random tokens is {random_constant:.3g} x its E.24 bound and elsewhere "
            f"{other_constant:.3g} x; the largest change {moved.max():.3g} is {e3_ratio:.3g} x E.3's "
            f"1/(sqrt(m) L) + L/m = {stated:.3g}.")


@check("lemmaE.25_key_query_change",
       "Lemma E.25: on [0, T1], |D0 K_ab|, |D0 Q_ab| <= t m^-0.5 ((c_a+c_b)/n) O~(m^-0.5)", "diagnostic", needs_t1=True,
       no_verdict="O~ hides its constant; the width sweep's key_query_change_at_T1 judges the m-dependence.")
def key_query_change(d: SeedData) -> tuple:
    """Lemma E.25 at T1 over every token pair with c_a + c_b > 0 (the others do not move): the
    fitted constant of |D0 K_ab| and |D0 Q_ab| against T1 m^-0.5 ((c_a+c_b)/n) m^-0.5."""
    if (missing := _unavailable(d, "init", "T1")) is not None:
        return missing
    sc, init, t1_state = d.scales, d.states["init"], d.states["T1"]
    t1 = state_time(t1_state, d.bounds["T1"])
    start, now = init.grams, t1_state.grams
    counts = pair_counts(token_counts(init, start["K"].shape[0]))
    bound = np.where(counts > 0, t1 * (counts / sc.n) / sc.m, 1.0)
    constants = {k: _max_over(np.abs(now[k] - start[k]) / bound, counts > 0) for k in ("K", "Q")}
    return ({"K_constant": constants["K"], "Q_constant": constants["Q"], "T1": t1},
            "fitted constants", None,
            f"At T1 = {t1:.3g}, |D0 K| is at most {constants['K']:.3g} and |D0 Q| at most {constants['Q']:.3g} "
            "x T1 m^-0.5 ((c_a+c_b)/n) m^-0.5.")


@check("thmE.27_at_T1",
       "Theorem E.27: at T1, y_i F_i = Theta(1) for all i; G(mu1), G(mu2), -G(mu3) = Theta(1); "
       "G(mu) = O~(G0) for random mu; u2 = Theta(U0)", "diagnostic", needs_t1=True,
       no_verdict="every part is a Theta or O~ with a hidden constant, and at T1 the margins are positive and the signs "
       "of G forced by construction; the width sweep's u_norm2_at_T1, G1_at_T1, min_margin_at_2T1, G_rand_at_T1 judge them.")
def state_at_t1(d: SeedData) -> tuple:
    """Theorem E.27 on the saved T1 state: the three target outputs and u2/U0 in the Theta(1) band,
    and the random tokens' outputs at their init scale G0. The margins are read at 2 T1 from the
    series: the theorem's T1 = C_T1/U0 takes C_T1 large, while the code's T1 is the first observed
    time with every sample correct, where the smallest margin is near 0 by construction; 2 T1 is
    still C/U0 (the margin at T1 is reported)."""
    if (missing := _unavailable(d, "T1")) is not None:
        return missing
    sc, t1_state = d.scales, d.states["T1"]
    now = t1_state.grams
    G = now["G"]
    t1 = state_time(t1_state, d.bounds["T1"])
    later = min(2 * t1, d.bounds["end"])
    measured = {"min_margin": d.at("min_margin", later), "min_margin_at_T1": float(np.min(sample_margins(t1_state))),
                "G_mu1": float(G[MU1]), "G_mu2": float(G[MU2]), "minus_G_mu3": float(-G[MU3]),
                "random_G_constant": float(np.max(np.abs(G[FIRST_RANDOM:]))) / sc.G0, "u2_over_U0": now["s"] / sc.U0,
                "random_G_times_n": float(np.max(np.abs(G[FIRST_RANDOM:]))) * sc.n}
    return (measured, "margin (at 2 T1), G1, G2, -G3, u2/U0 and max random |G| / G0 reported", None,
            f"At 2 T1 = {later:.3g}: min y_i F_i = {measured['min_margin']:.3g} ({measured['min_margin_at_T1']:.3g} at T1); "
            f"at T1: G1 = {G[MU1]:.3g}, G2 = {G[MU2]:.3g}, G3 = {G[MU3]:.3g}, u2/U0 = {measured['u2_over_U0']:.3g}, "
            f"max random |G| = {measured['random_G_constant']:.3g} G0 = {measured['random_G_times_n']:.3g}/n.")


# ---- Phase 2 (Appendix F) --------------------------------------------------------------------

@check("defF.1_invariants_states",
       "Definition F.1 (a), (b), (d), (e), (i): on [T1, T2], |D0 K|, |D0 Q| = O~(v0/sqrt m); |D0 p| < 1/L^2; "
       "|dG - u2 P|/u2 = o(1/L) Sg/n; |sum G dp|/u2 = o(1) Sg/n; random part of F_i = O(1)", "statement", needs_t1=True)
def invariants(d: SeedData) -> tuple:
    """Def. F.1 at the saved T1 and final states, rates from the velocity there (`invariants_at`).
    The verdict: the items with no hidden constant, (b) max |D0 p| L^2 < 1; (d) max over all tokens
    of |dG(mu) - u2 P(mu)| / u2 over (1/L) Sg/n, and (e) max over samples of
    |sum_{h,l} G(x_h) dp_{h,l}| / u2 over Sg/n, each an o(1), held to < 1. Reported: (a) the fitted
    constant against v0/sqrt m and (i) max |random part of F_i|, whose O() hide their constants."""
    if (missing := _unavailable(d, "init", "T1", "final")) is not None:
        return missing
    values = {name: invariants_at(d.states[name], d.states["init"], d.scales) for name in ("T1", "final")}
    ok = all(_invariants_hold(v) for v in values.values())
    parts = "; ".join(f"{name}: (a) {v['a_KQ_change_over_v0_sqrt_m']:.3g}, (b) {v['b_p_change_times_L2']:.3g}, "
                      f"(d) {v['d_ratio']:.3g}, (e) {v['e_ratio']:.3g}, (i) {v['i_random_output']:.3g}"
                      for name, v in values.items())
    headroom = bound_parts(**{f"({item}) at {name}": (v[key], 1.0) for name, v in values.items()
                              for item, key in (("b", "b_p_change_times_L2"), ("d", "d_ratio"), ("e", "e_ratio"))})
    return (values, "(b) |D0 p| L^2 < 1; (d), (e) ratios < 1 ((a), (i) reported)", ok,
            f"Def. F.1 at {parts}.", headroom)


@check("corF.2_within_group_balance",
       "Corollary F.2: on [T1, T2], within each group max_i g_i / min_i g_i = O(1)", "diagnostic", needs_t1=True,
       no_verdict="O(1) hides its constant; the ratios are reported.")
def within_group_balance(d: SeedData) -> tuple:
    """Corollary F.2 at the T1 and final states: the largest ratio g_i / g_j within one group
    I1..I4 (computed from log g, exact at large margins), reported."""
    if (missing := _unavailable(d, "T1", "final")) is not None:
        return missing
    groups = d.states["final"].groups
    measured = {}
    for name in ("T1", "final"):
        log_g = log_loss_weights(d.states[name])
        spread = max(np.ptp(log_g[groups == k]) for k in range(4) if np.any(groups == k))
        measured[name] = math.exp(spread) if spread < 700 else math.inf
    return (measured, "max within-group g_i / g_j reported", None,
            f"Within a group g_i / g_j is at most {measured['T1']:.3g} at T1 and {measured['final']:.3g} at the end.")


@check("lemmaF.3_at_T1",
       "Lemma F.3: at T1, (d) = O(s0^2/s1^2), (e) = O~(m^-1.5), 1/2 < S2/S3 < 2, Sg/n = Theta(1)", "statement",
       needs_t1=True)
def invariants_strict_at_t1(d: SeedData) -> tuple:
    """Lemma F.3 at the T1 state. The verdict: S2/S3 in (1/2, 2), the part with no hidden constant.
    Reported: Def. F.1 (d) as max_mu |dG(mu) - u2 P(mu)| / u2 / (Sg/n), fitted against s0^2/s1^2
    (= m1 v0/U0, the size of m1 V P / u2); (e) as max_i |sum G dp| / u2 / (Sg/n), fitted against
    m^-1.5; Sg/n (the mean g_i, below 1 for every state since g_i < 1)."""
    if (missing := _unavailable(d, "init", "T1")) is not None:
        return missing
    sc, t1_state = d.scales, d.states["T1"]
    values = invariants_at(t1_state, d.states["init"], sc)
    g, groups = loss_weights(t1_state), t1_state.groups
    S = [np.sum(g[groups == k]) for k in range(4)]
    measured = {"d_constant": values["d_over_Sg_n"] / (sc.s0**2 / sc.s1**2), "e_constant": values["e_ratio"] / sc.m**-1.5,
                "S2_over_S3": _ratio(S[1], S[2]), "Sg_over_n": float(sum(S)) / sc.n}
    ok = bool(S2_S3_BAND[0] < measured["S2_over_S3"] < S2_S3_BAND[1])
    return (measured, "1/2 < S2/S3 < 2 ((d), (e) fitted constants and Sg/n reported)", ok,
            f"At T1: (d) is {measured['d_constant']:.3g} x s0^2/s1^2, (e) {measured['e_constant']:.3g} x m^-1.5 "
            f"(both relative to Sg/n), S2/S3 = {measured['S2_over_S3']:.3g}, Sg/n = {measured['Sg_over_n']:.3g}.")


@check("lemmaF.11_exact",
       "Lemma F.11: dV_ab/dt = G(b) P(a) + G(a) P(b) exactly (and |D1 V| <= O(log m log t / U0), reported)", "identity")
def value_gram_identity(d: SeedData) -> tuple:
    """Lemma F.11's identity at every saved state (init, T1, final): dV/dt from the JVP of
    W_V^T W_V (or V) along the velocity against G P^T + P G^T, P(mu) the docs' P(mu) computed
    from the attention. Derivation: dL/dG(mu) = -P(mu) and dW_V/dt = -u (dL/dG)^T, so dV/dt =
    P G^T + G P^T with no further factor (no 1/sqrt(m), no sign change). The verdict is the
    identity's alone (an identity of the implementation: it holds for any weights); the lemma's
    bound is reported as its fitted constant max |V(final) - V(T1)| / (log(m) max(log t_end, 1) / U0)
    beside U0 x the loss integrated after T1, the factor it grows with."""
    if (missing := _unavailable(d, "init", "final")) is not None:
        return missing
    sc = d.scales
    errors = {}
    for name in ("init", "T1", "final"):
        state = d.states.get(name)
        if state is None:
            continue
        G, P = state.grams["G"], token_P(state)
        closed = np.outer(P, G) + np.outer(G, P)
        errors[name] = float(np.max(np.abs(rates_at(state)["dV"] - closed)) / max(np.max(np.abs(closed)), 1e-300))
    worst = max(errors.values())
    measured = {"relative_error": errors}
    sentence = f"dV/dt and G P^T + P G^T agree to {worst:.2g} (relative) at the {', '.join(errors)} states"
    if d.states.get("T1") is not None:
        moved = float(np.max(np.abs(d.states["final"].grams["V"] - d.states["T1"].grams["V"])))
        bound = math.log(sc.m) * max(math.log(d.bounds["end"]), 1.0) / sc.U0
        integral = loss_integral_after_t1(d)
        measured.update(D1_V_constant=moved / bound, U0_loss_integral=integral)
        sentence += (f"; max |D1 V| = {moved:.3g} is {moved / bound:.3g} x log(m) log(t_end)/U0 "
                     f"(U0 x the loss integrated after T1 = {integral:.3g})")
    return (measured, f"relative error <= {IDENTITY_TOLERANCE:g} (the bound's constant is reported)",
            worst <= IDENTITY_TOLERANCE, sentence + ".")


@check("lemmaF.14_random_token_outputs",
       "Lemma F.14: on [T1, T2], |D1 G(mu)| <= O~(1/n + m1 (L (v0/sqrt m + 1/m) + v0)/U0) for random mu",
       "diagnostic", needs_t1=True,
       no_verdict="O~ hides its constant; the width sweep's random_G_change_after_T1 judges the m-dependence.")
def random_token_outputs(d: SeedData) -> tuple:
    """Lemma F.14 at the end of the run over every random token of the vocabulary: the fitted
    constant of |G(mu)(final) - G(mu)(T1)| against 1/n + m1 (L (v0/sqrt m + 1/m) + v0)/U0, reported."""
    if (missing := _unavailable(d, "T1", "final")) is not None:
        return missing
    sc = d.scales
    moved = np.abs(d.states["final"].grams["G"] - d.states["T1"].grams["G"])[FIRST_RANDOM:]
    bound = 1 / sc.n + sc.m1 * (sc.L * (sc.v0 / math.sqrt(sc.m) + 1 / sc.m) + sc.v0) / sc.U0
    constant = float(moved.max()) / bound
    integral = loss_integral_after_t1(d)
    return ({"constant": constant, "max_change": float(moved.max()), "bound": bound, "U0_loss_integral": integral},
            "fitted constant reported", None,
            f"Random-token outputs moved by at most {moved.max():.3g} after T1, {constant:.3g} x "
            f"1/n + m1 (L (v0/sqrt m + 1/m) + v0)/U0 = {bound:.3g} (U0 x the loss integrated after T1 = {integral:.3g}).")


TARGETS = {"(mu1,mu2)": ((MU1, MU2), 1), "(mu2,mu1)": ((MU2, MU1), 1),
           "(mu3,mu1)": ((MU3, MU1), -1), "(mu3,mu2)": ((MU3, MU2), -1)}
"""The four target scores A[key, query] and the sign of their change in Phase 2 (Lemma 4.7, Thm 3.3)."""


def _target_changes(change: np.ndarray) -> tuple[dict[str, float], bool]:
    values = {name: float(change[index]) for name, (index, _) in TARGETS.items()}
    signs = all(np.sign(values[name]) == sign for name, (_, sign) in TARGETS.items())
    return values, bool(signs)


def _random_entries(d: int) -> np.ndarray:
    """Entries (a, b) of a d x d matrix with a random token in the row or the column."""
    mask = np.ones((d, d), dtype=bool)
    mask[:FIRST_RANDOM, :FIRST_RANDOM] = False
    return mask


@check("lemma4.7_random_score_change",
       "Lemma 4.7 (F.16): after T1, A[mu1,mu2], A[mu2,mu1] rise and A[mu3,mu1], A[mu3,mu2] fall; "
       "max_{a,b<=3} |D1 A| = Theta~(Cs); |D1 A| = O~(Cr) on rows and columns of random tokens", "statement",
       needs_t1=True)
def random_score_change(d: SeedData) -> tuple:
    """Lemma 4.7 between the T1 and final states: the signs of the four target changes
    D1 A[key, query] (the verdict). Reported, their constants hidden: the largest |D1 A| among
    mu1..mu3 over Cs (Theta~); the largest |D1 A| on an entry with a random key or query over Cr
    (the paper's statement being for a <= 3 against a random gamma, reported apart)."""
    if (missing := _unavailable(d, "T1", "final")) is not None:
        return missing
    sc = d.scales
    change = d.states["final"].grams["A"] - d.states["T1"].grams["A"]
    targets, signs = _target_changes(change)
    target_constant = float(np.max(np.abs(change[:FIRST_RANDOM, :FIRST_RANDOM]))) / sc.Cs
    random_constant = float(np.max(np.abs(change[_random_entries(change.shape[0])]))) / sc.Cr
    with_targets = max(np.max(np.abs(change[:FIRST_RANDOM, FIRST_RANDOM:])),
                       np.max(np.abs(change[FIRST_RANDOM:, :FIRST_RANDOM]))) / sc.Cr
    integral = loss_integral_after_t1(d)
    return ({"changes": targets, "target_constant": target_constant, "random_constant": random_constant,
             "random_with_target_constant": float(with_targets), "U0_loss_integral": integral},
            "signs +, +, -, - (max_(a,b<=3) |D1 A| / Cs and random |D1 A| / Cr reported)", signs,
            f"After T1: D1 A {', '.join(f'{k} {v:+.3g}' for k, v in targets.items())}; max target |D1 A| = "
            f"{target_constant:.3g} Cs; max |D1 A| with a random token = {random_constant:.3g} Cr "
            f"({float(with_targets):.3g} Cr against mu1..mu3); U0 x the loss integrated after T1 = {integral:.3g}.")


@check("lemmaF.19_key_query_after_T1",
       "Lemma F.19: on [T1, T2], |D1 K_ab|, |D1 Q_ab| <= O~(s0^2/U0); |A| <= O~(v0/sqrt m)", "diagnostic", needs_t1=True,
       no_verdict="O~ hides its constants; the width sweep's key_query_change_after_T1 and score_max_at_end judge them.")
def key_query_after_t1(d: SeedData) -> tuple:
    """Lemma F.19 between the T1 and final states over every token pair: the fitted constants of
    max |D1 K|, |D1 Q| against s0^2/U0 and of max |A(final)| against v0/sqrt m, reported."""
    if (missing := _unavailable(d, "T1", "final")) is not None:
        return missing
    sc = d.scales
    start, end = d.states["T1"].grams, d.states["final"].grams
    moved = max(np.max(np.abs(end["K"] - start["K"])), np.max(np.abs(end["Q"] - start["Q"])))
    change_constant = float(moved) / (sc.s0**2 / sc.U0)
    score_constant = float(np.max(np.abs(end["A"]))) / (sc.v0 / math.sqrt(sc.m))
    integral = loss_integral_after_t1(d)
    return ({"change_constant": change_constant, "score_constant": score_constant, "U0_loss_integral": integral},
            "fitted constants reported", None,
            f"After T1, |D1 K|, |D1 Q| reach {change_constant:.3g} x s0^2/U0 (U0 x the loss integrated after T1 = "
            f"{integral:.3g}); at the end max |A| = {score_constant:.3g} x v0/sqrt m.")


@check("thmF.20_margins_grow",
       "Theorem F.20: y_i F_i(t) >= y_i F_i(T1) for every sample on [T1, T2]; the loss reaches 1/poly(m)", "statement",
       needs_t1=True)
def margins_grow(d: SeedData) -> tuple:
    """Theorem F.20 between the T1 and final states: the fraction of samples whose margin grew and
    the smallest growth (passes when every margin grew); the final loss against 1/m, reported."""
    if (missing := _unavailable(d, "T1", "final")) is not None:
        return missing
    before, after = sample_margins(d.states["T1"]), sample_margins(d.states["final"])
    growth = after - before
    loss = float(np.mean(np.logaddexp(0.0, -after)))
    measured = {"fraction_grown": float(np.mean(growth >= 0)), "smallest_growth": float(growth.min()),
                "final_loss": loss, "final_loss_times_m": loss * d.scales.m}
    return (measured, "every margin grew after T1 (final loss vs 1/m reported)", bool(np.all(growth >= 0)),
            f"{measured['fraction_grown']:.1%} of margins grew after T1 (smallest change {growth.min():+.3g}); "
            f"the final loss {loss:.3g} is {loss * d.scales.m:.3g} x 1/m.")


@check("thm3.3_target_change_vs_Cs",
       "Theorem 3.3: at T*, C12, C21 > 0 > C31, C32 with |C| = Theta~(Cs), |D0 A| = O~(Cr) with a random token, "
       "test loss <= 1/poly(m)", "statement")
def target_change_vs_cs(d: SeedData) -> tuple:
    """Theorem 3.3 between the initial and final states: C_ab = D0 A[a, b] (key a, query b) at the
    four targets with signs C12, C21 > 0 > C31, C32 (the verdict). Reported, their constants hidden
    or set by the run's length: min and max |C| / Cs (Theta~), the largest |D0 A| on an entry with
    a random token over Cr (O~), and the final test loss against 1/m."""
    if (missing := _unavailable(d, "init", "final")) is not None:
        return missing
    sc = d.scales
    change = d.states["final"].grams["A"] - d.states["init"].grams["A"]
    targets, signs = _target_changes(change)
    sizes = np.abs(list(targets.values())) / sc.Cs
    random_constant = float(np.max(np.abs(change[_random_entries(change.shape[0])]))) / sc.Cr
    test_loss = float(d.series["test_loss"][-1]) if "test_loss" in d.series else float("nan")
    measured = {"C": targets, "min_over_Cs": float(sizes.min()), "max_over_Cs": float(sizes.max()),
                "random_constant": random_constant, "test_loss": test_loss, "U0_loss_integral": loss_integral(d, 0.0)}
    return (measured,
            f"signs +, +, -, - (|C|/Cs, random |D0 A| / Cr and test loss vs 1/m = {1 / sc.m:.3g} reported)", signs,
            f"C12 {targets['(mu1,mu2)']:+.3g}, C21 {targets['(mu2,mu1)']:+.3g}, C31 {targets['(mu3,mu1)']:+.3g}, "
            f"C32 {targets['(mu3,mu2)']:+.3g}: |C| in [{sizes.min():.3g}, {sizes.max():.3g}] Cs; random |D0 A| up to "
            f"{random_constant:.3g} Cr; final test loss {test_loss:.3g} (U0 x the loss integrated from 0 = "
            f"{measured['U0_loss_integral']:.3g}).")
