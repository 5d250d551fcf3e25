"""Experiments the authors promised and the reviewers asked for, on the same core.

A study runs one or more variants of a configuration, each as a seed ensemble written as an
ordinary run folder under `OUT/variants/NAME`, then writes its own comparison figure and a
`summary.md` with the numbers it measured into `OUT`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from coocflow.config import Config, random_slots
from coocflow.plots.figures import band_curve
from coocflow.plots.save import save_figure
from coocflow.run import train, write_run
from coocflow.run.eq1 import Eq1TrainedRun

Progress = Callable[[str], None]


@dataclass
class StudyResult:
    rows: list[dict]
    summary: str
    figures: list[Path]


def _band(ax, t: np.ndarray, values: np.ndarray, label: str, color: str, style: str = "-") -> None:
    """Median over seeds (rows of `values`) against t > 0, with the 10-90% band when there are
    several seeds."""
    shown = t > 0
    band_curve(ax, t[shown], values[:, shown], label, color, style)


def _plot(ax, result: Eq1TrainedRun, key: str, label: str, color: str, transform=lambda v: v) -> None:
    _band(ax, result.trajectory.t, transform(result.trajectory.series[key]), label, color)


def training_text(config: Config) -> str:
    """How a study's variant trains, in words: the flow with its solver, or the optimizer's steps."""
    train, solver, optimizer = config.train, config.solver, config.optimizer
    if config.is_flow:
        return f"the flow ({solver.name}, rtol {solver.rtol:g}) to t = {config.t_end:g}"
    return f"{train.method} with lr {optimizer.lr:g} for {train.steps} steps (t = lr x steps = {config.t_end:g})"


def time_label(config: Config) -> str:
    """The time axis of a study's figures."""
    return "flow time t" if config.is_flow else "t = lr x steps"


def decay_rate(t: np.ndarray, loss: np.ndarray, t_from: float) -> float | None:
    """Exponent b of loss ~ t^-b fitted on log-log axes from `t_from` on."""
    keep = (t >= t_from) & (loss > 0) & np.isfinite(loss)
    if keep.sum() < 3:
        return None
    slope, _ = np.polyfit(np.log(t[keep]), np.log(loss[keep]), 1)
    return float(-slope)


def _run_variants(base: Config, variants: dict[str, dict], out: Path, progress: Progress | None) -> dict[str, Eq1TrainedRun]:
    """Each variant as an ordinary run folder (metrics, states, manifest) under OUT/variants;
    the study draws the comparison figure, so the variants skip their own figures."""
    results = {}
    for name, overrides in variants.items():
        config = base.replace({**overrides, "name": f"{base.name}-{name}"})
        if progress:
            progress(f"variant {name}")
        results[name] = train(config)
        write_run(results[name], out / "variants" / name, force=True, figures=False)
    return results


def _save(fig, path: Path) -> Path:
    return save_figure(fig, path, dpi=120)


def _figure(rows: int, cols: int, width: float = 5.2, height: float = 4.0):
    matplotlib.use("Agg")

    return plt.subplots(rows, cols, figsize=(width * cols, height * rows), constrained_layout=True)


COLORS = ("black", "tab:blue", "tab:green", "tab:red", "tab:purple", "tab:orange", "tab:brown", "tab:cyan")


def _change(values: np.ndarray) -> np.ndarray:
    return values - values[:, :1]


def _comparison_figure(results: dict[str, Eq1TrainedRun], panels: list[tuple], path: Path) -> Path:
    """One panel per (column, transform, axis settings), one curve (median and band) per variant."""
    assert len(results) <= len(COLORS), "more variants than colors"
    fig, axes = _figure(1, len(panels))
    for ax, (key, transform, settings) in zip(axes, panels):
        for (name, result), color in zip(results.items(), COLORS):
            _plot(ax, result, key, name, color, transform=transform)
        ax.set(xscale="log", **settings)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    return _save(fig, path)


def _table(rows: list[dict], columns: list[str]) -> str:
    def cell(v):
        if v is None:
            return "-"
        return f"{v:.3g}" if isinstance(v, float) else str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _median_or_none(values: list) -> float | None:
    found = [v for v in values if v is not None]
    return float(np.median(found)) if found else None


def _t1_median(result: Eq1TrainedRun) -> float | None:
    return _median_or_none(result.t1)


def generalization(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """Train and test accuracy and loss over t (the authors' Figure 2 in their answers), and the
    fitted power-law decay rates of the train and test losses side by side, for uniform random
    tokens (the paper's experiment) and distinct ones (the theory's Assumption 2.3 (ii))."""
    distinct_d = max(base.data.d, random_slots(base.data.n, base.data.L) + 3)
    results = _run_variants(base, {"uniform": {"data.random_tokens": "uniform"},
                                   "distinct": {"data.random_tokens": "distinct", "data.d": distinct_d}},
                            out, progress)
    fig, axes = _figure(1, 2)
    for (name, result), color in zip(results.items(), ("tab:blue", "tab:red")):
        d = result.config.data.d
        _plot(axes[0], result, "train_acc", f"{name} (d={d}): train", color)
        _plot(axes[0], result, "test_acc", f"{name} (d={d}): test", "tab:orange" if name == "uniform" else "tab:purple")
        _plot(axes[1], result, "loss", f"{name} (d={d}): train", color)
        _plot(axes[1], result, "test_loss", f"{name} (d={d}): test", "tab:orange" if name == "uniform" else "tab:purple")
    axes[0].set(xscale="log", xlabel="flow time t", ylabel="accuracy", title="accuracy")
    axes[1].set(xscale="log", yscale="log", xlabel="flow time t", ylabel="loss", title="loss")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    rows, medians = [], {}
    for name, result in results.items():
        t1 = _t1_median(result) or result.trajectory.t[-1] / 100
        t_from = max(10 * t1, result.trajectory.t[-1] / 100)
        variant_rows = []
        for i, seed in enumerate(result.seeds):
            s = result.seed_series(i)
            variant_rows.append({"tokens": name, "d": result.config.data.d, "seed": seed, "T1": result.t1[i],
                                 "train_acc": float(s["train_acc"][-1]), "test_acc": float(s["test_acc"][-1]),
                                 "train_loss": float(s["loss"][-1]), "test_loss": float(s["test_loss"][-1]),
                                 "train_decay": decay_rate(s["t"], s["loss"], t_from),
                                 "test_decay": decay_rate(s["t"], s["test_loss"], t_from)})
        medians[name] = {k: _median_or_none([r[k] for r in variant_rows])
                         for k in ("train_acc", "test_acc", "test_loss", "train_decay", "test_decay")}
        rows += variant_rows
    figure = _save(fig, out / "generalization.png")
    def rate(value):
        return "t^-?" if value is None else f"t^-{value:.2f}"

    lines = [f"- {name}: train accuracy {m['train_acc']:.3f}, test accuracy {m['test_acc']:.3f} "
             f"(test loss {m['test_loss']:.3g}); train loss decays like {rate(m['train_decay'])}, "
             f"test loss like {rate(m['test_decay'])}." for name, m in medians.items()]
    text = (f"# generalization\n\n{len(base.seed_list)} seeds of `{base.name}` per random-token mode, "
            f"{base.data.n_test} i.i.d. test samples. Decay rates b of loss ~ t^-b are fitted on log-log axes "
            "from max(10 T1, t_end / 100).\n\n"
            + _table(rows, ["tokens", "d", "seed", "T1", "train_acc", "test_acc", "train_loss", "test_loss",
                            "train_decay", "test_decay"])
            + "\n\nMedians:\n\n" + "\n".join(lines) + "\n")
    return StudyResult(rows, text, [figure])


OPTIMIZERS = {
    "gd": {"train.method": "gd"},
    "sgd": {"train.method": "sgd", "train.batch_size": 10},
    "momentum": {"train.method": "momentum"},
    "adam": {"train.method": "adam", "optimizer.lr": 0.001},
    "adamw": {"train.method": "adamw", "optimizer.lr": 0.001},
}


def optimizers(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """GD, mini-batch SGD, momentum, Adam and AdamW from the same data and initialization: does
    the two-phase split survive, and what does Adam's normalization do to the scores?"""
    variants = {name: dict(overrides) for name, overrides in OPTIMIZERS.items()}
    variants["momentum"]["optimizer.lr"] = base.optimizer.lr * (1 - base.optimizer.momentum)
    results = _run_variants(base, variants, out, progress)
    figure = _comparison_figure(results, [
        ("loss", lambda v: v, {"yscale": "log", "xlabel": "t = lr x steps", "ylabel": "training loss"}),
        ("A_mu1_mu2", _change, {"xlabel": "t = lr x steps", "ylabel": "A[mu_1,mu_2](t) - A(0)"}),
        ("A_mu3_mu1", _change, {"xlabel": "t = lr x steps", "ylabel": "A[mu_3,mu_1](t) - A(0)"}),
    ], out / "optimizers.png")
    rows = []
    for name, result in results.items():
        s = result.trajectory.series
        rows.append({"optimizer": name, "lr": result.config.optimizer.lr, "T1": _t1_median(result),
                     "final_loss": float(np.nanmedian(s["loss"][:, -1])),
                     "dA_12": float(np.nanmedian(s["A_mu1_mu2"][:, -1] - s["A_mu1_mu2"][:, 0])),
                     "dA_31": float(np.nanmedian(s["A_mu3_mu1"][:, -1] - s["A_mu3_mu1"][:, 0])),
                     "p_q1_k2": float(np.nanmedian(s["p_q1_k2"][:, -1])),
                     "p_q1_k3": float(np.nanmedian(s["p_q1_k3"][:, -1])),
                     "diverged": sum(st != "completed" for st in result.trajectory.status)})
    text = (f"# optimizers\n\nSame data and initialization ({len(base.seed_list)} seeds of `{base.name}`), medians "
            "over seeds. Momentum runs at lr x (1 - momentum) so its effective step matches GD's; Adam and "
            "AdamW at lr 0.001. Time is t = lr x steps for all (nominal for Adam).\n\n"
            + _table(rows, ["optimizer", "lr", "T1", "final_loss", "dA_12", "dA_31", "p_q1_k2", "p_q1_k3", "diverged"])
            + "\n")
    return StudyResult(rows, text, [figure])


INIT_SCALES = {
    "kaiming": {"init.scheme": "kaiming", "init.c0": 1.0, "init.c1": 1.0},
    "kaiming-c1=0.1": {"init.scheme": "kaiming", "init.c0": 1.0, "init.c1": 0.1},
    "kaiming-c1=0.01": {"init.scheme": "kaiming", "init.c0": 1.0, "init.c1": 0.01},
    "theory": {"init.scheme": "theory", "init.c0": 1.0, "init.c1": 1.0},
    "theory-c0=0.3": {"init.scheme": "theory", "init.c0": 0.3, "init.c1": 1.0},
}


def init_scale(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """How the initialization (scheme and scales c0, c1) changes the I2/I3 rise in Phase 1, T1,
    and how far the scores move."""
    results = _run_variants(base, INIT_SCALES, out, progress)
    figure = _comparison_figure(results, [
        ("loss_I2", lambda v: v, {"xlabel": "flow time t", "ylabel": "I2 loss (linear)"}),
        ("loss", lambda v: v, {"yscale": "log", "xlabel": "flow time t", "ylabel": "training loss"}),
        ("A_mu1_mu2", _change, {"xlabel": "flow time t", "ylabel": "A[mu_1,mu_2](t) - A(0)"}),
    ], out / "init_scale.png")
    rows = []
    for name, result in results.items():
        rises, moved = [], []
        for i in range(result.trajectory.n_seeds):
            s = result.seed_series(i)
            t1 = result.t1[i]
            window = s["t"] <= (t1 if t1 is not None else s["t"][-1])
            rises.append(min(float(s[g][window].max() - s[g][0]) for g in ("loss_I2", "loss_I3")))
            moved.append(float(s["A_mu1_mu2"][-1] - s["A_mu1_mu2"][0]))
        rows.append({"init": name, "initial_loss": float(np.nanmedian(result.trajectory.series["loss"][:, 0])),
                     "T1": _t1_median(result), "I2_I3_rise": float(np.median(rises)),
                     "seeds_with_rise": f"{sum(r > 1e-3 for r in rises)}/{len(rises)}",
                     "dA_12": float(np.median(moved))})
    text = (f"# init-scale\n\n{len(base.seed_list)} seeds of `{base.name}` per initialization, medians over seeds. "
            "`I2_I3_rise` is the smaller of the two groups' rise above their initial loss before T1.\n\n"
            + _table(rows, ["init", "initial_loss", "T1", "I2_I3_rise", "seeds_with_rise", "dA_12"]) + "\n")
    return StudyResult(rows, text, [figure])
