"""Power-law exponent fits with seed-bootstrap intervals, on synthetic C m^e * lognormal data."""

import json
import re

import numpy as np
import pytest

from coocflow.verify.exponents import fit_exponent

WIDTHS = np.logspace(np.log10(64), 5, 6)
SEEDS = 8
EXPONENTS = (-1.0, -1.5, 1.0, 0.0)
COVERAGE_DATASETS = 200
COVERAGE_RANGE = (0.88, 0.99)
"""Nominal 95%; measured about 0.93 at 8 seeds. With 200 datasets the binomial standard error is
about 0.016, so [0.88, 0.99] allows for the known slight under-coverage plus 3 standard errors."""


def synthetic(rng: np.random.Generator, exponent: float, noise: float, prefactor: float = 2.5) -> np.ndarray:
    return prefactor * WIDTHS[:, None] ** exponent * np.exp(rng.normal(0.0, noise, (WIDTHS.size, SEEDS)))


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_interval_covers_true_exponent_about_95_percent(exponent):
    rng = np.random.default_rng(1000 + int(10 * exponent))
    covered = 0
    for _ in range(COVERAGE_DATASETS):
        fit = fit_exponent(WIDTHS, synthetic(rng, exponent, 0.5), predicted=exponent,
                           seed=int(rng.integers(2**31)))
        covered += fit.contains_prediction
    assert COVERAGE_RANGE[0] <= covered / COVERAGE_DATASETS <= COVERAGE_RANGE[1]


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_wrong_prediction_is_excluded_and_fails(exponent):
    rng = np.random.default_rng(2000 + int(10 * exponent))
    for _ in range(20):
        fit = fit_exponent(WIDTHS, synthetic(rng, exponent, 0.5), predicted=exponent + 0.5,
                           seed=int(rng.integers(2**31)))
        assert fit.contains_prediction is False
        assert fit.prefactor_ratio > 5.0


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_noise_free_interval_is_exact(exponent):
    fit = fit_exponent(WIDTHS, synthetic(np.random.default_rng(0), exponent, 0.0), predicted=exponent)
    assert fit.exponent == pytest.approx(exponent, abs=1e-12)
    assert fit.high - fit.low < 1e-12
    assert fit.contains_prediction is True
    assert fit.prefactor_ratio == pytest.approx(1.0)
    assert fit_exponent(WIDTHS, synthetic(np.random.default_rng(0), exponent, 0.0),
                        predicted=exponent + 0.5).contains_prediction is False


@pytest.mark.parametrize("exponent", EXPONENTS)
def test_low_noise_point_estimate_and_prefactor(exponent):
    fit = fit_exponent(WIDTHS, synthetic(np.random.default_rng(3), exponent, 0.05, prefactor=2.5),
                       predicted=exponent)
    assert fit.exponent == pytest.approx(exponent, abs=0.02)
    assert fit.low <= exponent <= fit.high
    reference_value = 2.5 * fit.reference_width**exponent
    assert fit.prefactor_low <= reference_value <= fit.prefactor_high
    assert fit.prefactor_ratio < 1.2
    assert fit.residual_spread < 0.05
    assert fit.seed_spread == pytest.approx(0.05, rel=0.3)


def test_prefactor_ratio_separates_right_and_wrong_predictions():
    values = synthetic(np.random.default_rng(4), -1.0, 0.3)
    right = fit_exponent(WIDTHS, values, predicted=-1.0)
    wrong = fit_exponent(WIDTHS, values, predicted=-1.5)
    assert right.prefactor_ratio < 2.0
    assert wrong.prefactor_ratio > 20.0


def test_nan_seeds_and_missing_width_are_handled():
    values = synthetic(np.random.default_rng(5), -1.0, 0.2)
    values[0, :5] = np.nan
    values[2, :] = np.nan
    values[4, 1:] = np.nan
    fit = fit_exponent(WIDTHS, values, predicted=-1.0)
    assert fit.n_widths == 5
    assert fit.n_seeds == (3, 8, 8, 1, 8)
    assert WIDTHS[2] not in fit.widths
    assert any("width dropped" in note for note in fit.notes)
    assert any("held fixed" in note for note in fit.notes)
    assert fit.low < -1.0 < fit.high
    assert "(5 widths, 1-8 seeds per width)" in fit.sentence()


def test_ragged_rows_and_zero_values():
    rows = [[1 / 64, 1.1 / 64, 0.0], [1 / 640, 0.9 / 640], [1 / 6400, 1.05 / 6400, np.nan, 0.95 / 6400]]
    fit = fit_exponent([64, 640, 6400], rows, predicted=-1.0)
    assert fit.n_seeds == (2, 2, 3)
    assert any("zero value" in note for note in fit.notes)
    assert fit.exponent == pytest.approx(-1.0, abs=0.05)


def test_mixed_and_negative_signs():
    values = synthetic(np.random.default_rng(6), -1.5, 0.2)
    negative = fit_exponent(WIDTHS, -values, predicted=-1.5)
    assert negative.signs == "negative"
    assert negative.exponent == pytest.approx(fit_exponent(WIDTHS, values).exponent)
    values[:, ::2] *= -1
    mixed = fit_exponent(WIDTHS, values, predicted=-1.5)
    assert mixed.signs == "mixed" and mixed.mixed_signs
    assert "signs mixed" in mixed.sentence()
    assert mixed.to_dict()["mixed_signs"] is True


def test_two_widths_are_flagged_and_one_width_is_not_applicable():
    values = synthetic(np.random.default_rng(7), 1.0, 0.2)
    two = fit_exponent(WIDTHS[:2], values[:2], predicted=1.0)
    assert two.fitted and two.few_widths and two.low is not None
    assert "only 2 widths" in two.sentence()
    one = fit_exponent(WIDTHS[:1], values[:1], predicted=1.0)
    assert not one.fitted
    assert "no exponent" in one.sentence()
    nothing = fit_exponent(WIDTHS, np.full((WIDTHS.size, SEEDS), np.nan), predicted=1.0)
    assert json.loads(json.dumps(nothing.to_dict()))["exponent"] is None


def test_single_seed_everywhere_has_no_interval():
    values = synthetic(np.random.default_rng(8), -1.0, 0.2)[:, :1]
    fit = fit_exponent(WIDTHS, values, predicted=-1.0)
    assert fit.fitted and fit.low is None and fit.contains_prediction is None


def test_without_prediction():
    fit = fit_exponent(WIDTHS, synthetic(np.random.default_rng(9), 0.0, 0.2))
    assert fit.predicted is None and fit.prefactor_ratio is None and fit.contains_prediction is None
    assert "predicted" not in fit.sentence()


def test_to_dict_is_strict_json_and_sentence_reads_well():
    fit = fit_exponent(WIDTHS, synthetic(np.random.default_rng(10), -1.0, 0.1), predicted=-1.0, name="T1")
    data = fit.to_dict()
    assert json.loads(json.dumps(data, allow_nan=False)) == data
    assert data["n_widths"] == 6 and data["n_seeds"] == [SEEDS] * 6
    sentence = fit.sentence()
    assert re.match(r"T1: exponent -[01]\.\d{2,4} \(95% CI -[01]\.\d{2,4} to -[01]\.\d{2,4}\) ", sentence)
    assert "over m = 64..1e5 (6 widths, 8 seeds each)" in sentence
    assert "predicted -1: inside" in sentence and "T1 m^1 varies by" in sentence


def test_bootstrap_is_reproducible_from_its_seed():
    values = synthetic(np.random.default_rng(11), -1.0, 0.5)
    first, again = fit_exponent(WIDTHS, values, seed=3), fit_exponent(WIDTHS, values, seed=3)
    assert (first.low, first.high) == (again.low, again.high)
    assert fit_exponent(WIDTHS, values, seed=4).low != first.low


def test_invalid_input_is_rejected():
    with pytest.raises(ValueError):
        fit_exponent([64, 128], [[1.0]])
    with pytest.raises(ValueError):
        fit_exponent([64, -1], [[1.0], [2.0]])
    with pytest.raises(ValueError):
        fit_exponent([64, 64], [[1.0], [2.0]])
    with pytest.raises(ValueError):
        fit_exponent([64, 128], [[1.0], [2.0]], confidence=1.5)


def seed_offset_sweep(rng, exponent, offset, noise, seeds=SEEDS):
    """A paired sweep: each seed's values share an offset at every width (the seed's data)."""
    offsets = offset * rng.standard_normal((1, seeds))
    return WIDTHS[:, None] ** exponent * np.exp(offsets + noise * rng.normal(0.0, 1.0, (WIDTHS.size, seeds)))


def test_paired_seeds_cancel_their_offsets_and_keep_coverage():
    """With per-seed offsets of sd 1 (log) and residual noise 0.1, the unpaired interval is about
    ten times wider than the paired one, and the paired one still covers the true exponent."""
    rng = np.random.default_rng(7)
    covered, paired_width, unpaired_width = 0, [], []
    for trial in range(100):
        values = seed_offset_sweep(rng, -1.0, 1.0, 0.1)
        paired = fit_exponent(WIDTHS, values, predicted=-1.0, paired=True, seed=trial, resamples=1000)
        unpaired = fit_exponent(WIDTHS, values, predicted=-1.0, seed=trial, resamples=1000)
        covered += paired.contains_prediction
        paired_width.append(paired.high - paired.low)
        unpaired_width.append(unpaired.high - unpaired.low)
        assert paired.exponent == pytest.approx(unpaired.exponent, abs=1e-12)  # every seed at every width
    assert 0.88 <= covered / 100 <= 1.0
    assert np.median(unpaired_width) > 5 * np.median(paired_width)
    assert paired.paired and paired.seed_offset_spread == pytest.approx(1.0, rel=0.6)
    assert "seeds paired across widths" in paired.sentence()


def test_paired_fit_with_missing_seeds_fits_within_seeds():
    """A seed missing at the largest widths must not pull the slope by its offset: the within-seed
    (fixed-effects) slope stays on the true exponent where a fit of per-width means does not."""
    rng = np.random.default_rng(3)
    values = seed_offset_sweep(rng, -1.0, 0.0, 0.0)
    values *= np.exp(np.array([3.0, 0, 0, 0, 0, 0, 0, 0]))[None, :]  # seed 0 sits e^3 above the others
    values[-3:, 0] = np.nan  # ... and is missing at the three largest widths
    paired = fit_exponent(WIDTHS, values, paired=True)
    unpaired = fit_exponent(WIDTHS, values)
    assert paired.exponent == pytest.approx(-1.0, abs=1e-12)
    assert abs(unpaired.exponent + 1.0) > 0.05


def test_paired_values_need_one_column_per_seed():
    with pytest.raises(ValueError, match="one column per seed"):
        fit_exponent([1e3, 1e4, 1e5], [[1.0, 2.0], [1.0], [1.0, 2.0]], paired=True)
    lonely = np.full((WIDTHS.size, 3), np.nan)
    for i in range(WIDTHS.size):
        lonely[i, i % 3] = WIDTHS[i] ** -1.0 if i < 3 else np.nan
    fit = fit_exponent(WIDTHS[:3], lonely[:3], paired=True)
    assert not fit.paired and any("fitted unpaired" in note for note in fit.notes)
