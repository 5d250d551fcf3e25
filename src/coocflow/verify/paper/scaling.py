"""Width scaling, the quantities and the fitting (`coocflow verify --scaling AXIS`): the paper's
orders in m as exponents with 95% confidence intervals over seeds, and every one-width check at
every width. Planning and judging the widths is `width_sweep` (eq. (1)'s theorem's `scaling` hook),
writing scaling.json/.md/.png `width_report`.

Each width is one run folder under `OUT/runs/` (an ensemble following the ODE flow; a complete
folder with the same configuration is reused, an interrupted one resumed). A base configuration
in the Gram space runs in weight space up to `WEIGHT_SPACE_MAX_WIDTH`, where the neurons w_j are
affordable, so the neuron-level quantities are measured there; above it, in the Gram space.

Per seed every `QUANTITIES` entry, a small named function of the seed's series and saved states
(`verify.paper.checks.SeedData`), is measured; the premises and the one-width checks are evaluated per
width. Each claim's rates (`verify.paper.claims`) are then fitted (`verify.exponents`) over the widths
where the premises the claim uses are met (all widths when fewer than two are): an order passes
when its predicted exponent lies in the interval and the prefactor (value x m^-predicted) varies
by at most 3x over the widths; an upper bound passes unless the interval lies wholly above it.
Predictions hold for the theory's initialization (Condition 1, c0 and c1 fixed) along every axis:
m and m1 growing together (`both`), m alone, or m1 alone at a fixed m (each rate's exponent in m and
its `m1_power`, `claims.Rate.test`); a quantity the axis does not move (`invariant_along_axis`) gets no
verdict. Under Kaiming initialization the exponents are reported without a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from coocflow.observables.ensemble import first_time
from coocflow.verify.paper.checks import EVIDENCE, SeedData
from coocflow.verify.paper.claims import CLAIMS, HOLDS_UNSTATED, judge, m1_power, paper_rate
from coocflow.verify.paper.premises import RELAXED, UNSTATED
from coocflow.verify.rate_judge import BOUND_TOLERANCE, judge_rate
from coocflow.verify.paper.state_values import resolved_changes

AXES = ("m", "m1", "both")
WEIGHT_SPACE_MAX_WIDTH = 4096
"""Widths m up to this run in weight space (neurons available) when the base runs in the Gram space."""
LATE_FRACTION = 0.1
"""The slope of 1/loss is read over t >= this fraction of the run's end (late Phase 2)."""
TARGET_SCORES = (("A_mu1_mu2", (0, 1)), ("A_mu2_mu1", (1, 0)), ("A_mu3_mu1", (2, 0)), ("A_mu3_mu2", (2, 1)))
"""The four target scores of Theorem 3.3 (column, (key, query) index into A)."""


@dataclass(frozen=True)
class Quantity:
    """A per-seed number of a width sweep: a function of one seed's `SeedData` (None: not measured)."""

    name: str
    label: str
    fn: Callable[[SeedData], float | None]


QUANTITIES: dict[str, Quantity] = {}


def quantity(name: str, label: str):
    def register(fn):
        QUANTITIES[name] = Quantity(name, label, fn)
        return fn
    return register


def _index(d: SeedData, time: float | None) -> int | None:
    return None if time is None else int(np.searchsorted(d.t, time))


def _resolved_change(before: np.ndarray, after: np.ndarray) -> float | None:
    """max |after - before| over the entries whose change is resolved (`state_values.resolved_changes`);
    None when none is: such a seed is left out of the fit rather than fitted as a fake power."""
    changes = resolved_changes(before, after)
    return float(changes.max()) if changes.size and changes.max() > 0 else None


def _grams(d: SeedData, moment: str) -> dict | None:
    state = d.states.get(moment)
    return None if state is None else state.grams


def _gram_change(d: SeedData, key: str, start: str, stop: str) -> float | None:
    a, b = _grams(d, start), _grams(d, stop)
    if a is None or b is None:
        return None
    if key == "KQ":
        changes = [_resolved_change(a[k], b[k]) for k in ("K", "Q")]
        found = [c for c in changes if c is not None]
        return max(found) if found else None
    return _resolved_change(a[key], b[key])


def _attention(d: SeedData, moment: str) -> np.ndarray | None:
    state = d.states.get(moment)
    return None if state is None else state.training_attention


def _neurons(d: SeedData, moment: str) -> dict | None:
    """W W^T and W W_V at `moment`, from weights or a Gram state that resolves the neurons."""
    state = d.states.get(moment)
    neurons = None if state is None else state.neurons
    if neurons is None:
        return None
    return {"WWt": neurons[0], "WWV": neurons[1]}


def t_star(d: SeedData) -> float | None:
    """T* of Theorem F.20: the first observed time with loss <= m^-k, k declared by the run's
    configuration (`verify.loss_exponent`, at least 2 so that Theta(poly(m)) is testable)."""
    return first_time(d.t, d.series["loss"] <= float(d.m) ** -d.loss_exponent)


# t = 0 ---------------------------------------------------------------------------------------
@quantity("score_max_at_0", "max |A(0)| over all token pairs")
def score_max_at_0(d):
    return float(np.max(np.abs(_grams(d, "init")["A"])))


@quantity("value_offdiag_at_0", "max off-diagonal |V(0)|")
def value_offdiag_at_0(d):
    V = _grams(d, "init")["V"]
    return float(np.max(np.abs(V[~np.eye(len(V), dtype=bool)])))


@quantity("value_diag_at_0", "median diagonal V(0)")
def value_diag_at_0(d):
    return float(np.median(np.diag(_grams(d, "init")["V"])))


@quantity("attention_deviation_at_0", "max |p - 1/L| at t = 0, all samples")
def attention_deviation_at_0(d):
    return float(np.max(np.abs(_attention(d, "init") - 1 / d.L)))


@quantity("G_max_at_0", "max |G(mu)| at t = 0")
def g_max_at_0(d):
    return float(np.max(np.abs(_grams(d, "init")["G"])))


@quantity("dG1_at_0", "dG(mu_1)/dt at t = 0")
def dg1_at_0(d):
    return float(d.series["d_G_mu1_dt"][0])


@quantity("score_rate_at_0", "|dA[mu1,mu2]/dt| at t = 0")
def score_rate_at_0(d):
    return float(abs(d.series["d_A_mu1_mu2_dt"][0]))


# Phase 1 -------------------------------------------------------------------------------------
@quantity("T0.5", "T0.5 (Lemma 4.3's sandwich sets in)")
def t_half(d):
    """The catch-up time; with Lemma 4.3's C declared (`verify.sandwich_c`) the start of the
    sandwich's last stretch up to T1. Each located between observations when the run located it
    with this C and this T1."""
    if d.sandwich_c <= 0:
        return d.event_time("T0.5", d.bounds["T0.5"])
    window = {"window_end": d.t1_declared, "window_event": None} if d.t1_declared is not None else {
        "window_end": None, "window_event": "all_correct"}
    return d.event_time("T0.5_sandwich", d.bounds["T0.5"], c=float(d.sandwich_c), **window)


@quantity("T_prime", "T' (I2 and I3 all correct)")
def t_prime(d):
    grid = first_time(d.t, d.series["min_margin_I2_I3"] > 0) if "min_margin_I2_I3" in d.series else None
    return d.event_time("T_prime", grid)


@quantity("I2_I3_gap_phase1", "max |S2 - S3|/n on [0, T1]")
def i2_i3_gap(d):
    stop = _index(d, d.bounds["T1"])
    if stop is None:
        return None
    gap = np.abs(d.series["S_I2"][:stop + 1] - d.series["S_I3"][:stop + 1]) / d.n
    return float(gap.max())


@quantity("loss_I2_peak_time", "time of the I2 loss peak in Phase 1")
def loss_i2_peak_time(d):
    stop = _index(d, d.bounds["T1"])
    if stop is None:
        return None
    peak = int(np.argmax(d.series["loss_I2"][:stop + 1]))
    return float(d.t[peak]) if 0 < peak < stop else None


@quantity("all_correct_time", "first time every training sample is correct")
def all_correct_time(d):
    """Thm 3.1: every sample is correct by T1 = O~(1/m); the paper's T1 = C_T1/U0 is -1 by
    definition, so the rate is measured on the first all-correct time (located between
    observations on the flow: `SeedData.event_time`)."""
    return d.event_time("all_correct", d.bounds["all_correct"])


@quantity("loss_at_T1", "loss at T1")
def loss_at_t1(d):
    at = _index(d, d.bounds["T1"])
    return None if at is None else float(d.series["loss"][at])


@quantity("phase1_score_drift", "max |A(T1) - A(0)|, target scores")
def phase1_score_drift(d):
    at = _index(d, d.bounds["T1"])
    if at is None:
        return None
    return float(max(abs(d.series[c][at] - d.series[c][0]) for c, _ in TARGET_SCORES))


@quantity("score_change_at_T1", "max |A(T1) - A(0)|, all pairs")
def score_change_at_t1(d):
    return _gram_change(d, "A", "init", "T1")


@quantity("attention_change_at_T1", "max |p(T1) - p(0)|, all samples")
def attention_change_at_t1(d):
    before, after = _attention(d, "init"), _attention(d, "T1")
    return None if after is None else _resolved_change(before, after)


@quantity("value_gram_change_at_T1", "max |V(T1) - V(0)|")
def value_gram_change_at_t1(d):
    return _gram_change(d, "V", "init", "T1")


@quantity("key_query_change_at_T1", "max |K, Q(T1) - K, Q(0)|")
def key_query_change_at_t1(d):
    return _gram_change(d, "KQ", "init", "T1")


@quantity("neuron_gram_change_at_T1", "max |<w_j1, w_j2>(T1) - (0)| (neurons: weights or model.neurons)")
def neuron_gram_change_at_t1(d):
    a, b = _neurons(d, "init"), _neurons(d, "T1")
    return None if a is None or b is None else _resolved_change(a["WWt"], b["WWt"])


@quantity("neuron_value_change_at_T1_times_m1", "m1 max_j |D0 w_j^T W_V mu|, mu <= 3 (neurons: weights or model.neurons)")
def neuron_value_change_at_t1_times_m1(d):
    """Thm E.26's box R = O(1/m1) as m1 R: m1 = max(1, rho m) is not proportional to m at small widths."""
    a, b = _neurons(d, "init"), _neurons(d, "T1")
    change = None if a is None or b is None else _resolved_change(a["WWV"][:, :3], b["WWV"][:, :3])
    return None if change is None else change * d.scales.m1


@quantity("u_norm2_at_T1", "||u||^2 at T1")
def u_norm2_at_t1(d):
    at = _index(d, d.bounds["T1"])
    return None if at is None else float(d.series["u_norm2"][at])


@quantity("G1_at_T1", "G(mu_1) at T1")
def g1_at_t1(d):
    at = _index(d, d.bounds["T1"])
    return None if at is None else float(d.series["G_mu1"][at])


@quantity("min_margin_at_T1", "min_i y_i F_i at T1 = C_T1/U0")
def min_margin_at_t1(d):
    """Thm E.27's margins at the paper's T1 = C_T1/U0 (declared, `verify.c_t1`); at the first
    all-correct time the smallest margin would be near 0 by construction, so without a declared
    C_T1 this is not measured."""
    if d.t1_declared is None:
        return None
    at = _index(d, d.bounds["T1"])
    return None if at is None else float(d.series["min_margin"][at])


@quantity("G_rand_at_T1", "max random-token |G| at T1")
def g_rand_at_t1(d):
    at = _index(d, d.bounds["T1"])
    return None if at is None else float(d.series["G_rand_maxabs"][at])


# Phase 2 -------------------------------------------------------------------------------------
@quantity("u_norm2_at_end", "||u||^2 at the end")
def u_norm2_at_end(d):
    return float(d.series["u_norm2"][-1])


@quantity("u_norm2_change_after_T1", "|u2(end) - u2(T1)| / u2(T1)")
def u_norm2_change_after_t1(d):
    at = _index(d, d.bounds["T1"])
    if at is None:
        return None
    start = d.series["u_norm2"][at]
    return float(abs(d.series["u_norm2"][-1] - start) / start)


@quantity("inverse_loss_slope", "slope of 1/loss, late Phase 2")
def inverse_loss_slope(d):
    late = int(np.searchsorted(d.t, LATE_FRACTION * d.t[-1]))
    loss = d.series["loss"]
    if late >= len(d.t) - 1 or not (loss[-1] > 0 and loss[late] > 0):
        return None
    return float((1 / loss[-1] - 1 / loss[late]) / (d.t[-1] - d.t[late]))


@quantity("rate_constant", "median -dloss/dt / (u2 loss^2), late Phase 2")
def rate_constant(d):
    late = d.t >= LATE_FRACTION * d.t[-1]
    loss = d.series["loss"]
    keep = late & d.phase2() & (loss > 1e-300)
    if not keep.any():
        return None
    return float(np.median(-d.series["d_loss_dt"][keep] / (d.series["u_norm2"][keep] * loss[keep] ** 2)))


@quantity("balance_max_phase2", "max |S2 - S3|/min(S2, S3) over Phase 2")
def balance_max_phase2(d):
    mask = d.phase2()
    return float(np.max(d.series["bal_S2_S3"][mask])) if mask.any() else None


@quantity("R_at_end", "R at the end")
def r_at_end(d):
    return float(d.series["R"][-1])


@quantity("G_ratio_at_end", "G(mu_1) / -G(mu_3) at the end")
def g_ratio_at_end(d):
    return float(d.series["G_mu1"][-1] / -d.series["G_mu3"][-1])


@quantity("value_gram_change_after_T1", "max |V(end) - V(T1)|")
def value_gram_change_after_t1(d):
    return _gram_change(d, "V", "T1", "final")


@quantity("random_G_change_after_T1", "max random-token |G(end) - G(T1)|")
def random_g_change_after_t1(d):
    a, b = _grams(d, "T1"), _grams(d, "final")
    return None if a is None else _resolved_change(a["G"][3:], b["G"][3:])


@quantity("score_rate_over_loss", "dA[mu1,mu2]/dt / loss at the end")
def score_rate_over_loss(d):
    return float(d.series["d_A_mu1_mu2_dt"][-1] / d.series["loss"][-1])


@quantity("score_rate_over_loss_at_T_star", "dA[mu1,mu2]/dt / loss at T*")
def score_rate_over_loss_at_t_star(d):
    at = _index(d, t_star(d))
    return None if at is None else float(d.series["d_A_mu1_mu2_dt"][at] / d.series["loss"][at])


@quantity("score_change_after_T1", "mean |A(end) - A(T1)|, target scores")
def score_change_after_t1(d):
    at = _index(d, d.bounds["T1"])
    if at is None:
        return None
    return float(np.mean([abs(d.series[c][-1] - d.series[c][at]) for c, _ in TARGET_SCORES]))


@quantity("random_score_change_after_T1", "max |A(end) - A(T1)| with a random token")
def random_score_change_after_t1(d):
    a, b = _grams(d, "T1"), _grams(d, "final")
    if a is None:
        return None
    random = np.ones_like(a["A"], dtype=bool)
    random[:3, :3] = False
    return _resolved_change(a["A"][random], b["A"][random])


@quantity("score_change_after_T1_over_Cs", "mean |A(end) - A(T1)|, target scores, over Cs")
def score_change_after_t1_over_cs(d):
    """L. 4.7's target changes are Theta(Cs), Cs = v0/(sqrt(m) L U0) + s0^2/U0: judged against the
    whole two-term expression, so no single term's exponent is assumed."""
    change = score_change_after_t1(d)
    return None if change is None else change / d.scales.Cs


@quantity("random_score_change_after_T1_over_Cr", "max |A(end) - A(T1)| with a random token, over Cr")
def random_score_change_after_t1_over_cr(d):
    """L. 4.7's random-token changes are O~(Cr), Cr = v0/(n sqrt(m) L U0) + s0^2/U0, whose two terms
    cross over at sqrt(m) = L n: an O bound of a sum is a bounded ratio to the sum."""
    change = random_score_change_after_t1(d)
    return None if change is None else change / d.scales.Cr


@quantity("attention_change_at_end", "max |p(end) - p(0)|, all samples")
def attention_change_at_end(d):
    return _resolved_change(_attention(d, "init"), _attention(d, "final"))


@quantity("key_query_change_after_T1", "max |K, Q(end) - K, Q(T1)|")
def key_query_change_after_t1(d):
    return _gram_change(d, "KQ", "T1", "final")


@quantity("key_query_change_at_end", "max |K, Q(end) - K, Q(0)|")
def key_query_change_at_end(d):
    return _gram_change(d, "KQ", "init", "final")


@quantity("score_max_at_end", "max |A(end)| over all pairs")
def score_max_at_end(d):
    return float(np.max(np.abs(_grams(d, "final")["A"])))


@quantity("T_star", "T* (loss <= m^-k, k = verify.loss_exponent)")
def t_star_quantity(d):
    """Located between observations when the run located T* at this k's level m^-k."""
    return d.event_time("T_star", t_star(d), level=float(d.m) ** -d.loss_exponent)


@quantity("score_change_at_T_star", "mean |A(T*) - A(0)|, target scores")
def score_change_at_t_star(d):
    at = _index(d, t_star(d))
    if at is None:
        return None
    return float(np.mean([abs(d.series[c][at] - d.series[c][0]) for c, _ in TARGET_SCORES]))


@quantity("score_change_at_T_star_over_Cs", "mean |A(T*) - A(0)|, target scores, over Cs")
def score_change_at_t_star_over_cs(d):
    """Thm 3.3's C12, C21, -C31, -C32 = Theta(Cs), against the whole two-term Cs."""
    change = score_change_at_t_star(d)
    return None if change is None else change / d.scales.Cs


@quantity("test_loss_at_T_star", "test loss at T*")
def test_loss_at_t_star(d):
    at = _index(d, t_star(d))
    return None if at is None else float(d.series["test_loss"][at])


def fitted_constants(results) -> dict[str, float]:
    """`check:key` for every number a seed's checks report under a key naming a constant
    ("constant", "fitted_constant_random", ...): the hidden constants of the paper's bounds at this
    width. A width sweep holds each to exponent <= 0: a constant must not grow with m (beyond the
    one log factor O~ allows)."""
    out = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and "constant" in prefix.rsplit(".", 1)[-1]:
            if math.isfinite(value) and value > 0:
                out[f"{result.name}:{prefix}"] = float(value)

    for result in results:
        walk("", result.measured)
    return out


def measure(data: SeedData) -> dict[str, float | None]:
    """Every quantity of one seed; None where it cannot be measured (no T1, no neurons, an
    unresolved change, a column the run lacks)."""
    out = {}
    for name, q in QUANTITIES.items():
        try:
            value = q.fn(data)
        except KeyError:
            value = None
        out[name] = None if value is None or not math.isfinite(value) else float(value)
    return out


def m1_slope(ms, m1s) -> float:
    """How log m1 moves with log m over a sweep's runs (0 when m1 is fixed, 1 when m1 = rho m): a
    rate's m1 power enters its predicted exponent through it (`claims.Rate.test`)."""
    log_m, log_m1 = np.log(np.asarray(ms, float)), np.log(np.asarray(m1s, float))
    spread = log_m - log_m.mean()
    return 0.0 if not np.any(spread) else float(spread @ (log_m1 - log_m1.mean()) / (spread @ spread))


def axis_slopes(rows: list[dict]) -> tuple[float, float]:
    """How log m and log m1 move per unit of log x over a sweep's runs, x its axis (`value`): (1, 0)
    along m with m1 fixed, (1, 1) when m1 = rho m, (0, 1) along m1 at fixed m."""
    values = [r["value"] for r in rows]
    return m1_slope(values, [r["m"] for r in rows]), m1_slope(values, [r["m1"] for r in rows])


AXIS_INVARIANCE = 1e-12
"""A quantity whose every seed gives the same value at every width of a sweep, to this relative
difference, does not depend on the axis (an init quantity of W_K, W_Q, W_V along m1): its slope 0 holds by
construction and is not evidence, so its rates are 'not applicable' along that axis."""


def invariant_along_axis(table: np.ndarray) -> bool:
    """Whether a widths x seeds table is the same at every width for every seed (`AXIS_INVARIANCE`)."""
    finite = np.isfinite(table).all(axis=0)
    if table.shape[0] < 2 or not finite.any():
        return False
    kept = table[:, finite]
    return bool(np.all(np.abs(kept - kept[:1]) <= AXIS_INVARIANCE * np.abs(kept[:1])))


PAPER_BOUND_CONSTANTS = frozenset({"lemma4.2_common_token_rate:lemma_bound_constant"})
"""Constants of a refinement check that measure the paper's own bound (Lemma 4.2's, beside the
refinement's derived error term): judged as statements."""


def constant_class(check: str, key: str) -> str:
    """The evidence class of a fitted constant in the width sweep: a refinement check's constants are
    refinements (except `PAPER_BOUND_CONSTANTS`); a statement's or a diagnostic's (a constant the paper
    hides, judged here by how it scales) are statements."""
    if EVIDENCE.get(check) == "refinement" and key not in PAPER_BOUND_CONSTANTS:
        return "refinement"
    return "statement"


def seed_table(rows: list[dict], values: list, quantity: str) -> np.ndarray:
    """`quantity` as a widths x seeds table, column s the same seed at every width (NaN where it was
    not measured): a width sweep's seeds are paired (each uses the same data at every width), and
    the rate fits use that (`exponents.fit_exponent(paired=True)`)."""
    seeds = sorted({r["seed"] for r in rows})
    column = {seed: j for j, seed in enumerate(seeds)}
    row_of = {v: i for i, v in enumerate(values)}
    table = np.full((len(values), len(seeds)), np.nan)
    for r in rows:
        found = r.get(quantity)
        if r["value"] in row_of and found is not None:
            table[row_of[r["value"]], column[r["seed"]]] = found
    return table


def judge_rate_verdict(verdict: str, premises: tuple[str, ...], met: dict[str, bool | None]) -> str:
    """A rate's verdict under its claim's premises: `claims.judge` for pass and fail, and
    inconclusive kept as it is (it counts neither way)."""
    if verdict in ("inconclusive", "vacuous"):
        return verdict
    return judge(None if verdict == "not applicable" else verdict == "pass", premises, met)


def _regime(claim, widths: list[dict], values: list[int], relaxed: bool) -> tuple[list[int], dict]:
    """The widths a claim's rates are fitted over (those meeting its premises, all when fewer than
    two do) and whether each premise holds over them; `relaxed` reads each premise of
    `premises.RELAXED` as its relaxed form."""
    def met_at(width, premise):
        return _met(width, RELAXED.get(premise, premise) if relaxed else premise)

    in_regime = [v for v, w in zip(values, widths) if all(met_at(w, p) is not False for p in claim.premises)]
    fitted = in_regime if len(in_regime) >= 2 else list(values)
    met = {p["id"]: not any(met_at(w, p["id"]) is False for w in widths if w["value"] in fitted)
           for p in widths[0]["premises"]} if widths else {}
    return fitted, met


def judge_rates(rows: list[dict], widths: list[dict], values: list[int], predictions_apply: bool,
                 c0: float) -> list[dict]:
    """Every claim's rates over one c0's widths, each by its pre-registered `RateTest`, fitted over
    the widths where the claim's premises hold; judged again with each premise of
    `premises.RELAXED` in its relaxed form (`verdict_relaxed`). A claim whose proof takes a step the
    paper does not justify (`Claim.unstated`) and whose rate fails is refitted over the widths meeting
    that condition: a pass there is 'holds under an unstated condition'."""
    slope_m, slope_m1 = axis_slopes(rows)
    rates = []
    for claim in CLAIMS:
        fitted, met = _regime(claim, widths, values, relaxed=False)
        fitted_relaxed, met_relaxed = _regime(claim, widths, values, relaxed=True)
        left_out = [v for v in values if v not in fitted]
        log_power = max((rate.log_power for rate in claim.rates), default=0)
        constants = [paper_rate(key, 0.0, "upper bound", BOUND_TOLERANCE, log_power, evidence=constant_class(name, key))
                     for name in claim.checks if name not in claim.borrowed
                     for key in sorted({k for r in rows for k in r if k.startswith(f"{name}:")})]
        for rate in (*claim.rates, *constants):
            test = rate.test_along({"model.m": slope_m, "model.m1": slope_m1})
            applies = predictions_apply and not invariant_along_axis(seed_table(rows, values, rate.quantity))

            def judged_over(chosen, rate=rate, test=test):
                return judge_rate(test, np.asarray(chosen, float), seed_table(rows, chosen, rate.quantity),
                                  name=rate.quantity, paired=True)

            judged = judged_over(fitted)
            raw = judged.verdict if applies else "not applicable"
            raw_relaxed = raw if fitted_relaxed == fitted else (
                judged_over(fitted_relaxed).verdict if applies else "not applicable")
            verdict = judge_rate_verdict(raw, claim.premises, met)
            unstated_note = None
            if verdict == "fail" and claim.unstated:
                meeting = [v for v, w in zip(values, widths) if v in fitted
                           and all(_met(w, c) is not False for c in claim.unstated)]
                if len(meeting) >= 2 and len(meeting) < len(fitted) and judged_over(meeting).verdict == "pass":
                    verdict = HOLDS_UNSTATED
                    unstated_note = (f"passes over the {len(meeting)} widths meeting {', '.join(claim.unstated)} "
                                     f"({'; '.join(UNSTATED[c] for c in claim.unstated)}), fails over all")
            label = QUANTITIES[rate.quantity].label if rate.quantity in QUANTITIES else f"fitted constant {rate.quantity}"
            rates.append({"claim": claim.id, "c0": c0, "quantity": rate.quantity, "label": label,
                          "source": "quantity" if rate.quantity in QUANTITIES else "fitted constant",
                          "class": rate.evidence,
                          "medians": [float(np.median(found)) if found else None for found in
                                      ([r[rate.quantity] for r in rows if r["value"] == v and r.get(rate.quantity) is not None]
                                       for v in values)],
                          "predicted": test.predicted if applies else None, "kind": rate.kind,
                          "invariant": predictions_apply and not applies,
                          "tol": test.tol, "log_power": test.log_power, "m1_power": m1_power(rate),
                          "fit": judged.fit.to_dict(), "judgement": judged.to_dict(), "sentence": judged.sentence(),
                          "log_slack": judged.log_slack, "left_out": left_out, "verdict": verdict,
                          "verdict_relaxed": judge_rate_verdict(raw_relaxed, claim.premises, met_relaxed),
                          "unstated": unstated_note})
    return rates


def _met(width: dict, premise: str) -> bool | None:
    return next((p["met"] for p in width["premises"] if p["id"] == premise), None)
