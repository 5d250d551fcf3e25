"""Initial Grams drawn without the weights (coocflow.model.gram_init): right distribution, any width.

Moment checks compare sample moments over N_DRAWS draws with the exact ones and allow
Z_TOLERANCE standard errors (each standard error estimated from the same draws). Seeds are fixed,
so the tests are deterministic.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from coocflow.config import Config
from coocflow.errors import ConfigError
from coocflow.model.gram import GramState, grams_from_weights
from coocflow.model.gram_init import (
    GRAM_ARRAY_KEYS,
    accumulate_kaiming_grams,
    check_kaiming_affordable,
    kaiming_cost_seconds,
    sample_theory_grams,
    wishart_identity,
)
from coocflow.model.init import init_model

N_DRAWS = 4000
Z_TOLERANCE = 5.0
D, L, M1, C0, C1 = 4, 5, 11, 1.3, 0.7


def gram_arrays(grams: GramState) -> dict[str, jnp.ndarray]:
    """The six arrays of a Gram state, by name."""
    return {name: getattr(grams, name) for name in GRAM_ARRAY_KEYS}


def draws(sample, seed: int) -> dict[str, np.ndarray]:
    """N_DRAWS vmapped draws of `sample(key)`, as numpy arrays with a leading draw axis."""
    keys = jax.random.split(jax.random.key(seed), N_DRAWS)
    return {k: np.asarray(v) for k, v in jax.vmap(lambda key: gram_arrays(sample(key)))(keys).items()}


def assert_moments(samples: np.ndarray, mean, variance, label: str) -> None:
    """Sample mean and mean squared deviation from `mean` within Z_TOLERANCE standard errors."""
    n = samples.shape[0]
    mean = np.broadcast_to(mean, samples.shape[1:])
    variance = np.broadcast_to(variance, samples.shape[1:])
    z_mean = (samples.mean(0) - mean) / (samples.std(0) / math.sqrt(n))
    squares = (samples - mean) ** 2
    z_variance = (squares.mean(0) - variance) / (squares.std(0) / math.sqrt(n))
    worst = max(np.abs(z_mean).max(), np.abs(z_variance).max())
    assert worst < Z_TOLERANCE, f"{label}: a moment is {worst:.2f} standard errors off"


def square_moments(diagonal_mean, diagonal_variance, off_variance, size: int):
    """Entry means and variances of a d x d Gram block with i.i.d. columns' diagonal."""
    eye = np.eye(size)
    return eye * diagonal_mean, eye * diagonal_variance + (1 - eye) * off_variance


def joint_grams(arrays: dict) -> tuple[np.ndarray, np.ndarray]:
    """The Grams of [W_Q, W_K] and [W_V, u] rebuilt from the blocks."""
    P, K, A, V, G, s = (np.asarray(arrays[k]) for k in ("P", "K", "A", "V", "G", "s"))
    query_key = np.block([[P, A.T], [A, K]])
    value_u = np.block([[V, G[:, None]], [G[None, :], np.reshape(s, (1, 1))]])
    return query_key, value_u


@pytest.mark.parametrize("m", [2, 9, 13, 14, 50, 10**6])
def test_theory_grams_have_wishart_moments(m):
    """Entry means and variances of P, K, A, V, G, s match Condition 1's Wisharts. The joint
    Gram of [W_Q, W_K, W_V, u] has p = 3d + 1 = 13: m = 2 and 9 draw the Gaussian, m = 13 is
    Bartlett's boundary m = p (last chi-square with one degree of freedom), the rest Bartlett."""
    samples = draws(lambda key: sample_theory_grams(key, D, m, M1, L, C0, C1), seed=m)
    v0 = C0**2 / (L * m)
    v_u = M1 * (C1**2 / M1)
    mean, variance = square_moments(m * v0, 2 * m * v0**2, m * v0**2, D)
    for name in ("P", "K", "V"):
        assert_moments(samples[name], mean, variance, f"{name} at m={m}")
    assert_moments(samples["A"], 0.0, m * v0**2, f"A at m={m}")
    assert_moments(samples["G"], 0.0, m * v0 * v_u, f"G at m={m}")
    assert_moments(samples["s"], m * v_u, 2 * m * v_u**2, f"s at m={m}")


def unique_features(samples: dict[str, np.ndarray]) -> np.ndarray:
    """Each draw's distinct Gram entries (upper triangles of the symmetric blocks), one row each."""
    upper = np.triu_indices(D)
    parts = [samples[name][:, upper[0], upper[1]] for name in ("P", "K", "V")]
    parts += [samples["A"].reshape(N_DRAWS, -1), samples["G"], samples["s"][:, None]]
    return np.concatenate(parts, axis=1)


@pytest.mark.parametrize("m", [5, 14])
def test_theory_grams_match_grams_of_drawn_weights(m):
    """Two-sample check against `init_model`'s Gaussian weights (m = 5 by the Gaussian path,
    m = 14 by Bartlett's): means of every distinct entry
    and of every product of two (the joint second moments) agree within Z_TOLERANCE standard
    errors of the difference."""
    config = Config().replace({"data.d": D, "data.L": L, "model.m": m, "model.m1": M1,
                               "init.scheme": "theory", "init.c0": C0, "init.c1": C1})
    sampled = unique_features(draws(lambda key: sample_theory_grams(key, D, m, M1, L, C0, C1), seed=1))
    weights = unique_features(draws(lambda key: grams_from_weights(init_model(config, key)), seed=2))
    rows, cols = np.triu_indices(sampled.shape[1])
    for label, transform in (("means", lambda x: x), ("products", lambda x: x[:, rows] * x[:, cols])):
        a, b = transform(sampled), transform(weights)
        error = np.sqrt((a.var(0) + b.var(0)) / N_DRAWS)
        worst = np.abs((a.mean(0) - b.mean(0)) / error).max()
        assert worst < Z_TOLERANCE, f"{label} at m={m}: {worst:.2f} standard errors apart"


@pytest.mark.parametrize("m", [10**6, 10**8, 10**12])
def test_bartlett_at_huge_widths_is_finite_symmetric_positive_definite(m):
    """Instant at any m; diagonals within 10 relative standard deviations of m sigma^2."""
    d = 16
    arrays = gram_arrays(sample_theory_grams(jax.random.key(7), d, m, M1, L, C0, C1))
    v0 = C0**2 / (L * m)
    for gram in joint_grams(arrays):
        assert np.all(np.isfinite(gram))
        np.testing.assert_array_equal(gram, gram.T)
        assert np.linalg.eigvalsh(gram).min() > 0
    relative = np.concatenate([np.diag(arrays["P"]), np.diag(arrays["K"]), np.diag(arrays["V"])]) / (m * v0)
    assert np.abs(relative - 1).max() < 10 * math.sqrt(2 / m)
    assert abs(float(arrays["s"]) / (m * C1**2) - 1) < 10 * math.sqrt(2 / m)


def test_narrow_widths_give_grams_of_rank_m():
    """m < p: the joint Grams are those of one m-row matrix, so their rank is m."""
    arrays = gram_arrays(sample_theory_grams(jax.random.key(3), D, 2, M1, L, C0, C1))
    for gram in joint_grams(arrays):
        eigenvalues = np.linalg.eigvalsh(gram)
        assert np.sum(eigenvalues > 1e-10 * eigenvalues.max()) == 2


def test_wishart_identity_bartlett_mean_is_m_identity():
    """E[Wishart(m, I)] = m I for the Bartlett path (m >= p), averaged over draws."""
    m, p = 12, 6
    keys = jax.random.split(jax.random.key(11), N_DRAWS)
    samples = np.asarray(jax.vmap(lambda key: wishart_identity(key, m, p))(keys))
    eye = np.eye(p)
    assert_moments(samples, m * eye, 2 * m * eye + m * (1 - eye), "Wishart(12, I_6)")


@pytest.mark.parametrize("rows_per_chunk, block_elements", [(2, 4), (4096, 1 << 22)])
def test_kaiming_grams_have_uniform_moments(rows_per_chunk, block_elements):
    """Entry means and variances under uniform weights; (2, 4) chunks m = 5 rows by 2 and
    W's m1 = 7 rows by 2, so both loops end on a masked partial chunk."""
    m, m1 = 5, 7
    samples = draws(lambda key: accumulate_kaiming_grams(
        key, D, m, m1, C0, C1, rows_per_chunk=rows_per_chunk, block_elements=block_elements), seed=5)
    b0, b1 = C0 / math.sqrt(D), C1 / math.sqrt(m)
    v0, fourth0 = b0**2 / 3, b0**4 / 5
    v1, fourth1 = b1**2 / 3, b1**4 / 5
    v_u = m1 * v1
    fourth_u = m1 * fourth1 + 3 * m1 * (m1 - 1) * v1**2
    mean, variance = square_moments(m * v0, m * (fourth0 - v0**2), m * v0**2, D)
    for name in ("P", "K", "V"):
        assert_moments(samples[name], mean, variance, f"kaiming {name}")
    assert_moments(samples["A"], 0.0, m * v0**2, "kaiming A")
    assert_moments(samples["G"], 0.0, m * v0 * v_u, "kaiming G")
    assert_moments(samples["s"], m * v_u, m * (fourth_u - v_u**2), "kaiming s")


def test_kaiming_affordability_refuses_wide_models_naming_theory():
    check_kaiming_affordable(64, 128, 256)
    assert kaiming_cost_seconds(64, 10**6, 10**6) > kaiming_cost_seconds(64, 10**4, 10**4)
    with pytest.raises(ConfigError, match="use init.scheme=theory") as refused:
        check_kaiming_affordable(64, 10**6, 10**6)
    assert "\n" not in str(refused.value)


def test_widths_whose_m1_moves_with_m_share_one_sampler():
    """m1 is traced in the Wishart sampler without neurons (it enters through u's scale, which is c1
    up to rounding, and the state's m1 leaf): a T1 table with m1 = m/8 compiled one sampler per width
    before. The state still carries each width."""
    from coocflow.model import gram_init

    key = jax.random.PRNGKey(3)
    first = gram_init.sample_wide_theory_grams(key, 5, 2**10, 2**7, 3, 0.01, 1.0)
    programs = gram_init._sample_wide_any_m1._cache_size()
    for m in (2**12, 2**16, 2**22):
        state = gram_init.sample_wide_theory_grams(key, 5, m, m // 8, 3, 0.01, 1.0)
        assert (float(state.m), float(state.m1)) == (m, m // 8)
        assert not np.array_equal(np.asarray(state.A), np.asarray(first.A))
    assert gram_init._sample_wide_any_m1._cache_size() == programs
