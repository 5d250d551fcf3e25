"""Phase boundaries read off an observed trajectory."""

from __future__ import annotations

import numpy as np


def first_time_all_correct(t: np.ndarray, min_margin: np.ndarray) -> float | None:
    """T1: the first observed time at which every training sample has y_i F_i > 0 (Theorem 3.1).

    None when no observed time has all samples correct.
    """
    hits = np.flatnonzero(np.asarray(min_margin) > 0)
    return float(np.asarray(t)[hits[0]]) if hits.size else None
