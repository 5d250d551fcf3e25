"""Width scaling (`coocflow verify --scaling m`): how T1, ||u||^2 at T1 and the score movements
scale with m.

Runs a configuration at several widths, each as a seed ensemble following the ODE flow, and
fits the exponent of each quantity with a 95% bootstrap interval over seeds
(`phases/exponents.py`). Under the theory's initialization (Condition 1, c0 and c1 fixed) with
m and m1 growing together (`both`), docs/claims.md predicts T1 ~ m^-1 (Thm 3.1, E26), ||u||^2 at
T1 ~ m^+1 (Thm E.27), the target-score drift by T1 ~ m^-1.5 (Thm 3.1) and the target-score
change at the end ~ m^-1.5 (Thm 3.3, C_ab = Theta(Cs)); a check passes when the prediction lies
in the interval and the prefactor (value x m^-predicted) varies by at most 3x over the widths.
Under Kaiming initialization the scales c0, c1 change with m, so no exponent is predicted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from coocflow.config import Config

AXES = ("m", "m1", "both")
PREDICTED = {"T1": {"both": -1.0}, "u_norm2_at_T1": {"both": 1.0}, "phase1_score_drift": {"both": -1.5},
             "final_score_change": {"both": -1.5}, "dG1_at_0": {"both": 1.0}, "G1_at_T1": {"both": 0.0},
             "u_norm2_at_end": {"both": 1.0}, "inverse_loss_slope": {"both": 1.0},
             "score_rate_over_loss": {"both": -0.5}}
"""Predicted exponents in m (docs/claims.md column e) for theory init with m1 = rho m: T1 (Thm 3.1,
E26), ||u||^2 at T1 (E27) and at the end (F9: Theta(U0)), the target-score drift by T1 (Thm 3.1)
and their change at the end (Thm 3.3), dG(mu_1)/dt at t = 0 (Lemma 4.1: Theta(W0)), G(mu_1) at T1
(E27: Theta(1)), the slope of 1/loss late in Phase 2 (Thm F.8: Theta(U0)) and the Phase-2 score
rate per unit loss, dA[mu_1, mu_2]/dt / loss at the end (Lemma 4.7: m^-0.5 Theta~(v0)/L)."""
UPPER_BOUNDS = {"score_rate_at_0": {"both": -0.5}, "attention_deviation_at_0": {"both": -1.0},
                "attention_change_at_T1": {"both": -2.0}, "value_gram_change_at_T1": {"both": -1.0},
                "key_query_change_at_T1": {"both": -2.0}}
"""Claims that bound a quantity from above, as exponents in m: |dA[mu_1, mu_2]/dt| at t = 0
(Lemma E.23: m^-0.5 (1/L + m^-0.5)), max |p - 1/L| at t = 0 over the tracked attention weights
(Cor. D.2: O~(1/(Lm))), their change by T1 (Cor. E.24: m^-2), the value Grams' change by T1
(Thm 3.1: O~(1/m)) and the key and query Grams' (Thm 3.1: O~(m^-2)). A bound passes unless the
measured exponent is above the bound's with 95% confidence (the interval's low end above it)."""
QUANTITIES = ("T1", "u_norm2_at_T1", "phase1_score_drift", "final_score_change", "dG1_at_0", "G1_at_T1",
              "u_norm2_at_end", "inverse_loss_slope", "score_rate_over_loss", *UPPER_BOUNDS)
ATTENTION = ("p_q1_k2", "p_q2_k1", "p_q1_k3", "p_q2_k3")
VALUE_GRAMS = ("V_mu1_mu1", "V_mu1_mu2", "V_mu1_mu3", "V_mu2_mu2", "V_mu2_mu3", "V_mu3_mu3")
KEY_QUERY_GRAMS = tuple(f"{kind}_mu{a}_mu{b}" for kind in ("K", "Q") for a in (1, 2, 3) for b in range(a, 4))
LATE_FRACTION = 0.1
"""The slope of 1/loss is read over t >= this fraction of the run's end (late Phase 2)."""
TARGET_SCORES = ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2")


def width_overrides(axis: str, value: int, base: Config) -> dict:
    """`both` keeps the base ratio m1 / m; `m` or `m1` moves one width alone."""
    if axis == "m":
        return {"model.m": value}
    if axis == "m1":
        return {"model.m1": value}
    ratio = base.model.m1 / base.model.m
    return {"model.m": value, "model.m1": max(1, int(round(ratio * value)))}


def fit_power_law(x: np.ndarray, y: np.ndarray) -> dict:
    """Least-squares slope and intercept of log y against log x (positive, finite points only)."""
    keep = (x > 0) & (y > 0) & np.isfinite(y)
    if keep.sum() < 2:
        return {"exponent": None, "prefactor": None, "points": int(keep.sum())}
    slope, intercept = np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)
    return {"exponent": float(slope), "prefactor": float(np.exp(intercept)), "points": int(keep.sum())}


def measure(result) -> list[dict]:
    """Per seed: T1, the largest target-score drift by T1, and the target-score changes at the end."""
    from coocflow.phases.boundaries import first_time_all_correct

    rows = []
    for i, seed in enumerate(result.seeds):
        s = result.seed_series(i)
        t1 = first_time_all_correct(s["t"], s["min_margin"])
        drift = u_at_t1 = g1_at_t1 = attention_change = value_change = key_query_change = None
        if t1 is not None:
            at = int(np.searchsorted(s["t"], t1))
            drift = float(max(abs(s[k][at] - s[k][0]) for k in TARGET_SCORES))
            u_at_t1 = float(s["u_norm2"][at])
            g1_at_t1 = float(s["G_mu1"][at])
            attention_change = _largest_change(s, ATTENTION, at)
            value_change = _largest_change(s, VALUE_GRAMS, at)
            key_query_change = _largest_change(s, KEY_QUERY_GRAMS, at)
        final = float(np.mean([abs(s[k][-1] - s[k][0]) for k in TARGET_SCORES]))
        late = int(np.searchsorted(s["t"], LATE_FRACTION * s["t"][-1]))
        slope = None
        if late < len(s["t"]) - 1:
            slope = float((1 / s["loss"][-1] - 1 / s["loss"][late]) / (s["t"][-1] - s["t"][late]))
        rows.append({"seed": seed, "T1": t1, "u_norm2_at_T1": u_at_t1, "phase1_score_drift": drift,
                     "final_score_change": final, "final_loss": float(s["loss"][-1]),
                     "dG1_at_0": float(s["d_G_mu1_dt"][0]), "G1_at_T1": g1_at_t1,
                     "u_norm2_at_end": float(s["u_norm2"][-1]), "inverse_loss_slope": slope,
                     "score_rate_over_loss": float(s["d_A_mu1_mu2_dt"][-1] / s["loss"][-1]),
                     "score_rate_at_0": float(abs(s["d_A_mu1_mu2_dt"][0])),
                     "attention_deviation_at_0": _largest_deviation(s, ATTENTION, 1 / result.config.data.L),
                     "attention_change_at_T1": attention_change, "value_gram_change_at_T1": value_change,
                     "key_query_change_at_T1": key_query_change})
    return rows


RESOLUTION_ULPS = 100
"""A change smaller than this many float64 ulps of the quantity itself is rounding, not a
measurement (the attention weights, about 1/L, stop resolving their Phase-1 change near
m = 10^4): such a seed's value is left out of the fit rather than fitted as a fake power."""


def _largest_change(series: dict, names: tuple[str, ...], at: int) -> float | None:
    """max |x(t_at) - x(0)| over the columns `names` the run has, or None when every change is
    below the float64 resolution of its column (`RESOLUTION_ULPS`)."""
    changes = []
    for name in (n for n in names if n in series):
        before, after = float(series[name][0]), float(series[name][at])
        floor = RESOLUTION_ULPS * np.finfo(np.float64).eps * max(abs(before), abs(after))
        if abs(after - before) > floor:
            changes.append(abs(after - before))
    return float(max(changes)) if changes else None


def _largest_deviation(series: dict, names: tuple[str, ...], value: float) -> float | None:
    """max |x(0) - value| over the columns `names` the run has."""
    present = [n for n in names if n in series]
    return float(max(abs(series[n][0] - value) for n in present)) if present else None


def width_scaling(base: Config, axis: str, values: list[int], progress: Callable[[str], None] | None = None) -> dict:
    """Run `base` (an ensemble, the ODE flow) at each width and fit the exponents."""
    from coocflow.runner import train

    table = []
    for value in values:
        config = base.replace(width_overrides(axis, value, base))
        if progress:
            progress(f"{axis}={value}: m={config.model.m}, m1={config.model.m1}, {len(config.seed_list)} seeds")
        for row in measure(train(config)):
            table.append({"value": value, "m": config.model.m, "m1": config.model.m1, **row})
    from coocflow.phases.exponents import fit_exponent, verdict

    theory = base.init.scheme == "theory"
    fits = {}
    for quantity in QUANTITIES:
        medians, per_seed = [], []
        for value in values:
            found = [r[quantity] for r in table if r["value"] == value and r[quantity] is not None]
            medians.append(np.median(found) if found else np.nan)
            per_seed.append([r[quantity] if r[quantity] is not None else np.nan for r in table if r["value"] == value])
        bound = quantity in UPPER_BOUNDS
        predicted = (UPPER_BOUNDS if bound else PREDICTED).get(quantity, {}).get(axis) if theory else None
        interval = fit_exponent(np.asarray(values, float), per_seed, predicted=predicted, name=quantity)
        if bound and predicted is not None and interval.fitted and interval.low == interval.low:
            outcome = "pass" if interval.low <= predicted else "fail"
        else:
            outcome = verdict(interval)
        fits[quantity] = {**fit_power_law(np.asarray(values, float), np.asarray(medians, float)),
                          "medians": [None if not np.isfinite(v) else float(v) for v in medians],
                          "predicted_exponent": predicted, "kind": "upper bound" if bound else "order",
                          "fit": interval.to_dict(), "verdict": outcome, "sentence": interval.sentence()}
    return {"axis": axis, "values": list(values), "seeds": list(base.seed_list), "rows": table, "fits": fits,
            "config": base.to_dict()}


def figure(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"T1": "T1 (all training samples correct)", "u_norm2_at_T1": "||u||^2 at T1",
              "phase1_score_drift": "max |A(T1) - A(0)| (target scores)",
              "final_score_change": "mean |A(end) - A(0)| (target scores)", "dG1_at_0": "dG(mu_1)/dt at t = 0",
              "G1_at_T1": "G(mu_1) at T1", "u_norm2_at_end": "||u||^2 at the end",
              "inverse_loss_slope": "slope of 1/loss, late Phase 2", "score_rate_over_loss": "dA[mu1,mu2]/dt / loss, end",
              "score_rate_at_0": "|dA[mu1,mu2]/dt| at t = 0", "attention_deviation_at_0": "max |p - 1/L| at t = 0",
              "attention_change_at_T1": "max |p(T1) - p(0)|", "value_gram_change_at_T1": "max |V(T1) - V(0)|",
              "key_query_change_at_T1": "max |K, Q(T1) - K, Q(0)|"}
    columns = 4
    rows = -(-len(labels) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.3 * columns, 4.0 * rows), constrained_layout=True)
    axes = np.atleast_1d(axes).ravel()
    values = np.asarray(report["values"], float)
    for ax, (quantity, label) in zip(axes, labels.items()):
        points = [(r["value"], r[quantity]) for r in report["rows"] if r[quantity] is not None]
        if points:
            x, y = np.array(points, dtype=float).T
            ax.scatter(x, y, s=12, alpha=0.5, color="tab:blue", label="seeds")
        fit = report["fits"][quantity]
        medians = np.array([np.nan if v is None else v for v in fit["medians"]], float)
        ax.plot(values, medians, "o", color="black", label="median")
        if fit["exponent"] is not None:
            ax.plot(values, fit["prefactor"] * values ** fit["exponent"], "k-",
                    label=f"fit: exponent {fit['exponent']:.2f}")
        if fit["predicted_exponent"] is not None and np.isfinite(medians).any():
            anchor = np.flatnonzero(np.isfinite(medians))[0]
            ax.plot(values, medians[anchor] * (values / values[anchor]) ** fit["predicted_exponent"], "r--",
                    label=f"predicted: exponent {fit['predicted_exponent']:g}")
        ax.set(xscale="log", yscale="log", xlabel=f"width ({report['axis']})", ylabel=label)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    fig.suptitle(f"width scaling over {report['axis']} = {report['values']}, {len(report['seeds'])} seeds each", fontsize=10)
    fig.savefig(path, dpi=120)
    plt.close(fig)
