"""The coupled dynamical system of the paper's Appendix C, in closed form, checked against JVPs.

The gradient flow moves six kinds of variables: <w_j1, w_j2>, w_j^T W_V mu, nu^T W_K^T W_Q mu,
nu^T W_V^T W_V mu, nu^T W_K^T W_K mu and nu^T W_Q^T W_Q mu. With coef_i = g_i y_i / n,
k_h = W_K x_h, q_l = W_Q x_l, B[i,h,l] = p_l[h] (G(x_h) - sum_h' p_l[h'] G(x_h')) (the softmax
derivative), c_h = sum_l p_l[h], v_i = sum_h c_h x_h and s = sum_i coef_i v_i, their rates are

  d<w_j1,w_j2>/dt        = a_j1 (W W_V s)_j2 + a_j2 (W W_V s)_j1
  d(w_j^T W_V mu)/dt     = a_j (W_V s)^T W_V mu + (w_j^T u) s[mu]
  d(nu^T W_K^T W_Q mu)/dt = 1/sqrt(m) sum_i coef_i sum_{h,l} B[i,h,l] ([x_h = nu] q_l^T W_Q mu + [x_l = mu] k_h^T W_K nu)
  d(nu^T W_V^T W_V mu)/dt = sum_i coef_i ((v_i . nu) G(mu) + (v_i . mu) G(nu))
  d(nu^T W_K^T W_K mu)/dt = 1/sqrt(m) sum_i coef_i sum_{h,l} B[i,h,l] ([x_h = nu] q_l^T W_K mu + [x_h = mu] q_l^T W_K nu)
  d(nu^T W_Q^T W_Q mu)/dt = 1/sqrt(m) sum_i coef_i sum_{h,l} B[i,h,l] ([x_l = nu] k_h^T W_Q mu + [x_l = mu] k_h^T W_Q nu)

The score equation is the one the authors printed in their answer to reviewers (docs/definitions.md section 8);
it agrees with the JVP. This module is a reference, not a hot path: it uses dense one-hot tokens
for clarity (compiled as one program all the same).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.data import Dataset
from coocflow.model import Transformer, attention, combine, logits, partition, token_mlp, trainable_loss
from coocflow.verify.paper.saved import SavedState, seed_arrays

KINDS = ("neuron Gram <w_j1,w_j2>", "neuron values w_j^T W_V mu", "scores nu^T W_K^T W_Q mu",
         "value Gram nu^T W_V^T W_V mu", "key Gram nu^T W_K^T W_K mu", "query Gram nu^T W_Q^T W_Q mu")


def variables(model: Transformer) -> dict[str, jnp.ndarray]:
    """The six kinds of variables as matrices over neurons or vocabulary tokens."""
    return {
        KINDS[0]: model.W @ model.W.T,
        KINDS[1]: model.W @ model.W_V,
        KINDS[2]: model.W_K.T @ model.W_Q,
        KINDS[3]: model.W_V.T @ model.W_V,
        KINDS[4]: model.W_K.T @ model.W_K,
        KINDS[5]: model.W_Q.T @ model.W_Q,
    }


def closed_form_rates(model: Transformer, data: Dataset) -> dict[str, jnp.ndarray]:
    """The right-hand sides above, written out sample by sample."""
    m, d = model.W_Q.shape
    E = jax.nn.one_hot(data.tokens, d, dtype=model.W.dtype)  # (n, L, d)
    K, Q = model.W_K.T[data.tokens], model.W_Q.T[data.tokens]  # (n, L, m)
    p = attention(model, data.tokens)  # (n, h, l)
    G = token_mlp(model)
    Gx = G[data.tokens]
    F = logits(model, data.tokens)
    coef = data.labels * jax.nn.sigmoid(-data.labels * F) / data.tokens.shape[0]
    B = p * (Gx[:, :, None] - jnp.einsum("nhl,nh->nl", p, Gx)[:, None, :])
    v = jnp.einsum("nh,nhd->nd", p.sum(axis=2), E)
    s = coef @ v
    u = model.u
    WVs = model.W_V @ s
    root = jnp.sqrt(m)
    score = (jnp.einsum("i,ihl,ihn,ilk,km->nm", coef, B, E, Q, model.W_Q)
             + jnp.einsum("i,ihl,ilm,ihk,kn->nm", coef, B, E, K, model.W_K)) / root
    key_half = jnp.einsum("i,ihl,ihn,ilk,km->nm", coef, B, E, Q, model.W_K) / root
    query_half = jnp.einsum("i,ihl,iln,ihk,km->nm", coef, B, E, K, model.W_Q) / root
    value_half = jnp.einsum("i,in,m->nm", coef, v, G)
    neuron_half = jnp.outer(model.a, model.W @ WVs)
    return {
        KINDS[0]: neuron_half + neuron_half.T,
        KINDS[1]: jnp.outer(model.a, WVs @ model.W_V) + jnp.outer(model.W @ u, s),
        KINDS[2]: score,
        KINDS[3]: value_half + value_half.T,
        KINDS[4]: key_half + key_half.T,
        KINDS[5]: query_half + query_half.T,
    }


def jvp_rates(model: Transformer, data: Dataset) -> dict[str, jnp.ndarray]:
    """The same rates by forward-mode differentiation of `variables` along -grad L."""
    trainable, frozen = partition(model)
    velocity = jax.tree.map(jnp.negative, jax.grad(trainable_loss)(trainable, frozen, data))
    _, tangent = jax.jvp(lambda params: variables(combine(params, frozen)), (trainable,), (velocity,))
    return tangent


@eqx.filter_jit
def _compared(model: Transformer, data: Dataset) -> tuple[dict[str, jnp.ndarray], jnp.ndarray]:
    """`agreement` as one compiled program. Op by op (before), each small operation of the closed forms,
    the gradient and the JVP was a program of its own, compiled or fetched from the cache in every new
    process: a warm `coocflow verify` of a tiny run took 6.8 s, 5.6 s compiled (median of 5 paired runs;
    Appendix C alone at three states, first call in a process: 6.3-8.0 s against 1.3 s), its numbers
    the same to rounding (relative errors of 1e-16 either way, every verdict unchanged)."""
    closed, exact = closed_form_rates(model, data), jvp_rates(model, data)
    relative = {k: jnp.max(jnp.abs(closed[k] - exact[k])) / jnp.maximum(jnp.max(jnp.abs(exact[k])), 1e-300)
                for k in KINDS}
    p = attention(model, data.tokens)
    return relative, jnp.max(jnp.abs(p - 1.0 / data.tokens.shape[1]))


def agreement(model: Transformer, data: Dataset) -> tuple[dict[str, float], float]:
    """Max |closed form - JVP| / max |JVP| for each kind, and how far attention is from uniform (max
    over samples and queries of |p - 1/L|)."""
    relative, spread = _compared(model, data)
    return {k: float(relative[k]) for k in KINDS}, float(spread)


def saved_state_agreement(run) -> list[dict]:
    """Agreement at the run's own saved states of its first seed: initial, at T1 (when the run
    kept it) and final. A Gram-space run has no weights to evaluate the neuron-level variables
    at, so it returns no states."""
    moments = [("initial", run.state_init), ("T1", getattr(run, "state_t1", None)), ("final", run.state_final)]
    reports = []
    for label, arrays in moments:
        if arrays is None:
            continue
        first = SavedState.of(seed_arrays(arrays)[0])
        if not isinstance(first.params, Transformer) or not all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(first.params)):
            continue
        model = jax.tree.map(jnp.asarray, first.params)
        relative, spread = agreement(model, first.dataset)
        reports.append({"state": label, "t": first.t, "max_abs_p_minus_uniform": spread, "relative_error": relative})
    return reports


def random_state_agreement(config, states: int = 3, attention_scale: float = 8.0) -> list[dict]:
    """Agreement at random states of `config`: its own initialization, then W_Q and W_K scaled by
    `attention_scale` so that attention is far from uniform."""
    from coocflow.systems.eq1 import build_model, build_problem  # lazy: defers JAX, 1-3.6 s

    reports = []
    for k in range(states):
        model, problem = build_model(config, seed=1000 + k), build_problem(config, seed=1000 + k)
        scale = 1.0 if k == 0 else attention_scale
        model = Transformer(W_Q=model.W_Q * scale, W_K=model.W_K * scale, W_V=model.W_V, W=model.W, a=model.a)
        relative, spread = agreement(model, problem.train)
        reports.append({"attention_scale": scale, "max_abs_p_minus_uniform": spread, "relative_error": relative})
    return reports


def max_error(reports: list[dict]) -> float:
    return float(np.max([max(r["relative_error"].values()) for r in reports]))
