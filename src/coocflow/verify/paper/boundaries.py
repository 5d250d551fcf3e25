"""Phase boundaries read off an observed trajectory (Theorem 3.1, Lemma 4.3, Section 4)."""

from __future__ import annotations

import numpy as np

from coocflow.observables.ensemble import first_time, first_time_all_correct

SCORE_RATES = ("d_A_mu1_mu2_dt", "d_A_mu2_mu1_dt", "d_A_mu3_mu1_dt", "d_A_mu3_mu2_dt")


def common_token_catch_up(series: dict[str, np.ndarray]) -> float | None:
    """T0.5 (Lemma 4.3): the first observed time at which the common token's alignment moves at
    least as fast as either target's, -dG(mu_3)/dt >= max(dG(mu_1)/dt, dG(mu_2)/dt)."""
    fast = -series["d_G_mu3_dt"] >= np.maximum(series["d_G_mu1_dt"], series["d_G_mu2_dt"])
    return first_time(series["t"], fast & (series["t"] > 0))


def sandwich_start(series: dict[str, np.ndarray], c: float, t1: float | None) -> float | None:
    """T0.5 as Lemma 4.3 defines it for a declared C: the earliest observed time from which
    (1+C) max(dG(mu_1), dG(mu_2)) <= -dG(mu_3) <= (1-C)(dG(mu_1) + dG(mu_2)) holds at every observed
    time up to T1 (None when it does not hold at T1 itself, or there is no T1)."""
    if t1 is None:
        return None
    t = series["t"]
    g1, g2, g3 = (series[f"d_G_mu{k}_dt"] for k in (1, 2, 3))
    holds = ((1 + c) * np.maximum(g1, g2) <= -g3) & (-g3 <= (1 - c) * (g1 + g2))
    inside = np.flatnonzero((t > 0) & (t <= t1))
    if not inside.size or not holds[inside[-1]]:
        return None
    broken = inside[~holds[inside]]
    start = inside[0] if not broken.size else broken[-1] + 1
    return float(t[start])


def score_drift_rate(series: dict[str, np.ndarray]) -> np.ndarray:
    """Sum of |dA/dt| over the four target scores (exact rates along the flow)."""
    return np.sum([np.abs(series[name]) for name in SCORE_RATES], axis=0)


def phase2_start(series: dict[str, np.ndarray]) -> float | None:
    """When the attention scores start to move: the first observed time at which the score
    drift per e-fold of time, t * sum |dA/dt|, reaches half its largest value over the run.

    In Phase 2 the scores grow like log t (so t dA/dt levels off at its plateau); in Phase 1
    they barely move. Measuring per e-fold makes the criterion independent of how long the
    run is observed. None also where the run did not record the score rates (`observe.only`)."""
    if any(name not in series for name in SCORE_RATES):
        return None
    drift = series["t"] * score_drift_rate(series)
    if not np.isfinite(drift).any() or np.nanmax(drift) <= 0:
        return None
    hits = np.flatnonzero(drift >= 0.5 * np.nanmax(drift))
    return float(series["t"][hits[0]])


def phase_boundaries(series: dict[str, np.ndarray]) -> dict[str, float | None]:
    t = series["t"]
    return {
        "T0.5": common_token_catch_up(series),
        "T1": first_time_all_correct(t, series["min_margin"]),
        "phase2_start": phase2_start(series),
        "end": float(t[-1]),
    }
