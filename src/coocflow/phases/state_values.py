"""What the checks compute from one seed's saved state (either space, run-folder keys): per-sample
margins and loss weights, the drive P(mu) of each token, token counts, and the flow's velocity
and rates there. NumPy, except the velocity, one jitted JAX function per shape built on first use
(importing the checks needs no JAX)."""

from __future__ import annotations

import collections
import functools
import hashlib

import equinox as eqx
import jax
import numpy as np

from coocflow.model.state import attention_of as model_attention
from coocflow.model.state import join, mlp_of, split, velocity
from coocflow.model.stored import attention_of, grams_of, has_neurons, neuron_grams
from coocflow.phases.premises import logits_at
from coocflow.runner import state_from_arrays

RESOLUTION_ULPS = 100
"""A change smaller than this many float64 ulps of the quantity itself is rounding, not a
measurement (the attention weights, about 1/L, stop resolving their Phase-1 change near
m = 10^4)."""

__all__ = ["RESOLUTION_ULPS", "resolved_changes", "grams_of", "has_neurons", "neuron_grams", "vocabulary_size", "neuron_count", "sample_margins", "log_loss_weights", "loss_weights",
           "token_P", "token_counts", "pair_counts", "state_time", "velocity_at", "rates_at"]


def resolved_changes(before, after) -> np.ndarray:
    """|after - before| entrywise, with 0 where the change is within `RESOLUTION_ULPS` ulps of the
    entry itself (rounding) or not finite."""
    before, after = np.asarray(before, float), np.asarray(after, float)
    change = np.abs(after - before)
    floor = RESOLUTION_ULPS * np.finfo(np.float64).eps * np.maximum(np.abs(before), np.abs(after))
    return np.where((change > floor) & np.isfinite(change), change, 0.0)


def vocabulary_size(state: dict) -> int:
    """d, the number of tokens."""
    return int(np.shape(state["A"] if "A" in state else state["W_Q"])[-1])


def neuron_count(state: dict) -> int:
    """m1, the number of MLP neurons."""
    return int(np.ravel(state["m1"])[0]) if "m1" in state else int(np.shape(state["a"])[0])


def sample_margins(state: dict) -> np.ndarray:
    """y_i F_i per training sample."""
    return np.asarray(state["labels"]) * logits_at(state)


def log_loss_weights(state: dict) -> np.ndarray:
    """log g_i, g_i = 1/(1 + exp(y_i F_i)), exact for large margins."""
    return -np.logaddexp(0.0, sample_margins(state))


def loss_weights(state: dict) -> np.ndarray:
    """g_i = 1/(1 + exp(y_i F_i)), minus the derivative of the logistic loss."""
    return np.exp(log_loss_weights(state))


def token_P(state: dict) -> np.ndarray:
    """P(mu) = (1/n) sum_{i: mu in X_i} g_i y_i sum_l p^(i)_{q<-l, k<-mu} for every token mu, (d,):
    the attention all queries of sample i give the key positions holding mu, weighted by g_i y_i."""
    tokens, labels = np.asarray(state["tokens"]), np.asarray(state["labels"])
    key_weight = attention_of(state, tokens).sum(axis=2)  # (n, L): sum over queries l of p[i, h, l]
    per_position = (loss_weights(state) * labels)[:, None] * key_weight
    return np.bincount(tokens.ravel(), weights=per_position.ravel(), minlength=vocabulary_size(state)) / len(tokens)


def token_counts(state: dict, d: int) -> np.ndarray:
    """c_a: the number of training samples that hold token a, shape (d,)."""
    tokens = np.asarray(state["tokens"])
    holds = np.zeros((tokens.shape[0], d), dtype=bool)
    holds[np.arange(tokens.shape[0])[:, None], tokens] = True
    return holds.sum(axis=0)


def pair_counts(counts: np.ndarray) -> np.ndarray:
    """c_a + c_b for every token pair, (d, d)."""
    return counts[:, None] + counts[None, :]


def state_time(state: dict, fallback: float | None) -> float:
    """The time a saved state was taken at (the T1 state carries `t`)."""
    return float(np.ravel(state["t"])[0]) if "t" in state else float(fallback)


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


def _fingerprint(state: dict) -> tuple:
    """The state's content (every array's dtype, shape and bytes hashed): a key that an in-place
    edit of an array changes, unlike the dict's identity."""
    return tuple((key, value.dtype.str, value.shape, hashlib.blake2b(value.tobytes(), digest_size=16).digest())
                 for key, value in sorted((k, np.ascontiguousarray(v)) for k, v in state.items()))


def _read_only(array) -> np.ndarray:
    """A NumPy copy no caller can change: evaluations are shared (`_evaluate`)."""
    array = np.array(array)
    array.flags.writeable = False
    return array


def _evaluate(state: dict) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray]:
    """The velocity's arrays and dV/dt, dG/dt, dp/dt at `state`, computed once per content."""
    key = _fingerprint(state)
    if key not in _evaluated:
        model, data = state_from_arrays(state)
        field, dV, dG, dp = _program()(model, data)
        names = ("A", "P", "K", "V", "G", "s") + (("N", "Z") if "N" in state else ()) if "A" in state else (
            "W_Q", "W_K", "W_V", "W")
        _evaluated[key] = ({name: _read_only(getattr(field, name)) for name in names},
                           _read_only(dV), _read_only(dG), _read_only(dp))
        while len(_evaluated) > EVALUATIONS_KEPT:
            _evaluated.popitem(last=False)
    return _evaluated[key]


def velocity_at(state: dict) -> dict[str, np.ndarray]:
    """d/dt of each moving array of a saved state (W_Q, W_K, W_V, W; or A, P, K, V, G, s, and N, Z
    when the Gram state resolves the neurons) along the flow."""
    return dict(_evaluate(state)[0])


def rates_at(state: dict) -> dict[str, np.ndarray]:
    """dV/dt (d, d), dG/dt (d,) and dp/dt (n, L, L) along the flow at a saved state: the JVP of V,
    G and the training attention along the velocity (`model.state.velocity`)."""
    _, dV, dG, dp = _evaluate(state)
    return {"dV": dV, "dG": dG, "dp": dp}
