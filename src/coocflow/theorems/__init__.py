"""The verifier: theorems about any System, declared and verified (docs/theorems.md).

Declare with `Theorem` and its parts (`coocflow.theorems.declare`); a System returns its theorem from
`AbstractSystem.theorem()`; `coocflow verify` judges it (`coocflow.theorems.judge`) with the
pre-registered rate test (`rate_judge`, `exponents`, `power`). eq. (1)'s theorem, the paper's 41
claims, is judged in `coocflow.theorems.paper`; its checks are declared `Check`s.
"""

from coocflow.theorems.declare import (
    EVIDENCE_CLASSES,
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
    Rate,
    SeedRun,
    Sign,
    Statement,
    Theorem,
    ValueAt,
    bound_parts,
)

__all__ = ["EVIDENCE_CLASSES", "At", "Bound", "Check", "Claim", "Computed", "Crossing", "EventTime", "FirstTime",
           "Identity", "Limit", "Ordering", "Outcome", "Premise", "Rate", "SeedRun", "Sign", "Statement", "Theorem", "ValueAt",
           "bound_parts"]
