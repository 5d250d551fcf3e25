"""How a claim's verdict is formed from its evidence: every run of a sweep counts, a failure confined to
runs that miss a condition the paper does not state is its own outcome, and the verdict under P7
relaxed to L. D.8's own bound is given beside the stated one."""

from coocflow.verify.paper.claims import BY_ID, CLAIMS, HOLDS_UNSTATED, claims_table, summary_line
from coocflow.verify.paper.verify import every_run_summary

PREMISES = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P7r", "P8", "P9", "P10")


def counts(passed=0, failed=0, outside=0, unchecked=0, failed_unstated=0, passed_unstated_met=0, of=None):
    total = passed + failed + outside + unchecked
    return {"passed": passed, "failed": failed, "failed_outside_premises": outside, "vacuous": 0,
            "failed_unstated": failed_unstated, "passed_unstated_met": passed_unstated_met,
            "unchecked": unchecked, "no_verdict": 0, "of": of or total, "evidence": "statement"}


def width(checks: dict, met: dict | None = None, relaxed: dict | None = None) -> dict:
    met = met or {}
    out = {"m": 1, "m1": 1, "premises": [{"id": p, "met": met.get(p, True)} for p in PREMISES],
           "premises_met": True, "checks": checks, "first_seed": {}}
    if relaxed is not None:
        out["checks_relaxed"] = relaxed
    return out


def row(table, claim_id):
    return next(r for r in table if r["id"] == claim_id)


E7 = "lemmaE.7_neuron_value_change"


def test_a_failure_only_where_the_unstated_condition_is_missing_is_its_own_outcome():
    small_m1 = width({E7: counts(failed=8, failed_unstated=8)}, met={"P10": False})
    large_m1 = width({E7: counts(passed=8, passed_unstated_met=8)}, met={"P10": True})
    table = claims_table(every_run_summary([small_m1, large_m1], small_m1))
    e7 = row(table, "E7")
    assert e7["verdict"] == HOLDS_UNSTATED and "P10" in e7["evidence"][0]["text"]
    assert "P10" not in BY_ID["E7"].premises and BY_ID["E7"].unstated == ("P10",)
    assert HOLDS_UNSTATED in summary_line(table)
    # failing where the condition is met too: a plain fail
    also = width({E7: counts(passed=6, failed=2, passed_unstated_met=6)}, met={"P10": True})
    assert row(claims_table(every_run_summary([small_m1, also], small_m1)), "E7")["verdict"] == "fail"
    # never met anywhere: nothing shows that it holds under the condition
    assert row(claims_table(every_run_summary([small_m1], small_m1)), "E7")["verdict"] == "fail"


def test_every_run_counts_not_only_the_base_width():
    name = "thm3.1_correct_by_T1"
    base = width({name: counts(passed=8)})
    other = width({name: counts(passed=5, failed=3)})
    assert row(claims_table(base), "T3.1")["verdict"] != "fail"
    table = claims_table(every_run_summary([base, other], base))
    t31 = row(table, "T3.1")
    assert t31["verdict"] == "fail"
    assert any("13/16 runs x seeds pass, 3 fail" in e["text"] for e in t31["evidence"])


def test_the_relaxed_p7_verdict_stands_beside_the_stated_one():
    name = "lemma4.4_balance"
    stated = width({name: counts(outside=8)}, met={"P7": False, "P7r": True}, relaxed={name: counts(failed=8)})
    f5 = row(claims_table(stated), "F5")
    assert f5["verdict"] == "fail outside premises" and f5["verdict_relaxed"] == "fail"
    assert "with P7 relaxed to L. D.8's own bound (P7r)" in summary_line(claims_table(stated))
    assert {c.id for c in CLAIMS if "P7r" in c.premises} == set()


def test_an_init_lemma_is_judged_by_its_probability_delta_not_run_by_run():
    """L. D.1 holds with probability 1 - delta = 0.95 per run: 2 failing runs of 72 (the m1 sweep's) are
    what it allows (P(Binomial(72, 0.05) >= 2) = 0.88), 3 of 8 are not (0.006); a dynamics check gets
    no such allowance."""
    from coocflow.verify.declare import PROBABILITY_LEVEL, within_probability
    from coocflow.verify.paper.claims import AT_PROBABILITY
    from coocflow.verify.paper.premises import DELTA

    name = "lemmaD.1_init_concentration"
    assert name in AT_PROBABILITY and "thm3.1_correct_by_T1" not in AT_PROBABILITY
    assert abs(within_probability(2, 72, DELTA) - 0.8808) < 1e-4 and abs(within_probability(3, 8, DELTA) - 0.00579) < 1e-5
    assert within_probability(1, 1, DELTA) == PROBABILITY_LEVEL
    runs = [width({name: counts(passed=8)}) for _ in range(7)]
    runs += [width({name: counts(passed=7, failed=1)}) for _ in range(2)]
    d1 = row(claims_table(every_run_summary(runs, runs[0])), "D1")
    assert d1["verdict"] == "pass" and "2 outside the lemma's events" in d1["evidence"][0]["text"]
    many = width({name: counts(passed=5, failed=3)})
    assert row(claims_table(many), "D1")["verdict"] == "fail"
    t31 = width({"thm3.1_correct_by_T1": counts(passed=71, failed=1)})
    assert row(claims_table(t31), "T3.1")["verdict"] == "fail"


def test_one_rule_forms_a_verdict_from_seed_verdicts_for_the_judge_and_for_summed_counts():
    """`judge.tally_verdict`, which the judge applies to its seed runs and eq. (1)'s report to counts summed
    over a width sweep: a run that cannot tell outranks passes, vacuous needs every applying run vacuous,
    a failure outside the premises yields to one inside, and a lemma's allowance in probability applies
    to failures inside its premises."""
    from coocflow.verify.judge import tally_verdict
    from coocflow.verify.paper.claims import _check_verdict

    assert tally_verdict({"pass": 7, "inconclusive": 1}) == "inconclusive"
    assert tally_verdict({"pass": 1, "vacuous": 7, "not applicable": 2}) == "pass"
    assert tally_verdict({"vacuous": 7, "not applicable": 2}) == "vacuous"
    assert tally_verdict({"not applicable": 3}) == tally_verdict({}) == "not applicable"
    assert tally_verdict({"fail": 1, "fail outside premises": 5, "pass": 2}) == "fail"
    assert tally_verdict({"fail outside premises": 5, "inconclusive": 2}) == "fail outside premises"
    assert tally_verdict({"fail": 2, "pass": 70}, at_probability=0.05) == "pass"
    assert tally_verdict({"fail": 3, "pass": 5}, at_probability=0.05) == "fail"
    inconclusive = {**counts(passed=7, unchecked=0, of=8), "inconclusive": 1}
    assert _check_verdict(inconclusive, E7) == "inconclusive", "the report counts a seed that cannot tell apart"
