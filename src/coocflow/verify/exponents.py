"""Power-law exponents in the width m with seed-bootstrap confidence intervals (scaling checks).

A scaling check measures a quantity per seed at several widths and asks whether
quantity ~ C m^e with the paper's predicted e (docs/claims.md, column `e`). `fit_exponent` fits e
and C with percentile-bootstrap intervals over seeds; `verdict` turns a fit into pass/fail.

Statistical choices:
- The fit is ordinary least squares of the per-width mean of log|value| on log m, every width
  weighted equally. With equal seed counts this is the pooled least-squares fit over all
  points; with missing seeds it keeps a width that lost seeds from counting less. Means of logs
  (geometric means), not medians: their bootstrap distribution is smooth, whereas the median of
  8 seeds takes few distinct values and gives lumpy, under-covering percentile intervals.
- The bootstrap resamples seeds with replacement independently at each width (seeds are the
  independent units; widths are the design) and refits: SciPy's `stats.bootstrap` with one sample
  per width (`paired=False`), percentile intervals. Each seed's deviation from its width's mean
  is first scaled by sqrt(n / (n - 1)): the plain bootstrap variance of a mean of n seeds is
  (n - 1)/n of the unbiased one, which at 8 seeds narrows 95% intervals to about 91%.
  Measured coverage of the nominal 95% interval (16 widths 64..1e7, log-normal seeds, 300
  sweeps each): 0.97 / 0.95 with 8 seeds at noise 0.1 / 0.5, 0.94 / 0.93 with 4, 0.91 / 0.92
  with 3. BCa gave the same coverage (0.96, 0.96, 0.95, 0.94, 0.91, 0.93) at 2.5x the time, so
  the percentile interval is used (the log|value| means are near-normal).
- Paired seeds (`paired=True`, the width sweeps and `fit-rate` with a seed column): a seed uses the
  same data at every width, so its values share an offset across widths that independent
  resampling mistakes for noise in the slope. The slope is then the fixed-effects estimate
  sum_s Sxy_s / sum_s Sxx_s (within-seed centring; with every seed at every width it equals the
  line through the per-width means), and the bootstrap resamples seed indices jointly across
  widths (multinomial counts over the seeds, so 1000 seeds cost a matrix product). Each seed's
  contribution Sxy_s is first moved away from its fitted value slope * Sxx_s by
  sqrt(n / (n - 1)) t_{n-1} / z, so that for normal per-seed slopes the percentile interval is
  Student's t interval (with whole seeds as the units, 8 seeds give a plain percentile bootstrap
  about 90% coverage; measured with the correction: 0.93-0.96 at seed offsets sd 0..1). `seed_offset_spread` reports the per-seed offsets
  (the standard deviation of each seed's mean residual), `seed_spread` the residual spread.
- The prefactor C is quoted at the reference width m_ref (geometric mean of the fitted widths),
  quantity ~ C (m / m_ref)^e, where it is uncorrelated with e and best determined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

FEW_WIDTHS = 3
"""Below this many widths the line has no residual degrees of freedom worth the name: flagged."""
PREDICTION_SLACK = 1e-9
"""Relative slack when testing a prediction against a (possibly degenerate, noise-free) interval."""


@dataclass(frozen=True)
class ExponentFit:
    """A power-law fit |value| ~ prefactor * (m / reference_width)^exponent with bootstrap intervals."""

    exponent: float | None
    low: float | None
    high: float | None
    prefactor: float | None
    prefactor_low: float | None
    prefactor_high: float | None
    reference_width: float | None
    predicted: float | None
    contains_prediction: bool | None
    prefactor_ratio: float | None
    widths: tuple[float, ...]
    n_seeds: tuple[int, ...]
    residual_spread: float | None
    seed_spread: float | None
    signs: str | None
    confidence: float
    resamples: int
    name: str = "value"
    notes: tuple[str, ...] = field(default_factory=tuple)
    paired: bool = False
    """Seeds paired across widths (a seed's offset common to all widths cancels from the slope)."""
    seed_offset_spread: float | None = None
    """Paired fits: the standard deviation of the seeds' offsets (each seed's mean residual, log units)."""

    @property
    def n_widths(self) -> int:
        return len(self.widths)

    @property
    def fitted(self) -> bool:
        return self.exponent is not None

    @property
    def few_widths(self) -> bool:
        return self.n_widths < FEW_WIDTHS

    @property
    def mixed_signs(self) -> bool:
        return self.signs == "mixed"

    def to_dict(self) -> dict:
        """JSON-safe: plain floats, lists, and None for anything not finite."""
        data = {key: json_safe(value) for key, value in asdict(self).items()}
        data.update(n_widths=self.n_widths, few_widths=self.few_widths, mixed_signs=self.mixed_signs)
        return data

    def sentence(self) -> str:
        """One line: exponent, interval, design, prediction and prefactor stability."""
        if not self.fitted:
            return f"{self.name}: no exponent ({'; '.join(self.notes) or 'nothing to fit'})"
        percent = f"{100 * self.confidence:g}%"
        digits = _digits(self.low, self.high, self.predicted)
        interval = ("no interval" if self.low is None
                    else f"{percent} CI {self.low:.{digits}f} to {self.high:.{digits}f}")
        span = f"{_format_width(self.widths[0])}..{_format_width(self.widths[-1])}"
        design = f"{self.n_widths} widths, {_format_seed_counts(self.n_seeds)}"
        parts = [f"{self.name}: exponent {self.exponent:.{digits}f} ({interval}) over m = {span} ({design})"]
        if self.predicted is not None:
            if self.contains_prediction is not None:
                parts.append(f"predicted {self.predicted:g}: {'inside' if self.contains_prediction else 'outside'}")
            else:
                parts.append(f"predicted {self.predicted:g}")
            if self.prefactor_ratio is not None:
                parts.append(f"{_scaled_name(self.name, self.predicted)} varies by "
                             f"{_format_ratio(self.prefactor_ratio)}x across widths")
        if self.paired:
            parts.append("seeds paired across widths" + ("" if self.seed_offset_spread is None
                                                          else f" (seed offsets sd {self.seed_offset_spread:.2g})"))
        if self.mixed_signs:
            parts.append("signs mixed (fitted |value|)")
        if self.few_widths:
            parts.append(f"only {self.n_widths} widths")
        return "; ".join(parts)


def fit_exponent(
    widths: Sequence[float] | np.ndarray,
    values: Sequence[Sequence[float]] | np.ndarray,
    predicted: float | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    name: str = "value",
    paired: bool = False,
) -> ExponentFit:
    """Fit |values[w, s]| ~ C m_w^e over seeds s; NaN (or zero) marks a missing seed.

    Unpaired, rows of `values` may differ in length; widths left without a usable seed are dropped
    with a note, and a width with one seed keeps its point but stays fixed in the bootstrap.
    Paired, `values` is a widths x seeds table whose column s is the same seed at every width (NaN
    where it is missing): the slope is fitted within seeds and the bootstrap resamples whole seeds.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be positive, got {resamples}")
    predicted = None if predicted is None else float(predicted)
    width_array = np.asarray(widths, dtype=np.float64).ravel()
    rows = [np.asarray(row, dtype=np.float64).ravel() for row in values]
    if len(rows) != width_array.size:
        raise ValueError(f"{width_array.size} widths but {len(rows)} rows of values")
    if not np.all(np.isfinite(width_array) & (width_array > 0)):
        raise ValueError("widths must be positive and finite")
    if np.unique(width_array).size != width_array.size:
        raise ValueError("widths must be distinct")

    if paired and len({row.size for row in rows}) > 1:
        raise ValueError("paired values need one column per seed: every width's row must have the same length "
                         "(NaN where a seed is missing)")
    order = np.argsort(width_array)
    notes: list[str] = []
    columns = []
    kept_widths, log_rows, signed = [], [], []
    for index in order:
        m, row = width_array[index], rows[index]
        finite = row[np.isfinite(row)]
        zeros = int(np.sum(finite == 0))
        usable = finite[finite != 0]
        if zeros:
            notes.append(f"m={_format_width(m)}: {zeros} zero value(s) dropped")
        if usable.size == 0:
            notes.append(f"m={_format_width(m)}: no usable seed, width dropped")
            continue
        if usable.size == 1:
            notes.append(f"m={_format_width(m)}: 1 seed, held fixed in the bootstrap")
        kept_widths.append(float(m))
        log_rows.append(np.log(np.abs(usable)))
        signed.append(usable)
        with np.errstate(divide="ignore"):
            columns.append(np.where(np.isfinite(row) & (row != 0), np.log(np.abs(row)), np.nan))

    signs = _sign_summary(signed)
    if signs == "mixed":
        notes.append("values of both signs: fitted |value|")
    n_seeds = tuple(int(row.size) for row in log_rows)
    empty = {"low": None, "high": None, "prefactor_low": None, "prefactor_high": None, "predicted": predicted,
             "contains_prediction": None, "widths": tuple(kept_widths), "n_seeds": n_seeds, "signs": signs,
             "confidence": confidence, "resamples": resamples, "name": name}
    if len(kept_widths) < 2:
        notes.append(f"{len(kept_widths)} usable width(s): at least 2 are needed")
        return ExponentFit(exponent=None, prefactor=None, reference_width=None, prefactor_ratio=None,
                           residual_spread=None, seed_spread=None, notes=tuple(notes), **empty)
    if len(kept_widths) < FEW_WIDTHS:
        notes.append(f"only {len(kept_widths)} widths: the line fits them exactly, interval from seeds alone")

    log_widths = np.log(np.asarray(kept_widths))
    centred = log_widths - log_widths.mean()
    reference_width = float(np.exp(log_widths.mean()))
    means = np.array([row.mean() for row in log_rows])
    exponent, log_prefactor = _line(centred, means[None, :])
    exponent, log_prefactor = float(exponent[0]), float(log_prefactor[0])
    seed_spread = _pooled_spread(log_rows)
    offset_spread = None
    if paired:
        table = PairedTable.of(centred, np.stack(columns))
        if table.informative >= 2:
            exponent = table.slope()
            seed_spread, offset_spread = table.spreads(exponent)
        else:
            notes.append(f"{table.informative} seed(s) seen at two or more widths: fitted unpaired")
            paired = False
    residual_spread = float(np.sqrt(np.mean((means - log_prefactor - exponent * centred) ** 2)))

    interval: dict = {}
    if all(row.size < 2 for row in log_rows):
        notes.append("no width has 2 or more seeds: no interval")
    else:
        if paired:
            (low, high), (prefactor_low, prefactor_high) = table.bootstrap(exponent, confidence, resamples, seed)
        else:
            (low, high), (prefactor_low, prefactor_high) = _bootstrap_interval(centred, log_rows, confidence, resamples,
                                                                               seed)
        interval = {"low": low, "high": high, "prefactor_low": prefactor_low, "prefactor_high": prefactor_high}
        if predicted is not None:
            slack = PREDICTION_SLACK * (1 + abs(predicted))
            interval["contains_prediction"] = bool(low - slack <= predicted <= high + slack)

    prefactor_ratio = None
    if predicted is not None:
        scaled = [np.median(np.exp(row) * m ** (-predicted)) for row, m in zip(log_rows, kept_widths)]
        prefactor_ratio = float(max(scaled) / min(scaled))
    return ExponentFit(exponent=exponent, prefactor=float(np.exp(log_prefactor)), reference_width=reference_width,
                       prefactor_ratio=prefactor_ratio, residual_spread=residual_spread, seed_spread=seed_spread,
                       notes=tuple(notes), paired=paired, seed_offset_spread=offset_spread, **{**empty, **interval})


@dataclass(frozen=True)
class PairedTable:
    """log|value| as widths x seeds (NaN: missing) with each seed's within-seed sums: the pieces of
    the fixed-effects slope sum_s Sxy_s / sum_s Sxx_s and of its seed bootstrap."""

    centred: np.ndarray
    """Centred log widths, one per row."""
    logs: np.ndarray
    """widths x seeds."""
    sxx: np.ndarray
    sxy: np.ndarray

    @classmethod
    def of(cls, centred: np.ndarray, logs: np.ndarray) -> "PairedTable":
        present = np.isfinite(logs)
        counts = present.sum(axis=0)
        x = np.where(present, centred[:, None], 0.0)
        y = np.where(present, logs, 0.0)
        safe = np.maximum(counts, 1)
        x_mean, y_mean = x.sum(axis=0) / safe, y.sum(axis=0) / safe
        dx = np.where(present, centred[:, None] - x_mean, 0.0)
        dy = np.where(present, logs - y_mean, 0.0)
        return cls(centred, logs, (dx * dx).sum(axis=0), (dx * dy).sum(axis=0))

    @property
    def informative(self) -> int:
        """Seeds seen at two or more widths (the others say nothing about the slope)."""
        return int(np.sum(self.sxx > 0))

    def slope(self) -> float:
        return float(self.sxy.sum() / self.sxx.sum())

    def spreads(self, slope: float) -> tuple[float | None, float | None]:
        """(residual spread, seed-offset spread) of log|value| after the line: the within-seed
        scatter about each seed's own line, and the spread of the seeds' offsets."""
        present = np.isfinite(self.logs)
        residual = np.where(present, self.logs - slope * self.centred[:, None], np.nan)
        width_means = np.nanmean(residual, axis=1, keepdims=True)
        offsets = np.nanmean(residual - width_means, axis=0)
        scatter = residual - width_means - offsets
        dof = int(present.sum()) - self.logs.shape[0] - self.logs.shape[1] + 1
        within = math.sqrt(float(np.nansum(scatter**2)) / dof) if dof > 0 else None
        offset = float(np.std(offsets[np.isfinite(offsets)], ddof=1)) if np.sum(np.isfinite(offsets)) >= 2 else None
        return within, offset

    def bootstrap(self, slope: float, confidence: float, resamples: int,
                  seed: int) -> tuple[tuple[float, float], tuple[float, float]]:
        """Percentile intervals of the slope and the prefactor, whole seeds resampled (see the module
        docstring for the sqrt(n / (n - 1)) correction)."""
        keep = np.any(np.isfinite(self.logs), axis=0)
        logs, sxx, sxy = self.logs[:, keep], self.sxx[keep], self.sxy[keep]
        from scipy import stats  # lazy: 1.2 s, which a sweep's summary and a run's verify never need

        n = logs.shape[1]
        tail = 0.5 * (1 - confidence)
        scale = math.sqrt(n / (n - 1)) * stats.t.ppf(1 - tail, n - 1) / stats.norm.ppf(1 - tail)
        inflated = slope * sxx + scale * (sxy - slope * sxx)
        draws = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=resamples).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            slopes = (draws @ inflated) / (draws @ sxx)
            present = np.isfinite(logs)
            width_means = (draws @ np.where(present, logs, 0.0).T) / (draws @ present.T.astype(np.float64))
        centres = np.nanmean(width_means, axis=1)
        percent = (100 * tail, 100 * (1 - tail))
        low, high = np.nanpercentile(slopes, percent)
        prefactor = np.exp(np.nanpercentile(centres, percent))
        return (float(low), float(high)), (float(prefactor[0]), float(prefactor[1]))


def _line(centred: np.ndarray, means: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope and value at the centre for each row of `means` (last axis: widths)."""
    return means @ centred / (centred @ centred), means.mean(axis=-1)


def _bootstrap_interval(centred: np.ndarray, log_rows: list[np.ndarray], confidence: float, resamples: int,
                        seed: int) -> tuple[tuple[float, float], tuple[float, float]]:
    """Percentile intervals of the slope and of the prefactor exp(value at the centre), seeds
    resampled within each width by `scipy.stats.bootstrap`; a one-seed width stays fixed."""
    from scipy import stats  # lazy: see PairedTable.bootstrap

    inflated = tuple(np.repeat(row, 2) if row.size < 2
                     else row.mean() + math.sqrt(row.size / (row.size - 1)) * (row - row.mean()) for row in log_rows)

    def slope_and_centre(*samples, axis=-1):
        means = np.stack(np.broadcast_arrays(*[sample.mean(axis=axis) for sample in samples]), axis=-1)
        return np.stack(_line(centred, means))

    result = stats.bootstrap(inflated, slope_and_centre, n_resamples=resamples, method="percentile",
                             vectorized=True, paired=False, confidence_level=confidence,
                             rng=np.random.default_rng(seed))
    low, high = (float(v) for v in (result.confidence_interval.low[0], result.confidence_interval.high[0]))
    prefactor = np.exp([result.confidence_interval.low[1], result.confidence_interval.high[1]])
    return (low, high), (float(prefactor[0]), float(prefactor[1]))


def _pooled_spread(log_rows: list[np.ndarray]) -> float | None:
    """Pooled within-width standard deviation of log|value| across seeds (None without replicates)."""
    squares = sum(float(np.sum((row - row.mean()) ** 2)) for row in log_rows)
    dof = sum(row.size - 1 for row in log_rows)
    return math.sqrt(squares / dof) if dof > 0 else None


def _sign_summary(signed: list[np.ndarray]) -> str | None:
    if not signed:
        return None
    every = np.concatenate(signed)
    if np.all(every > 0):
        return "positive"
    if np.all(every < 0):
        return "negative"
    return "mixed"


def json_safe(value):
    """`value` with NumPy scalars as Python ones and non-finite floats as None (JSON has no NaN),
    through dicts, lists and tuples."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def _digits(low: float | None, high: float | None, predicted: float | None) -> int:
    """Two decimals, more when rounding would put an interval end on the prediction."""
    if low is None or predicted is None:
        return 2
    for digits in (2, 3, 4):
        if predicted in (round(low, digits), round(high, digits)) and predicted not in (low, high):
            continue
        return digits
    return 4


def _format_ratio(ratio: float) -> str:
    return f"{ratio:.3g}" if ratio < 1000 else f"{ratio:.0f}"


def _format_width(m: float) -> str:
    if m < 1e4:
        return f"{m:g}"
    return f"{m:.3g}".replace("e+0", "e").replace("e+", "e")


def _format_seed_counts(n_seeds: tuple[int, ...]) -> str:
    if min(n_seeds) == max(n_seeds):
        return f"{n_seeds[0]} seed{'s' if n_seeds[0] != 1 else ''} each"
    return f"{min(n_seeds)}-{max(n_seeds)} seeds per width"


def _scaled_name(name: str, predicted: float) -> str:
    if predicted == 0:
        return name
    return f"{name} m^{-predicted:g}"
