"""Every quantity coocflow records, as a small named pure function of (model, problem).

The same functions feed the training loop's observation, the ODE solver's saving, the
verification checks and the figures: there are no probes anywhere else. Each returns a scalar;
`observe` evaluates all of them (one jit-friendly dict) and the metrics table has one column per
name, in registry order. Group sums S_k and the balancing ratios follow Lemmas 4.4-4.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp

from coocflow.data import COMMON, FIRST_RANDOM, MU1, MU2, Dataset
from coocflow.model.state import (
    State,
    attention_of,
    dtype_of,
    has_neurons,
    join,
    key_gram_entry,
    logits_of,
    m1_of,
    mlp_of,
    neuron_gram_of,
    neuron_values_at,
    query_gram_entry,
    sample_losses_of,
    score_entry,
    scores_of,
    split,
    u_norm2_of,
    value_gram_entry,
    velocity,
)

Transformer = State
"""Observables take either state (weights or Grams, coocflow.model.state)."""


class Problem(eqx.Module):
    """What the observables look at besides the weights: the training and test sets, and which
    parameters the run trains (`train.trainable`), so the rates follow the flow that is run."""

    train: Dataset
    test: Dataset
    trainable: str = eqx.field(static=True, default="all")


@dataclass(frozen=True)
class Observable:
    """A named scalar function of (model, problem). Observables computed together (the rates,
    which share one gradient) name a `shared` function returning a dict; `observe` calls it once.
    `neurons` marks those that need the individual rows of W, which the Gram space has only with
    `model.neurons` (N = W W^T, Z = W W_V)."""

    name: str
    group: str
    doc: str
    fn: Callable[[Transformer, Problem], jnp.ndarray]
    shared: Callable[[Transformer, Problem], dict] | None = None
    neurons: bool = False


OBSERVABLES: dict[str, Observable] = {}


def _register(name: str, group: str, doc: str, fn: Callable, neurons: bool = False) -> None:
    OBSERVABLES[name] = Observable(name, group, doc, fn, neurons=neurons)


def names(space: str = "weights") -> list[str]:
    """The metrics columns of a run in `space` (weights: all; gram: all but the neuron ones)."""
    return [name for name, obs in OBSERVABLES.items() if space == "weights" or not obs.neurons]


def neuron_only() -> list[str]:
    """Columns that need the rows w_j of W: weight space, or the Gram space with `model.neurons`."""
    return [name for name, obs in OBSERVABLES.items() if obs.neurons]


def observe(model: Transformer, problem: Problem, only: frozenset[str] | None = None) -> dict[str, jnp.ndarray]:
    """Evaluate every registered observable (or those named in `only`); a dict of scalars keyed
    by column name."""
    shared: dict[Callable, dict] = {}
    out = {}
    for name, obs in OBSERVABLES.items():
        if only is not None and name not in only:
            continue
        if obs.neurons and not has_neurons(model):
            continue
        if obs.shared is None:
            out[name] = obs.fn(model, problem)
            continue
        if obs.shared not in shared:
            shared[obs.shared] = obs.shared(model, problem)
        out[name] = shared[obs.shared][name]
    return out


TOKENS = {1: MU1, 2: MU2, 3: COMMON}

_logits = eqx.filter_jit(logits_of)
_attention = eqx.filter_jit(attention_of)
_sample_losses = eqx.filter_jit(sample_losses_of)
"""The model's outputs, attention and per-sample losses as jitted calls: dozens of observables read
them, and inside a compiled program each call would trace the model again, where a jitted one is
traced once per argument structure and reused (XLA inlines the calls and merges the copies)."""


def margins(model: Transformer, data: Dataset) -> jnp.ndarray:
    """y_i F_i per sample."""
    return data.labels * _logits(model, data.tokens)


def loss_weights(model: Transformer, data: Dataset) -> jnp.ndarray:
    """g_i = 1 / (1 + exp(y_i F_i)), minus the derivative of the logistic loss."""
    return jax.nn.sigmoid(-margins(model, data))


def group_sums(model: Transformer, data: Dataset) -> jnp.ndarray:
    """S_1..S_4: sums of g_i over the groups I1..I4."""
    g = loss_weights(model, data)
    return jnp.stack([jnp.sum(jnp.where(data.groups == k, g, 0.0)) for k in range(4)])


def _group_mean(values: jnp.ndarray, data: Dataset, k: int) -> jnp.ndarray:
    mask = data.groups == k
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def _position(tokens: jnp.ndarray, token: int) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Position of `token` in each sample and whether it is there at all."""
    hit = tokens == token
    return jnp.argmax(hit, axis=1), jnp.any(hit, axis=1)


def mean_attention(model: Transformer, data: Dataset, query: int, key: int) -> jnp.ndarray:
    """Mean of p_{q<-query, k<-key} over the samples that hold both tokens."""
    p = _attention(model, data.tokens)
    q_pos, q_has = _position(data.tokens, query)
    k_pos, k_has = _position(data.tokens, key)
    weights = p[jnp.arange(data.n), k_pos, q_pos]
    both = q_has & k_has
    return jnp.sum(jnp.where(both, weights, 0.0)) / jnp.maximum(jnp.sum(both), 1)


def random_key_attention(model: Transformer, data: Dataset) -> jnp.ndarray:
    """Mean attention a key position holding a random token receives, averaged over the queries
    of its sample and over all such positions (1/L under uniform attention)."""
    per_key = jnp.mean(_attention(model, data.tokens), axis=2)
    is_random = data.tokens >= FIRST_RANDOM
    return jnp.sum(jnp.where(is_random, per_key, 0.0)) / jnp.maximum(jnp.sum(is_random), 1)


def random_token_mlp(model: Transformer, data: Dataset) -> jnp.ndarray:
    """Mean |G(x)| over the positions of `data` that hold a random token."""
    g = jnp.abs(mlp_of(model)[data.tokens])
    is_random = data.tokens >= FIRST_RANDOM
    return jnp.sum(jnp.where(is_random, g, 0.0)) / jnp.maximum(jnp.sum(is_random), 1)


def value_gram(model: Transformer, a: int, b: int) -> jnp.ndarray:
    """mu_a^T W_V^T W_V mu_b."""
    return value_gram_entry(model, TOKENS[a], TOKENS[b])


def _register_all() -> None:
    _register("loss", "loss", "training loss (mean logistic loss)",
              lambda model, pr: jnp.mean(_sample_losses(model, pr.train)))
    for k in range(4):
        _register(f"loss_I{k + 1}", "loss", f"mean training loss over group I{k + 1}",
                  lambda model, pr, k=k: _group_mean(_sample_losses(model, pr.train), pr.train, k))
    _register("train_acc", "accuracy", "fraction of training samples with y F > 0",
              lambda model, pr: jnp.mean((margins(model, pr.train) > 0).astype(dtype_of(model))))
    _register("min_margin", "accuracy", "smallest training margin min_i y_i F_i",
              lambda model, pr: jnp.min(margins(model, pr.train)))
    _register("min_margin_I2_I3", "accuracy", "smallest margin y_i F_i over the groups I2 and I3 (Cor. E.20)",
              lambda model, pr: jnp.min(jnp.where((pr.train.groups == 1) | (pr.train.groups == 2),
                                                  margins(model, pr.train), jnp.inf)))
    _register("mean_margin", "accuracy", "mean training margin",
              lambda model, pr: jnp.mean(margins(model, pr.train)))
    _register("test_loss", "loss", "mean logistic loss on the i.i.d. test set",
              lambda model, pr: jnp.mean(_sample_losses(model, pr.test)))
    _register("test_acc", "accuracy", "test accuracy",
              lambda model, pr: jnp.mean((margins(model, pr.test) > 0).astype(dtype_of(model))))
    for a, token in TOKENS.items():
        _register(f"G_mu{a}", "mlp", f"G(mu_{a}) = u^T W_V mu_{a}",
                  lambda model, pr, token=token: mlp_of(model)[token])
    _register("G_rand_mean", "mlp", "mean of G over the random tokens",
              lambda model, pr: jnp.mean(mlp_of(model)[FIRST_RANDOM:]))
    _register("G_rand_maxabs", "mlp", "max |G| over the random tokens",
              lambda model, pr: jnp.max(jnp.abs(mlp_of(model)[FIRST_RANDOM:])))
    for a, key in TOKENS.items():
        for b, query in TOKENS.items():
            _register(f"A_mu{a}_mu{b}", "scores", f"score A[mu_{a}, mu_{b}] = mu_{a}^T W_K^T W_Q mu_{b} (key mu_{a}, query mu_{b})",
                      lambda model, pr, key=key, query=query: score_entry(model, key, query))
    _register("A_rand_maxabs", "scores", "max |A| over entries with a random token (key or query)",
              lambda model, pr: jnp.max(jnp.abs(scores_of(model).at[:FIRST_RANDOM, :FIRST_RANDOM].set(0.0))))
    for q, k in ((1, 2), (2, 1), (1, 3), (2, 3)):
        _register(f"p_q{q}_k{k}", "attention",
                  f"mean attention the query mu_{q} gives the key mu_{k}, over training samples holding both",
                  lambda model, pr, q=q, k=k: mean_attention(model, pr.train, TOKENS[q], TOKENS[k]))
    for prefix, subset, where in (("", "train", "training"), ("test_", "test", "test")):
        _register(f"{prefix}attn_random", "attention",
                  f"mean attention a random-token key receives in the {where} samples (1/L if uniform)",
                  lambda model, pr, subset=subset: random_key_attention(model, getattr(pr, subset)))
        _register(f"{prefix}G_random_abs", "mlp", f"mean |G| at the random-token positions of the {where} samples",
                  lambda model, pr, subset=subset: random_token_mlp(model, getattr(pr, subset)))
    for a in (1, 2, 3):
        for b in range(a, 4):
            _register(f"V_mu{a}_mu{b}", "value", f"value Gram mu_{a}^T W_V^T W_V mu_{b}",
                      lambda model, pr, a=a, b=b: value_gram(model, a, b))
    _register("u_norm2", "mlp", "||u||^2 with u = W^T a (Eq. (5))",
              lambda model, pr: u_norm2_of(model))
    for k in range(4):
        _register(f"S_I{k + 1}", "balance", f"S_{k + 1}: sum of g_i over group I{k + 1}",
                  lambda model, pr, k=k: group_sums(model, pr.train)[k])
    _register("bal_S2_S3", "balance", "|S_2 - S_3| / min(S_2, S_3) (Lemma 4.4)",
              lambda model, pr: _balance(model, pr)["S2_S3"])
    _register("bal_sum_neg", "balance", "sum g / (S_2 + S_3 + S_4 - S_1) (Lemma 4.5)",
              lambda model, pr: _balance(model, pr)["sum_neg"])
    _register("bal_sum_S1_S2", "balance", "sum g / (S_1 - S_2) (Lemma 4.5)",
              lambda model, pr: _balance(model, pr)["sum_S1_S2"])
    _register("R", "balance", "R = (S_2 + S_3 + S_4 - S_1) / (S_1 - S_2) (Lemma 4.5)",
              lambda model, pr: _balance(model, pr)["R"])


RATE_OF = ("loss", "G_mu1", "G_mu2", "G_mu3", "A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2",
           "V_mu1_mu1", "V_mu2_mu2", "V_mu3_mu3", "V_mu1_mu2", "V_mu1_mu3", "V_mu2_mu3", "u_norm2")
"""Observables whose time derivative along the flow is recorded as `d_<name>_dt`."""


def rates(model: Transformer, pr: Problem) -> dict[str, jnp.ndarray]:
    """Exact time derivatives along the flow that the run trains: the JVP of each observable
    along -grad L over the trainable parameters (`pr.trainable`; with `mlp-value` attention is
    frozen, so the scores do not move).

    These are the flow's derivatives at the current weights, whatever method produced them;
    the checks of `coocflow verify` use them instead of finite differences of the saved series.
    """
    trainable, frozen = split(model, pr.trainable)
    field = velocity(trainable, frozen, pr.train, pr.trainable)

    def values(params):
        current = join(params, frozen)
        return jnp.stack([OBSERVABLES[name].fn(current, pr) for name in RATE_OF])

    _, tangent = jax.jvp(values, (trainable,), (field,))
    return {f"d_{name}_dt": tangent[i] for i, name in enumerate(RATE_OF)}


def eq5_rhs(model: Transformer, pr: Problem) -> jnp.ndarray:
    """The right-hand side of Eq. (5): (2 m1 / n) sum_i g_i y_i F_i."""
    m1, n = m1_of(model), pr.train.tokens.shape[0]
    return 2 * m1 / n * jnp.sum(loss_weights(model, pr.train) * margins(model, pr.train))


def _register_dynamics() -> None:
    """Further coordinates of the coupled system (Appendix C) and the exact rates."""
    for a in (1, 2, 3):
        for b in range(a, 4):
            _register(f"K_mu{a}_mu{b}", "dynamics", f"key Gram mu_{a}^T W_K^T W_K mu_{b}",
                      lambda model, pr, a=a, b=b: key_gram_entry(model, TOKENS[a], TOKENS[b]))
            _register(f"Q_mu{a}_mu{b}", "dynamics", f"query Gram mu_{a}^T W_Q^T W_Q mu_{b}",
                      lambda model, pr, a=a, b=b: query_gram_entry(model, TOKENS[a], TOKENS[b]))
    for a in (1, 2, 3):
        _register(f"WV_mu{a}_norm", "dynamics", f"||W W_V mu_{a}||: the neurons' values w_j^T W_V mu_{a}",
                  lambda model, pr, a=a: jnp.linalg.norm(neuron_values_at(model, TOKENS[a])), neurons=True)
    _register("W_gram_fro", "dynamics", "||W W^T||_F: the neuron inner products <w_j1, w_j2>",
              lambda model, pr: jnp.linalg.norm(neuron_gram_of(model)), neurons=True)
    for name in RATE_OF:
        column = f"d_{name}_dt"
        OBSERVABLES[column] = Observable(column, "rates", f"d({name})/dt along the trained flow, -grad L over the trainable parameters (JVP)",
                                         lambda model, pr, column=column: rates(model, pr)[column], rates)
    _register("eq5_rhs", "rates", "(2 m1 / n) sum_i g_i y_i F_i, which Eq. (5) says equals d||u||^2/dt", eq5_rhs)


def _balance(model: Transformer, pr: Problem) -> dict[str, jnp.ndarray]:
    s1, s2, s3, s4 = group_sums(model, pr.train)
    total = s1 + s2 + s3 + s4
    negative_excess = s2 + s3 + s4 - s1
    return {
        "S2_S3": jnp.abs(s2 - s3) / jnp.minimum(s2, s3),
        "sum_neg": total / negative_excess,
        "sum_S1_S2": total / (s1 - s2),
        "R": negative_excess / (s1 - s2),
    }


_register_all()
_register_dynamics()
