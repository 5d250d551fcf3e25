"""Initial Grams of the Gram space, drawn without the weights (docs/definitions.md section 4).

The Gram space follows eq. (1) through P = W_Q^T W_Q, K = W_K^T W_K, A = W_K^T W_Q,
V = W_V^T W_V (d x d), G = W_V^T u (d,) and s = u^T u, with u = W^T a. Their initial values can
be had three ways, `GRAM_INIT_METHODS`:

- `weights`: draw the weights exactly as `init.init_model` does (same key split) and form the
  Grams from them. The only method that matches a weight-space run bit for bit; it holds the
  m x d and m1 x m matrices, so it applies while they fit (the comparisons with the weight path,
  small widths). Not in this module: the caller already has the weights.
- `wishart` (`sample_theory_grams`, `init.scheme=theory` only): the Gaussian weights' Grams are
  Wishart, sampled exactly in distribution by the Bartlett decomposition in O(d^3) time whatever
  m and m1 are (m = 10^12 takes milliseconds once compiled; compiling JAX's chi-square sampler
  takes a few seconds once per process). A different draw from `weights` for the same seed.
- `chunked` (`accumulate_kaiming_grams`, `init.scheme=kaiming`): uniform weights have no closed
  form, so the Grams are summed over chunks of rows without ever holding the matrices: exact in
  distribution, but u = W^T a alone needs m x m1 uniforms, so it is refused
  (`check_kaiming_affordable`) where `kaiming_cost_seconds` says it would take over a minute.

Both samplers return a `gram.GramState`. With `model.neurons` (`sample_theory_grams(...,
neurons=True)`) the Wishart draw also holds the rows of W, so the neurons' Grams N = W W^T and
Z = W W_V come from the same draw as V, and G = Z^T a, s = a^T N a are set from it; the chunked
sampler does not resolve neurons.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.errors import ConfigError
from coocflow.model.gram import GramState

GRAM_INIT_METHODS = ("weights", "wishart", "chunked")
GRAM_ARRAY_KEYS = ("A", "P", "K", "V", "G", "s")
NEURON_ARRAY_KEYS = ("N", "Z", "a")
"""The arrays a state with resolved neurons (`model.neurons`) holds besides `GRAM_ARRAY_KEYS`."""


def wishart_identity(key: jax.Array, m: int, p: int, dtype=jnp.float64) -> jnp.ndarray:
    """A draw of Wishart(m, I_p), the Gram X^T X of an m x p standard Gaussian X.

    For m >= p by the Bartlett decomposition C C^T (C lower triangular, C_ii^2 ~ chi^2(m - i + 1)
    for i = 1..p, C_ij ~ N(0, 1) below the diagonal): O(p^3) however large m is. For m < p the
    Wishart is singular and Bartlett does not apply, so X is drawn and its Gram formed. A traced m
    (`sample_wide_theory_grams`) is taken to be >= p.
    """
    if isinstance(m, int) and m < p:
        gaussian = jax.random.normal(key, (m, p), dtype=dtype)
        return gaussian.T @ gaussian
    key_diagonal, key_below = jax.random.split(key)
    degrees = jnp.asarray(m, dtype=dtype) - jnp.arange(p, dtype=dtype)
    diagonal = jnp.sqrt(jax.random.chisquare(key_diagonal, degrees, dtype=dtype))
    below = jnp.tril(jax.random.normal(key_below, (p, p), dtype=dtype), k=-1)
    factor = below + jnp.diag(diagonal)
    return factor @ factor.T


def _scaled_wishart(key: jax.Array, m: int, scales: jnp.ndarray, dtype) -> jnp.ndarray:
    """Gram of an m x p matrix whose column j is i.i.d. N(0, scales[j]^2): D^(1/2) S D^(1/2)
    with S ~ Wishart(m, I_p)."""
    standard = wishart_identity(key, m, scales.shape[0], dtype)
    return scales[:, None] * standard * scales[None, :]


def _attention_value_grams(query_key: jnp.ndarray, value_u: jnp.ndarray, d: int, m: int, m1: int) -> GramState:
    """The Gram state from the Grams of [W_Q, W_K] (2d x 2d) and [W_V, u] ((d+1) x (d+1)),
    symmetrized so that P, K, V are exactly symmetric whatever the matmul's rounding."""
    query_key = 0.5 * (query_key + query_key.T)
    value_u = 0.5 * (value_u + value_u.T)
    return GramState(
        P=query_key[:d, :d], K=query_key[d:, d:], A=query_key[d:, :d],
        V=value_u[:d, :d], G=value_u[:d, d], s=value_u[d, d], m=m, m1=m1,
    )


def sample_theory_grams(key: jax.Array, d: int, m: int, m1: int, L: int, c0: float, c1: float,
                        dtype=jnp.float64, sigma_u=None) -> GramState:
    """The initial Grams under Condition 1 (`init.scheme=theory`), exact in distribution.

    W_Q, W_K, W_V ~ N(0, sigma0^2) with sigma0 = c0/sqrt(L m), and u = W^T a has i.i.d.
    N(0, m1 sigma1^2) = N(0, c1^2) entries whatever the signs a, independent of the rest. So
    [W_Q, W_K, W_V, u] (m x (3d+1)) has Gram D^(1/2) Wishart(m, I) D^(1/2) with
    D = diag(sigma0^2 (3d times), c1^2), drawn at once (one chi-square draw to compile, not two).
    In the Gram of [W_Q, W_K]: P is the top-left d x d block, K the bottom-right, A = W_K^T W_Q
    the bottom-left. In the Gram of [W_V, u]: V is the top-left d x d block, G = W_V^T u the last
    column, s = u^T u the corner. O(d^3) time for any m, m1. `sigma_u`: u's scale (`u_scale`), given
    where m1 is traced.
    """
    dtype = jnp.dtype(dtype)
    sigma0 = c0 / jnp.sqrt(jnp.asarray(L * m, dtype))
    sigma_u = u_scale(m1, c1) if sigma_u is None else sigma_u
    scales = jnp.concatenate([jnp.full((3 * d,), sigma0, dtype=dtype), jnp.reshape(jnp.asarray(sigma_u, dtype), (1,))])
    joint = _scaled_wishart(key, m, scales, dtype)
    return _attention_value_grams(joint[:2 * d, :2 * d], joint[2 * d:, 2 * d:], d, m, m1)


def sample_theory_neuron_grams(key: jax.Array, d: int, m: int, m1: int, L: int, c0: float, c1: float,
                               dtype=jnp.float64) -> GramState:
    """The initial Grams under Condition 1 with the neurons resolved, exact in distribution.

    The m-vectors [columns of W_Q, W_K, W_V (3d, N(0, sigma0^2) entries); rows w_j of W (m1,
    N(0, sigma1^2) entries)] are independent Gaussians, so their Gram is one scaled Wishart of
    dimension 3d + m1 with m degrees of freedom (Bartlett: O((3d + m1)^3) for any m). A, P, K come
    from its [W_Q, W_K] block, V from the W_V block, N = W W^T from the W block and Z = W W_V from
    the W-by-W_V block; a is drawn as `init.init_model` draws it (Rademacher), and G = Z^T a,
    s = a^T N a are set from the same draw.
    """
    dtype = jnp.dtype(dtype)
    sigma0, sigma1 = c0 / jnp.sqrt(jnp.asarray(L * m, dtype)), c1 / math.sqrt(m1)
    key_grams, key_signs = jax.random.split(key)
    scales = jnp.concatenate([jnp.full((3 * d,), sigma0, dtype=dtype), jnp.full((m1,), sigma1, dtype=dtype)])
    joint = _scaled_wishart(key_grams, m, scales, dtype)
    joint = 0.5 * (joint + joint.T)
    a = jax.random.rademacher(key_signs, (m1,), dtype=dtype)
    N, Z = joint[3 * d:, 3 * d:], joint[3 * d:, 2 * d:3 * d]
    return GramState(
        P=joint[:d, :d], K=joint[d:2 * d, d:2 * d], A=joint[d:2 * d, :d], V=joint[2 * d:3 * d, 2 * d:3 * d],
        G=Z.T @ a, s=a @ N @ a, m=m, m1=m1, N=N, Z=Z, a=a,
    )


def u_scale(m1: float, c1: float) -> float:
    """The standard deviation of u = W^T a's entries, sqrt(m1) sigma1 with sigma1 = c1 / sqrt(m1):
    c1 up to rounding, computed in host floating point as it always was (inside a compiled program
    XLA may rewrite c1 / sqrt(m1) as c1 * rsqrt(m1), which rounds differently)."""
    return math.sqrt(m1) * (c1 / math.sqrt(m1))


@functools.partial(jax.jit, static_argnames=("d", "m1", "neurons", "dtype"))
def _sample_wide(key, m, L, c0, c1, *, d, m1, neurons, dtype):
    sample = sample_theory_neuron_grams if neurons else sample_theory_grams
    return sample(key, d, m, m1, L, c0, c1, dtype)


@functools.partial(jax.jit, static_argnames=("d", "dtype"))
def _sample_wide_any_m1(key, m, m1, L, c0, sigma_u, *, d, dtype):
    """`_sample_wide` without the neurons, m1 traced (it enters only through u's scale, computed on
    the host by `u_scale`, and the state's m1 leaf): a T1 table whose m1 moves with m compiled one
    sampler per width before (16 for 16 widths), now one."""
    return sample_theory_grams(key, d, m, m1, L, c0, None, dtype, sigma_u=sigma_u)


def sample_wide_theory_grams(key: jax.Array, d: int, m: int, m1: int, L: int, c0: float, c1: float,
                             neurons: bool = False, dtype=jnp.float64) -> GramState:
    """`sample_theory_neuron_grams` (`neurons`) or `sample_theory_grams` compiled once for every
    width m, c0 and c1 (traced, so a width sweep compiles one sampler, not one per width; without the
    neurons m1 and c1 too); m below the Wishart's dimension takes the un-compiled path, whose Gram of
    drawn Gaussians has m rows."""
    dimension = 3 * d + (m1 if neurons else 1)
    if m < dimension:
        sample = sample_theory_neuron_grams if neurons else sample_theory_grams
        return sample(key, d, m, m1, L, c0, c1, dtype)
    dtype = jnp.dtype(dtype)
    # The traced scalars as NumPy arrays of the dtype: the same values and the same compiled program as
    # JAX arrays, but an ensemble draws a sampler per seed and five jnp.asarray calls were half its cost
    # (1.08 -> 0.48 ms a seed, the Grams bit-identical).
    if not neurons:
        return _sample_wide_any_m1(key, np.asarray(m, dtype), np.asarray(m1, dtype), np.asarray(L, dtype),
                                   np.asarray(c0, dtype), np.asarray(u_scale(m1, c1), dtype), d=d, dtype=dtype)
    return _sample_wide(key, np.asarray(m, dtype), np.asarray(L, dtype), np.asarray(c0, dtype),
                        np.asarray(c1, dtype), d=d, m1=m1, neurons=neurons, dtype=dtype)


KAIMING_BLOCK_ELEMENTS = 1 << 22
"""Uniforms of W drawn at once by `accumulate_kaiming_grams` (32 MiB in float64)."""


@functools.partial(jax.jit, static_argnames=("d", "m", "m1", "dtype", "rows_per_chunk", "w_rows_per_block"))
def _accumulate_kaiming(key, c0, c1, *, d, m, m1, dtype, rows_per_chunk, w_rows_per_block):
    """Sum the Grams of [W_Q, W_K] and [W_V, u] over chunks of `rows_per_chunk` rows."""
    bound_attention = c0 / jnp.sqrt(jnp.asarray(d, dtype))
    bound_w = c1 / jnp.sqrt(jnp.asarray(m, dtype))
    key_rows, key_w, key_a = jax.random.split(key, 3)
    row_chunks = -(-m // rows_per_chunk)
    w_blocks = -(-m1 // w_rows_per_block)

    def u_chunk(chunk):
        """u on this chunk's rows: a^T W[:, chunk], W's rows summed a block at a time. a's block j
        comes from key_a and j alone, so every chunk sees the same a."""
        def add_block(block, total):
            rows = block * w_rows_per_block + jnp.arange(w_rows_per_block)
            signs = jax.random.rademacher(jax.random.fold_in(key_a, block), (w_rows_per_block,), dtype=dtype)
            signs = jnp.where(rows < m1, signs, 0)
            block_key = jax.random.fold_in(jax.random.fold_in(key_w, chunk), block)
            weights = jax.random.uniform(block_key, (w_rows_per_block, rows_per_chunk), dtype=dtype,
                                         minval=-bound_w, maxval=bound_w)
            return total + signs @ weights

        return jax.lax.fori_loop(0, w_blocks, add_block, jnp.zeros((rows_per_chunk,), dtype))

    def add_chunk(chunk, grams):
        query_key, value_u = grams
        valid = (chunk * rows_per_chunk + jnp.arange(rows_per_chunk) < m).astype(dtype)[:, None]
        rows = valid * jax.random.uniform(jax.random.fold_in(key_rows, chunk), (rows_per_chunk, 3 * d),
                                          dtype=dtype, minval=-bound_attention, maxval=bound_attention)
        value_rows = jnp.concatenate([rows[:, 2 * d:], valid * u_chunk(chunk)[:, None]], axis=1)
        return query_key + rows[:, :2 * d].T @ rows[:, :2 * d], value_u + value_rows.T @ value_rows

    initial = (jnp.zeros((2 * d, 2 * d), dtype), jnp.zeros((d + 1, d + 1), dtype))
    return jax.lax.fori_loop(0, row_chunks, add_chunk, initial)


def accumulate_kaiming_grams(key: jax.Array, d: int, m: int, m1: int, c0: float, c1: float,
                             dtype=jnp.float64, rows_per_chunk: int = 4096,
                             block_elements: int = KAIMING_BLOCK_ELEMENTS) -> GramState:
    """The initial Grams under `init.scheme=kaiming`, exact in distribution, in bounded memory.

    W_Q, W_K, W_V ~ uniform(-c0/sqrt(d), c0/sqrt(d)) and W ~ uniform(-c1/sqrt(m), c1/sqrt(m)),
    a uniform on {+1, -1}, as in `init.init_model` but not the same draw. Rows of [W_Q, W_K, W_V]
    come `rows_per_chunk` at a time, with the matching entries of u = W^T a summed over blocks of
    at most `block_elements` entries of W, so nothing larger than a block is ever held. Time is
    about `kaiming_cost_seconds(d, m, m1)`.
    """
    rows_per_chunk = max(1, min(rows_per_chunk, m))
    w_rows_per_block = max(1, min(m1, block_elements // rows_per_chunk))
    dtype = jnp.dtype(dtype)
    query_key, value_u = _accumulate_kaiming(
        key, jnp.asarray(c0, dtype), jnp.asarray(c1, dtype), d=d, m=m, m1=m1, dtype=dtype,
        rows_per_chunk=rows_per_chunk, w_rows_per_block=w_rows_per_block)
    return _attention_value_grams(query_key, value_u, d, m, m1)


KAIMING_SECONDS_PER_UNIFORM = 4.0e-9
"""Seconds per uniform drawn (and summed into u or a row), float64 on CPU. Measured on the
2-core development machine: 3.7e-9 to 4.3e-9 s per entry of W at m, m1 = 4096..16384
(d = 3 and 64), e.g. 0.99 s for m = m1 = 16384 after compilation. Check: d = 64, m = 32768,
m1 = 65536 took 8.3 s (14.1 s with the cores shared) against an estimate of 9.7 s."""
KAIMING_SECONDS_PER_GRAM_ENTRY = 6.0e-11
"""Seconds per row of [W_Q, W_K, W_V] per entry of the two Grams it is added into,
(2d)^2 + (d+1)^2. Measured with m1 = 1: 3.3e-11 (d = 64, m = 2e5), 3.1e-11 (d = 256,
m = 1e5), 6.7e-11 (d = 512, m = 2e4, out of cache)."""
KAIMING_OVERHEAD_SECONDS = 1.0
"""Compilation and dispatch: 0.6 to 1.5 s measured on the first call at each shape."""
KAIMING_AFFORDABLE_SECONDS = 60.0


def kaiming_cost_seconds(d: int, m: int, m1: int) -> float:
    """Estimated wall time of `accumulate_kaiming_grams`: m (m1 + 3d) uniforms (u = W^T a needs
    m x m1 of them) and per row of [W_Q, W_K, W_V] the rank-one updates of the two Grams."""
    uniforms = m * (m1 + 3 * d)
    gram_updates = m * ((2 * d) ** 2 + (d + 1) ** 2)
    return (KAIMING_OVERHEAD_SECONDS + KAIMING_SECONDS_PER_UNIFORM * uniforms
            + KAIMING_SECONDS_PER_GRAM_ENTRY * gram_updates)


def check_kaiming_affordable(d: int, m: int, m1: int, budget_seconds: float = KAIMING_AFFORDABLE_SECONDS) -> None:
    """Refuse (ConfigError, one line) Kaiming Grams whose estimated time exceeds the budget."""
    seconds = kaiming_cost_seconds(d, m, m1)
    if seconds > budget_seconds:
        raise ConfigError(
            f"init.scheme=kaiming at model.m={m}, model.m1={m1} needs about {seconds:.3g} s to draw its "
            f"Grams (u = W^T a alone is {m * m1:.3g} uniforms, limit {budget_seconds:.0f} s): use "
            "init.scheme=theory (Gaussian, sampled exactly at any width) or smaller widths")
