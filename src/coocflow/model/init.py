"""Initialization (docs/definitions.md section 4: the paper's Condition 1 and its experiment's Kaiming)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coocflow.config import Config
from coocflow.model.transformer import Transformer


def init_model(config: Config, key: jax.Array) -> Transformer:
    """Draw a, W, W_V, W_K, W_Q from `key`.

    `theory`: W ~ N(0, sigma1^2), W_Q, W_K, W_V ~ N(0, sigma0^2), sigma0 = c0/sqrt(L m),
    sigma1 = c1/sqrt(m1) (Condition 1). `kaiming`: uniform(-b, b) with b = 1/sqrt(fan_in), fan-in
    d for W_Q, W_K, W_V and m for W (the common deep-learning default for a linear map), then
    scaled by c0 (attention and value) and c1 (W). `a` is uniform on {+1, -1} in both.
    """
    m, m1, d, L = config.model.m, config.model.m1, config.data.d, config.data.L
    c0, c1 = config.init.c0, config.init.c1
    dtype = jnp.dtype(config.dtype)
    k_a, k_w, k_v, k_k, k_q = jax.random.split(key, 5)
    a = jax.random.rademacher(k_a, (m1,), dtype=dtype)
    if config.init.scheme == "theory":
        sigma0, sigma1 = c0 / jnp.sqrt(L * m), c1 / jnp.sqrt(m1)

        def draw(k, shape, scale):
            return scale * jax.random.normal(k, shape, dtype=dtype)

        return Transformer(
            W_Q=draw(k_q, (m, d), sigma0), W_K=draw(k_k, (m, d), sigma0),
            W_V=draw(k_v, (m, d), sigma0), W=draw(k_w, (m1, m), sigma1), a=a,
        )
    bound_attn, bound_w = c0 / jnp.sqrt(d), c1 / jnp.sqrt(m)

    def uniform(k, shape, bound):
        return jax.random.uniform(k, shape, dtype=dtype, minval=-bound, maxval=bound)

    return Transformer(
        W_Q=uniform(k_q, (m, d), bound_attn), W_K=uniform(k_k, (m, d), bound_attn),
        W_V=uniform(k_v, (m, d), bound_attn), W=uniform(k_w, (m1, m), bound_w), a=a,
    )
