"""The verifier: theorems about any System, declared and verified (docs/theorems.md).

Declare with `Theorem` and its parts (`coocflow.verify.declare`); a System returns its theorem from
`AbstractSystem.theorem()`; `coocflow verify` judges it (`coocflow.verify.judge`) with the
pre-registered rate test (`rate_judge`, `exponents`, `power`). eq. (1)'s theorem, the paper's 41
claims, is one such declaration (`coocflow.verify.paper.theorem.THEOREM`, which `Eq1System.theorem()`
returns), reported in full by `coocflow.verify.paper`.

The package is also the Python API's `coocflow.verify(...)`: calling it judges a run or a sweep folder
(`VerifyPackage.__call__`, which is `coocflow.notebook.verify`).
"""

import sys
import types
from typing import Any

from coocflow.verify.declare import (
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


class VerifyPackage(types.ModuleType):
    """This package, callable: `coocflow.verify` names both the verifier and the API's function, so the
    package is the function (module classes, Python's data model, "Customizing module attribute
    access")."""

    def __call__(self, target: Any) -> Any:
        """Judge the theorem its System declares on a run (a `coocflow.notebook.Run` or its folder) or on a
        `coocflow sweep` folder, as `coocflow verify` does; writes verify.json/.md (and .png) there. On
        eq. (1)'s run: the paper's `Verification` (`.pass_rates()` counts verdicts per check, `.table()`
        is the same as a pyarrow Table), else the `TheoremVerdict` (docs/theorems.md)."""
        from coocflow.notebook import verify  # lazy: the API above this layer (pyproject.toml's contract says why)

        return verify(target)


sys.modules[__name__].__class__ = VerifyPackage
