"""Theorems about any System, declared and verified (docs/theorems.md).

Declare with `Theorem` and its parts (`coocflow.verify.declare`); a System returns its theorem from
`AbstractSystem.theorem()`; `coocflow verify` judges it (`coocflow.verify.judge`).
"""

from coocflow.verify.declare import (
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
