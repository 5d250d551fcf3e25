"""What the checks compute from one seed's saved state (`verify.paper.saved.SavedState`, either space):
per-sample margins and loss weights, the drive P(mu) of each token, token counts, and the flow's
velocity and rates there (one jitted JAX function per shape, built on first use)."""

from __future__ import annotations

import collections
import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from coocflow.model.state import State, join, mlp_of, split, velocity
from coocflow.model.state import attention_of as model_attention
from coocflow.verify.paper.premises import logits_at
from coocflow.verify.paper.saved import SavedState

RESOLUTION_ULPS = 100
"""A change smaller than this many float64 ulps of the quantity itself is rounding, not a
measurement (the attention weights, about 1/L, stop resolving their Phase-1 change near
m = 10^4)."""

__all__ = ["RESOLUTION_ULPS", "resolved_changes", "sample_margins", "log_loss_weights", "loss_weights",
           "token_P", "token_counts", "pair_counts", "state_time", "velocity_at", "rates_at"]


def resolved_changes(before, after) -> np.ndarray:
    """|after - before| entrywise, with 0 where the change is within `RESOLUTION_ULPS` ulps of the
    entry itself (rounding) or not finite."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    change = np.abs(after - before)
    floor = RESOLUTION_ULPS * np.finfo(np.float64).eps * np.maximum(np.abs(before), np.abs(after))
    return np.where((change > floor) & np.isfinite(change), change, 0.0)


def sample_margins(state: SavedState) -> np.ndarray:
    """y_i F_i per training sample."""
    return state.labels * logits_at(state)


def log_loss_weights(state: SavedState) -> np.ndarray:
    """log g_i, g_i = 1/(1 + exp(y_i F_i)), exact for large margins."""
    return -np.logaddexp(0.0, sample_margins(state))


def loss_weights(state: SavedState) -> np.ndarray:
    """g_i = 1/(1 + exp(y_i F_i)), minus the derivative of the logistic loss."""
    return np.exp(log_loss_weights(state))


def token_P(state: SavedState) -> np.ndarray:
    """P(mu) = (1/n) sum_{i: mu in X_i} g_i y_i sum_l p^(i)_{q<-l, k<-mu} for every token mu, (d,):
    the attention all queries of sample i give the key positions holding mu, weighted by g_i y_i."""
    tokens = state.tokens
    key_weight = state.training_attention.sum(axis=2)  # (n, L): sum over queries l of p[i, h, l]
    per_position = (loss_weights(state) * state.labels)[:, None] * key_weight
    return np.bincount(tokens.ravel(), weights=per_position.ravel(), minlength=state.vocabulary) / len(tokens)


def token_counts(state: SavedState, d: int) -> np.ndarray:
    """c_a: the number of training samples that hold token a, shape (d,)."""
    tokens = state.tokens
    holds = np.zeros((tokens.shape[0], d), dtype=bool)
    holds[np.arange(tokens.shape[0])[:, None], tokens] = True
    return holds.sum(axis=0)


def pair_counts(counts: np.ndarray) -> np.ndarray:
    """c_a + c_b for every token pair, (d, d)."""
    return counts[:, None] + counts[None, :]


def state_time(state: SavedState, fallback: float | None) -> float:
    """The time a saved state was taken at (the T1 state carries `t`)."""
    return state.t if state.t is not None else float(fallback)


@functools.cache
def _program():
    """The velocity and the rates of V, G and the attention along it, in one jitted function (all
    weights train): one trace per shape serves both `velocity_at` and `rates_at`."""
    @eqx.filter_jit
    def field_and_rates(model, data):
        moving, fixed = split(model)
        field = velocity(moving, fixed, data)

        def observed(params):
            state = join(params, fixed)
            return state.value_gram(), mlp_of(state), model_attention(state, data.tokens)

        _, (dV, dG, dp) = jax.jvp(observed, (moving,), (field,))
        return field, dV, dG, dp

    return field_and_rates


EVALUATIONS_KEPT = 8
"""Evaluated states kept (`_evaluate`): the checks of one seed ask for the velocity and rates at
the same few saved states (start, T1, end) about 14 times."""
_evaluated: collections.OrderedDict = collections.OrderedDict()


def _read_only(array) -> np.ndarray:
    """A NumPy copy no caller can change: evaluations are shared (`_evaluate`)."""
    array = np.array(array)
    array.flags.writeable = False
    return array


def _evaluate(state: SavedState) -> tuple[State, np.ndarray, np.ndarray, np.ndarray]:
    """The velocity (the moving part's time derivative, NumPy leaves) and dV/dt, dG/dt, dp/dt at
    `state`, computed once per saved state."""
    key = id(state)
    if key not in _evaluated or _evaluated[key][0] is not state:
        model = jax.tree.map(jnp.asarray, state.params)
        field, dV, dG, dp = _program()(model, state.dataset)
        _evaluated[key] = (state, jax.tree.map(_read_only, field), _read_only(dV), _read_only(dG), _read_only(dp))
        while len(_evaluated) > EVALUATIONS_KEPT:
            _evaluated.popitem(last=False)
    return _evaluated[key][1:]


def velocity_at(state: SavedState) -> State:
    """d/dt of the moving part of a saved state (W_Q, W_K, W_V, W; or the Grams, and N, Z when the
    Gram state resolves the neurons) along the flow, in the state's own type."""
    return _evaluate(state)[0]


def rates_at(state: SavedState) -> dict[str, np.ndarray]:
    """dV/dt (d, d), dG/dt (d,) and dp/dt (n, L, L) along the flow at a saved state: the JVP of V,
    G and the training attention along the velocity (`model.state.velocity`)."""
    _, dV, dG, dp = _evaluate(state)
    return {"dV": dV, "dG": dG, "dp": dp}
