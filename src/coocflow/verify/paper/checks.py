"""One check per claim of the paper (docs/definitions.md section 6), each a named function of one seed's
observed series (and its initial and final states) returning the measured quantity, the
threshold it is held to, and a verdict with a sentence.

Rates (d/dt) are the exact derivatives along the flow recorded by the observables (JVP of the
observable along -grad L), never finite differences of the saved series. Order-of-magnitude
claims (Omega(1), O(1), "order-smaller") need a number to be checked; the thresholds below are
those numbers, stated in each result.
"""

from __future__ import annotations

import numpy as np

from coocflow.verify.paper.check_registry import (  # noqa: F401  (re-exported: the checks' registry)
    BALANCE_BOUND,
    CHECKS,
    EVIDENCE,
    EVIDENCE_CLASSES,
    HIDDEN_CONSTANT,
    IDENTITY_TOLERANCE,
    LINEAR_R2,
    MONOTONE_FRACTION,
    SANDWICH_FRACTION,
    CheckResult,
    SeedData,
    _t1,
    bound_parts,
    check,
)
from coocflow.verify.paper.premises import logits_at
from coocflow.verify.paper.saved import SavedState
from coocflow.verify.paper.state_values import loss_weights


@check("thm3.1_alignment",
       "Theorem 3.1: by T1, G(mu_1), G(mu_2) >= Omega(1) and G(mu_3) <= -Omega(1)", "statement", needs_t1=True)
def alignment(d: SeedData) -> tuple:
    """Thm 3.1's signs, read at half the first all-correct time. From that time on they are forced:
    I4 correct needs G(mu_3) < 0 and I2, I3 with I1 then need G(mu_1), G(mu_2) > 0 (up to the
    random-token part of F). At half of it some sample is still misclassified, so only the Phase-1
    dynamics (Lemmas 4.1, 4.3) can have set them. The values at T1 are reported."""
    t1 = d.bounds["T1"]
    half = min(d.bounds.get("all_correct") or t1, t1) / 2
    g = {k: d.at(k, half) for k in ("G_mu1", "G_mu2", "G_mu3")}
    at_t1 = {k: d.at(k, t1) for k in ("G_mu1", "G_mu2", "G_mu3")}
    margin = d.at("min_margin", half)
    ok = g["G_mu1"] > 0 and g["G_mu2"] > 0 and g["G_mu3"] < 0
    return ({**g, "time": half, "min_margin_there": margin, "at_T1": at_t1},
            "G(mu_1), G(mu_2) > 0 > G(mu_3) at half the first all-correct time", ok,
            f"At half the first all-correct time, t = {half:.3g} (smallest margin {margin:.3g}): G(mu_1)={g['G_mu1']:.3g}, G(mu_2)={g['G_mu2']:.3g}, "
            f"G(mu_3)={g['G_mu3']:.3g}; at T1: {at_t1['G_mu1']:.3g}, {at_t1['G_mu2']:.3g}, {at_t1['G_mu3']:.3g}.")


@check("thm3.1_all_correct",
       "Theorem 3.1: every training sample correctly classified by T1 = O~(1/m), early in training", "diagnostic",
       needs_t1=True, no_verdict="T1 is the first observed time with every sample correct, so 'by T1' holds by "
       "construction and T1 <= end/10 tests the run's length; T1 = O~(1/m) is the width sweep's (rate T1).")
def all_correct(d: SeedData) -> tuple:
    """Thm 3.1's T1 = O~(1/m): the first all-correct time, its fraction of the run and times U0
    (Def. E.2's C_T1 when T1 is that time), reported."""
    t1 = d.bounds.get("all_correct") or d.bounds["T1"]
    end = d.bounds["end"]
    measured = {"T1": t1, "T1_over_end": t1 / end}
    if d.scales is not None:
        measured["T1_times_U0"] = t1 * d.scales.U0
    scaled = f"; T1 U0 = {measured['T1_times_U0']:.3g}" if d.scales is not None else ""
    return (measured, "T1 and T1 U0 reported", None,
            f"All samples are correct from t={t1:.3g}, {t1 / end:.2%} of the run{scaled}.")


@check("thm3.1_correct_by_T1",
       "Theorem 3.1: every training sample is correctly classified by T1 = C_T1/U0 (C_T1 declared)", "statement",
       needs_t1=True, needs=("min_margin",))
def correct_by_declared_t1(d: SeedData) -> tuple:
    """With T1 declared (`verify.c_t1`) "every sample is correct by T1" is a real test: the first
    all-correct time against C_T1/U0. Without a declaration T1 is that time, so nothing is tested."""
    if d.t1_declared is None:
        return (None, "", None, "T1 is the first all-correct time here (no verify.c_t1), so 'correct by T1' holds "
                "by construction: nothing to test.")
    first, t1 = d.bounds["all_correct"], d.bounds["T1"]
    margin = d.at("min_margin", t1)
    ok = first is not None and first <= t1
    when = "never" if first is None else f"from t = {first:.3g} ({first / t1:.2f} T1)"
    return ({"all_correct_time": first, "T1": t1, "min_margin_at_T1": margin},
            "first all-correct time <= T1", ok,
            f"Every sample is correct {when}; T1 = C_T1/U0 = {t1:.3g}, where the smallest margin is {margin:.3g}.")


def neuron_gram(state: SavedState | None) -> np.ndarray | None:
    """N = W W^T, the neurons' inner products <w_j1, w_j2>; None when the state does not resolve
    the neurons (a Gram-space run without model.neurons)."""
    return None if state is None or state.neurons is None else state.neurons[0]


@check("thm3.1_near_init",
       "Theorem 3.1: on [0, T1], |D0 <w_j1, w_j2>|, |D0 V| <= O~(1/m), |D0 A| <= O~(m^-1.5 (1/L + m^-0.5)), "
       "|D0 K|, |D0 Q| <= O~(m^-2)", "diagnostic", needs_t1=True,
       no_verdict="each bound hides its constant (O~); their m-dependence is the width sweep's (value_gram_change_at_T1, "
       "neuron_gram_change_at_T1, score_change_at_T1, key_query_change_at_T1).")
def near_init(d: SeedData) -> tuple:
    """Thm 3.1's 'near initialization' at T1, every variable against its own O~ scale (all token
    pairs, from the saved init and T1 states): max |D0 V| and max |D0 N| (N = W W^T, the neuron
    Gram) times m, max |D0 A| over m^-1.5 (1/L + m^-0.5), max |D0 K|, |D0 Q| times m^2. The drift
    relative to each variable's initial size is reported too: V and N, which start at v0 and
    s1^2 m, move far more than their size by T1, while the theorem's scale is absolute."""
    start, at_t1 = d.states.get("init"), d.states.get("T1")
    if start is None or at_t1 is None:
        return (None, "", None, "needs the saved init and T1 states")
    before, after = start.grams, at_t1.grams
    moved = {k: float(np.max(np.abs(after[k] - before[k]))) for k in ("V", "A", "K", "Q")}
    relative = {k: moved[k] / max(float(np.max(np.abs(before[k]))), 1e-300) for k in moved}
    N0, N1 = neuron_gram(start), neuron_gram(at_t1)
    m, L = d.m, d.L
    constants = {"value_gram_constant": moved["V"] * m,
                 "score_constant": moved["A"] * m**1.5 / (1 / L + m**-0.5),
                 "key_query_constant": max(moved["K"], moved["Q"]) * m**2}
    if N0 is not None and N1 is not None:
        moved["N"] = float(np.max(np.abs(N1 - N0)))
        relative["N"] = moved["N"] / max(float(np.max(np.abs(N0))), 1e-300)
        constants["neuron_gram_constant"] = moved["N"] * m
    neurons = (f"|D0 N| = {constants['neuron_gram_constant']:.3g}/m ({relative['N']:.3g} x its initial size), "
               if "N" in moved else "|D0 N| not measured (no neurons saved), ")
    return ({"max_change": moved, "relative_to_init": relative, **constants},
            "fitted constants against 1/m (V, N), m^-1.5 (1/L + m^-0.5) (A), m^-2 (K, Q)", None,
            f"At T1: |D0 V| = {constants['value_gram_constant']:.3g}/m ({relative['V']:.3g} x its initial size), {neurons}"
            f"|D0 A| = {constants['score_constant']:.3g} x m^-1.5 (1/L + m^-0.5) ({relative['A']:.3g} x), "
            f"|D0 K|, |D0 Q| = {constants['key_query_constant']:.3g}/m^2.")


@check("thm3.1_loss_order_one",
       "Theorem 3.1: the loss is still Theta(1) at T1", "diagnostic", needs_t1=True,
       no_verdict="at T1 every margin is positive, so loss(T1) < log 2 by construction, and the Omega(1) side hides "
       "its constant (the width sweep's loss_at_T1).")
def loss_order_one(d: SeedData) -> tuple:
    t1 = d.bounds["T1"]
    value = d.at("loss", t1)
    return (value, "loss(T1) reported", None, f"The loss at T1 is {value:.3g} (it starts at {d.series['loss'][0]:.3g}).")


@check("fig1b_rise_then_fall",
       "Figure 1(b): in Phase 1 the I2 and I3 losses first rise, then fall", "statement", needs_t1=True)
def rise_then_fall(d: SeedData) -> tuple:
    t1 = d.bounds["T1"]
    window = d.t <= t1
    measured, ok = {}, True
    for group in ("loss_I2", "loss_I3"):
        values = d.series[group][window]
        peak = int(np.argmax(values))
        rise, fall = float(values[peak] - values[0]), float(values[peak] - values[-1])
        measured[group] = {"rise": rise, "fall": fall, "peak_t": float(d.t[window][peak])}
        ok &= rise > 1e-3 and fall > 1e-3
    return (measured, "rise and fall each > 1e-3 before T1", ok,
            "I2 rises by {:.3g} then falls by {:.3g}; I3 rises by {:.3g} then falls by {:.3g}.".format(
                measured["loss_I2"]["rise"], measured["loss_I2"]["fall"],
                measured["loss_I3"]["rise"], measured["loss_I3"]["fall"]))


def _sign_fractions(d: SeedData, expected: dict[str, int]) -> dict[str, float]:
    mask = d.phase2()
    return {name: float(np.mean(np.sign(d.series[name][mask]) == sign)) if mask.any() else 0.0
            for name, sign in expected.items()}


@check("thm3.2_scores",
       "Theorem 3.2: in Phase 2, A[mu_2,mu_1], A[mu_1,mu_2] increase; A[mu_3,mu_1], A[mu_3,mu_2] decrease", "statement",
       needs=("d_A_mu1_mu2_dt",))
def scores_monotone(d: SeedData) -> tuple:
    fractions = _sign_fractions(d, {"d_A_mu2_mu1_dt": 1, "d_A_mu1_mu2_dt": 1, "d_A_mu3_mu1_dt": -1, "d_A_mu3_mu2_dt": -1})
    ok = min(fractions.values()) >= MONOTONE_FRACTION
    return (fractions, f"right sign of dA/dt at >= {MONOTONE_FRACTION:.0%} of Phase-2 times",
            ok, f"The four scores move the predicted way at {min(fractions.values()):.1%} of Phase-2 times or more.")


@check("thm3.2_value_gram",
       "Theorem 3.2: in Phase 2, mu_1^T W_V^T W_V mu_2 increases; mu_1^T.. mu_3 and mu_2^T.. mu_3 decrease", "statement",
       needs=("d_V_mu1_mu2_dt",))
def value_gram_monotone(d: SeedData) -> tuple:
    fractions = _sign_fractions(d, {"d_V_mu1_mu2_dt": 1, "d_V_mu1_mu3_dt": -1, "d_V_mu2_mu3_dt": -1})
    ok = min(fractions.values()) >= MONOTONE_FRACTION
    return (fractions, f"right sign at >= {MONOTONE_FRACTION:.0%} of Phase-2 times", ok,
            f"The three value Gram entries move the predicted way at {min(fractions.values()):.1%} of Phase-2 times or more.")


@check("thm3.2_G_sums",
       "Theorem 3.2: in Phase 2, G(mu_1)+G(mu_2)+G(mu_3) > 0, G(mu_1)+G(mu_3) < 0, G(mu_2)+G(mu_3) < 0", "statement")
def g_sums(d: SeedData) -> tuple:
    mask = d.phase2()
    g1, g2, g3 = (d.series[k][mask] for k in ("G_mu1", "G_mu2", "G_mu3"))
    fractions = {"G1+G2+G3>0": float(np.mean(g1 + g2 + g3 > 0)) if mask.any() else 0.0,
                 "G1+G3<0": float(np.mean(g1 + g3 < 0)) if mask.any() else 0.0,
                 "G2+G3<0": float(np.mean(g2 + g3 < 0)) if mask.any() else 0.0}
    ok = min(fractions.values()) >= MONOTONE_FRACTION
    return (fractions, f"each holds at >= {MONOTONE_FRACTION:.0%} of Phase-2 times", ok,
            "Over Phase 2: " + ", ".join(f"{k} at {v:.1%}" for k, v in fractions.items()) + " of times.")


@check("thm3.3_final_loss",
       "Theorem 3.3: the loss reaches 1/poly(m)", "diagnostic",
       no_verdict="whether the loss reaches 1/m by the end tests the run's length (t_end); T* = Theta(poly(m)) and "
       "the test loss at T* are the width sweep's (T_star, test_loss_at_T_star).")
def final_loss(d: SeedData) -> tuple:
    """Thm 3.3's T* (first time with loss <= m^-k, k = `loss_exponent`) when the run reaches it,
    and the final loss."""
    value = float(d.series["loss"][-1])
    reached = np.flatnonzero(d.series["loss"] <= float(d.m) ** -d.loss_exponent)
    t_star = float(d.t[reached[0]]) if reached.size else None
    return ({"final_loss": value, "final_loss_times_m": value * d.m, "T_star": t_star}, "final loss and T* reported",
            None, f"The final loss is {value:.3g} = {value * d.m:.3g}/m at t={d.bounds['end']:.3g}; "
            + (f"it reaches m^-{d.loss_exponent:g} at T* = {t_star:.3g}." if t_star is not None
               else f"it never reaches m^-{d.loss_exponent:g}."))


@check("thm3.3_score_pattern",
       "Theorem 3.3: A(T*) - A(0) is positive at (1,2), (2,1), negative at (3,1), (3,2), and order-smaller "
       "wherever a random token is involved", "statement")
def score_pattern(d: SeedData) -> tuple:
    """Thm 3.3's signs of the four target changes (the verdict); the random-token changes relative
    to the smallest target change against the derived 1/n + L/sqrt(m) (docs/claims.md, T3.3) hide
    an O~ constant, reported as the fitted constant."""
    if d.A_init is None or d.A_final is None:
        return (None, "", None, "needs the initial and final weights")
    change = d.A_final - d.A_init
    targets = {"(1,2)": change[0, 1], "(2,1)": change[1, 0], "(3,1)": change[2, 0], "(3,2)": change[2, 1]}
    random_part = change.copy()
    random_part[:3, :3] = 0.0
    largest_random = float(np.max(np.abs(random_part)))
    smallest_target = float(min(abs(v) for v in targets.values()))
    signs = targets["(1,2)"] > 0 and targets["(2,1)"] > 0 and targets["(3,1)"] < 0 and targets["(3,2)"] < 0
    ratio = largest_random / max(smallest_target, 1e-300)
    bound = 1 / d.n + d.L / np.sqrt(d.m)
    return ({"target_changes": {k: float(v) for k, v in targets.items()}, "max_random_change": largest_random,
             "ratio": ratio, "bound": float(bound), "fitted_constant": float(ratio / bound)},
            "signs +, +, -, - (random-token changes over 1/n + L/sqrt(m) x the smallest target change reported)",
            bool(signs),
            f"Target score changes {', '.join(f'{k}: {v:+.3g}' for k, v in targets.items())}; the largest "
            f"random-token change is {largest_random:.3g}, {ratio:.2g} x the smallest target change, "
            f"{ratio / bound:.2g} x the bound 1/n + L/sqrt(m) = {bound:.2g}.")


def late_phase2(d: SeedData) -> np.ndarray:
    """Late Phase 2, where Theorem F.8's rate applies: t >= max(10 T1, end / 100)."""
    t1 = d.bounds["T1"] or d.bounds["end"]
    return d.t >= max(10 * t1, d.bounds["end"] / 100)


@check("thmF.8_inverse_loss_linear",
       "Theorem F.8: in Phase 2, 1/loss grows linearly in t", "statement")
def inverse_loss_linear(d: SeedData) -> tuple:
    mask = late_phase2(d) & (d.series["loss"] > 0)
    if mask.sum() < 5:
        return (None, "", False, "Fewer than 5 observations in late Phase 2 with a nonzero loss "
                                 "(the loss may have underflowed to 0).")
    t, inverse = d.t[mask], 1 / d.series["loss"][mask]
    slope, intercept = np.polyfit(t, inverse, 1)
    residual = inverse - (slope * t + intercept)
    with np.errstate(divide="ignore", invalid="ignore"):  # a flat 1/loss: R2 -inf or NaN, and no pass
        r2 = float(1 - residual.var() / inverse.var())
    ok = slope > 0 and r2 >= LINEAR_R2
    t1 = d.bounds["T1"]
    scale = d.at("u_norm2", t1) if t1 is not None and "u_norm2" in d.series else None
    constant = float(slope / scale) if scale else None
    return ({"slope": float(slope), "intercept": float(intercept), "R2": r2, "t_from": float(t[0]),
             "slope_over_u_norm2_at_T1": constant},
            f"slope > 0 and R^2 >= {LINEAR_R2}", ok,
            f"From t={t[0]:.3g}, 1/loss = {slope:.3g} t + {intercept:.3g} with R^2 = {r2:.4f}"
            + (f"; the slope is {constant:.3g} x ||u(T1)||^2 (Theorem F.8: Theta(U0), u2(T1) = Theta(U0))."
               if constant is not None else "."))


@check("lemma4.4_balance",
       "Lemma 4.4: |S_2 - S_3| / min(S_2, S_3) stays small over Phase 2", "statement")
def balance(d: SeedData) -> tuple:
    mask = d.phase2()
    value = float(np.max(d.series["bal_S2_S3"][mask])) if mask.any() else float("nan")
    return (value, f"max over Phase 2 <= {BALANCE_BOUND:.3g} (1/3, the largest C of Lemmas 4.3-4.5)", bool(value <= BALANCE_BOUND),
            f"The I2/I3 gradient imbalance peaks at {value:.3g} over Phase 2.", bound_parts(imbalance=(value, BALANCE_BOUND)))


@check("lemma4.5_bounded_ratios",
       "Lemma 4.5: sum g / (S_2+S_3+S_4-S_1) = O(1) and sum g / (S_1-S_2) = O(1) over Phase 2", "statement")
def bounded_ratios(d: SeedData) -> tuple:
    """Lemma 4.5's ratios are finite and positive over Phase 2: S_2+S_3+S_4 > S_1 > S_2 at every
    Phase-2 time (the verdict). Their O(1) size hides its constant: the maxima are reported."""
    mask = d.phase2()
    a, b = d.series["bal_sum_neg"][mask], d.series["bal_sum_S1_S2"][mask]
    measured = {"max_sum_over_neg": float(np.max(a)) if mask.any() else None,
                "max_sum_over_S1_S2": float(np.max(b)) if mask.any() else None,
                "min_denominators_positive": bool(mask.any() and np.all(a > 0) and np.all(b > 0))}
    return (measured, "both positive at every Phase-2 time (maxima reported)", measured["min_denominators_positive"],
            f"Over Phase 2 the ratios stay below {measured['max_sum_over_neg']:.3g} and {measured['max_sum_over_S1_S2']:.3g}."
            if mask.any() else "No Phase-2 observations.")


@check("lemma4.5_R_settles",
       "Lemma 4.5: R(t) = (S_2+S_3+S_4-S_1)/(S_1-S_2) settles in (1, 2)", "statement")
def r_settles(d: SeedData) -> tuple:
    tail = d.series["R"][int(0.8 * len(d.t)):]
    ok = bool(np.all((tail > 1) & (tail < 2)))
    return ({"final": float(tail[-1]), "min": float(tail.min()), "max": float(tail.max())},
            "1 < R < 2 over the last 20% of observations", ok,
            f"Over the last 20% of observations R ranges over [{tail.min():.3g}, {tail.max():.3g}], ending at {tail[-1]:.3g}.")


@check("lemma4.3_sandwich",
       "Lemma 4.3: on [T0.5, T1], (1+C) max(dG(mu_1)/dt, dG(mu_2)/dt) <= -dG(mu_3)/dt <= (1-C)(dG(mu_1)/dt + dG(mu_2)/dt)",
       "statement", needs_t1=True, needs=("d_G_mu1_dt",))
def sandwich(d: SeedData) -> tuple:
    """Held to the lemma's own window [T0.5, T1], T0.5 the code's boundary (the first time the
    common token's alignment catches up with the targets', `verify.paper.boundaries`)."""
    t1, t_half = d.bounds["T1"], d.bounds["T0.5"]
    if d.sandwich_c > 0:
        return _declared_sandwich(d, t1, t_half)
    if t_half is None:
        return (None, "T0.5 observed by T1", False, "The common token's alignment never catches up with the "
                "targets' (no T0.5), while Lemma 4.3 has it do so by T0.5 = O(1/m) <= T1.")
    if t_half > t1:
        return ({"T0.5": t_half, "T1": t1}, "T0.5 <= T1", False,
                f"T0.5 = {t_half:.3g} comes after T1 = {t1:.3g}: the window [T0.5, T1] of Lemma 4.3 is empty.")
    mask = (d.t >= t_half) & (d.t <= t1)
    g1, g2, g3 = (d.series[f"d_G_mu{k}_dt"][mask] for k in (1, 2, 3))
    upper, lower = g1 + g2, np.maximum(g1, g2)
    holds = (lower < -g3) & (-g3 < upper)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero rate gives no slack where it does not hold
        slack = np.minimum(-g3 / lower - 1, 1 + g3 / upper)
    fraction = float(np.mean(holds)) if mask.any() else 0.0
    best_c = float(np.min(slack[holds])) if holds.any() else None
    return ({"fraction": fraction, "C": best_c, "window": [t_half, t1]},
            f"strict sandwich at >= {SANDWICH_FRACTION:.0%} of times in [T0.5, T1]", fraction >= SANDWICH_FRACTION,
            f"The sandwich holds at {fraction:.0%} of the times in [T0.5, T1] = [{t_half:.3g}, {t1:.3g}]"
            + (f", with C = {best_c:.3g}." if best_c is not None else "."))


def _declared_sandwich(d: SeedData, t1: float, t_half: float | None) -> tuple:
    """With C declared, T0.5 is where the C-sandwich starts to hold through T1, so the sandwich on
    [T0.5, T1] holds by definition; what can fail is that it holds at all by T1, and (the width
    sweep's T0.5 rate) that it sets in by O(1/m)."""
    c = d.sandwich_c
    if t_half is None:
        return (None, f"the C = {c:g} sandwich holds at T1", False,
                f"At T1 = {t1:.3g} the sandwich with the declared C = {c:g} does not hold: Lemma 4.3 has it hold on "
                "[T0.5, T1].")
    return ({"T0.5": t_half, "T1": t1, "C": c, "T0.5/T1": t_half / t1}, f"the C = {c:g} sandwich holds at T1", True,
            f"The sandwich with the declared C = {c:g} holds from T0.5 = {t_half:.3g} through T1 = {t1:.3g} "
            f"(T0.5/T1 = {t_half / t1:.2f}).")


@check("eq5_exact",
       "Eq. (5): d/dt ||u||^2 = (2 m1 / n) sum_i g_i y_i F_i", "identity", needs=("d_u_norm2_dt", "eq5_rhs",))
def eq5(d: SeedData) -> tuple:
    lhs, rhs = d.series["d_u_norm2_dt"], d.series["eq5_rhs"]
    error = float(np.max(np.abs(lhs - rhs)) / max(np.max(np.abs(rhs)), 1e-300))
    return (error, f"relative difference <= {IDENTITY_TOLERANCE:g}", error <= IDENTITY_TOLERANCE,
            f"The JVP rate of ||u||^2 and Eq. (5)'s right-hand side agree to {error:.2g} at every observed time.")


def run_checks(data: SeedData) -> list[CheckResult]:
    return [fn(data) for fn in CHECKS.values()]



ROUNDING_ULPS = 100
"""A difference between successive saved values smaller than this many float64 ulps of the value
is rounding, not motion."""
UNDERFLOW = 1e-300
"""Loss values below this (or not finite) have underflowed; rate constants leave them out."""
R_FORMULA_TOLERANCE = 0.25
"""Lemma 4.5's proof says R contracts to R*; ours: R(end) and R* agree to 25% relative."""
NO_SCALES = (None, "", None, "needs the configuration's scales (U0, m1), which this seed's data does not carry")


def _from_t1(d: SeedData) -> np.ndarray:
    """T1 and the Phase-2 observations after it: the window of claims that start at T1."""
    return d.t >= d.bounds["T1"]


NO_PHASE2 = (None, "observations after T1", False, "No observation after T1: Phase 2 is not observed.")


@check("corE.20_I2_I3_correct_time",
       "Corollary E.20: the groups I2 and I3 are correctly classified (min y_i F_i >= C) from T' = O(1/m) on, "
       "by T1", "diagnostic", needs_t1=True, needs=("min_margin_I2_I3",),
       no_verdict="T' <= T1 holds whenever T1 is observed (T1 needs every margin positive), and T' = O(1/m) hides its "
       "constant: the width sweep's T_prime judges it.")
def i2_i3_correct_time(d: SeedData) -> tuple:
    """Cor. E.20 with typo 2 fixed (y_i F_i, not F_i): T' is the first observed time with
    min_{I2 u I3} y_i F_i > C, C = 0 operationally. The corollary has T' = O(1/m); the theory's
    initialization has U0 = c1^2 m ~ m, so T' U0 is the fitted constant, reported with T'/T1."""
    margin = d.series["min_margin_I2_I3"]
    hits = np.flatnonzero(margin > 0)
    t1 = d.bounds["T1"]
    if not hits.size:
        return ({"T_prime": None, "T1": t1}, "T' reported", None, "The I2 and I3 samples are never all correct.")
    t_prime = float(d.t[hits[0]])
    measured = {"T_prime": t_prime, "T1": t1, "T_prime_over_T1": t_prime / t1 if t1 > 0 else None}
    if d.scales is not None:
        measured["fitted_constant"] = t_prime * d.scales.U0
    constant = (f"; T' U0 = {measured['fitted_constant']:.3g} (O(1/m), U0 = {d.scales.U0:.3g} ~ m)"
                if d.scales is not None else "")
    return (measured, "T' and T' U0 reported (C = 0)", None,
            f"Every I2 and I3 sample is correct from T' = {t_prime:.3g}, T1 = {t1:.3g}{constant}.")


@check("propE.21_I2_I3_balance",
       "Proposition E.21: on [0, T1], |S_2 - S_3| / n <= O(Fmax0)", "diagnostic", needs_t1=True,
       no_verdict="O(Fmax0) hides its constant; the width sweep's I2_I3_gap_phase1 judges its m-dependence.")
def i2_i3_balance(d: SeedData) -> tuple:
    """Prop. E.21: the I2 and I3 gradient weights stay balanced through Phase 1, |S_2 - S_3| / n
    at most a constant times Fmax0 = max_i |F_i(0)| (read off the initial state). Measured: the
    largest |S_2 - S_3| / n over the observed times in [0, T1]; fitted constant: that / Fmax0."""
    init = d.states.get("init")
    if init is None:
        return (None, "", None, "needs the initial state, for Fmax0 = max_i |F_i(0)|")
    fmax0 = float(np.max(np.abs(logits_at(init))))
    window = d.t <= d.bounds["T1"]
    gap = float(np.max(np.abs(d.series["S_I2"] - d.series["S_I3"])[window]) / d.n)
    constant = gap / max(fmax0, 1e-300)
    return ({"max_gap_over_n": gap, "Fmax0": fmax0, "fitted_constant": constant},
            "fitted constant of max |S_2 - S_3| / n against Fmax0", None,
            f"Over [0, T1], |S_2 - S_3| / n peaks at {gap:.3g}, {constant:.3g} x Fmax0 = {fmax0:.3g}.")


def _ordered_sums(d: SeedData, mask: np.ndarray) -> np.ndarray:
    """Def. F.1 (f) at each masked time: S_4 <= min(S_2, S_3) <= max(S_2, S_3) <= S_1 <= S_2+S_3+S_4
    and 1/2 <= S_2/S_3 <= 2."""
    s1, s2, s3, s4 = (d.series[f"S_I{k}"][mask] for k in (1, 2, 3, 4))
    low, high = np.minimum(s2, s3), np.maximum(s2, s3)
    return (s4 <= low) & (high <= s1) & (s1 <= s2 + s3 + s4) & (2 * s2 >= s3) & (s2 <= 2 * s3)


@check("defF.1_invariants_series",
       "Definition F.1: on [T1, T2], (c) ||u||^2 <= O(U0); (f) S_4 <= min(S_2,S_3) <= max(S_2,S_3) <= S_1 <= "
       "S_2+S_3+S_4, 1/2 <= S_2/S_3 <= 2; (g) y_i F_i > 0; (h) |G(mu_k)| <= O(log m), k <= 3", "statement",
       needs_t1=True)
def phase2_invariants(d: SeedData) -> tuple:
    """The items of Def. F.1 the series show, over the Phase-2 observations (t > T1). The verdict:
    (f) the ordering of the group sums at >= MONOTONE_FRACTION of the times and (g) every margin
    positive (C = 0 operationally), items with no hidden constant. Reported: (c) max ||u||^2 / U0
    and (h) max_k |G(mu_k)| / log m, whose O() hide their constants."""
    if d.scales is None:
        return NO_SCALES
    mask = d.phase2()
    if not mask.any():
        return NO_PHASE2
    u_max = float(np.max(d.series["u_norm2"][mask]) / d.scales.U0)
    ordered = float(np.mean(_ordered_sums(d, mask)))
    margin = float(np.min(d.series["min_margin"][mask]))
    g_max = float(max(np.max(np.abs(d.series[f"G_mu{k}"][mask])) for k in (1, 2, 3)) / np.log(d.m))
    ok = ordered >= MONOTONE_FRACTION and margin > 0
    return ({"c_max_u_norm2_over_U0": u_max, "f_ordered_fraction": ordered, "g_min_margin": margin,
             "h_max_G_over_log_m": g_max},
            f"(f) at >= {MONOTONE_FRACTION:.0%} of Phase-2 times; (g) min margin > 0 ((c), (h) fitted constants reported)",
            ok,
            f"Over Phase 2: max ||u||^2 = {u_max:.3g} U0; the group sums are ordered at {ordered:.1%} of times; "
            f"the smallest margin is {margin:.3g}; max |G(mu_k)| = {g_max:.3g} log m.")


@check("lemmaF.3_balance_at_T1",
       "Lemma F.3: at T1, 1/2 < S_2/S_3 < 2 and sum_i g_i / n = Theta(1)", "statement", needs_t1=True)
def balance_at_t1(d: SeedData) -> tuple:
    """Lemma F.3's series part: Def. F.1 holds strictly at T1, with the I2/I3 ratio S_2/S_3 inside
    (1/2, 2) (the verdict). The mean gradient weight Sg/n = (S_1+S_2+S_3+S_4)/n is reported: it is
    below 1 for every state (g_i < 1), and its Omega(1) side hides its constant."""
    t1 = d.bounds["T1"]
    s = np.array([d.at(f"S_I{k}", t1) for k in (1, 2, 3, 4)])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio, mean_weight = float(s[1] / s[2]), float(s.sum() / d.n)
    return ({"S2_over_S3": ratio, "Sg_over_n": mean_weight}, "1/2 < S_2/S_3 < 2 (Sg/n reported)", bool(0.5 < ratio < 2),
            f"At T1 = {t1:.3g}: S_2/S_3 = {ratio:.4g}, Sg/n = {mean_weight:.3g}.")


@check("lemmaF.4_u_norm_grows",
       "Lemma F.4: on [T1, T2], d||u||^2/dt > 0 and ||u||^2 = Omega(U0)", "diagnostic", needs_t1=True,
       needs=("d_u_norm2_dt",),
       no_verdict="by eq. (5), d||u||^2/dt = (2 m1/n) sum_i g_i y_i F_i is positive whenever every margin is (Def. F.1 "
       "(g), judged by defF.1_invariants_series), and Omega(U0) hides its constant (the width sweep's u_norm2_at_end).")
def u_norm_grows(d: SeedData) -> tuple:
    """Lemma F.4 with eq. (5): the fraction of Phase-2 times at which ||u||^2 grows and
    min ||u||^2 / U0 over Phase 2, reported."""
    if d.scales is None:
        return NO_SCALES
    mask = d.phase2()
    if not mask.any():
        return NO_PHASE2
    growing = float(np.mean(d.series["d_u_norm2_dt"][mask] > 0))
    smallest = float(np.min(d.series["u_norm2"][mask]) / d.scales.U0)
    return ({"growing_fraction": growing, "min_u_norm2_over_U0": smallest},
            "fraction of Phase-2 times with d||u||^2/dt > 0 and min ||u||^2 / U0 reported", None,
            f"Over Phase 2, ||u||^2 grows at {growing:.1%} of times and stays >= {smallest:.3g} U0.")


G_RATIOS = {"G1/G2": ("G_mu1", 1, "G_mu2", 1), "G1/(-G3)": ("G_mu1", 1, "G_mu3", -1), "G2/(-G3)": ("G_mu2", 1, "G_mu3", -1)}


@check("corF.7_G_ratios",
       "Corollary F.7: on [T1, T2], G(mu_1)/G(mu_2), G(mu_1)/(-G(mu_3)), G(mu_2)/(-G(mu_3)) = Theta(1)", "diagnostic",
       needs_t1=True, no_verdict="Theta(1) hides its constants (the width sweep's G_ratio_at_end judges them), and the "
       "ratios' signs are forced once every sample is correct.")
def g_ratios(d: SeedData) -> tuple:
    """Cor. F.7: the ranges of the three alignment ratios over Phase 2, reported."""
    mask = d.phase2()
    if not mask.any():
        return NO_PHASE2
    ranges = {}
    for label, (top, top_sign, bottom, bottom_sign) in G_RATIOS.items():
        ratio = (top_sign * d.series[top][mask]) / (bottom_sign * d.series[bottom][mask])
        ranges[label] = [float(np.min(ratio)), float(np.max(ratio))]
    return (ranges, "each ratio's range over Phase 2 reported", None,
            "Over Phase 2: " + ", ".join(f"{k} in [{lo:.3g}, {hi:.3g}]" for k, (lo, hi) in ranges.items()) + ".")


@check("thmF.8_rate_constant",
       "Theorem F.8: in Phase 2, dLh/dt = -Theta(U0) Lh^2, i.e. -dLh/dt / (||u||^2 Lh^2) = Theta(1)", "refinement",
       needs_t1=True, needs=("d_loss_dt",))
def loss_rate_constant(d: SeedData) -> tuple:
    """Thm F.8's differential form with the exact rate: kappa = -dLh/dt / (||u||^2 Lh^2) over late
    Phase 2 (`late_phase2`), a Theta(1) constant (||u||^2 = Theta(U0), Lemma F.4). The paper hides
    it; with S2 = S3, S4 ~ 0 and near-uniform attention every margin grows at
    u2 (Sg/n) (2 - R)/(4 + 3R), so kappa* = (2 - R)/(4 + 3R) (docs/claims.md section 4), at most 1/7
    for R in (1, 2). Passes when the median kappa lies within a factor 2 of the median kappa*
    (Theta(1) with the derived constant). Loss values that underflowed (below UNDERFLOW or not
    finite) are left out and counted."""
    window = late_phase2(d)
    loss = d.series["loss"][window]
    usable = np.isfinite(loss) & (loss >= UNDERFLOW)
    left_out = int(np.sum(~usable))
    if not usable.any():
        return ({"left_out": left_out}, "", False, "No late-Phase-2 observation with a loss that has not underflowed.")
    kappa = -d.series["d_loss_dt"][window][usable] / (d.series["u_norm2"][window][usable] * loss[usable] ** 2)
    R = d.series["R"][window][usable]
    derived = float(np.median((2 - R) / (4 + 3 * R)))
    low, high, middle = float(np.min(kappa)), float(np.max(kappa)), float(np.median(kappa))
    ratio = middle / derived if derived > 0 else float("inf")
    return ({"min": low, "max": high, "median": middle, "derived_kappa": derived, "ratio_to_derived": ratio,
             "points": int(usable.sum()), "left_out": left_out},
            "median kappa within a factor 2 of kappa* = (2 - R)/(4 + 3R)", bool(0.5 <= ratio <= 2.0),
            f"Over late Phase 2 (t >= {d.t[window][0]:.3g}) kappa = -dLh/dt / (||u||^2 Lh^2) ranges over "
            f"[{low:.3g}, {high:.3g}], median {middle:.3g}, {ratio:.3g} x the derived (2 - R)/(4 + 3R) = {derived:.3g} "
            f"({left_out} underflowed values left out).")


@check("corF.9_u_norm_stable",
       "Corollary F.9: on [T1, T2], |u2(t) - u2(T1)| <= O(m1 log m log t / U0) and u2 = Theta(U0)", "diagnostic",
       needs_t1=True, no_verdict="O() and Theta(U0) hide their constants (about 1/kappa here, docs/claims.md section 4 "
       "item 2); the width sweep's u_norm2_at_end and u_norm2_change_after_T1 judge them.")
def u_norm_stable(d: SeedData) -> tuple:
    """Cor. F.9 at the last observed time: the Phase-2 change of ||u||^2 over m1 log(m) log(t) / U0
    (log t read as log max(t, e)) as a fitted constant, and ||u(end)||^2 / U0, reported."""
    if d.scales is None:
        return NO_SCALES
    t1, end = d.bounds["T1"], d.bounds["end"]
    change = abs(d.series["u_norm2"][-1] - d.at("u_norm2", t1))
    scale = d.scales.m1 * np.log(d.m) * np.log(max(end, np.e)) / d.scales.U0
    constant, final = float(change / scale), float(d.series["u_norm2"][-1] / d.scales.U0)
    return ({"change": float(change), "bound_expression": float(scale), "fitted_constant": constant,
             "u_norm2_end_over_U0": final},
            "fitted constant against m1 log(m) log(t)/U0 and u2(end)/U0 reported", None,
            f"From T1 to t = {end:.3g}, ||u||^2 changes by {change:.3g}, {constant:.3g} x m1 log(m) log(t)/U0 "
            f"= {scale:.3g}; ||u(end)||^2 = {final:.4g} U0.")


VALUE_SIGNS = {"d_V_mu1_mu2_dt": 1, "d_V_mu1_mu1_dt": 1, "d_V_mu2_mu2_dt": 1, "d_V_mu1_mu3_dt": -1, "d_V_mu2_mu3_dt": -1}


@check("cor4.6_value_signs",
       "Corollary 4.6: on [T1, T2], dV_12, dV_11, dV_22 > 0 and dV_13, dV_23 < 0", "statement", needs_t1=True,
       needs=("d_V_mu1_mu1_dt",))
def value_signs(d: SeedData) -> tuple:
    """Cor. 4.6 = F.13: the exact rates of the value Gram entries have the stated signs at >=
    MONOTONE_FRACTION of the Phase-2 times. dV_33 > 0 follows from L. F.11 (2 G(mu_3) P(mu_3),
    both negative) and is reported, not required."""
    fractions = _sign_fractions(d, VALUE_SIGNS)
    derived = _sign_fractions(d, {"d_V_mu3_mu3_dt": 1})
    ok = min(fractions.values()) >= MONOTONE_FRACTION
    return ({**fractions, "derived": derived}, f"right sign at >= {MONOTONE_FRACTION:.0%} of Phase-2 times", ok,
            f"The five value Gram rates have the stated sign at {min(fractions.values()):.1%} of Phase-2 times or more; "
            f"dV_33 > 0 at {derived['d_V_mu3_mu3_dt']:.1%}.")


ATTENTION_MOVES = {"p_q1_k2": 1, "p_q2_k1": 1, "p_q1_k3": -1, "p_q2_k3": -1}


def _resolved_steps(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Successive differences of a saved series and which of them exceed ROUNDING_ULPS ulps of the value."""
    steps = np.diff(values)
    return steps, np.abs(steps) >= ROUNDING_ULPS * np.spacing(np.abs(values[1:]))


@check("corF.17_attention_moves",
       "Corollary F.17: on [T1, T2], p_{q<-mu,k<-nu} (mu != nu in {mu_1, mu_2}) rises, p_{q<-mu,k<-mu_3} falls, "
       "and max |p(t) - p(0)| < 1/L^2", "statement", needs_t1=True)
def attention_moves(d: SeedData) -> tuple:
    """Cor. F.17 on the four mean target attentions: over the steps between successive
    observations from T1 on, the fraction that move the stated way among the steps that move at
    all (a step below ROUNDING_ULPS ulps is rounding: neither up nor down, and left out); at least
    MONOTONE_FRACTION passes. A series with no resolved step cannot be judged (not applicable). The
    change bound 1/L^2 (Def. F.1 (b)) is explicit: max over the four of |p(end) - p(0)| < 1/L^2."""
    mask = _from_t1(d)
    fractions, unresolved = {}, {}
    for name, sign in ATTENTION_MOVES.items():
        steps, resolved = _resolved_steps(d.series[name][mask])
        unresolved[name] = int(np.sum(~resolved))
        fractions[name] = float(np.mean(np.sign(steps[resolved]) == sign)) if resolved.any() else None
    change = float(max(abs(d.series[name][-1] - d.series[name][0]) for name in ATTENTION_MOVES))
    bound = 1 / d.L**2
    judged = [f for f in fractions.values() if f is not None]
    if change >= bound or any(f < MONOTONE_FRACTION for f in judged):
        ok = False
    else:
        ok = True if len(judged) == len(fractions) else None
    steps = int(mask.sum()) - 1
    return ({"fractions": fractions, "unresolved_steps": unresolved, "steps": steps, "max_change": change,
             "bound": bound},
            f"right direction at >= {MONOTONE_FRACTION:.0%} of resolved Phase-2 steps; "
            f"max |p(end) - p(0)| < 1/L^2 = {bound:.3g}",
            ok,
            "Over Phase 2 (" + ", ".join(f"{k}: {'unresolved' if v is None else f'{v:.1%}'} of "
                                         f"{steps - unresolved[k]} resolved steps" for k, v in fractions.items())
            + f") the attentions move as stated; max |p(end) - p(0)| = {change:.3g} < 1/L^2 = {bound:.3g}"
            + ("." if change < bound else " fails."),
            bound_parts(**{"max |p(end) - p(0)| < 1/L^2": (change, bound)}))


@check("thmF.20_margins_nondecreasing",
       "Theorem F.20: on [T1, T2] the margins do not decrease, y_i F_i(t) >= y_i F_i(T1), and Lh reaches 1/poly(m)",
       "statement", needs_t1=True)
def margins_nondecreasing(d: SeedData) -> tuple:
    """Thm F.20's series part: the smallest margin never decreases from T1 on (every successive
    difference >= -ROUNDING_ULPS ulps of the value). The final loss against 1/m is reported: it
    tests the run's length (t_end), not the theorem."""
    margin = d.series["min_margin"][_from_t1(d)]
    steps = np.diff(margin)
    drops = steps < -ROUNDING_ULPS * np.spacing(np.abs(margin[1:]))
    largest_drop = float(max(-np.min(steps), 0.0)) if steps.size else 0.0
    final = float(d.series["loss"][-1])
    return ({"drops": int(drops.sum()), "largest_drop": largest_drop, "final_loss": final, "loss_bound": 1 / d.m},
            f"no drop of min margin beyond {ROUNDING_ULPS} ulps from T1 on (final loss vs 1/m = {1 / d.m:.3g} reported)",
            not drops.any(),
            f"From T1 on the smallest margin drops at {int(drops.sum())} of {steps.size} steps "
            f"(largest drop {largest_drop:.3g}); the final loss is {final:.3g}.")


@check("thm3.2_G_order_one",
       "Theorem 3.2 (typo 1 fixed): on (T1, T2), G(mu_1), G(mu_2), -G(mu_3) >= Omega(1)", "diagnostic", needs_t1=True,
       no_verdict="Omega(1) hides its constant, and the signs are forced once every sample is correct (I4 needs "
       "G(mu_3) < 0, then I1-I3 need G(mu_1), G(mu_2) > 0); the width sweep's G1_at_T1 judges the size.")
def g_order_one(d: SeedData) -> tuple:
    """Thm 3.2 item 3 with typo 1 fixed: the Phase-2 minima of G(mu_1), G(mu_2) and -G(mu_3) beside
    their values at T1, reported."""
    mask = d.phase2()
    if not mask.any():
        return NO_PHASE2
    t1 = d.bounds["T1"]
    signed = {"G1": ("G_mu1", 1), "G2": ("G_mu2", 1), "-G3": ("G_mu3", -1)}
    at_t1 = {k: sign * d.at(name, t1) for k, (name, sign) in signed.items()}
    smallest = {k: float(np.min(sign * d.series[name][mask])) for k, (name, sign) in signed.items()}
    return ({"at_T1": at_t1, "phase2_min": smallest}, "Phase-2 minima and values at T1 reported", None,
            "Phase-2 minimum (value at T1): " + ", ".join(f"{k} {smallest[k]:.3g} ({at_t1[k]:.3g})" for k in signed) + ".")


def r_star(state: SavedState) -> float:
    """Lemma 4.5's proof: the fixed point R* = -b/(2a) + sqrt(b^2/(4a^2) - c/a) of R, with
    a = H_1 + H_2, b = H_3 + H_4 - H_1, c = -(H_2 + H_3 + 2 H_1), H_k the sum over I_k of
    g'_i = -g_i (1 - g_i), g_i = sigmoid(-y_i F_i) at `state` (NaN where a = 0 or the root is complex)."""
    g = loss_weights(state)
    slope = -g * (1 - g)
    groups = state.groups
    h1, h2, h3, h4 = (float(np.sum(slope[groups == k])) for k in range(4))
    a, b, c = h1 + h2, h3 + h4 - h1, -(h2 + h3 + 2 * h1)
    if a == 0:
        return float("nan")
    discriminant = b**2 / (4 * a**2) - c / a
    return float(-b / (2 * a) + np.sqrt(discriminant)) if discriminant >= 0 else float("nan")


@check("lemma4.5_R_formula",
       "Lemma 4.5 (proof): R = (S_2+S_3+S_4-S_1)/(S_1-S_2) contracts to R* = -b/(2a) + sqrt(b^2/(4a^2) - c/a) in (1, 2)",
       "refinement")
def r_formula(d: SeedData) -> tuple:
    """Lemma 4.5's proof: R(t) contracts to the root R* of a R^2 + b R + c = 0 built from the
    loss curvatures g' of the four groups (`r_star`). At the final state: R(end) in (1, 2) and
    |R(end) - R*| / R* <= R_FORMULA_TOLERANCE (our constant: the proof drops the random tokens'
    and the attention's share of the margins' rates, so R* is close to, not equal to, R)."""
    final = d.states.get("final")
    if final is None:
        return (None, "", None, "needs the final state (per-sample g)")
    target = r_star(final)
    value = float(d.series["R"][-1])
    gap = abs(value - target) / target if np.isfinite(target) and target != 0 else float("nan")
    ok = bool(1 < value < 2 and gap <= R_FORMULA_TOLERANCE)
    return ({"R_end": value, "R_star": target, "relative_difference": gap},
            f"1 < R(end) < 2 and |R - R*|/R* <= {R_FORMULA_TOLERANCE:g}", ok,
            f"At the end R = {value:.4g} and R* = {target:.4g} (relative difference {gap:.3g}).")

def _register_state_checks() -> None:
    """The checks that read whole saved states live in their own modules and register here."""
    import coocflow.verify.paper.checks_phase1  # noqa: F401  # lazy: registers after this module's checks (CHECKS order)
    import coocflow.verify.paper.checks_phase2  # noqa: F401  # lazy: registers after this module's checks (CHECKS order)


_register_state_checks()
