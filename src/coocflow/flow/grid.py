"""Observation grids: dense early (Phase 1 lasts O~(1/m)), covering the whole run."""

from __future__ import annotations

import numpy as np


def _candidates(steps: int, budget: int, spacing: str) -> np.ndarray:
    if spacing == "log":
        return np.geomspace(1, steps, budget)
    if spacing == "linear":
        return np.linspace(0, steps, budget)
    n_log = (3 * budget + 3) // 4
    return np.concatenate([np.geomspace(1, steps, n_log), np.linspace(0, steps, budget - n_log)])


def observation_steps(steps: int, points: int, spacing: str = "log-linear") -> np.ndarray:
    """Sorted unique step indices from 0 to `steps`, at least `min(points, steps + 1)` of them.

    `log`: geometric from step 1; `linear`: evenly spaced; `log-linear` (default): three
    quarters of the budget geometric and one quarter evenly spaced, so the slow Phase-2 tail is
    observed evenly too. Rounding merges early geometric points, so the budget grows until
    enough distinct steps remain.
    """
    target = min(points, steps + 1)
    budget = target
    while True:
        grid = np.concatenate([[0, steps], np.rint(_candidates(steps, budget, spacing))])
        unique = np.unique(grid.astype(np.int64))
        if len(unique) >= target:
            return unique
        budget += target - len(unique)


def observation_times(t_end: float, start: float, points: int, spacing: str = "log-linear") -> np.ndarray:
    """Observed flow times from 0 to `t_end` for the ODE flow, the first positive one `start`.

    The grid gradient descent with learning rate `start` observes (its steps times `start`), so
    with `start` = lr the flow and GD compare at shared times (`Config.flow_start`).
    """
    steps = max(1, int(round(t_end / start)))
    times = observation_steps(steps, points, spacing) * (t_end / steps)
    return times
