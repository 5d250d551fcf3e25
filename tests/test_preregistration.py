"""The pre-registration record (src/coocflow/verify/paper/preregistration.json): every rule a verdict rests
on, with the commit that fixed it. A rule changed without the record fails here, so every change is
a visible edit of the record with its reason and the verdicts before and after."""

import re

from coocflow.verify.paper.preregistration import differences, record, registration

COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


def test_the_live_rules_are_the_recorded_ones():
    assert differences() == []


def test_every_rule_names_the_commit_that_fixed_it():
    kept = record()
    fixed = [item["fixed_in"] for item in kept["thresholds"].values()]
    fixed += [claim["fixed_in"] for claim in kept["claims"]]
    fixed += [rate["fixed_in"] for claim in kept["claims"] for rate in claim["rates"]]
    assert fixed and all(COMMIT.match(commit) for commit in fixed), sorted(set(fixed))


def test_every_change_after_data_says_why_and_what_it_did_to_the_verdicts():
    for change in record()["changes"]:
        assert {"what", "why", "commit", "verdicts_before", "verdicts_after"} <= set(change), change
        assert COMMIT.match(change["commit"]) and change["why"].strip()


def test_a_changed_tolerance_is_caught(monkeypatch):
    from coocflow.verify import rate_judge

    monkeypatch.setattr(rate_judge, "ORDER_TOLERANCE", 0.15)
    assert any("ORDER_TOLERANCE" in line for line in differences())
    assert registration()["thresholds"]["rate_judge.ORDER_TOLERANCE"] == 0.15
