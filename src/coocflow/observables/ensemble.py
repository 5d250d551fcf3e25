"""Statistics of an observable over the seeds of an ensemble, shared by figures, reports and studies."""

from __future__ import annotations

import warnings

import numpy as np

BAND = (0.1, 0.9)
"""The quantiles every figure and report shades around the median over seeds."""


def median_band(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(10% quantile, median, 90% quantile) over seeds (axis 0), ignoring NaN: a diverged seed
    is NaN after its divergence and drops out; a time no seed reached gives NaN, silently, and so does
    every time of an ensemble with no seed observed at all (every seed diverged at t = 0)."""
    values = np.asarray(values, dtype=float)
    if values.shape[0] == 0:
        nothing = np.full(values.shape[1:], np.nan)
        return nothing, nothing, nothing
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, mid, high = np.nanquantile(values, [BAND[0], 0.5, BAND[1]], axis=0)
    return low, mid, high


def first_time(t: np.ndarray, condition: np.ndarray) -> float | None:
    """The first observed time at which `condition` holds, or None if it never does."""
    hits = np.flatnonzero(np.asarray(condition))
    return float(np.asarray(t)[hits[0]]) if hits.size else None


def first_time_all_correct(t: np.ndarray, min_margin: np.ndarray) -> float | None:
    """T1: the first observed time at which every training sample has y_i F_i > 0 (Theorem 3.1).

    None when no observed time has all samples correct.
    """
    return first_time(t, np.asarray(min_margin) > 0)
