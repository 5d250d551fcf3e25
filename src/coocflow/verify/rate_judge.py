"""The rate judge: a pre-registered equivalence test of quantity ~ m^p over a width sweep.

A claim "X = Theta(m^p)" (or O, Omega, 1/poly) is asymptotic in m with everything else fixed,
so it is judged by how X scales, never by one width's constant. `judge_rate` fits the exponent
(`exponents.fit_exponent`: least squares of mean log|X| on log m, 95% seed-bootstrap interval)
and compares the whole interval with a band fixed before any run (`RateTest`):

- order (Theta): pass when the interval lies inside [p - tol, p + tol], fail when it lies wholly
  outside, inconclusive otherwise;
- upper bound (O): pass when its top is below p + tol, fail when its bottom is above; a bound
  undercut by more than `LOOSE_BY` is reported as loose (it still passes);
- lower bound (Omega): the mirror image;
- decays (1/poly(m)): pass when the top is below 0, fail when the bottom is at or above 0.

Log factors widen the band only where the statement carries them (a tilde or an explicit log),
by at most its own power `log_power`, and only in the direction they act (up for O~, down for
Omega~, both for Theta~): each factor of log m is worth `log_slack`, the least-squares slope of
log log m on log m over the fitted widths. The tolerance itself is worth `tol / log_slack` factors
of log m (about 1.3 at the theory sweep's widths), which `RateJudgement.sentence` states.

A width sweep's seeds are paired (a seed uses the same data at every width): `paired=True` fits
the slope within seeds and resamples whole seeds (`exponents.fit_exponent`), so a seed's offset
common to all widths does not widen the interval.

The slope over the largest third of the widths is fitted too and reported beside the global one,
and the two are reconciled symmetrically: a pass whose largest-widths interval lies wholly outside
the band, and a fail whose largest-widths slope lies inside it, are inconclusive (the curve bends
within the range: a two-term law crossing over), with the width a sweep would have to reach to
decide. A result whose values change sign across seeds is inconclusive too (the power law is of
|value|, which a sign change hides).

An upper bound undercut by more than `VACUOUS_BY` (the interval's top below p - 1), or a lower
bound exceeded by as much, is `vacuous`: the data are far inside the bound, which then says
nothing about them, so the verdict counts neither as a pass nor as a fail. Power of this test at
the default design: docs/power.md (`coocflow power`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from coocflow.verify.exponents import ExponentFit, fit_exponent

KINDS = ("order", "upper bound", "lower bound", "decays")
"""What a statement says of the exponent: Theta, O, Omega, or 1/poly(m)."""
VERDICTS = ("pass", "fail", "inconclusive", "vacuous", "not applicable")
ORDER_TOLERANCE = 0.1
"""How far an exponent may sit from the paper's and still agree (pre-registered; docs/power.md
shows that at the default sweep an exponent 0.2 off fails and the true one passes)."""
BOUND_TOLERANCE = 0.1
"""The same allowance for O and Omega bounds, on the side the bound constrains."""
LOOSE_BY = 0.5
"""An upper bound undercut by more than this (the interval's top below p - 0.5) is reported loose."""
VACUOUS_BY = 1.0
"""An upper bound undercut by more than this (the interval's top below p - 1: the data fall a whole
power of m faster than the bound) is vacuous; a lower bound exceeded by as much likewise."""
LOCAL_FRACTION = 1 / 3
"""The local slope is fitted over the largest third of the widths (at least `MIN_LOCAL_WIDTHS`)."""
MIN_LOCAL_WIDTHS = 3


@dataclass(frozen=True)
class RateTest:
    """A pre-registered test: quantity ~ m^predicted as `kind`, within `tol`, allowing
    `log_power` factors of log m where the statement carries them."""

    predicted: float
    kind: str = "order"
    tol: float = ORDER_TOLERANCE
    log_power: int = 0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not (self.tol >= 0 and math.isfinite(self.tol)):
            raise ValueError(f"tol must be a non-negative number, got {self.tol}")
        if self.log_power < 0:
            raise ValueError(f"log_power must be >= 0, got {self.log_power}")
        if self.kind == "decays" and self.predicted != 0:
            raise ValueError("a decay (1/poly(m)) is tested against exponent 0: predicted must be 0")

    def band(self, log_slack: float) -> tuple[float, float]:
        """The exponents that agree with the statement: (low, high), infinite on a free side."""
        logs = self.log_power * log_slack
        p, tol = self.predicted, self.tol
        if self.kind == "order":
            return p - tol - logs, p + tol + logs
        if self.kind == "upper bound":
            return -math.inf, p + tol + logs
        if self.kind == "lower bound":
            return p - tol - logs, math.inf
        return -math.inf, 0.0


@dataclass(frozen=True)
class RateJudgement:
    """The verdict of one `RateTest` on one sweep, with everything it rests on."""

    verdict: str
    test: RateTest
    fit: ExponentFit
    local: ExponentFit | None
    band: tuple[float, float] | None
    log_slack: float
    loose: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def exponent(self) -> float | None:
        return self.fit.exponent

    @property
    def ci(self) -> tuple[float, float] | None:
        return None if self.fit.low is None else (self.fit.low, self.fit.high)

    def to_dict(self) -> dict:
        """JSON-safe: the verdict, the exponent and its interval, the local slope, the band."""
        local = self.local
        return {
            "verdict": self.verdict, "exponent": _finite(self.exponent),
            "ci": None if self.ci is None else [_finite(v) for v in self.ci],
            "local_exponent": None if local is None else _finite(local.exponent),
            "local_ci": None if local is None or local.low is None else [_finite(local.low), _finite(local.high)],
            "local_widths": None if local is None else list(local.widths),
            "band": None if self.band is None else [_finite(v) for v in self.band],
            "log_slack": self.log_slack, "loose": self.loose, "notes": list(self.notes),
            "test": asdict(self.test), "fit": self.fit.to_dict(),
        }

    def sentence(self) -> str:
        """One line: exponent, interval, local slope, the band and the verdict with its reason."""
        if self.ci is None:
            return f"{self.verdict}: {'; '.join(self.notes) or 'nothing to fit'}"
        low, high = self.ci
        text = f"exponent {self.exponent:+.3f} (95% CI {low:+.3f} to {high:+.3f})"
        if self.local is not None and self.local.exponent is not None:
            local = self.local
            interval = "" if local.low is None else f", CI {local.low:+.3f} to {local.high:+.3f}"
            text += f"; largest {local.n_widths} widths {local.exponent:+.3f}{interval}"
        if self.fit.paired:
            text += "; seeds paired"
        text += f"; {_band_text(self.band)}"
        if self.test.log_power and self.log_slack > 0:
            text += f" (with {self.test.log_power} log factor{'s' if self.test.log_power > 1 else ''} of {self.log_slack:.3f})"
        text += f": {self.verdict}"
        return text + "".join(f"; {note}" for note in self.notes)


def log_slack(widths: Sequence[float]) -> float:
    """The exponent one factor of log m alone shows over these widths: the least-squares slope of
    log(log m) on log m (about 1 / ln m at the middle width)."""
    widths = np.asarray(widths, float)
    if widths.size < 2 or widths.min() <= math.e:
        return 0.0
    return float(np.polyfit(np.log(widths), np.log(np.log(widths)), 1)[0])


def judge_rate(test: RateTest, widths: Sequence[float], values: Sequence[Sequence[float]], *,
               resamples: int = 2000, seed: int = 0, name: str = "value", paired: bool = False) -> RateJudgement:
    """Fit |values[w][s]| ~ C m_w^e over seeds s and judge e against `test` (module docstring).
    `paired`: values is widths x seeds with column s the same seed at every width."""
    fit = fit_exponent(widths, values, predicted=None if test.kind == "decays" else test.predicted,
                       resamples=resamples, seed=seed, name=name, paired=paired)
    if not fit.fitted or fit.low is None:
        return RateJudgement("not applicable", test, fit, None, None, 0.0, notes=fit.notes or ("no interval",))
    slack = log_slack(fit.widths)
    band = test.band(slack)
    local = _local_fit(fit, widths, values, resamples, seed, name, fit.paired)
    verdict = _verdict(fit.low, fit.high, band)
    notes = []
    if local is not None and local.low is not None:
        if verdict == "pass" and _verdict(local.low, local.high, band) == "fail":
            verdict = "inconclusive"
            notes.append("the largest widths' slope lies outside the band: the asymptote is not reached; "
                         + _deciding_width(local))
        elif verdict == "fail" and (band[0] <= local.exponent <= band[1] or _bends_toward(fit, local, band)):
            verdict = "inconclusive"
            where = "lies inside the band" if band[0] <= local.exponent <= band[1] else "bends toward the band"
            notes.append(f"the largest widths' slope {local.exponent:+.3f} {where} while the whole range's "
                         f"({fit.exponent:+.3f}) lies outside: the curve bends within the range (a crossover), so "
                         "the asymptote is not settled; " + _deciding_width(local))
    if fit.mixed_signs and verdict != "fail":
        verdict = "inconclusive"
        notes.append("values of both signs across seeds: |value| follows the band, the quantity does not")
    if verdict == "inconclusive" and not notes:
        notes.append(_what_resolves(fit, band))
    loose = ((test.kind == "upper bound" and fit.high < test.predicted - LOOSE_BY)
             or (test.kind == "lower bound" and fit.low > test.predicted + LOOSE_BY))
    vacuous = ((test.kind == "upper bound" and fit.high < test.predicted - VACUOUS_BY)
               or (test.kind == "lower bound" and fit.low > test.predicted + VACUOUS_BY))
    if vacuous and verdict == "pass":
        verdict = "vacuous"
        notes.append(f"vacuous: the data beat the bound by more than {VACUOUS_BY:g} in the exponent, so it says "
                     "nothing about them (counts neither as a pass nor as a fail)")
    elif loose:
        notes.append(f"loose: the bound is undercut by more than {LOOSE_BY}")
    if fit.few_widths:
        notes.append(f"only {fit.n_widths} values of the axis")
    return RateJudgement(verdict, test, fit, local, band, slack, loose, tuple(notes))


def _verdict(low: float, high: float, band: tuple[float, float]) -> str:
    if band[0] <= low and high <= band[1]:
        return "pass"
    if high < band[0] or low > band[1]:
        return "fail"
    return "inconclusive"


def _local_fit(fit: ExponentFit, widths, values, resamples: int, seed: int, name: str,
               paired: bool = False) -> ExponentFit | None:
    """The fit over the largest third of the widths the global fit used (None below 2 x 3 widths)."""
    count = max(MIN_LOCAL_WIDTHS, math.ceil(LOCAL_FRACTION * fit.n_widths))
    if fit.n_widths < 2 * MIN_LOCAL_WIDTHS:
        return None
    largest = set(fit.widths[-count:])
    kept = [(m, row) for m, row in zip(np.asarray(widths, float).ravel(), values) if float(m) in largest]
    return fit_exponent([m for m, _ in kept], [row for _, row in kept], resamples=resamples, seed=seed,
                        name=f"{name} (largest widths)", paired=paired)


BEND_FRACTION = 1.0
"""A fail turns inconclusive when the largest widths' slope sits closer to the band than the whole
range's by more than this fraction of the largest-widths interval's half-width: the curve bends
toward the band. With seeds paired the difference of the two slopes has about the local slope's
standard error, and the half-width is about 2.35 of those (8 seeds), so a straight line bends this
far by chance in about 3% of sweeps (docs/power.md: a false claim still fails >= 95%). It only
ever turns a fail into inconclusive."""


def _distance(exponent: float, band: tuple[float, float]) -> float:
    return max(band[0] - exponent, exponent - band[1], 0.0)


def _bends_toward(fit: ExponentFit, local: ExponentFit, band: tuple[float, float]) -> bool:
    """Whether the largest widths' slope is nearer the band than the whole range's, beyond chance."""
    half = (local.high - local.low) / 2
    return _distance(fit.exponent, band) - _distance(local.exponent, band) > BEND_FRACTION * half


def _deciding_width(local: ExponentFit) -> str:
    """The width a sweep would have to reach to tell where the largest widths' slope settles: as far
    again beyond the largest width, in log m, as the largest third spans."""
    first, last = local.widths[0], local.widths[-1]
    return f"widths up to about m = {last * last / first:.3g} would decide it"


def _what_resolves(fit: ExponentFit, band: tuple[float, float]) -> str:
    """How many seeds per width would make the interval decide at the current estimate."""
    half = (fit.high - fit.low) / 2
    edges = [edge for edge in band if math.isfinite(edge)]
    distance = min(abs(fit.exponent - edge) for edge in edges)
    seeds = max(fit.n_seeds)
    if distance == 0 or half == 0:
        return "the estimate sits on the band's edge: more widths or seeds will not settle it quickly"
    needed = math.ceil(seeds * (half / distance) ** 2)
    return (f"inconclusive at {seeds} seeds: about {needed} seeds per width, or a wider range of widths, "
            f"would decide it at the current estimate")


def _band_text(band: tuple[float, float] | None) -> str:
    if band is None:
        return "no band"
    low, high = band
    if math.isinf(low):
        return f"band <= {high:+.3f}" if high != 0 else "band < 0"
    if math.isinf(high):
        return f"band >= {low:+.3f}"
    return f"band [{low:+.3f}, {high:+.3f}]"


def _finite(value):
    return None if value is None or not math.isfinite(value) else float(value)
