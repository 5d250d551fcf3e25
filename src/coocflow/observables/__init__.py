"""Named observables of (model, problem): the quantities the theory tracks (docs/definitions.md sections 6-7)."""

from coocflow.observables.ensemble import median_band
from coocflow.observables.registry import (
    OBSERVABLES,
    Observable,
    Problem,
    names,
    observe,
)

__all__ = ["OBSERVABLES", "Observable", "Problem", "median_band", "names", "observe"]
