"""The paper's premises P1..P10 (Condition 1, Assumption 2.3, Definition 2.1, the small output at
initialization of Lemma D.8, gradient flow and the initialization events of Appendix D), declared as
public `verify.Premise`s (`PREMISES`) and measured on one run folder by the judge every declared
theorem uses (`verify.judge.premise_verdict`).

Each premise is measured on the run's own configuration (`holds`), or on its data and initial state
per seed (`on_seed`, reading a seed's view: its `states["init"]`, `scales` and `config`, as
`SeedData` has them); a premise on the seeds is met only if every seed meets it, and its value shows
the worst seed.
"Much greater than 1" is made concrete as >= `MUCH_GREATER`. Init scales follow the manifest's
scheme: theory s0 = c0/sqrt(Lm), s1 = c1/sqrt(m1); Kaiming uniform has the same variances at
c0 = c0_cfg sqrt(Lm/(3d)), c1 = c1_cfg sqrt(m1/(3m)) (run.eq1.INIT_NOTES).
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from coocflow.config import Config, config_from_dict, random_slots
from coocflow.verify.declare import Premise, PremiseOutcome
from coocflow.verify.judge import PremiseVerdict, premise_verdict
from coocflow.verify.paper.saved import SavedState, seed_states
from coocflow.verify.paper.scales import Scales, eps_m, scales_of
from coocflow.storage.run_folder import LoadedRun

MU1, MU2, MU3, FIRST_RANDOM = 0, 1, 2, 3
MUCH_GREATER = 10.0
"""Threshold for ">> 1" in P1 and P3."""
MAX_RHO = 1 / 8
"""P1: largest m1/m that keeps the sqrt(rho) per-neuron errors (E14, F1-inv (d), F14) small."""
DELTA = 0.05
"""The failure probability delta of the theorems' "with probability 1 - delta" (P1, P3, P7, P9)."""
FMAX0_LIMIT = 0.01
"""P7 as the paper states it (L. D.8): Fmax0 <= 0.01. It does not follow from Condition 1 (it needs
c0 c1 <~ 1e-3, docs/claims.md typo 9), so `P7r`, the lemma's own bound, is evaluated beside it and
every verdict is also given under P7r (`RELAXED`)."""
UNSTATED = {"P10": "c0 c1 sqrt(m1) > 4 (L. E.7's last step, 4R/L < s0 s1 sqrt(m/L), with R = 1/m1)"}
"""Conditions derived here that the paper does not state: never premises (a claim failing where one
is not met still fails), but a claim that fails only where one is not met and holds where it is gets
the outcome 'holds under an unstated condition' (`verify.paper.claims`)."""
GD_STEP_LIMIT = 0.1
"""P8: eta W0 / 6 <= this counts as "<< 1" for gradient descent. G moves at
dG/dt = -(s + m1 V) dL/dG (Appendix C), so its stiffness is u2 + m1 v0 = W0 at t = 0 (dG(mu_1)/dt(0)
~ W0/6, Lemma 4.1), not U0 alone."""


def _fmt(x: float) -> str:
    return f"{x:.3g}"


def _seed_ids(run: LoadedRun, count: int) -> list[int]:
    seeds = list(run.config.get("seeds") or []) or [run.config.get("seed", 0)]
    return seeds if len(seeds) == count else list(range(count))


def logits_at(state: SavedState) -> np.ndarray:
    """F_i = sum_l sum_h G(x_h) p_l[h] (eq. (1)) on the training tokens of one seed's state."""
    return np.einsum("nh,nhl->n", state.mlp[state.tokens], state.training_attention)


def _p1_widths(sc: Scales, delta: float) -> PremiseOutcome:
    """P1, Cond. 1 and the width conditions of the proofs (E4, E19, F3)."""
    ratios = {
        "m/(m1 log^2(m1/delta))": sc.m / (sc.m1 * math.log(sc.m1 / delta) ** 2),
        "m/L^2": sc.m / sc.L**2,
        "m/(L log(2nL/delta))": sc.m / (sc.L * math.log(2 * sc.n * sc.L / delta)),
    }
    rho = sc.m1 / sc.m
    init_ratio = sc.L * sc.s0**2 / sc.s1**2
    fewest_neurons = min_neurons(delta)
    failures = [f"{k} = {_fmt(v)} < {MUCH_GREATER:g}" for k, v in ratios.items() if v < MUCH_GREATER]
    if sc.m1 < fewest_neurons:
        failures.append(f"m1 = {sc.m1} < 8 log(4/delta) = {fewest_neurons:.1f} (L. D.6 vacuous)")
    if rho > MAX_RHO:
        failures.append(f"m1/m = {_fmt(rho)} > 1/8")
    if init_ratio > 1 / MUCH_GREATER:
        failures.append(f"L s0^2/s1^2 = {_fmt(init_ratio)} > {1 / MUCH_GREATER:g}")
    value = (", ".join(f"{k} = {_fmt(v)}" for k, v in ratios.items())
             + f", m1 = {sc.m1}, m1/m = {_fmt(rho)}, L s0^2/s1^2 = {_fmt(init_ratio)}")
    return PremiseOutcome(not failures, value, tuple(failures))


def min_neurons(delta: float) -> float:
    """Condition 1's m1 >= Omega~(1) made concrete: L. D.6 says #{a_j = +1} = m1 (1/2 +- sqrt(2 log(4/delta)
    / m1)), which says nothing unless the deviation is below 1/2, i.e. m1 > 8 log(4/delta) (35 at delta = 0.05)."""
    return 8 * math.log(4 / delta)


def neurons_meeting_p1(m: int, delta: float, cap: int) -> int:
    """The most neurons m1 <= cap, a power of two, with m >= 10 m1 log^2(m1/delta) (P1's first ratio):
    a width sweep's m1 grows with m while P1 holds, up to `cap` (1 when none does)."""
    m1 = 1
    while 2 * m1 <= cap and m >= MUCH_GREATER * 2 * m1 * math.log(2 * m1 / delta) ** 2 and 2 * m1 <= MAX_RHO * m:
        m1 *= 2
    return m1


def _measured_c(state: SavedState, sc: Scales) -> tuple[float, float]:
    """c0, c1 read off the initial state: s0^2 = mean square entry of W_Q, W_K, W_V (the mean
    diagonal of their Grams over m); s1^2 = ||W^T a||^2 / (m m1)."""
    grams = state.grams
    s0_sq = np.mean([np.diag(grams[k]) for k in ("Q", "K", "V")]) / sc.m
    s1_sq = grams["s"] / (sc.m * sc.m1)
    return math.sqrt(s0_sq * sc.L * sc.m), math.sqrt(s1_sq * sc.m1)


def _p2_init(scheme: str, state: SavedState, sc: Scales) -> PremiseOutcome:
    """P2, Cond. 1: Gaussian init with s0 = c0/sqrt(Lm), s1 = c1/sqrt(m1), on one seed's initial state (its
    badness: how far its measured c0, c1 stray from the configured ones, relatively)."""
    c0, c1 = _measured_c(state, sc)
    value = f"{scheme}; c0 = {_fmt(sc.c0)}, c1 = {_fmt(sc.c1)} (measured c0 = {_fmt(c0)}, c1 = {_fmt(c1)})"
    readout = state.params.readout()
    failures = [] if scheme == "theory" else [f"{scheme} init is not Gaussian"]
    if readout is not None and not np.all(np.abs(np.asarray(readout)) == 1):
        failures.append("a_j not all +-1")
    farthest = max(abs(c0 / sc.c0 - 1), abs(c1 / sc.c1 - 1))  # the seed whose measured scales stray most
    return PremiseOutcome(not failures, value, tuple(failures), farthest)


def _p3_data_size(sc: Scales) -> PremiseOutcome:
    """P3, Cond. 1: n >= Omega~(L^2), L >= Omega~(1) (L >= 3 for Def. 2.1)."""
    ratio = sc.n / sc.L**2
    failures = ([f"n/L^2 = {_fmt(ratio)} < {MUCH_GREATER:g}"] if ratio < MUCH_GREATER else []) + \
               ([f"L = {sc.L} < 3"] if sc.L < 3 else [])
    return PremiseOutcome(not failures, f"n/L^2 = {_fmt(ratio)}, L = {sc.L}", tuple(failures))


def _p4_groups(state: SavedState, sc: Scales) -> PremiseOutcome:
    """P4, Assump. 2.3(i): group sizes n/2, n/6, n/6, n/6."""
    counts = np.bincount(state.groups.ravel(), minlength=4)[:4]
    n = len(state.groups)
    expected = np.array([n / 2, n / 6, n / 6, n / 6])
    off = float(np.abs(counts - expected).sum())
    value = "sizes " + "/".join(str(int(c)) for c in counts)
    return PremiseOutcome(off == 0, value, () if off == 0 else (f"{value} != {n / 2:g}/{n / 6:g}/{n / 6:g}/{n / 6:g}",), off)


def _p5_distinct(state: SavedState, sc: Scales) -> PremiseOutcome:
    """P5, Assump. 2.3(ii): every random-token occurrence is a different token (c_mu = 1)."""
    tokens = state.tokens
    random_tokens = tokens[tokens >= FIRST_RANDOM]
    occurrences, distinct = random_tokens.size, np.unique(random_tokens).size
    largest_count = int(np.bincount(random_tokens).max()) if occurrences else 0
    value = (f"{distinct} distinct of {occurrences} random slots (n(L-7/3) = {random_slots(sc.n, sc.L)}, "
             f"d-3 = {sc.d - 3}), max c_mu = {largest_count}")
    met = distinct == occurrences
    return PremiseOutcome(met, value, () if met else (f"{distinct} distinct of {occurrences} slots",),
                        float(occurrences - distinct))


def _p6_one_hot(state: SavedState, sc: Scales) -> PremiseOutcome:
    """P6, Def. 2.1: mu3 in every sample; mu1, mu2, mu3 at most once; y = +1 iff mu1 and mu2 co-occur."""
    tokens = state.tokens
    counts = np.stack([(tokens == mu).sum(axis=1) for mu in (MU1, MU2, MU3)], axis=1)
    both = (counts[:, 0] > 0) & (counts[:, 1] > 0)
    labels = state.labels
    bad = (counts[:, 2] != 1) | (counts[:, :2] > 1).any(axis=1) | ((labels > 0) != both)
    value = (f"{int((counts[:, 2] == 1).sum())}/{len(tokens)} samples hold mu3 once; "
             f"max count mu1, mu2, mu3 = {', '.join(str(int(c)) for c in counts.max(axis=0))}; "
             f"labels off = {int(((labels > 0) != both).sum())}")
    return PremiseOutcome(not bad.any(), value, (f"{int(bad.sum())} samples break Def. 2.1",) if bad.any() else (),
                        float(bad.sum()))


def _small_output(state: SavedState, sc: Scales, delta: float) -> tuple[float, float, float]:
    """Fmax0 = max_i |F_i(0)|, L. D.8's bound 2 c0 c1 sqrt(2 log(2Ln/delta)) for Condition 1's
    scales, and loss(0)."""
    F = logits_at(state)
    fmax0 = float(np.max(np.abs(F)))
    loss0 = float(np.mean(np.logaddexp(0.0, -state.labels * F)))
    return fmax0, 2 * sc.c0 * sc.c1 * math.sqrt(2 * math.log(2 * sc.L * sc.n / delta)), loss0


def _p7_small_output(state: SavedState, sc: Scales, delta: float) -> PremiseOutcome:
    """P7 as the paper states it (L. D.8): Fmax0 <= 0.01 (`FMAX0_LIMIT`); the lemma's own bound is
    P7r's, reported beside it."""
    fmax0, bound, loss0 = _small_output(state, sc, delta)
    met = fmax0 <= FMAX0_LIMIT
    value = (f"Fmax0 = {_fmt(fmax0)} ({'<=' if met else '>'} {FMAX0_LIMIT:g}; L. D.8's own bound {_fmt(bound)}, P7r); "
             f"loss(0) = {loss0:.4f} vs log 2 = {math.log(2):.4f}")
    return PremiseOutcome(met, value, () if met else (f"Fmax0 = {_fmt(fmax0)} > {FMAX0_LIMIT:g}",), fmax0)


def _p7r_small_output(state: SavedState, sc: Scales, delta: float) -> PremiseOutcome:
    """P7r, P7 relaxed to what Condition 1 implies: Fmax0 <= L. D.8's bound 2 c0 c1 sqrt(2 log(2Ln/delta))
    (the lemma's last step, that this is <= 0.01, does not follow from Condition 1). Reported, with the
    verdicts under it beside the stated P7's; not a premise."""
    fmax0, bound, _ = _small_output(state, sc, delta)
    met = fmax0 <= bound
    return PremiseOutcome(met, f"Fmax0 = {_fmt(fmax0)} vs L. D.8's bound {_fmt(bound)}",
                          () if met else (f"Fmax0 = {_fmt(fmax0)} > L. D.8's bound {_fmt(bound)}",), fmax0)


def _p8_flow(method: str, lr: float, sc: Scales) -> PremiseOutcome:
    """P8: gradient flow; GD counts when eta W0/6 << 1 (derived: `GD_STEP_LIMIT`)."""
    if method == "flow":
        return PremiseOutcome(True, "flow")
    step = lr * sc.W0 / 6
    value = f"{method}, eta W0/6 = {_fmt(step)} (eta U0/6 = {_fmt(lr * sc.U0 / 6)}), W0 = {_fmt(sc.W0)}"
    if method != "gd":
        return PremiseOutcome(False, value, (f"{method} is not a discretization of the flow",))
    met = step <= GD_STEP_LIMIT
    return PremiseOutcome(met, value, () if met else (f"eta W0/6 = {_fmt(step)} > {GD_STEP_LIMIT:g}",))


def init_events(state: SavedState, sc: Scales, delta: float) -> dict[str, float | None]:
    """Measured/allowed for the init events of L. D.1-D.7 at t = 0 (<= 1 holds; None: needs the
    neurons, which a Gram state has only with model.neurons). Uses v0 = s0^2 m and eps_m of L. D.1; the Gaussian bounds of
    D4 (|G(mu)| and L. D.7's |w_j^T W_V X_i p_l|) take the union-bound constant sqrt(2 log(2N/delta))
    over N events, which L. D.7's sqrt(log(m1 nL/delta)) omits."""
    d, n, L, m, m1, v0 = sc.d, sc.n, sc.L, sc.m, sc.m1, sc.v0
    tokens = state.tokens
    grams = {k: state.grams[k] for k in ("K", "Q", "V")}
    u_norm2 = state.grams["s"]
    A, G = state.scores, state.mlp
    eps_d = eps_m(2 * d / delta, m)
    off = ~np.eye(d, dtype=bool)
    events: dict[str, float | None] = {
        "D1 diag K,Q,V": max(np.max(np.abs(np.diag(X) - v0)) for X in grams.values()) / (v0 * eps_d),
        "D1 A, off-diag K,Q,V": max(np.max(np.abs(A)), *(np.max(np.abs(X[off])) for X in grams.values()))
        / (v0 * eps_d),
    }
    p = state.training_attention
    score_bound = v0 * eps_d / math.sqrt(m)
    events["D2 |p - 1/L|"] = float(np.max(np.abs(p - 1 / L))) / (math.expm1(2 * score_bound) / L)
    events["D4 |G(mu)|"] = float(np.max(np.abs(G))) / (sc.s0 * math.sqrt(u_norm2) * math.sqrt(2 * math.log(2 * d / delta)))
    V_pairs = grams["V"][tokens[:, :, None], tokens[:, None, :]]  # (n, h, h')
    value_norms = np.einsum("nhl,nhk,nkl->nl", p, V_pairs, p)  # ||W_V X_i p_l||^2
    events["D4 ||W_V X p||^2"] = float(np.max(np.abs(value_norms - v0 / L))) / ((v0 / L) * eps_m(2 * n * L / delta, m))
    neurons = state.neurons
    if neurons is not None:
        inner, values, a = neurons
        neuron_off = ~np.eye(m1, dtype=bool)
        events["D1 <w_j1,w_j2>"] = (float(np.max(np.abs(inner[neuron_off]))) / (sc.s1**2 * m * eps_m(2 * m1**2 / delta, m))
                                    if m1 > 1 else 0.0)
        events["D1 ||w_j||^2"] = float(np.max(np.abs(np.diag(inner) - sc.s1**2 * m))) / (sc.s1**2 * m * eps_m(2 * m1 / delta, m))
        events["D1 w_j^T W_V mu"] = float(np.max(np.abs(values))) / (sc.s0 * sc.s1 * m * eps_m(2 * m1 * d / delta, m))
        wv_tokens = values[:, tokens]  # (m1, n, h)
        events["D4 w_j^T W_V X p"] = float(np.max(np.abs(np.einsum("jnh,nhl->jnl", wv_tokens, p)))) / (
            sc.s0 * sc.s1 * math.sqrt((m / L) * 2 * math.log(2 * m1 * n * L / delta)))
        events["D6 #{a_j=+1}"] = abs(float(np.mean(a > 0)) - 0.5) / math.sqrt(2 * math.log(4 / delta) / m1)
    else:
        for name in ("D1 <w_j1,w_j2>", "D1 ||w_j||^2", "D1 w_j^T W_V mu", "D4 w_j^T W_V X p", "D6 #{a_j=+1}"):
            events[name] = None
    return events


def _p9_init_events(state: SavedState, sc: Scales, delta: float) -> PremiseOutcome:
    """P9: the init events D1, D2, D4 (and L. D.6) at t = 0; each ratio measured/allowed <= 1."""
    events = init_events(state, sc, delta)
    measured = {k: v for k, v in events.items() if v is not None}
    unavailable = [k for k, v in events.items() if v is None]
    failures = [f"{k} ratio {_fmt(v)} > 1" for k, v in measured.items() if v > 1]
    met = False if failures else (None if unavailable else True)
    value = ", ".join(f"{k} {_fmt(v)}" for k, v in measured.items())
    if met is None:
        failures = [f"needs weights a Gram-space run lacks: {', '.join(unavailable)}"]
    return PremiseOutcome(met, value, tuple(failures), max(measured.values()))


@dataclass(frozen=True)
class InitialView:
    """What eq. (1)'s premises read of one seed: its saved states (the premises read "init"), the
    configuration's scales and its config (the dict form). `SeedData`, the view the checks read, has
    the same three."""

    states: dict[str, SavedState]
    scales: Scales
    config: dict[str, Any]


def _on_seed(measure):
    """A premise on one seed's view from `measure(initial_state, scales, config)`."""
    return lambda view: measure(view.states["init"], view.scales, view.config)


def _on_config(measure):
    """A premise on the run's config from `measure(scales, config)` (`config` in its dict form)."""
    def holds(system: Any, config: Config) -> PremiseOutcome:
        tree = config.to_dict()
        return measure(scales_of(tree), tree)
    return holds


def _p9_threshold(sc: Scales) -> str:
    eps_d = eps_m(2 * sc.d / DELTA, sc.m)
    return (f"every measured/allowed ratio <= 1 (D1: v0 eps_m(2d/delta) = {_fmt(sc.v0 * eps_d)}; "
            f"D2: (exp(2 v0 eps_m(2d/delta)/sqrt m) - 1)/L)")


def _with_threshold(outcome: PremiseOutcome, threshold: str) -> PremiseOutcome:
    return dataclasses.replace(outcome, threshold=threshold)


PREMISES: tuple[Premise, ...] = (
    Premise("P1", "widths (Cond. 1): m >> m1 log^2(m1/delta), L^2, L log(2nL/delta); m1 >= Omega~(1) "
            "(L. D.6 non-vacuous); m1/m <= 1/8; s0^2/s1^2 = o(1/L) (F3)",
            holds=_on_config(lambda sc, config: _p1_widths(sc, DELTA)),
            threshold=f"each ratio >= {MUCH_GREATER:g}; m1 >= 8 log(4/delta); m1/m <= 1/8; "
                      f"L s0^2/s1^2 <= {1 / MUCH_GREATER:g}"),
    Premise("P2", "init (Cond. 1): Gaussian, s0 = c0/sqrt(Lm), s1 = c1/sqrt(m1), a_j = +-1 fixed",
            on_seed=_on_seed(lambda state, sc, config: _p2_init(config["init"]["scheme"], state, sc)),
            threshold="init.scheme = theory (Gaussian), a_j = +-1"),
    Premise("P3", "data size (Cond. 1): n >> L^2, L >= 3", holds=_on_config(lambda sc, config: _p3_data_size(sc)),
            threshold=f"n/L^2 >= {MUCH_GREATER:g}; L >= 3"),
    Premise("P4", "group sizes n/2, n/6, n/6, n/6 (Assump. 2.3(i))",
            on_seed=_on_seed(lambda state, sc, config: _with_threshold(
                _p4_groups(state, sc), f"exactly {sc.n / 2:g}/{sc.n / 6:g}/{sc.n / 6:g}/{sc.n / 6:g}"))),
    Premise("P5", "all random-token occurrences distinct (Assump. 2.3(ii))",
            on_seed=_on_seed(lambda state, sc, config: _p5_distinct(state, sc)),
            threshold="distinct random tokens = random-token occurrences"),
    Premise("P6", "one-hot samples: mu3 in every sample, mu1..mu3 at most once (Def. 2.1)",
            on_seed=_on_seed(lambda state, sc, config: _p6_one_hot(state, sc)),
            threshold="every sample: mu3 once, mu1, mu2 at most once, y = +1 iff both"),
    Premise("P7", "small initial output Fmax0 <= 0.01 (L. D.8 as stated), g(0) ~ 1/2 (E4)",
            on_seed=_on_seed(lambda state, sc, config: _p7_small_output(state, sc, DELTA)),
            threshold=f"Fmax0 <= {FMAX0_LIMIT:g}"),
    Premise("P7r", "P7 relaxed (reported, not a premise): Fmax0 within L. D.8's own bound",
            on_seed=_on_seed(lambda state, sc, config: _p7r_small_output(state, sc, DELTA)),
            threshold="Fmax0 <= 2 c0 c1 sqrt(2 log(2Ln/delta))", kind="relaxed", relaxes="P7"),
    Premise("P8", "gradient flow (GD only with eta W0/6 << 1)",
            holds=_on_config(lambda sc, config: _p8_flow(config["train"]["method"], config["optimizer"]["lr"], sc)),
            threshold=f"train.method = flow, or gd with eta W0/6 <= {GD_STEP_LIMIT:g}"),
    Premise("P9", "init events D1, D2, D4, D6 hold at t = 0 (L. D.1-D.7)",
            on_seed=_on_seed(lambda state, sc, config: _with_threshold(_p9_init_events(state, sc, DELTA),
                                                                       _p9_threshold(sc))),
            kind="reported"),
    Premise("P10", "unstated condition (not a premise): L. E.7's last step needs c0 c1 sqrt(m1) > 4",
            holds=_on_config(lambda sc, config: _p10_lemma_e7_neurons(sc)), threshold="c0 c1 sqrt(m1) > 4",
            kind="unstated"),
)
"""P1..P10 of docs/claims.md section 1, as the public declarations every theorem's premises are: P1..P8
what every theorem and lemma of the paper assumes (`kind` "assumed"), P7r P7 relaxed to L. D.8's own
bound, P9 the initialization events (they hold with probability 1 - delta: reported), P10 a condition
the paper does not state (`UNSTATED`)."""
RELAXED = {p.relaxes: p.id for p in PREMISES if p.kind == "relaxed"}
"""Premises whose relaxed form is reported beside them: verdicts are given under each (the stated
one decides; the relaxed one is shown beside it)."""
ASSUMED = tuple(p.id for p in PREMISES if p.kind == "assumed")
"""What every theorem and lemma of the paper assumes (P1..P8): a run meets the theorems' premises when
it meets each of these."""


def evaluate_premises(run: LoadedRun) -> list[PremiseVerdict]:
    """P1..P10 (`PREMISES`) on `run`'s configuration and its seeds' initial states."""
    states = seed_states(run.state_init)
    seeds = _seed_ids(run, len(states))
    scales = scales_of(run.config)
    views = [InitialView({"init": state}, scales, run.config) for state in states]
    config = config_from_dict(run.config)
    return [premise_verdict(premise, None, config, views, seeds) for premise in PREMISES]


E7_NEURON_FACTOR = 4.0
"""L. E.7's last step, 4R/L < s0 s1 sqrt(m/L) with R = Theta(1/m1), holds when c0 c1 sqrt(m1) > 4."""


def _p10_lemma_e7_neurons(sc: Scales) -> PremiseOutcome:
    """P10, a condition the paper does not state (`UNSTATED`): the neuron count Lemma E.7's last
    inequality needs, c0 c1 sqrt(m1) > 4, i.e. m1 > 16/(c0 c1)^2. Reported, never a premise: the claims
    whose proofs take that step get 'holds under an unstated condition' where it explains a failure."""
    product = sc.c0 * sc.c1 * math.sqrt(sc.m1)
    met = product > E7_NEURON_FACTOR
    need = 16 / (sc.c0 * sc.c1) ** 2
    return PremiseOutcome(met, f"c0 c1 sqrt(m1) = {_fmt(product)} (m1 = {sc.m1}; needs m1 > {_fmt(need)})",
                          () if met else (f"m1 = {sc.m1} <= 16/(c0 c1)^2 = {_fmt(need)}",))


def _verdict_word(met: bool | None) -> str:
    return {True: "met", False: "not met", None: "n/a"}[met]


def premises_markdown(premises: list[Premise]) -> str:
    """A Markdown table: id, premise, measured, needs, verdict."""
    rows = ["| id | premise | measured | needs | met |", "|---|---|---|---|---|"]
    for p in premises:
        verdict = _verdict_word(p.met) + (f" ({p.note})" if p.note and p.met is not True else "")
        cells = [p.id, p.statement, p.value, p.threshold, verdict]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def premises_summary(premises: list[Premise]) -> str:
    """One line: how many premises are met, and why the others are not."""
    met = sum(p.met is True for p in premises)
    line = f"{met} of {len(premises)} premises met"
    failed = [f"{p.id} ({p.note})" for p in premises if p.met is False]
    unknown = [f"{p.id} ({p.note})" for p in premises if p.met is None]
    if failed:
        line += "; not met: " + ", ".join(failed)
    if unknown:
        line += "; n/a: " + ", ".join(unknown)
    return line
