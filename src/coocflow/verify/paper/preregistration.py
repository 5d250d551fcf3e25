"""The pre-registration record: every threshold, tolerance, log power, evidence class and premise a
verdict of `coocflow verify` rests on, per claim, with the commit that fixed it
(`preregistration.json` beside this file).

A rule fixed after the data it judges is not evidence, so the record is the contract:
tests/test_preregistration.py fails when the live rules (`registration()`) differ from the record, and
a change is made by editing the record in the same commit, with an entry under `changes` that says
what changed, why, and the verdicts before and after. `python -m coocflow.verify.paper.preregistration`
prints the live rules beside the record's, so the difference is plain to see.
"""

from __future__ import annotations

import json
import sys
from importlib import resources

from coocflow.verify import declare, exponents, rate_judge
from coocflow.verify.paper import (
    check_registry,
    checks,
    checks_phase2,
    claims,
    premises,
    scaling,
    state_values,
)
from coocflow.verify.paper.checks import EVIDENCE
from coocflow.verify.paper.claims import CLAIMS, m1_power

RECORD = "preregistration.json"
"""The record's file name, beside this module (shipped with the package)."""


def thresholds() -> dict[str, float]:
    """Every named number a verdict turns on, by `module.NAME`."""
    return {
        "rate_judge.ORDER_TOLERANCE": rate_judge.ORDER_TOLERANCE,
        "rate_judge.BOUND_TOLERANCE": rate_judge.BOUND_TOLERANCE,
        "rate_judge.LOOSE_BY": rate_judge.LOOSE_BY,
        "rate_judge.VACUOUS_BY": rate_judge.VACUOUS_BY,
        "rate_judge.LOCAL_FRACTION": rate_judge.LOCAL_FRACTION,
        "rate_judge.MIN_LOCAL_WIDTHS": rate_judge.MIN_LOCAL_WIDTHS,
        "rate_judge.BEND_FRACTION": rate_judge.BEND_FRACTION,
        "exponents.FEW_WIDTHS": exponents.FEW_WIDTHS,
        "check_registry.MONOTONE_FRACTION": check_registry.MONOTONE_FRACTION,
        "check_registry.BALANCE_BOUND": check_registry.BALANCE_BOUND,
        "check_registry.SANDWICH_FRACTION": check_registry.SANDWICH_FRACTION,
        "check_registry.HIDDEN_CONSTANT": check_registry.HIDDEN_CONSTANT,
        "check_registry.VACUOUS_FACTOR": check_registry.VACUOUS_FACTOR,
        "check_registry.IDENTITY_TOLERANCE": check_registry.IDENTITY_TOLERANCE,
        "checks.ROUNDING_ULPS": checks.ROUNDING_ULPS,
        "checks.R_FORMULA_TOLERANCE": checks.R_FORMULA_TOLERANCE,
        "checks_phase2.ROUNDING_TOLERANCE": checks_phase2.ROUNDING_TOLERANCE,
        "state_values.RESOLUTION_ULPS": state_values.RESOLUTION_ULPS,
        "premises.MUCH_GREATER": premises.MUCH_GREATER,
        "premises.MAX_RHO": premises.MAX_RHO,
        "premises.DELTA": premises.DELTA,
        "premises.FMAX0_LIMIT": premises.FMAX0_LIMIT,
        "premises.GD_STEP_LIMIT": premises.GD_STEP_LIMIT,
        "premises.E7_NEURON_FACTOR": premises.E7_NEURON_FACTOR,
        "scaling.AXIS_INVARIANCE": scaling.AXIS_INVARIANCE,
        # Recorded under claims., which re-exported it; the level is the declaration API's (judge.tally_verdict).
        "claims.PROBABILITY_LEVEL": declare.PROBABILITY_LEVEL,
        "claims.AT_PROBABILITY": sorted(claims.AT_PROBABILITY),
    }


def registration() -> dict:
    """The live rules: the thresholds, then per claim its premises, its checks with their evidence
    classes, and its rates (kind, exponent, tolerance, log power, m1 power, evidence class)."""
    return {
        "thresholds": thresholds(),
        "claims": [{"id": claim.id, "premises": list(claim.premises), "unstated": list(claim.unstated),
                    "checks": {name: EVIDENCE.get(name, "statement") for name in claim.checks},
                    "rates": [{"quantity": r.quantity, "kind": r.kind, "predicted": r.exponent, "tol": r.tol,
                               "log_power": r.log_power, "m1_power": m1_power(r), "evidence": r.evidence}
                              for r in claim.rates]}
                   for claim in CLAIMS],
    }


def record() -> dict:
    """The record as committed (`RECORD`)."""
    return json.loads(resources.files("coocflow.verify.paper").joinpath(RECORD).read_text())


def registered(entry: dict) -> dict:
    """A record entry without its bookkeeping (`fixed_in`): what `registration()` gives."""
    return {key: value for key, value in entry.items() if key != "fixed_in"}


def differences() -> list[str]:
    """Each way the live rules differ from the record, one line each (empty: they agree)."""
    live, kept = registration(), record()
    out = []
    kept_thresholds = {name: item["value"] for name, item in kept["thresholds"].items()}
    for name in sorted(set(live["thresholds"]) | set(kept_thresholds)):
        if live["thresholds"].get(name) != kept_thresholds.get(name):
            out.append(f"threshold {name}: live {live['thresholds'].get(name)}, recorded {kept_thresholds.get(name)}")
    kept_claims = {c["id"]: c for c in kept["claims"]}
    for claim in live["claims"]:
        entry = kept_claims.pop(claim["id"], None)
        if entry is None:
            out.append(f"claim {claim['id']}: not in the record")
            continue
        for key in ("premises", "unstated", "checks"):
            if claim[key] != entry[key]:
                out.append(f"claim {claim['id']} {key}: live {claim[key]}, recorded {entry[key]}")
        if claim["rates"] != [registered(r) for r in entry["rates"]]:
            out.append(f"claim {claim['id']} rates: live {claim['rates']}, recorded "
                       f"{[registered(r) for r in entry['rates']]}")
    out += [f"claim {claim_id}: in the record, not live" for claim_id in kept_claims]
    return out


if __name__ == "__main__":
    found = differences()
    print("\n".join(found) if found else "the live rules agree with the record")
    sys.exit(1 if found else 0)
