"""The power of the rate judge (`rate_test.judge_rate`), measured on simulated sweeps.

A simulated sweep draws, at each width m and seed s, log|X| = e_true log m + sigma z (z standard
normal: seed-to-seed spread sigma in log units, the same at every width), and judges it against
a `RateTest` whose prediction is 0. The pass rate as a function of the exponent error e_true and
the noise sigma is the test's power curve: at error 0 it is the rate at which a true claim
passes (about the interval's coverage once the band is wider than the interval), at error
>= tol + half the interval it is the rate at which a false claim passes. docs/power.md is this
table at the default design (`coocflow power`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from coocflow.phases.rate_test import RateTest, judge_rate

ERRORS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)
"""Exponent errors of the power table (true exponent minus the claimed one)."""
NOISES = (0.01, 0.05, 0.1, 0.25, 0.5)
"""Seed-to-seed spreads of log|X| in the power table."""


@dataclass(frozen=True)
class PowerCell:
    """How often `trials` simulated sweeps with exponent error `error` and noise `noise` gave each verdict."""

    error: float
    noise: float
    trials: int
    passed: int
    failed: int
    inconclusive: int

    @property
    def pass_rate(self) -> float:
        return self.passed / self.trials


def simulate_sweep(rng: np.random.Generator, widths: Sequence[float], seeds: int, exponent: float,
                   noise: float) -> list[np.ndarray]:
    """One sweep: per width, `seeds` values m^exponent exp(noise z)."""
    return [np.exp(exponent * np.log(m) + noise * rng.standard_normal(seeds)) for m in widths]


def power_cell(test: RateTest, widths: Sequence[float], seeds: int, error: float, noise: float,
               trials: int, seed: int = 0, resamples: int = 2000) -> PowerCell:
    """Judge `trials` simulated sweeps whose true exponent is test.predicted + error."""
    rng = np.random.default_rng(seed)
    counts = {"pass": 0, "fail": 0, "inconclusive": 0, "not applicable": 0}
    for trial in range(trials):
        values = simulate_sweep(rng, widths, seeds, test.predicted + error, noise)
        counts[judge_rate(test, widths, values, resamples=resamples, seed=trial).verdict] += 1
    return PowerCell(error, noise, trials, counts["pass"], counts["fail"], counts["inconclusive"])


def power_table(test: RateTest, widths: Sequence[float], seeds: int, trials: int,
                errors: Sequence[float] = ERRORS, noises: Sequence[float] = NOISES,
                progress=None) -> list[PowerCell]:
    """Every (error, noise) cell of the power table, each from its own random stream."""
    cells = []
    for i, error in enumerate(errors):
        for j, noise in enumerate(noises):
            cells.append(power_cell(test, widths, seeds, error, noise, trials, seed=1000 * i + j))
            if progress:
                progress()
    return cells


def power_markdown(cells: list[PowerCell], test: RateTest, widths: Sequence[float], seeds: int,
                   command: str) -> str:
    """The power table as a Markdown page: pass rates by exponent error (rows) and noise (columns)."""
    errors = sorted({c.error for c in cells})
    noises = sorted({c.noise for c in cells})
    by_key = {(c.error, c.noise): c for c in cells}
    trials = cells[0].trials if cells else 0
    span = f"{widths[0]:g}..{widths[-1]:g}"
    lines = [
        "# The power of the rate test",
        "",
        f"Made by `{command}`. Each cell judges {trials} simulated sweeps at the default design of "
        f"`coocflow verify theory --scaling both` ({len(widths)} widths, m = {span}, {seeds} seeds each): "
        "log|X| = (p + error) log m + noise z, z standard normal, judged as a Theta(m^p) claim with "
        f"tolerance {test.tol:g} and no log factor (`coocflow.phases.rate_test`). A cell is the fraction of sweeps "
        "that **pass**; the rest are inconclusive or fail (in brackets: the fraction that fail).",
        "",
        "| exponent error | " + " | ".join(f"noise {n:g}" for n in noises) + " |",
        "| --- |" + " --- |" * len(noises),
    ]
    for error in errors:
        row = []
        for noise in noises:
            cell = by_key[(error, noise)]
            row.append(f"{cell.pass_rate:.2f} ({cell.failed / cell.trials:.2f})")
        lines.append(f"| {error:g} | " + " | ".join(row) + " |")
    lines += [
        "",
        "How to read it: the first row is how often a true claim passes (the interval's coverage once the "
        f"band is wider than the interval); the rows at and beyond {2 * test.tol:g} are how often a claim whose "
        "exponent is that far off passes (it should not). At an error equal to the tolerance the test is "
        "`inconclusive` almost always and names the seeds per width that would decide; between, the pass rate "
        "falls as the noise widens the interval. The noise is the seed-to-seed standard deviation of log|X| at one "
        "width (`seed_spread` in each fit of scaling.json).",
        "",
    ]
    return "\n".join(lines)
