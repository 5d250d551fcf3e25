"""Data model: co-occurrence classification sets (docs/definitions.md section 2)."""

from coocflow.data.cooccurrence import (
    COMMON,
    FIRST_RANDOM,
    GROUP_NAMES,
    MU1,
    MU2,
    Dataset,
    make_test_set,
    make_train_set,
)

__all__ = [
    "COMMON", "FIRST_RANDOM", "GROUP_NAMES", "MU1", "MU2",
    "Dataset", "make_test_set", "make_train_set",
]
