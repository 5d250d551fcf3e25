"""The verifier: theorems about any System, declared and verified (docs/theorems.md).

Declare with `Theorem` and its parts (`coocflow.theorems.declare`); a System returns its theorem from
`AbstractSystem.theorem()`; `coocflow verify` judges it (`coocflow.theorems.judge`) with the
pre-registered rate test (`rate_judge`, `exponents`, `power`). eq. (1)'s theorem, the paper's 41
claims, is judged by its own checks in `coocflow.theorems.paper`.
"""

from coocflow.theorems.declare import (
    EVIDENCE_CLASSES,
    At,
    Bound,
    Claim,
    Computed,
    Crossing,
    EventTime,
    FirstTime,
    Identity,
    Limit,
    Ordering,
    Premise,
    Rate,
    SeedRun,
    Sign,
    Theorem,
    ValueAt,
)

__all__ = ["EVIDENCE_CLASSES", "At", "Bound", "Claim", "Computed", "Crossing", "EventTime", "FirstTime", "Identity",
           "Limit", "Ordering", "Premise", "Rate", "SeedRun", "Sign", "Theorem", "ValueAt"]
