"""`deep`: a standard multi-layer, multi-head transformer on the co-occurrence task.

Does the practitioners' architecture (model/deep.py) drive the loss to zero with zero error, like
eq. (1) does (the authors' Figure 1 in their answers)? And what is its phase picture: when does
classification become correct (T_correct) versus when does the loss fall (T_loss), and how does
each layer's attention to the two target words mu_1, mu_2 move?

The model, its data and its observables are the deep system (systems/deep.py); every seed is
trained by `flow.system.integrate`, by a full-batch optimizer (t = lr x steps, nominal for Adam)
or by the flow itself. A seed whose loss or weights turn non-finite stops there and keeps its
observations before.

A `deep` study folder checkpoints and resumes through experiments/study_folder.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coocflow.config import Config
from coocflow.experiments.studies import (
    COLORS,
    Progress,
    StudyResult,
    _band,
    _figure,
    _median_or_none,
    _save,
    _table,
    time_label,
    training_text,
)
from coocflow.experiments.study_folder import divergence_lines, train_variant
from coocflow.flow.system import EnsembleTraining, integrate
from coocflow.flow.trajectory import Checkpoint
from coocflow.observables.ensemble import first_time
from coocflow.storage.folders import StudyFolder
from coocflow.storage.run_folder import write_metrics
from coocflow.run import long_columns
from coocflow.systems.deep import DeepSystem

LOSS_DROP = 0.1
"""T_loss is the first observed time the training loss is at most this fraction of its initial value."""

SMALL_LOSS = 0.01
"""T_small is the first observed time the training loss is below this absolute value."""


def check_deep_config(config: Config) -> None:
    """Refuse a training the deep system cannot do (mini-batch SGD), before a folder exists."""
    DeepSystem.from_config(config).check_training(config)


def train_deep(config: Config, checkpoint: Checkpoint | None = None,
               progress: Progress | None = None) -> EnsembleTraining:
    """Train every seed of `config.seed_list` (`flow.system.integrate`, checkpointed into
    `checkpoint` when given) and return the observed series."""
    def report(done: float) -> None:
        if progress:
            progress(f"deep: training {len(config.seed_list)} seeds, {done:.0%} of the way to t = {config.t_end:g}")

    return integrate(DeepSystem.from_config(config), config, checkpoint, report)


def deep_columns(training: "EnsembleTraining") -> dict[str, np.ndarray]:
    """The metrics as flat columns: `seed`, `step`, `t`, then one column per scalar observable
    and per layer of the per-layer ones, one row per seed x observed step (NaN from a diverged
    seed's first non-finite observation on)."""
    return long_columns(training, entry_prefix="_L")


def run_deep(config: Config) -> dict[str, np.ndarray]:
    """Train every seed of `config.seed_list` and return the metrics columns (`deep_columns`)."""
    return deep_columns(train_deep(config))


def half_change_time(t: np.ndarray, values: np.ndarray) -> float | None:
    """The first observed time where `values` has moved half of its total change (None if it did not move)."""
    change = values - values[0]
    total = change[-1]
    if not np.isfinite(total) or total == 0:
        return None
    return first_time(t, change * np.sign(total) >= 0.5 * abs(total))


def _per_seed(columns: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    rows = columns["seed"] == seed
    return {name: values[rows] for name, values in columns.items()}


def phase_row(series: dict[str, np.ndarray], layers: int) -> dict:
    """One seed's phase picture: T_correct, T_loss, T_small, per-layer half-change times of the
    target attention, its initial and final values, and the final losses and accuracies."""
    t, loss = series["t"], series["loss"]
    if not len(t):
        return {"seed": int(series["seed"][0]), **{key: None for key in _row_keys(layers)}}
    row = {"seed": int(series["seed"][0]),
           "T_correct": first_time(t, series["min_margin"] > 0),
           "T_loss": first_time(t, loss <= LOSS_DROP * loss[0]),
           "T_small": first_time(t, loss < SMALL_LOSS),
           "final_loss": float(loss[-1]), "final_test_loss": float(series["test_loss"][-1]),
           "final_train_acc": float(series["train_acc"][-1]), "final_test_acc": float(series["test_acc"][-1])}
    for layer in range(1, layers + 1):
        targets = series[f"attn_targets_L{layer}"]
        row[f"T_attn_L{layer}"] = half_change_time(t, targets)
        row[f"attn_targets_init_L{layer}"] = float(targets[0])
        row[f"attn_targets_L{layer}"] = float(targets[-1])
        row[f"attn_mu3_L{layer}"] = float(series[f"attn_mu3_L{layer}"][-1])
    return row


def _row_keys(layers: int) -> list[str]:
    """The keys of a phase row after `seed`."""
    return (["T_correct", "T_loss", "T_small", "final_loss", "final_test_loss", "final_train_acc", "final_test_acc"]
            + [f"{key}_L{layer}" for layer in range(1, layers + 1)
               for key in ("T_attn", "attn_targets_init", "attn_targets", "attn_mu3")])


def _ensemble(columns: dict[str, np.ndarray], name: str, seeds: tuple[int, ...]) -> np.ndarray:
    return np.stack([columns[name][columns["seed"] == seed] for seed in seeds])


def _mark(ax, time_value: float | None, label: str, style: str) -> None:
    if time_value is not None:
        ax.axvline(time_value, color="gray", ls=style, lw=1, label=label)


def deep_figure(columns: dict[str, np.ndarray], rows: list[dict], config: Config, path: Path) -> Path:
    """Four panels over t: train and test loss, train and test accuracy (with median T_correct and
    T_loss marked), and per layer the attention to mu_1 + mu_2 in I1 samples and to mu_3."""
    seeds, layers, L = config.seed_list, config.model.layers, config.data.L
    t = columns["t"][columns["seed"] == seeds[0]]
    t_correct = _median_or_none([r["T_correct"] for r in rows])
    t_loss = _median_or_none([r["T_loss"] for r in rows])
    fig, axes = _figure(2, 2)
    loss_ax, acc_ax, target_ax, common_ax = axes.ravel()
    for ax, (train_key, test_key), label in ((loss_ax, ("loss", "test_loss"), "logistic loss"),
                                             (acc_ax, ("train_acc", "test_acc"), "accuracy")):
        _band(ax, t, _ensemble(columns, train_key, seeds), "train", COLORS[1])
        _band(ax, t, _ensemble(columns, test_key, seeds), "test", COLORS[3])
        _mark(ax, t_correct, "median T_correct", "--")
        _mark(ax, t_loss, f"median T_loss ({LOSS_DROP:g} x initial)", ":")
        ax.set(xscale="log", xlabel=time_label(config), ylabel=label)
    loss_ax.set(yscale="log", title="loss")
    acc_ax.set(title="accuracy")
    for ax, key, uniform, title in ((target_ax, "attn_targets", 2 / L, "attention to mu_1 + mu_2 keys (I1 samples)"),
                                    (common_ax, "attn_mu3", 1 / L, "attention to mu_3 keys (all samples)")):
        for layer in range(1, layers + 1):
            _band(ax, t, _ensemble(columns, f"{key}_L{layer}", seeds), f"layer {layer}", f"C{layer - 1}")
        ax.axhline(uniform, color="gray", ls="--", lw=1, label=f"uniform ({uniform:.2g})")
        ax.set(xscale="log", xlabel=time_label(config), ylabel="attention weight", title=title)
    for ax in axes.ravel():
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    fig.suptitle(f"deep: {layers} layers, {config.model.heads} heads, m={config.model.m}, m1={config.model.m1}, "
                 f"{config.train.method}, median and 10-90% band of {len(seeds)} seeds")
    return _save(fig, path)


def _fmt(value: float | None) -> str:
    return "never" if value is None else f"{value:.3g}"


def deep_summary(rows: list[dict], config: Config, seconds: float, diverged: list[str] = ()) -> str:
    """The summary text: setting, per-seed table of the phase picture, the medians, and a line
    per diverged seed (`diverged`, from `divergence_lines`)."""
    layers, L = config.model.layers, config.data.L

    def median(key):
        return _median_or_none([r[key] for r in rows])

    t_correct, t_loss, t_small = median("T_correct"), median("T_loss"), median("T_small")
    drop = f"the loss falls to {LOSS_DROP:g} x its initial value"
    if t_correct is not None and t_loss is not None:
        order = "before" if t_correct < t_loss else "after" if t_correct > t_loss else "at the same time as"
        phases = f"Classification becomes correct at t = {_fmt(t_correct)}, {order} {drop} (T_loss = {_fmt(t_loss)})"
    else:
        correct = ("classification never becomes correct on every training sample" if t_correct is None
                   else f"classification becomes correct at t = {_fmt(t_correct)}")
        falls = f"{drop} at t = {_fmt(t_loss)}" if t_loss is not None else drop.replace("falls", "never falls")
        phases = f"{correct[0].upper()}{correct[1:]}; {falls}"
    small = (f"first falls below {SMALL_LOSS:g} at t = {_fmt(t_small)}" if t_small is not None
             else f"never falls below {SMALL_LOSS:g}")
    columns = (["seed", "T_correct", "T_loss", "T_small", "final_loss", "final_test_loss", "final_train_acc",
                "final_test_acc"]
               + [f"{key}_L{layer}" for layer in range(1, layers + 1)
                  for key in ("T_attn", "attn_targets", "attn_mu3")])
    layer_lines = ", ".join(f"layer {layer}: {_fmt(median(f'attn_targets_init_L{layer}'))} at t = 0 -> "
                            f"{_fmt(median(f'attn_targets_L{layer}'))} (half-change at t = "
                            f"{_fmt(median(f'T_attn_L{layer}'))}; mu_3 {_fmt(median(f'attn_mu3_L{layer}'))})"
                            for layer in range(1, layers + 1))
    seconds_text = f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
    return (
        f"# deep\n\n{len(rows)} seeds of `{config.name}`: a {layers}-layer pre-LayerNorm transformer with "
        f"{config.model.heads} heads, m={config.model.m}, m1={config.model.m1}, mean-pooled readout, no positional "
        f"embedding; {training_text(config)}; data n={config.data.n}, L={L}, d={config.data.d}, "
        f"{config.data.n_test} i.i.d. test samples. Trained in {seconds_text} (compilation included).\n\n"
        f"T_correct: first observed t with every training sample classified correctly (min y F > 0). "
        f"T_loss: first t with training loss <= {LOSS_DROP:g} x its initial value; T_small: loss < {SMALL_LOSS:g}. "
        f"T_attn_Lk: first t where layer k's attention to mu_1 + mu_2 in I1 samples moved half of its total "
        f"change. attn_targets (uniform {2 / L:.2g}) and attn_mu3 (uniform {1 / L:.2g}) are final values, "
        f"averaged over heads, queries and samples.\n\n"
        + _table(rows, columns)
        + "\n\nMedians over seeds:\n\n"
        f"- {phases}; it {small}.\n"
        f"- Final training loss {_fmt(median('final_loss'))} (train accuracy {_fmt(median('final_train_acc'))}), "
        f"test loss {_fmt(median('final_test_loss'))}, test accuracy {_fmt(median('final_test_acc'))}.\n"
        f"- Attention to mu_1 + mu_2 in I1 samples (uniform {2 / L:.2g}): {layer_lines}.\n"
        + "".join(f"- {line}\n" for line in diverged)
    )


def deep(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """Train the seed ensemble of `base`, write `metrics.parquet` and `deep.png` into `out`, and
    return the per-seed phase rows, the summary text and the figure. In a study folder
    (`begin_study_folder`) the training checkpoints and resumes (`train_variant`)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(f"deep: training {len(base.seed_list)} seeds, {training_text(base)}")
    training = train_variant(base, out, "deep", lambda checkpoint: train_deep(base, checkpoint, progress))
    columns = deep_columns(training)
    write_metrics(StudyFolder(out).metrics_file, columns)
    rows = [phase_row(_kept(_per_seed(columns, seed), training.kept(i)), base.model.layers)
            for i, seed in enumerate(base.seed_list)]
    if progress:
        progress("deep: drawing the figure")
    figure = deep_figure(columns, rows, base, out / "deep.png")
    return StudyResult(rows, deep_summary(rows, base, training.train_s, divergence_lines(training)), [figure])


def _kept(series: dict[str, np.ndarray], kept: int) -> dict[str, np.ndarray]:
    """A seed's series up to its first non-finite observation (`seed` stays whole)."""
    return {name: values if name == "seed" else values[:kept] for name, values in series.items()}
