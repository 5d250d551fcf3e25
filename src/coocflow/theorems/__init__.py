"""The verifier: theorems about any System, declared and verified (docs/theorems.md).

Declare with `Theorem` and its parts (`coocflow.theorems.declare`); a System returns its theorem from
`AbstractSystem.theorem()`; `coocflow verify` judges it (`coocflow.theorems.judge`) with the
pre-registered rate test (`rate_judge`, `exponents`, `power`). eq. (1)'s theorem, the paper's 41
claims, is one such declaration (`coocflow.theorems.paper.theorem.THEOREM`, which `Eq1System.theorem()`
returns), reported in full by `coocflow.theorems.paper`.
"""

from coocflow.theorems.declare import (
    EVIDENCE_CLASSES,
    PREMISE_KINDS,
    PROBABILITY_LEVEL,
    STATEMENT_ORDER,
    At,
    Bound,
    Check,
    Claim,
    Computed,
    Crossing,
    EventTime,
    FirstTime,
    Identity,
    Limit,
    Ordering,
    Outcome,
    Premise,
    PremiseOutcome,
    Rate,
    SeedRun,
    Sign,
    Statement,
    Theorem,
    ValueAt,
    bound_parts,
    within_probability,
)

__all__ = ["EVIDENCE_CLASSES", "PREMISE_KINDS", "PROBABILITY_LEVEL", "STATEMENT_ORDER", "At", "Bound", "Check", "Claim",
           "Computed", "Crossing", "EventTime", "FirstTime", "Identity", "Limit", "Ordering", "Outcome", "Premise",
           "PremiseOutcome", "Rate", "SeedRun", "Sign", "Statement", "Theorem", "ValueAt", "bound_parts",
           "within_probability"]
