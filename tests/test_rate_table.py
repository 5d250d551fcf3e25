"""The pre-registered rate table: every claimed rate's kind, exponent, tolerance, log
allowance, m1 power and evidence class, pinned here so that changing any of them is a visible
change to this file, made in its own commit with its reason."""

from coocflow.verify.paper.claims import CLAIMS, m1_power

PINNED = [
    ('D1', 'score_max_at_0', 'upper bound', -0.5, 0.1, 0, 0.0, 'statement'),
    ('D1', 'value_offdiag_at_0', 'upper bound', -0.5, 0.1, 0, 0.0, 'statement'),
    ('D1', 'value_diag_at_0', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('D2', 'attention_deviation_at_0', 'upper bound', -1.0, 0.1, 1, 0.0, 'statement'),
    ('D4', 'G_max_at_0', 'upper bound', 0.0, 0.1, 1, 0.0, 'statement'),
    ('E3', 'attention_change_at_T1', 'upper bound', -0.5, 0.1, 0, 0.0, 'statement'),
    ('E4', 'dG1_at_0', 'order', 1.0, 0.1, 0, 0.0, 'statement'),
    ('E9', 'value_gram_change_at_T1', 'upper bound', -1.0, 0.1, 1, 0.0, 'statement'),
    ('E12', 'neuron_gram_change_at_T1', 'upper bound', -1.0, 0.1, 1, -0.5, 'refinement'),
    ('E19', 'T0.5', 'upper bound', -1.0, 0.1, 0, 0.0, 'statement'),
    ('E19', 'dG1_at_0', 'order', 1.0, 0.1, 0, 0.0, 'statement'),
    ('E20', 'T_prime', 'upper bound', -1.0, 0.1, 0, 0.0, 'statement'),
    ('E21', 'I2_I3_gap_phase1', 'upper bound', 0.0, 0.1, 0, 0.0, 'statement'),
    ('E23', 'score_rate_at_0', 'upper bound', -0.5, 0.1, 1, 0.0, 'statement'),
    ('E23', 'score_change_at_T1', 'upper bound', -1.5, 0.1, 1, 0.0, 'statement'),
    ('E24', 'attention_change_at_T1', 'upper bound', -2.0, 0.1, 1, 0.0, 'statement'),
    ('E25', 'key_query_change_at_T1', 'upper bound', -2.0, 0.1, 1, 0.0, 'statement'),
    ('E26', 'neuron_value_change_at_T1_times_m1', 'upper bound', 0.0, 0.1, 0, 0.0, 'statement'),
    ('E27', 'u_norm2_at_T1', 'order', 1.0, 0.1, 0, 0.0, 'statement'),
    ('E27', 'G1_at_T1', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('E27', 'min_margin_at_T1', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('E27', 'G_rand_at_T1', 'upper bound', 0.0, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'all_correct_time', 'upper bound', -1.0, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'loss_at_T1', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('T3.1', 'value_gram_change_at_T1', 'upper bound', -1.0, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'neuron_gram_change_at_T1', 'upper bound', -1.0, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'phase1_score_drift', 'upper bound', -1.5, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'score_change_at_T1', 'upper bound', -1.5, 0.1, 1, 0.0, 'statement'),
    ('T3.1', 'key_query_change_at_T1', 'upper bound', -2.0, 0.1, 1, 0.0, 'statement'),
    ('Fig1b', 'loss_I2_peak_time', 'order', -1.0, 0.1, 0, 0.0, 'refinement'),
    ('F1-inv', 'key_query_change_at_end', 'upper bound', -0.5, 0.1, 1, 0.0, 'statement'),
    ('F4', 'u_norm2_at_end', 'lower bound', 1.0, 0.1, 0, 0.0, 'statement'),
    ('F5', 'balance_max_phase2', 'upper bound', 0.0, 0.1, 0, 0.0, 'statement'),
    ('F6', 'R_at_end', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('F7', 'G_ratio_at_end', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('F8', 'inverse_loss_slope', 'order', 1.0, 0.1, 0, 0.0, 'statement'),
    ('F8', 'rate_constant', 'order', 0.0, 0.1, 0, 0.0, 'statement'),
    ('F9', 'u_norm2_at_end', 'order', 1.0, 0.1, 0, 0.0, 'statement'),
    ('F9', 'u_norm2_change_after_T1', 'upper bound', -2.0, 0.1, 2, 1.0, 'statement'),
    ('F11', 'value_gram_change_after_T1', 'upper bound', -1.0, 0.1, 2, 0.0, 'statement'),
    ('F14', 'random_G_change_after_T1', 'upper bound', 0.0, 0.1, 1, 0.0, 'statement'),
    ('F16', 'score_rate_over_loss_at_T_star', 'order', -0.5, 0.1, 1, 0.0, 'statement'),
    ('F16', 'score_rate_over_loss', 'order', -0.5, 0.1, 1, 0.0, 'statement'),
    ('F16', 'score_change_after_T1_over_Cs', 'order', 0.0, 0.1, 1, 0.0, 'statement'),
    ('F16', 'random_score_change_after_T1_over_Cr', 'upper bound', 0.0, 0.1, 1, 0.0, 'statement'),
    ('F17', 'attention_change_at_end', 'upper bound', -2.0, 0.1, 0, 0.0, 'refinement'),
    ('F19', 'key_query_change_after_T1', 'upper bound', -2.0, 0.1, 1, 0.0, 'statement'),
    ('F19', 'score_max_at_end', 'upper bound', -0.5, 0.1, 1, 0.0, 'statement'),
    ('F20', 'T_star', 'order', 1.0, 0.1, 0, 0.0, 'refinement'),
    ('T3.3', 'score_change_at_T_star_over_Cs', 'order', 0.0, 0.1, 1, 0.0, 'statement'),
    ('T3.3', 'test_loss_at_T_star', 'decays', 0.0, 0.0, 0, 0.0, 'statement'),
]


def test_rate_table_is_pinned():
    table = [(claim.id, rate.quantity, rate.kind, rate.exponent, rate.tol, rate.log_power, m1_power(rate), rate.evidence)
             for claim in CLAIMS for rate in claim.rates]
    assert table == PINNED


def test_log_factors_only_where_a_statement_carries_them():
    """No rate allows more than the two log factors the paper's own bounds carry (log m log t, F9, F11)."""
    assert max(rate.log_power for claim in CLAIMS for rate in claim.rates) == 2
    assert {(claim.id, rate.quantity) for claim in CLAIMS for rate in claim.rates if rate.log_power == 2} == {
        ("F9", "u_norm2_change_after_T1"), ("F11", "value_gram_change_after_T1")}


def test_one_log_convention():
    """The same quantity against the same bound carries the same log allowance in every claim."""
    seen = {}
    for claim in CLAIMS:
        for rate in claim.rates:
            key = (rate.quantity, rate.kind, rate.exponent, m1_power(rate))
            assert seen.setdefault(key, rate.log_power) == rate.log_power, (claim.id, key)
