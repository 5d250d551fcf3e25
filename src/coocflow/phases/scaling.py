"""Width scaling (`coocflow verify --scaling AXIS`): the paper's orders in m as exponents with 95%
confidence intervals over seeds, and every one-width check at every width.

Each width is one run folder under `OUT/runs/` (an ensemble following the ODE flow; a complete
folder with the same configuration is reused, an interrupted one resumed). A base configuration
in the Gram space runs in weight space up to `WEIGHT_SPACE_MAX_WIDTH`, where the neurons w_j are
affordable, so the neuron-level quantities are measured there; above it, in the Gram space.

Per seed every `QUANTITIES` entry, a small named function of the seed's series and saved states
(`phases.checks.SeedData`), is measured; the premises and the one-width checks are evaluated per
width. Each claim's rates (`phases.claims`) are then fitted (`phases.exponents`) over the widths
where the premises the claim uses are met (all widths when fewer than two are): an order passes
when its predicted exponent lies in the interval and the prefactor (value x m^-predicted) varies
by at most 3x over the widths; an upper bound passes unless the interval lies wholly above it.
Predictions hold for the theory's initialization (Condition 1, c0 and c1 fixed) with m and m1
growing together (`both`); under Kaiming initialization, or one width moving alone, the exponents
are reported without a verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from coocflow.config import Config
from coocflow.phases.checks import EVIDENCE, SeedData
from coocflow.phases.claims import CLAIMS, Rate, judge
from coocflow.phases.rate_test import BOUND_TOLERANCE, judge_rate
from coocflow.phases.state_values import resolved_changes
from coocflow.storage.run_folder import attention_of, grams_of, neuron_grams

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


def _first_time(d: SeedData, mask: np.ndarray) -> float | None:
    hits = np.flatnonzero(mask)
    return float(d.t[hits[0]]) if hits.size else None


def _resolved_change(before: np.ndarray, after: np.ndarray) -> float | None:
    """max |after - before| over the entries whose change is resolved (`state_values.resolved_changes`);
    None when none is: such a seed is left out of the fit rather than fitted as a fake power."""
    changes = resolved_changes(before, after)
    return float(changes.max()) if changes.size and changes.max() > 0 else None


def _grams(d: SeedData, moment: str) -> dict | None:
    state = d.states.get(moment)
    return None if state is None else grams_of(state)


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
    return None if state is None else attention_of(state, state["tokens"])


def _neurons(d: SeedData, moment: str) -> dict | None:
    """W W^T and W W_V at `moment`, from weights or a Gram state that resolves the neurons."""
    state = d.states.get(moment)
    neurons = None if state is None else neuron_grams(state)
    if neurons is None:
        return None
    return {"WWt": neurons[0], "WWV": neurons[1]}


def t_star(d: SeedData) -> float | None:
    """T* of Theorem F.20: the first observed time with loss <= m^-k, k declared by the run's
    configuration (`verify.loss_exponent`, at least 2 so that Theta(poly(m)) is testable)."""
    return _first_time(d, d.series["loss"] <= float(d.m) ** -d.loss_exponent)


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
    return d.bounds["T0.5"]


@quantity("T_prime", "T' (I2 and I3 all correct)")
def t_prime(d):
    return _first_time(d, d.series["min_margin_I2_I3"] > 0) if "min_margin_I2_I3" in d.series else None


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
    definition, so the rate is measured on the first all-correct time."""
    return d.bounds["all_correct"]


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
    return t_star(d)


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


# The sweep -----------------------------------------------------------------------------------
GRID_START_PER_U0 = 0.01
"""A theory sweep observes from t = 0.01 / U0, well before T1 ~ C_T1 / U0 at every width."""
T_END_PER_LOSS_SCALE = 50.0
"""... and runs to t = 50 m^(k-1) / c1^2: F8's 1/loss ~ kappa U0 t (kappa ~ 0.07) reaches m^k by about
14 m^(k-1) / c1^2, so T* = first loss <= m^-k is inside the run with room to spare."""


def width_overrides(axis: str, value: int, base: Config) -> dict:
    """`m` or `m1` moves one width alone. `both` moves m and, under the theory init, gives m1 the
    most neurons (a power of two, at most the base m1) that keep P1 at that m
    (`premises.neurons_meeting_p1`), with the flow's grid and end in the run's own time scale
    (from `GRID_START_PER_U0` / U0 to past T*); otherwise it keeps the base ratio m1 / m. A Gram-space
    base runs in weight space up to `WEIGHT_SPACE_MAX_WIDTH` unless it resolves the neurons."""
    from coocflow.phases.premises import DELTA, neurons_meeting_p1

    if axis == "m":
        widths = {"model.m": value}
    elif axis == "m1":
        widths = {"model.m1": value}
    elif base.init.scheme == "theory":
        widths = {"model.m": value, "model.m1": neurons_meeting_p1(value, DELTA, base.model.m1)}
        if base.is_flow:
            c1_squared = base.init.c1 ** 2
            widths["train.lr"] = GRID_START_PER_U0 / (c1_squared * value)
            widths["train.t_end"] = T_END_PER_LOSS_SCALE * value ** (base.verify.loss_exponent - 1) / c1_squared
    else:
        ratio = base.model.m1 / base.model.m
        widths = {"model.m": value, "model.m1": max(1, int(round(ratio * value)))}
    m = widths.get("model.m", base.model.m)
    if base.model.space == "gram" and m <= WEIGHT_SPACE_MAX_WIDTH and not getattr(base.model, "neurons", False):
        widths["model.space"] = "weights"
    return widths


def _training_part(config: dict) -> dict:
    """A configuration less its `verify` section: the declared times (C_T1, k, Lemma 4.3's C) read
    a finished run and do not change its training, so a run that differs only there is reused, with
    the new declarations written into its config.json."""
    return {key: value for key, value in config.items() if key != "verify"}


def _width_run(config: Config, folder: Path):
    """The run folder of one width: reused when complete with the same configuration (`_training_part`),
    resumed when interrupted, trained otherwise."""
    from coocflow.api import resumable_config, resume_run, run_and_write
    from coocflow.storage import atomic_write_json, load_run

    wanted = json.loads(json.dumps(config.to_dict()))
    if (folder / "manifest.json").is_file():
        found = json.loads((folder / "config.json").read_text())
        if _training_part(found) == _training_part(wanted):
            if found.get("verify") != wanted["verify"]:
                atomic_write_json(folder / "config.json", {**found, "verify": wanted["verify"]})
            return load_run(folder)
    elif (folder / "config.json").is_file() and resumable_config(folder) == config:
        resume_run(folder, figures=False)
        return load_run(folder)
    run_and_write(config, folder, force=True, figures=False)
    return load_run(folder)


def m1_slope(ms, m1s) -> float:
    """How log m1 moves with log m over a sweep's runs (0 when m1 is fixed, 1 when m1 = rho m): a
    rate's m1 power enters its predicted exponent through it (`claims.Rate.test`)."""
    log_m, log_m1 = np.log(np.asarray(ms, float)), np.log(np.asarray(m1s, float))
    spread = log_m - log_m.mean()
    return 0.0 if not np.any(spread) else float(spread @ (log_m1 - log_m1.mean()) / (spread @ spread))


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


def judge_rate_verdict(verdict: str, premises: tuple[str, ...], met: dict[str, bool | None]) -> str:
    """A rate's verdict under its claim's premises: `claims.judge` for pass and fail, and
    inconclusive kept as it is (it counts neither way)."""
    if verdict == "inconclusive":
        return "inconclusive"
    return judge(None if verdict == "not applicable" else verdict == "pass", premises, met)


def width_scaling(base: Config, axis: str, values: list[int], out: Path,
                  progress: Callable[[str], None] | None = None, c0_values: tuple[float, ...] = ()) -> dict:
    """Run `base` at each width (and each init scale c0 of `c0_values`, default the base's) into
    `out/runs/`, measure every quantity and check per seed, and fit every claim's rates per c0."""
    from coocflow.phases.exponents import fit_exponent
    from coocflow.phases.verify import seed_data, verify_run, width_summary

    c0_values = tuple(c0_values) or (base.init.c0,)
    rows, widths = [], []
    for c0 in c0_values:
        scaled = base if c0 == base.init.c0 else base.replace({"init.c0": c0})
        for value in values:
            config = scaled.replace(width_overrides(axis, value, scaled))
            if progress:
                progress(f"{axis}={value}: m={config.model.m}, m1={config.model.m1}, c0={c0:g}, {config.model.space} "
                         f"space, {len(config.seed_list)} seeds")
            name = f"{axis}-{value}" if len(c0_values) == 1 else f"c0-{c0:g}-{axis}-{value}"
            folder = Path(out) / "runs" / name
            run = _width_run(config, folder)
            verification = verify_run(run)
            widths.append({"value": value, "c0": c0, "space": config.model.space, "folder": str(folder),
                           **width_summary(verification, config.model.m, config.model.m1)})
            for (seed, data), results in zip(seed_data(run), verification.per_seed):
                rows.append({"value": value, "c0": c0, "m": config.model.m, "m1": config.model.m1, "seed": seed,
                             **measure(data), **fitted_constants(results)})

    predictions_apply = base.init.scheme == "theory" and axis == "both"
    x = np.asarray(values, float)
    base_rows = [r for r in rows if r["c0"] == base.init.c0] or rows
    quantities = {}
    for name, q in QUANTITIES.items():
        per_width = [[r[name] for r in base_rows if r["value"] == v and r[name] is not None] for v in values]
        medians = [float(np.median(found)) if found else None for found in per_width]
        quantities[name] = {"label": q.label, "medians": medians,
                            "fit": fit_exponent(x, [f or [np.nan] for f in per_width], name=name).to_dict()}
    rates = []
    for c0 in c0_values:
        of_c0 = [r for r in rows if r["c0"] == c0]
        rates += _judge_rates(of_c0, [w for w in widths if w["c0"] == c0], values, predictions_apply, c0)
    return {"axis": axis, "values": list(values), "c0_values": list(c0_values), "seeds": list(base.seed_list),
            "widths": widths, "rows": rows, "quantities": quantities, "rates": rates,
            "predictions_apply": predictions_apply, "m1_slope": m1_slope([r["m"] for r in rows], [r["m1"] for r in rows]),
            "config": base.to_dict()}


def _judge_rates(rows: list[dict], widths: list[dict], values: list[int], predictions_apply: bool,
                 c0: float) -> list[dict]:
    """Every claim's rates over one c0's widths, each by its pre-registered `RateTest`, fitted over
    the widths where the claim's premises hold."""
    slope_m1 = m1_slope([r["m"] for r in rows], [r["m1"] for r in rows])
    rates = []
    for claim in CLAIMS:
        in_regime = [v for v, w in zip(values, widths) if all(_met(w, p) is not False for p in claim.premises)]
        fitted = in_regime if len(in_regime) >= 2 else list(values)
        left_out = [v for v in values if v not in fitted]
        met = {p["id"]: not any(_met(w, p["id"]) is False for w in widths if w["value"] in fitted)
               for p in widths[0]["premises"]} if widths else {}
        log_power = max((rate.log_power for rate in claim.rates), default=0)
        constants = [Rate(key, 0.0, "upper bound", BOUND_TOLERANCE, log_power, evidence=constant_class(name, key))
                     for name in claim.checks if name not in claim.borrowed
                     for key in sorted({k for r in rows for k in r if k.startswith(f"{name}:")})]
        for rate in (*claim.rates, *constants):
            per_width = [[r.get(rate.quantity) if r.get(rate.quantity) is not None else np.nan
                          for r in rows if r["value"] == v] for v in fitted]
            test = rate.test(slope_m1)
            judged = judge_rate(test, np.asarray(fitted, float), per_width, name=rate.quantity)
            raw = judged.verdict if predictions_apply else "not applicable"
            label = QUANTITIES[rate.quantity].label if rate.quantity in QUANTITIES else f"fitted constant {rate.quantity}"
            rates.append({"claim": claim.id, "c0": c0, "quantity": rate.quantity, "label": label,
                          "source": "quantity" if rate.quantity in QUANTITIES else "fitted constant",
                          "class": rate.evidence,
                          "medians": [float(np.median(found)) if found else None for found in
                                      ([r[rate.quantity] for r in rows if r["value"] == v and r.get(rate.quantity) is not None]
                                       for v in values)],
                          "predicted": test.predicted if predictions_apply else None, "kind": rate.kind,
                          "tol": test.tol, "log_power": test.log_power, "m1_power": rate.m1_power,
                          "fit": judged.fit.to_dict(), "judgement": judged.to_dict(), "sentence": judged.sentence(),
                          "log_slack": judged.log_slack, "left_out": left_out,
                          "verdict": judge_rate_verdict(raw, claim.premises, met)})
    return rates


def _met(width: dict, premise: str) -> bool | None:
    return next((p["met"] for p in width["premises"] if p["id"] == premise), None)


def base_width(report: dict, base: Config) -> dict:
    """The width whose one-width checks stand for the claims (at the base c0): the base configuration's
    own width when the sweep has it, else the largest width in weight space, else the largest."""
    widths = [w for w in report["widths"] if w.get("c0", base.init.c0) == base.init.c0] or report["widths"]
    own = [w for w in widths if w["m"] == base.model.m and w["m1"] == base.model.m1]
    weights = [w for w in widths if w["space"] == "weights"]
    return (own or weights[-1:] or widths[-1:])[0]


def write_scaling(out: Path, report: dict, base: Config) -> list[Path]:
    """Complete `report` with the claims table at the base width (`base_width`) and write
    scaling.json, scaling.md, scaling.png and report.html into `out`, each atomically."""
    from coocflow.phases.claims import claims_table
    from coocflow.report.html import write_report
    from coocflow.storage import atomic_write_json, atomic_write_text

    width = base_width(report, base)
    report["base_width"] = width["value"]
    report["claims"] = claims_table(width, report["rates"])
    out = Path(out)
    atomic_write_json(out / "scaling.json", report)
    atomic_write_text(out / "scaling.md", scaling_markdown(report, base))
    tmp = out / ".scaling.png.tmp.png"
    figure(report, tmp)
    tmp.replace(out / "scaling.png")
    return [out / "scaling.json", out / "scaling.md", out / "scaling.png", write_report(out)]


def scaling_markdown(report: dict, base: Config) -> str:
    """scaling.md: the design, the premises per width, the claims table and every fitted rate."""
    from coocflow.phases.claims import claims_markdown, summary_line
    from coocflow.phases.premises import premises_markdown, Premise

    base_c0 = report["config"]["init"]["c0"]
    width = next(w for w in report["widths"] if w["value"] == report["base_width"] and w.get("c0", base_c0) == base_c0)
    c0_values = report.get("c0_values", [base_c0])
    lines = [f"# Width scaling: {base.name} over {report['axis']} = {', '.join(map(str, report['values']))}", "",
             f"Seeds per width: {len(report['seeds'])} ({', '.join(map(str, report['seeds']))}); init scale c0 = "
             f"{', '.join(f'{c:g}' for c in c0_values)}, each a whole sweep. Each width is a run folder under `runs/`; "
             f"without resolved neurons, widths up to m = {WEIGHT_SPACE_MAX_WIDTH} run in weight space. Exponents are "
             "least-squares slopes of the per-width mean of log|value| with 95% seed-bootstrap intervals "
             "(`coocflow/phases/exponents.py`), judged by the pre-registered rate test (`coocflow/phases/rate_test.py`, "
             "power: docs/power.md): pass when the whole interval lies in the claim's band, fail when it lies wholly "
             "outside, inconclusive otherwise.", "",
             "| width | c0 | m | m1 | space | premises not met |", "| --- | --- | --- | --- | --- | --- |"]
    for w in report["widths"]:
        unmet = [p["id"] for p in w["premises"] if p["met"] is False]
        lines.append(f"| {w['value']} | {w.get('c0', base_c0):g} | {w['m']} | {w['m1']} | {w['space']} | "
                     f"{', '.join(unmet) or 'none'} |")
    lines += ["", f"## Premises at m = {width['m']}, c0 = {base_c0:g} (the width of the one-width checks)", "",
              premises_markdown([Premise(**p) for p in width["premises"]]).rstrip(), "",
              "## Claims", "", summary_line(report["claims"]) + ".", "", claims_markdown(report["claims"]).rstrip(), "",
              "## Every fitted rate", "",
              "| claim | c0 | quantity | class | exponent (95% CI) | largest widths | band | verdict | medians per width |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rate in report["rates"]:
        judged = rate.get("judgement", {})
        fit = rate["fit"]
        exponent = "-" if fit["exponent"] is None else (
            f"{fit['exponent']:+.3f} ({fit['low']:+.3f} to {fit['high']:+.3f})" if fit["low"] is not None
            else f"{fit['exponent']:+.3f}")
        local = "-" if judged.get("local_exponent") is None else f"{judged['local_exponent']:+.3f}"
        band = judged.get("band")
        band_text = "-" if band is None else "[" + ", ".join("-inf" if v is None and i == 0 else "+inf" if v is None
                                                             else f"{v:+.3f}" for i, v in enumerate(band)) + "]"
        notes = "; ".join(judged.get("notes", []))
        medians = ", ".join("-" if v is None else f"{v:.3g}" for v in rate["medians"])
        lines.append(f"| {rate['claim']} | {rate.get('c0', base_c0):g} | {rate['label']} | {rate.get('class', 'statement')} | "
                     f"{exponent} | {local} | {band_text} | {rate['verdict']}{f' ({notes})' if notes else ''} | {medians} |")
    return "\n".join(lines) + "\n"


def figure(report: dict, path: Path) -> None:
    """One panel per claimed rate's quantity: seeds, medians, the fit and the prediction. Titles at a
    fixed height and no minor ticks: automatic title placement and log-axis minor ticks took 80% of
    drawing its 48 panels (about 6 s of a 20 s re-check)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullLocator

    shown = list(dict.fromkeys(r["quantity"] for r in report["rates"] if r["source"] == "quantity"))
    predicted = {r["quantity"]: r["predicted"] for r in report["rates"] if r["predicted"] is not None}
    columns = 6
    rows = -(-len(shown) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.0 * rows))
    fig.subplots_adjust(left=0.03, right=0.99, bottom=0.02, top=1 - 0.35 / rows, wspace=0.3, hspace=0.45)
    axes = np.atleast_1d(axes).ravel()
    values = np.asarray(report["values"], float)
    base_c0 = report["config"]["init"]["c0"]
    for ax, name in zip(axes, shown):
        points = [(r["value"], abs(r[name])) for r in report["rows"]
                  if r[name] is not None and r[name] != 0 and r.get("c0", base_c0) == base_c0]
        if points:
            x, y = np.array(points, dtype=float).T
            ax.scatter(x, y, s=8, alpha=0.5, color="tab:blue")
        entry = report["quantities"][name]
        medians = np.array([np.nan if not v else abs(v) for v in entry["medians"]], float)
        if not points and not np.isfinite(medians).any():
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, fontsize=7)
            ax.set_xscale("log")
            ax.set_title(entry["label"], fontsize=7, y=1.0)
            continue
        ax.plot(values, medians, "o", color="black", ms=3)
        fit = entry["fit"]
        if fit["exponent"] is not None:
            ax.plot(values, fit["prefactor"] * (values / fit["reference_width"]) ** fit["exponent"], "k-", lw=1,
                    label=f"fit {fit['exponent']:+.2f}")
        if name in predicted and np.isfinite(medians).any():
            anchor = np.flatnonzero(np.isfinite(medians))[0]
            ax.plot(values, medians[anchor] * (values / values[anchor]) ** predicted[name], "r--", lw=1,
                    label=f"claim {predicted[name]:+g}")
        ax.set(xscale="log", yscale="log")
        ax.set_title(entry["label"], fontsize=7, y=1.0)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6)
        ax.grid(alpha=0.3, lw=0.4)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    fig.suptitle(f"width scaling over {report['axis']} = {report['values']}, {len(report['seeds'])} seeds each, "
                 f"c0 = {base_c0:g}",
                 fontsize=9)
    fig.savefig(path, dpi=110)
    plt.close(fig)
