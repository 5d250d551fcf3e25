"""The paper's claims, one per row of docs/claims.md section 2, each tied to the premises its
proof uses, the one-width checks that test it (`verify.paper.checks`) and the exponents in m a width
sweep should show (`verify.paper.scaling`).

A claim's verdict combines its evidence: `fail` when a check fails on some seed or an exponent
misses its prediction while every premise the claim uses is met (a finding against the paper),
`fail outside premises` when such a premise is not met (the theorem promises nothing there),
`pass` when some evidence passes and none fails, `not applicable` when nothing could be measured
(no T1, a Gram-space run for a neuron-level row, no width sweep for a rate). Identities of the
implementation (E18, the identity parts of F4 and F11) use no premise.

Only some checks decide a claim (`verify.paper.checks.EVIDENCE_CLASSES`): its statement checks (the
paper's claim as stated) and identities (an identity row is the claim). A refinement (a sharper
statement derived here) has a verdict of its own, shown, that never fails the claim; a diagnostic
(holds by construction, or a constant the paper hides) has none.
"""

from __future__ import annotations

from coocflow.verify.paper.checks import CHECKS, EVIDENCE, EVIDENCE_CLASSES
from coocflow.verify.paper.premises import UNSTATED
from coocflow.verify.declare import STATEMENT_ORDER, Statement, within_probability
from coocflow.verify.declare import Rate as DeclaredRate
from coocflow.verify.judge import allowed_by_probability, tally_verdict
from coocflow.verify.rate_judge import BOUND_TOLERANCE, ORDER_TOLERANCE

INIT = ("P1", "P2")
"""Concentration at initialization (L. D.1): wide enough (Cond. 1) and Gaussian with the stated scales."""
INIT_DATA = ("P1", "P2", "P6")
"""Initialization read through the data (attention, outputs at sample positions): also one-hot samples."""
AT_ZERO = ("P1", "P2", "P3", "P4", "P5", "P6", "P7")
"""Rates at t = 0 (Lemmas 4.1, E.6, 4.2): the data model and the small initial output, no flow yet."""
DYNAMICS = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8")
"""Every statement about the trajectory: Condition 1, Assumption 2.3, Definition 2.1, L. D.8 and the flow."""
HOLDS_UNSTATED = "holds under an unstated condition"
"""A claim that fails only where a condition the paper does not state is not met (`premises.UNSTATED`),
and holds where it is: a finding about the paper's premises, not a pass and not a plain fail."""
VERDICT_ORDER = STATEMENT_ORDER
"""A claim's verdict is the first of these that any of its pieces of evidence has: `vacuous` evidence
(a bound the data beat by far, `rate_judge.VACUOUS_BY`) counts neither way, so a claim is `vacuous`
only when nothing else decides it."""
NO_VERDICT = "no verdict"
"""A diagnostic check's entry in the evidence: reported, never judged."""
DECIDING_CLASSES = ("statement", "identity")
ON_E7 = ("P10",)
"""L. E.7's last step, 4R/L < s0 s1 sqrt(m/L) with R = 1/m1, needs c0 c1 sqrt(m1) > 4, which the
paper does not state: the unstated condition of E7 and of every claim whose proof uses L. E.7 (E12,
E14 and the T1 box E26 with what builds on it: E27, T3.1)."""
"""The check classes whose verdicts make a claim's (with its rates)."""


def paper_rate(quantity: str, predicted: float, kind: str = "order", tol: float = ORDER_TOLERANCE, log_power: int = 0,
               m1_power: float = 0.0, evidence: str = "statement") -> DeclaredRate:
    """An order in m a width sweep should show, pre-registered, as the public `verify.Rate` every
    System's theorem declares: `quantity` (verify.paper.scaling.QUANTITIES) ~ m^predicted
    (m1)^m1_power as `kind` (Theta "order", O "upper bound", Omega "lower bound", or 1/poly(m)
    "decays", whose tolerance is 0), judged by `rate_judge.judge_rate` within `tol`, allowing
    `log_power` factors of log m where the statement carries a tilde or an explicit log. A rate stated
    without m1 has `m1_power` 0: the paper states it for every m1 Condition 1 allows, so it holds
    uniformly in m1. Along a sweep's axis x in which log m moves by s_m and log m1 by s_m1 per unit of
    log x, the predicted exponent is s_m predicted + s_m1 m1_power (`Rate.test_along`). `evidence` is
    "statement" (the paper's rate) or "refinement" (an exponent derived here: its own verdict, never
    the claim's). Every field is fixed before any sweep runs; tests/test_rate_table.py pins the whole
    table."""
    return DeclaredRate(id=quantity, statement=quantity, evidence=evidence, quantity=quantity, axis="model.m",
                        exponent=predicted, kind=kind, tol=0.0 if kind == "decays" else tol, log_power=log_power,
                        also={"model.m1": m1_power} if m1_power else {})


def m1_power(rate: DeclaredRate) -> float:
    """A rate's exponent in m1 (0 when it names none)."""
    return float(rate.also.get("model.m1", 0.0))


def paper_claim(id: str, where: str, statement: str, premises: tuple[str, ...], checks: tuple[str, ...] = (),
                rates: tuple[DeclaredRate, ...] = (), **fields) -> Statement:
    """One claim of the paper as the public `verify.Statement`: where the paper states it, the
    statement, the premises its proof uses, the checks that test it (`verify.paper.checks`, by
    name) and its pre-registered rates (`paper_rate`); `identities` (checks that are identities of the
    implementation: no premise applies), `borrowed` (checks that test another claim's sharper bound,
    E3 lists E24's: shown with this claim, their fitted constants judged only there) and `unstated`
    (conditions the paper does not state that its proof needs, `premises.UNSTATED`: a step of L. E.7
    for every claim built on it: never premises, but a failure confined to the runs that do not meet
    them is `HOLDS_UNSTATED`)."""
    return Statement(id=id, where=where, statement=statement, premises=premises, checks=checks, rates=rates, **fields)


TILDE = 1
"""One log convention: every O~, Theta~ and Omega~ of the paper allows this many factors of log m
(an explicit log m log t, F9 and F11, allows 2). The same quantity with the same bound is judged
with the same allowance in every claim that uses it (E9 and T3.1's value change at T1 both carry T1
= O~(1/m)); typo 8 makes L. 4.7's and Thm 3.3's Cs a Theta~ (the loss integral adds a log m). The
tolerance 0.1 is itself worth about 1.3 factors of log m at the theory sweep's widths
(`rate_judge.log_slack`), which each rate's sentence states."""


def _up(quantity: str, predicted: float, log_power: int = 0, **fields) -> DeclaredRate:
    """An O(m^predicted) bound; O~ carries `log_power` = 1."""
    return paper_rate(quantity, predicted, "upper bound", BOUND_TOLERANCE, log_power, **fields)


def _order(quantity: str, predicted: float, log_power: int = 0, **fields) -> DeclaredRate:
    """A Theta(m^predicted) order; Theta~ carries `log_power` = 1."""
    return paper_rate(quantity, predicted, "order", ORDER_TOLERANCE, log_power, **fields)


CLAIMS: tuple[Statement, ...] = (
    paper_claim("D1", "L. D.1, D.3", "at t = 0 the Grams concentrate: |A|, off-diagonal K, Q, V <= v0 eps_m; diagonals "
          "v0 (1 +- eps_m); neuron inner products and norms likewise", INIT,
          ("lemmaD.1_init_concentration",),
          (_up("score_max_at_0", -0.5), _up("value_offdiag_at_0", -0.5), _order("value_diag_at_0", 0.0))),
    paper_claim("D2", "Cor. D.2", "at t = 0 attention is uniform up to O~(1/(Lm))", INIT_DATA,
          ("corD.2_uniform_attention",), (_up("attention_deviation_at_0", -1.0, 1),)),
    paper_claim("D4", "L. D.4, Cor. D.5, L. D.7, Prop. E.8", "at t = 0 |G(mu)| <= O~(G0), ||W_V X_i p_l||^2 = (v0/L)(1 +- eps), "
          "|w_j^T V_i p_l| <= s0 s1 sqrt((m/L) log)", INIT_DATA, ("lemmaD.4_init_outputs",), (_up("G_max_at_0", 0.0, 1),)),
    paper_claim("E3", "Prop. E.3", "by T1 attention moves by at most O(1/(sqrt(m) L) + L/m)", DYNAMICS,
          ("corE.24_attention_change",), (_up("attention_change_at_T1", -0.5),), borrowed=("corE.24_attention_change",)),
    paper_claim("E4", "L. 4.1 = E.4", "at t = 0 each neuron's alignment with mu1, mu2 grows at Theta(W0/m1); dG(mu1)/dt ~ W0/6",
          AT_ZERO, ("lemma4.1_neuron_alignment_rate",), (_order("dG1_at_0", 1.0),)),
    paper_claim("E6", "L. E.6, Thm E.15, L. E.17", "neurons align with random tokens at O(W0/(m1 n) + v0 sqrt(L/m)) and with "
          "mu3 at O~(s1^2 m)", AT_ZERO, ("lemmaE.6_other_neuron_rates",)),
    paper_claim("E7", "L. E.7", "by T1 |D0 w_j^T V_i p_l| < s0 s1 sqrt(m/L)", DYNAMICS,
          ("lemmaE.7_neuron_value_change",), unstated=ON_E7),
    paper_claim("E9", "L. E.9", "by T1 the value Grams move by O(t (c_a + c_b)/n); |V_ab| <= O~(v0/sqrt m), V_aa = Theta(v0)",
          DYNAMICS, ("lemmaE.9_value_change",), (_up("value_gram_change_at_T1", -1.0, 1),)),
    paper_claim("E12", "Prop. E.12, Cor. E.13", "by T1 the neuron inner products move by O~(t L s0 s1 sqrt(m/L))",
          DYNAMICS, ("propE.12_neuron_gram_change",),
          (_up("neuron_gram_change_at_T1", -1.0, 1, m1_power=-0.5, evidence="refinement"),), unstated=ON_E7),
    paper_claim("E14", "Thm E.14, Cor. E.10, L. E.11", "on [0, T1] each neuron's alignment with mu1, mu2 grows at "
          "P(mu) Theta(W0/m1) plus a small error", DYNAMICS, ("thmE.14_neuron_rate_vs_P",), unstated=ON_E7),
    paper_claim("E16", "L. 4.2 = E.16", "at t = 0 the common token's rate is small: dG3/dG1 ~ -(3/2) mean F(0) + O~(m^-0.5)",
          AT_ZERO, ("lemma4.2_common_token_rate",)),
    paper_claim("E18", "Def. E.18, eq. (4)", "identity: dG(mu)/dt = u2 P(mu) + (m1/n) sum_i g_i y_i sum_l (V_i p_l)^T W_V mu",
          (), ("eqE.18_exact",), identities=("eqE.18_exact",)),
    paper_claim("E19", "L. 4.3 = Thm E.19", "on [T0.5, T1], max(dG1, dG2) < -dG3 < dG1 + dG2, with T0.5 = O(1/m) and "
          "dG = Omega(W0)", DYNAMICS, ("lemma4.3_sandwich",), (_up("T0.5", -1.0), _order("dG1_at_0", 1.0))),
    paper_claim("E20", "Cor. E.20", "the I2 and I3 samples are correct by T' = O(1/m)", DYNAMICS,
          ("corE.20_I2_I3_correct_time",), (_up("T_prime", -1.0),)),
    paper_claim("E21", "Prop. E.21", "on [0, T1] |S2 - S3|/n <= O(Fmax0)", DYNAMICS, ("propE.21_I2_I3_balance",),
          (_up("I2_I3_gap_phase1", 0.0),)),
    paper_claim("E22", "Prop. E.22", "at t = 0 |K[mu,mu] G(nu)| <= O~(v0 G0), |K[nu,x] G(nu)| <= O~(v0 G0/sqrt m)", INIT_DATA,
          ("propE.22_key_value_products",)),
    paper_claim("E23", "L. E.23", "on [0, T1] |dA| <= m^-0.5 ((c_mu + c_nu)/n) O~(1/L + m^-0.5), |D0 A| <= t x that",
          DYNAMICS, ("lemmaE.23_score_change",), (_up("score_rate_at_0", -0.5, 1), _up("score_change_at_T1", -1.5, 1))),
    paper_claim("E24", "Cor. E.24", "by T1 attention moves by O~((1/(L m^2))(1/L + m^-0.5)) (1/L + 1/n smaller for random pairs)",
          DYNAMICS, ("corE.24_attention_change",), (_up("attention_change_at_T1", -2.0, 1),)),
    paper_claim("E25", "L. E.25", "by T1 the key and query Grams move by O~(t m^-1 (c_a + c_b)/n)", DYNAMICS,
          ("lemmaE.25_key_query_change",), (_up("key_query_change_at_T1", -2.0, 1),)),
    paper_claim("E26", "Thm E.26", "the T1 box holds until C_T1/U0: T1 = Theta~(1/m), neurons' values move by O(1/m1)",
          DYNAMICS, ("thmE.26_T1_box",), (_up("neuron_value_change_at_T1_times_m1", 0.0),), unstated=ON_E7),
    paper_claim("E27", "Thm E.27", "at T1 every margin, G1, G2, -G3 are Theta(1), random G(mu) O~(G0), u2 = Theta(U0)",
          DYNAMICS, ("thmE.27_at_T1",), (_order("u_norm2_at_T1", 1.0), _order("G1_at_T1", 0.0),
                                         _order("min_margin_at_T1", 0.0), _up("G_rand_at_T1", 0.0, 1)), unstated=ON_E7),
    paper_claim("T3.1", "Thm 3.1 = E.28", "by T1 = O~(1/m) every sample is correct with G1, G2 >= Omega(1), G3 <= -Omega(1), "
          "the loss still Theta(1), and V, <w, w> move O~(1/m), A O~(m^-1.5), K, Q O~(m^-2)", DYNAMICS,
          ("thm3.1_alignment", "thm3.1_correct_by_T1", "thm3.1_all_correct", "thm3.1_near_init", "thm3.1_loss_order_one"),
          (_up("all_correct_time", -1.0, 1), _order("loss_at_T1", 0.0), _up("value_gram_change_at_T1", -1.0, 1),
           _up("neuron_gram_change_at_T1", -1.0, 1), _up("phase1_score_drift", -1.5, 1), _up("score_change_at_T1", -1.5, 1),
           _up("key_query_change_at_T1", -2.0, 1)), unstated=ON_E7),
    paper_claim("Fig1b", "Sec. 3, 4.1", "in Phase 1 the I1 loss falls while the I2, I3 losses rise, then fall before T1",
          DYNAMICS, ("fig1b_rise_then_fall",), (_order("loss_I2_peak_time", -1.0, evidence="refinement"),)),
    paper_claim("F1-inv", "Def. F.1", "on [T1, T2]: K, Q near init, attention near uniform, u2 <= O(U0), the gradient "
          "balance, margins > C, |Gk| <= O(log m), the random part of F O(1)", DYNAMICS,
          ("defF.1_invariants_series", "defF.1_invariants_states"), (_up("key_query_change_at_end", -0.5, 1),)),
    paper_claim("F2", "Cor. F.2, F.12, F.18", "within a group max g_i/g_j = O(1) in Phase 2", DYNAMICS,
          ("corF.2_within_group_balance",)),
    paper_claim("F3", "L. F.3", "the Phase-2 invariants hold strictly at T1: 1/2 < S2/S3 < 2, Sg/n = Theta(1), (d) O(s0^2/s1^2), "
          "(e) O~(m^-1.5)", DYNAMICS, ("lemmaF.3_balance_at_T1", "lemmaF.3_at_T1")),
    paper_claim("F4", "eq. (5), L. F.4", "identity d u2/dt = (2 m1/n) sum_i g_i y_i F_i; u2 grows in Phase 2 and stays Omega(U0)",
          DYNAMICS, ("eq5_exact", "lemmaF.4_u_norm_grows"), (paper_rate("u_norm2_at_end", 1.0, "lower bound", BOUND_TOLERANCE),), identities=("eq5_exact",)),
    paper_claim("F5", "L. 4.4 = F.5", "in Phase 2 |S2 - S3|/min(S2, S3) stays small", DYNAMICS, ("lemma4.4_balance",),
          (_up("balance_max_phase2", 0.0),)),
    paper_claim("F6", "L. 4.5 = F.6", "in Phase 2 the gradient ratios are O(1) and R settles at R* in (1, 2)", DYNAMICS,
          ("lemma4.5_bounded_ratios", "lemma4.5_R_settles", "lemma4.5_R_formula"), (_order("R_at_end", 0.0),)),
    paper_claim("F7", "Cor. F.7", "in Phase 2 G1/G2, G1/(-G3), G2/(-G3) = Theta(1)", DYNAMICS, ("corF.7_G_ratios",),
          (_order("G_ratio_at_end", 0.0),)),
    paper_claim("F8", "Thm F.8", "in Phase 2 1/loss grows linearly at rate Theta(U0): -dLh/dt = Theta(U0) Lh^2", DYNAMICS,
          ("thmF.8_inverse_loss_linear", "thmF.8_rate_constant"),
          (_order("inverse_loss_slope", 1.0), _order("rate_constant", 0.0))),
    paper_claim("F9", "Cor. F.9, L. F.10", "in Phase 2 u2 = Theta(U0) and moves by O~(m1/m) relative to it", DYNAMICS,
          ("corF.9_u_norm_stable",), (_order("u_norm2_at_end", 1.0), _up("u_norm2_change_after_T1", -2.0, 2, m1_power=1.0))),
    paper_claim("F11", "L. F.11", "identity dV_ab/dt = G(b) P(a) + G(a) P(b); after T1 V moves O(log m log t/U0)", DYNAMICS,
          ("lemmaF.11_exact",), (_up("value_gram_change_after_T1", -1.0, 2),), identities=("lemmaF.11_exact",)),
    paper_claim("F13", "Cor. 4.6 = F.13", "in Phase 2 dV_12, dV_11, dV_22 > 0 and dV_13, dV_23 < 0", DYNAMICS,
          ("cor4.6_value_signs", "thm3.2_value_gram")),
    paper_claim("F14", "L. F.14, Cor. F.15", "in Phase 2 random-token outputs move by O~(1/n + ...)", DYNAMICS,
          ("lemmaF.14_random_token_outputs",), (_up("random_G_change_after_T1", 0.0, 1),)),
    paper_claim("F16", "L. 4.7 = F.16", "in Phase 2 dA[mu2,mu1], dA[mu1,mu2] > 0 > dA[mu3,mu1], dA[mu3,mu2] at "
          "m^-0.5 Theta~(Lh v0)/L; target changes Theta(Cs), random rows O~(Cr)", DYNAMICS,
          ("thm3.2_scores", "lemma4.7_random_score_change"),
          (_order("score_rate_over_loss_at_T_star", -0.5, 1), _order("score_rate_over_loss", -0.5, 1),
           _order("score_change_after_T1_over_Cs", 0.0, 1), _up("random_score_change_after_T1_over_Cr", 0.0, 1))),
    paper_claim("F17", "Cor. F.17", "in Phase 2 p(mu1<-mu2), p(mu2<-mu1) rise, p(mu<-mu3) falls, all within O(1/L^2)",
          DYNAMICS, ("corF.17_attention_moves",), (_up("attention_change_at_end", -2.0, evidence="refinement"),)),
    paper_claim("F19", "L. F.19", "after T1 K, Q move O~(s0^2/U0); |A| <= O~(v0/sqrt m) throughout", DYNAMICS,
          ("lemmaF.19_key_query_after_T1",), (_up("key_query_change_after_T1", -2.0, 1), _up("score_max_at_end", -0.5, 1))),
    paper_claim("F20", "Thm F.20", "T* (loss <= m^-k) = Theta(poly(m)); margins never decrease after T1", DYNAMICS,
          ("thmF.20_margins_grow", "thmF.20_margins_nondecreasing"), (_order("T_star", 1.0, evidence="refinement"),)),
    paper_claim("T3.2", "Thm 3.2", "on (T1, T2) A[mu2,mu1], A[mu1,mu2], V_12 rise, A[mu3,mu*], V_13, V_23 fall; G1, G2, -G3 >= "
          "Omega(1); G1+G2+G3 > 0 > G1+G3, G2+G3", DYNAMICS,
          ("thm3.2_scores", "thm3.2_value_gram", "thm3.2_G_sums", "thm3.2_G_order_one")),
    paper_claim("T3.3", "Thm 3.3", "at T* the loss and test loss are <= 1/poly(m); C12, C21, -C31, -C32 = Theta(Cs), "
          "random-token changes O~(Cr)", DYNAMICS,
          ("thm3.3_final_loss", "thm3.3_score_pattern", "thm3.3_target_change_vs_Cs"),
          (_order("score_change_at_T_star_over_Cs", 0.0, 1), paper_rate("test_loss_at_T_star", 0.0, "decays", 0.0))),
)
BY_ID = {claim.id: claim for claim in CLAIMS}


def shared_evidence(claim_id: str) -> tuple[str, ...]:
    """The other claims judged on the same evidence as `claim_id`: a check one borrows from the other
    (E3 reads E24's corE.24 check) or a rate of the same quantity with a different exponent (E3's
    attention change against m^-0.5, E24's against m^-2), so equal sentences with unequal verdicts
    are explained on the line."""
    own = next((c for c in CLAIMS if c.id == claim_id), None)
    if own is None:
        return ()
    quantities = {r.quantity: r.exponent for r in own.rates}
    out = []
    for other in CLAIMS:
        if other.id == claim_id:
            continue
        borrowed = set(own.borrowed) & set(other.checks) or set(other.borrowed) & set(own.checks)
        rebounded = any(r.quantity in quantities and r.exponent != quantities[r.quantity] for r in other.rates)
        if borrowed or rebounded:
            out.append(other.id)
    return tuple(out)


def premises_of_check(name: str) -> tuple[str, ...]:
    """The premises a check's verdict depends on: the union over the claims it tests of their
    premises (none for an identity); a check no claim lists depends on all of `DYNAMICS`."""
    found: set[str] = set()
    listed = False
    for claim in CLAIMS:
        if name in claim.checks:
            listed = True
            if name not in claim.identities:
                found.update(claim.premises)
    return tuple(sorted(found)) if listed else DYNAMICS


def unstated_of_check(name: str) -> tuple[str, ...]:
    """The unstated conditions of the claims a check tests (`Statement.unstated`)."""
    return tuple(sorted({c for claim in CLAIMS if name in claim.checks for c in claim.unstated}))


def judge(passed: bool | None, premises: tuple[str, ...], met: dict[str, bool | None]) -> str:
    """One piece of evidence's verdict: a violation counts against the paper only where every
    premise it uses is met (a premise that could not be evaluated does not block)."""
    if passed is None:
        return "not applicable"
    if passed:
        return "pass"
    return "fail" if all(met.get(p) is not False for p in premises) else "fail outside premises"


def combine(verdicts: list[str]) -> str:
    """The claim's verdict from its evidence's: the first of `VERDICT_ORDER` present."""
    return next((v for v in VERDICT_ORDER if v in verdicts), "not applicable")


def claims_table(width: dict, rates: list[dict] | None = None) -> list[dict]:
    """One row per claim of docs/claims.md: its premises at one width, its one-width checks there
    (verdict counts over seeds and the first seed's sentence), its fitted rates (`rates`, from a
    width sweep) and the combined verdict. `width` is `verify.paper.verify.width_summary`'s dict."""
    met = {p["id"]: p["met"] for p in width["premises"]}
    table = []
    for claim in CLAIMS:
        evidence = []
        relaxed = []
        for name in claim.checks:
            loose = width.get("checks_relaxed", {}).get(name)
            if loose is not None and EVIDENCE.get(name, "statement") in DECIDING_CLASSES:
                relaxed.append(_check_verdict(loose, name))
            rate = width["checks"].get(name)
            if rate is None:
                evidence.append({"kind": "check", "name": name, "verdict": "not applicable",
                                 "text": "not measured by this coocflow version"})
                continue
            evidence_class = EVIDENCE.get(name, "statement")
            sentence = width["first_seed"].get(name, {}).get("sentence", "")
            if evidence_class == "diagnostic":
                evidence.append({"kind": "check", "class": evidence_class, "name": name, "verdict": NO_VERDICT,
                                 "text": sentence})
                continue
            verdict = _check_verdict(rate, name)
            unit = width.get("unit", "seeds")
            counts = f"{rate['passed']}/{rate['of']} {unit} pass" if rate["of"] > 1 else verdict
            if allowed_failures(name, rate):
                delta = CHECKS[name].at_probability
                counts += (f", {rate['failed']} outside the lemma's events, which it allows with probability delta = "
                           f"{delta:g} (P({rate['of']} runs give {rate['failed']} or more) = "
                           f"{within_probability(rate['failed'], rate['of'], delta):.2g})")
            elif rate["failed"] or rate["failed_outside_premises"]:
                counts += (f", {rate['failed']} fail" if rate["failed"] else "") + (
                    f", {rate['failed_outside_premises']} fail outside premises" if rate["failed_outside_premises"] else "")
            if rate.get("vacuous"):
                counts += f", {rate['vacuous']} vacuous"
            if verdict == HOLDS_UNSTATED:
                conditions = unstated_of_check(name)
                counts += (f"; every failure where {', '.join(conditions)} is not met "
                           f"({'; '.join(UNSTATED[c] for c in conditions)}), "
                           f"{rate['passed_unstated_met']} passes where it is")
            evidence.append({"kind": "check", "class": evidence_class, "name": name, "verdict": verdict,
                             "text": f"{counts}. {sentence}"})
        for rate in (r for r in rates or [] if r["claim"] == claim.id):
            evidence.append({"kind": "rate", "class": rate.get("class", "statement"), "name": rate["quantity"],
                             "c0": rate.get("c0"), "verdict": rate["verdict"], "text": rate_text(rate)})
            if rate.get("class", "statement") in DECIDING_CLASSES:
                relaxed.append(rate.get("verdict_relaxed", rate["verdict"]))
        met_in = {p["id"]: p.get("met_in") for p in width["premises"]}
        premises = ", ".join(f"{p} {'met' if met.get(p) else 'not met' if met.get(p) is False else 'n/a'}"
                             + (f" ({met_in[p]})" if met_in.get(p) and met.get(p) is False else "")
                             for p in claim.premises)
        table.append({"id": claim.id, "where": claim.where, "statement": claim.statement,
                      "premises": premises or "none (identity)",
                      "premises_met": all(met.get(p) is not False for p in claim.premises),
                      "evidence": evidence, "verdict": combine([e["verdict"] for e in evidence if decides(e)]),
                      "verdict_relaxed": combine(relaxed) if "checks_relaxed" in width or rates else None})
    return table


AT_PROBABILITY = frozenset(name for name, c in CHECKS.items() if c.at_probability)
"""Checks of the events L. D.1-D.7 state with probability at least 1 - delta over the initialization
(the P9 events; `Check.at_probability`): a run outside them is one the lemma allows, so their failures
over N runs judge the lemma by `within_probability`, not one by one."""


def allowed_failures(name: str, rate: dict) -> bool:
    """Whether a check's failures over its seeds (or runs) are ones its lemma allows
    (`verify.judge.allowed_by_probability` with the check's `Check.at_probability`)."""
    return allowed_by_probability(rate["failed"], rate["of"], CHECKS[name].at_probability if name in CHECKS else 0.0)


def _check_verdict(rate: dict, name: str = "") -> str:
    """A check's verdict from its counts over seeds (or runs, summed over a width sweep's judgings): the
    judge's own rule on those counts (`verify.judge.tally_verdict`), and `HOLDS_UNSTATED` when every
    failure is where an unstated condition is not met and some pass where it is (on one run the judge
    weighs unstated conditions in the statements instead, which on counts summed over runs this does)."""
    tally = {"fail": rate["failed"], "fail outside premises": rate["failed_outside_premises"], "pass": rate["passed"],
             "vacuous": rate.get("vacuous", 0), "inconclusive": rate.get("inconclusive", 0),
             "not applicable": rate["unchecked"]}
    verdict = tally_verdict(tally, CHECKS[name].at_probability if name in CHECKS else 0.0)
    if (verdict == "fail" and rate.get("failed_unstated", 0) == rate["failed"]
            and rate.get("passed_unstated_met", 0) > 0):
        return HOLDS_UNSTATED
    return verdict


def decides(evidence: dict) -> bool:
    """Whether a piece of a claim's evidence enters its verdict: a rate, a statement or an identity;
    not a refinement (judged on its own) nor a diagnostic (no verdict)."""
    return evidence.get("class", "statement") in DECIDING_CLASSES


def rate_text(rate: dict) -> str:
    """`quantity: exponent (95% CI), largest widths' slope, band: verdict` in a line (`RateJudgement.sentence`)."""
    fit = rate["fit"]
    if fit["exponent"] is None:
        return f"{rate['quantity']}: not measured ({'; '.join(fit['notes']) or 'no values'})"
    left_out = f"; m = {', '.join(map(str, rate['left_out']))} left out (premises not met)" if rate.get("left_out") else ""
    refinement = " [refinement]" if rate.get("class") == "refinement" else ""
    unstated = f"; {rate['unstated']}" if rate.get("unstated") else ""
    relaxed = rate.get("verdict_relaxed")
    beside = f"; with P7 relaxed: {relaxed}" if relaxed is not None and relaxed != rate["verdict"] else ""
    return f"{rate['quantity']}{refinement}: {rate['sentence']}{left_out}{unstated}{beside}"


def verdict_counts(table: list[dict]) -> dict[str, int]:
    """How many claims have each verdict."""
    return {v: sum(row["verdict"] == v for row in table) for v in VERDICT_ORDER}


def evidence_counts(table: list[dict]) -> dict[str, dict[str, int]]:
    """Per check class, how many distinct checks of the claims table have each verdict (a check
    listed under two claims counts once); diagnostics count under `NO_VERDICT`."""
    seen: dict[str, dict] = {}
    for row in table:
        for e in row["evidence"]:
            if e["kind"] == "check":
                seen.setdefault(e["name"], e)
    counts = {c: {v: 0 for v in (*VERDICT_ORDER, NO_VERDICT)} for c in EVIDENCE_CLASSES}
    for e in seen.values():
        counts[e.get("class", "statement")][e["verdict"]] += 1
    return counts


def evidence_label(evidence: dict) -> str:
    """A piece of evidence's verdict, with its class when that is not a plain statement or a rate:
    `pass`, `fail (refinement)`, `no verdict (diagnostic)`."""
    evidence_class = evidence.get("class", "statement")
    return evidence["verdict"] + ("" if evidence_class == "statement" else f" ({evidence_class})")


def claims_markdown(table: list[dict]) -> str:
    """The claims table as Markdown: claim, premise status, evidence (checks and rates), verdict."""
    lines = ["| claim | where | premises | evidence | verdict |", "| --- | --- | --- | --- | --- |"]
    for row in table:
        evidence = "<br>".join(f"`{e['name']}` ({evidence_label(e)}): {e['text']}" for e in row["evidence"]) or "-"
        verdict = f"**{row['verdict']}**" if row["verdict"] == "fail" else row["verdict"]
        relaxed = row.get("verdict_relaxed")
        if relaxed is not None and relaxed != row["verdict"]:
            verdict += f" (with P7 relaxed: {relaxed})"
        cells = [f"{row['id']}: {row['statement']}", row["where"], row["premises"], evidence, verdict]
        lines.append("| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


PLURAL = {"statement": "statements", "refinement": "refinements", "identity": "identities", "diagnostic": "diagnostics"}


def summary_line(table: list[dict]) -> str:
    """The claims' verdicts, then the checks' per class, e.g. `claims: 20 pass, ...; statements: 30
    pass, 1 fail; refinements: 2 pass, 1 fail; identities: 3 pass; diagnostics: 24 (no verdict)`."""
    counts = verdict_counts(table)
    vacuous = f"{counts['vacuous']} vacuous, " if counts["vacuous"] else ""
    vacuous += f"{counts[HOLDS_UNSTATED]} {HOLDS_UNSTATED}, " if counts[HOLDS_UNSTATED] else ""
    parts = [f"claims: {counts['pass']} pass, {counts['fail']} fail, {counts['fail outside premises']} fail outside "
             f"premises, {counts['inconclusive']} inconclusive, {vacuous}{counts['not applicable']} not applicable "
             f"(of {len(table)})"]
    rates = [e for row in table for e in row["evidence"] if e["kind"] == "rate"]
    relaxed = [row.get("verdict_relaxed") for row in table]
    if any(v is not None and v != row["verdict"] for v, row in zip(relaxed, table)):
        found = [v or row["verdict"] for v, row in zip(relaxed, table)]
        parts.append("with P7 relaxed to L. D.8's own bound (P7r): " + ", ".join(
            f"{found.count(v)} {v}" for v in VERDICT_ORDER if found.count(v)))
    for rate_class in ("statement", "refinement"):
        of_class = [e["verdict"] for e in rates if e.get("class", "statement") == rate_class]
        shown = [f"{of_class.count(v)} {v}" for v in VERDICT_ORDER if of_class.count(v)]
        if shown:
            parts.append(f"{rate_class} rates: {', '.join(shown)}")
    for evidence_class, by_verdict in evidence_counts(table).items():
        if evidence_class == "diagnostic":
            if by_verdict[NO_VERDICT]:
                parts.append(f"{PLURAL[evidence_class]}: {by_verdict[NO_VERDICT]} (no verdict)")
            continue
        shown = [f"{n} {v}" for v, n in by_verdict.items() if n and v != NO_VERDICT]
        if shown:
            parts.append(f"{PLURAL[evidence_class]}: {', '.join(shown)}")
    return "; ".join(parts)


def _short(evidence: dict) -> str:
    """A few characters of one piece of evidence: a rate's exponent and interval, or a check's name."""
    if evidence["kind"] == "rate":
        text = evidence["text"].split(": exponent ", 1)
        return f"{evidence['name']} {text[1].split(';')[0]}" if len(text) == 2 else evidence["text"]
    return evidence["name"]


def _distinct(evidence: list[dict]) -> list[dict]:
    """One entry per (name, verdict): a rate judged alike at several init scales is shown once."""
    seen, out = set(), []
    for e in evidence:
        if (e["name"], e["verdict"]) not in seen:
            seen.add((e["name"], e["verdict"]))
            out.append(e)
    return out


def _c0_note(entry: dict, shown: list[dict], evidence: list[dict]) -> str:
    """`(c0 = 0.02, 0.2)`: the init scales at which this (name, verdict) was found, when not all of
    the claim's."""
    scales = [e["c0"] for e in shown if e.get("c0") is not None and (e["name"], e["verdict"]) == (
        entry["name"], entry["verdict"])]
    everywhere = {e["c0"] for e in evidence if e.get("c0") is not None}
    if not scales or len(everywhere) < 2 or set(scales) == everywhere:
        return ""
    return f" (c0 = {', '.join(f'{c:g}' for c in scales)})"


def side_by_side_markdown(tables: dict[str, list[dict]]) -> str:
    """One row per claim, one column per run (e.g. {"theory": scaling.json's claims, "paper":
    verify.json's claims}): the verdict, then the evidence that did not pass (or, when all passed,
    the claim's first rate)."""
    names = list(tables)
    lines = ["| claim | " + " | ".join(f"`{n}`" for n in names) + " |", "| --- |" + " --- |" * len(names)]
    rows = {name: {row["id"]: row for row in table} for name, table in tables.items()}
    for claim in CLAIMS:
        cells = []
        for name in names:
            row = rows[name].get(claim.id)
            if row is None:
                cells.append("-")
                continue
            shown = [e for e in row["evidence"] if e["verdict"] not in ("pass", "not applicable", NO_VERDICT)]
            if not shown:
                shown = [e for e in row["evidence"] if e["kind"] == "rate" and e["verdict"] == "pass"][:1]
            detail = "; ".join(f"{_short(e)}" + (" [refinement]" if e.get("class") == "refinement" else "")
                               + ("" if e["verdict"] == row["verdict"] else f" ({e['verdict']})")
                               + _c0_note(e, shown, row["evidence"]) for e in _distinct(shown)[:3])
            cells.append(f"**{row['verdict']}**" + (f": {detail}" if detail else "") if row["verdict"] == "fail"
                         else row["verdict"] + (f": {detail}" if detail else ""))
        lines.append(f"| {claim.id} ({claim.where}) | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"
