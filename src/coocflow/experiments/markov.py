"""`markov`: next-token prediction on a random Markov chain with the one-layer model of eq. (1).

The authors' suggested next step. The model keeps eq. (1)'s attention and MLP but reads out a
vocabulary: the query is the last position only,
h = sum_k W_V x_k softmax_k(x_k^T W_K^T W_Q x_L / sqrt(m)), logits = B W h, with W_Q, W_K,
W_V and W trained and B (d x m1, fixed random +-1/sqrt(m1)) playing the role of the fixed a.
There is no positional encoding, so the only way to find the one token that matters, x_L, is
for attention to favour keys equal to the query token: the diagonal of A = W_K^T W_Q. With
near-uniform attention the model is a bag of words over the context; the study asks whether
gradient descent first fits that (MLP and value move, attention does not: Phase 1) and only
then grows the diagonal scores (Phase 2), and how close the loss gets to the entropy rate.

The model, its data and its observables are the Markov system (systems/markov.py); every seed
is trained by `flow.system.integrate` (full-batch `gd` or `adam`, or the flow itself): a seed
whose loss or weights turn non-finite stops there and keeps its observations before, and in a
study folder the training checkpoints and resumes bit for bit (study_folder.train_variant).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from coocflow.config import Config
from coocflow.data.markov import MarkovDataset
from coocflow.experiments.study_folder import divergence_lines, train_variant
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
from coocflow.flow.system import EnsembleTraining, build_ensemble, integrate
from coocflow.flow.trajectory import Checkpoint
from coocflow.storage import write_metrics
from coocflow.storage.folders import StudyFolder
from coocflow.run import long_columns
from coocflow.systems.markov import OBSERVABLES, MarkovSystem, MarkovTransformer


def build_markov_ensemble(config: Config) -> tuple[MarkovTransformer, MarkovDataset, MarkovDataset]:
    """Per seed its own chain, data and initialization, stacked along a leading seed axis
    (`flow.system.build_ensemble` of the Markov system)."""
    return build_ensemble(MarkovSystem.from_config(config), config.seed_list)


def check_markov_config(config: Config) -> None:
    """Refuse the trainings this experiment does not run (it is full-batch), before a folder exists."""
    MarkovSystem.from_config(config).check_training(config)


def train_markov(config: Config, checkpoint: Checkpoint | None = None,
                 progress: Progress | None = None) -> EnsembleTraining:
    """Train every seed of `config` (`flow.system.integrate`, checkpointed into `checkpoint` when
    given) and return the observed series, each (seeds, observed steps)."""
    def report(done: float) -> None:
        if progress:
            progress(f"markov: training {len(config.seed_list)} seeds, {done:.0%} of the way to t = {config.t_end:g}")

    return integrate(MarkovSystem.from_config(config), config, checkpoint, report)


def train_markov_ensemble(config: Config) -> dict[str, np.ndarray]:
    """Train every seed of `config`: the observed series, each (seeds, observed steps), plus
    `step` and `t` = lr * step."""
    training = train_markov(config)
    return {**training.series, "step": training.steps, "t": training.t}


def crossing_time(t: np.ndarray, fraction: np.ndarray, level: float) -> float | None:
    """First time `fraction` reaches `level`, linearly interpolated between observations."""
    reached = np.flatnonzero(fraction >= level)
    if reached.size == 0:
        return None
    i = int(reached[0])
    if i == 0:
        return float(t[0])
    before, after = fraction[i - 1], fraction[i]
    return float(t[i - 1] + (level - before) / (after - before) * (t[i] - t[i - 1]))


def fraction_done(values: np.ndarray) -> np.ndarray:
    """(v(t) - v(0)) / (v(end) - v(0)): how much of its total change a quantity has done."""
    total = values[-1] - values[0]
    return (values - values[0]) / total if total != 0 else np.zeros_like(values)


PHASE1_SCORE_FRACTION = 0.1
"""Phase 1 ends when the diagonal score gap has done this fraction of its total change; the
picture counts as two-phase when the MLP/value weights have done half of theirs before that."""


def phase_times(t: np.ndarray, s: dict[str, np.ndarray]) -> dict[str, float | None]:
    """One seed's phase picture from its series `s`.

    `t_half_mlp`: when the MLP/value weights have done half their total relative change;
    `t_half_score`: when the diagonal score gap has done half its change; `score_at_half_mlp`:
    the fraction of the score gap's change done by `t_half_mlp` (near 0 in a two-phase picture);
    `loss_phase1`: the training loss when the score gap has done PHASE1_SCORE_FRACTION of its
    change (what the MLP/value part reaches with near-uniform attention); `t_loss_half` and
    `t_loss_90`: when the training loss has gone 50% and 90% of the way from its initial value to
    the Bayes loss on the training set.
    """
    score = fraction_done(s["score_gap"])
    loss_progress = (s["train_loss"][0] - s["train_loss"]) / (s["train_loss"][0] - s["bayes_train_loss"][0])
    t_half_mlp = crossing_time(t, fraction_done(s["change_mlp_value"]), 0.5)
    t_phase1 = crossing_time(t, score, PHASE1_SCORE_FRACTION)
    return {
        "t_half_mlp": t_half_mlp,
        "t_half_score": crossing_time(t, score, 0.5),
        "score_at_half_mlp": None if t_half_mlp is None else float(np.interp(t_half_mlp, t, score)),
        "loss_phase1": None if t_phase1 is None else float(np.interp(t_phase1, t, s["train_loss"])),
        "t_loss_half": crossing_time(t, loss_progress, 0.5),
        "t_loss_90": crossing_time(t, loss_progress, 0.9),
    }


ROW_KEYS = ("H", "H_pi", "train_loss", "test_loss", "bayes_test", "test_minus_H", "train_minus_H", "test_acc",
            "bayes_acc", "same_attn", "uniform_attn", "score_gap", "t_half_mlp", "t_half_score", "score_at_half_mlp",
            "loss_phase1", "t_loss_half", "t_loss_90")


def _seed_rows(config: Config, series: dict[str, np.ndarray], kept: list[int]) -> list[dict]:
    """One row per seed from its first `kept` observations (all unless it diverged)."""
    rows = []
    for i, seed in enumerate(config.seed_list):
        if not kept[i]:
            rows.append({"seed": seed, **{key: None for key in ROW_KEYS}})
            continue
        s = {name: values[i, :kept[i]] for name, values in series.items() if name not in ("step", "t")}
        H = float(s["entropy_rate"][-1])
        rows.append({
            "seed": seed, "H": H, "H_pi": float(s["stationary_entropy"][-1]),
            "train_loss": float(s["train_loss"][-1]), "test_loss": float(s["test_loss"][-1]),
            "bayes_test": float(s["bayes_test_loss"][-1]), "test_minus_H": float(s["test_loss"][-1]) - H,
            "train_minus_H": float(s["train_loss"][-1]) - H,
            "test_acc": float(s["test_acc"][-1]), "bayes_acc": float(s["bayes_test_acc"][-1]),
            "same_attn": float(s["same_token_attention"][-1]), "uniform_attn": float(s["same_token_uniform"][-1]),
            "score_gap": float(s["score_gap"][-1]),
            **phase_times(series["t"][:kept[i]], s),
        })
    return rows


def _last_finite(values: np.ndarray) -> np.ndarray:
    """Each seed's last finite value (NaN if it has none): the last one unless the seed diverged."""
    finite = np.isfinite(values)
    last = values.shape[1] - 1 - np.argmax(finite[:, ::-1], axis=1)
    return np.where(finite.any(axis=1), values[np.arange(len(values)), last], np.nan)


def _markov_figure(series: dict[str, np.ndarray], path: Path, xlabel: str = "t = lr x steps") -> Path:
    """Loss against H and H(pi); relative weight changes; fraction of change done (the phase
    picture); same-token attention against its uniform level. Medians with 10-90% bands."""
    t = series["t"]
    fig, axes = _figure(1, 4, width=4.6)
    loss_ax, change_ax, phase_ax, attn_ax = axes
    _band(loss_ax, t, series["train_loss"], "train loss", COLORS[1])
    _band(loss_ax, t, series["test_loss"], "test loss", COLORS[3])
    loss_ax.axhline(np.median(_last_finite(series["entropy_rate"])), color="black", ls="--", lw=1,
                    label="entropy rate H")
    loss_ax.axhline(np.median(_last_finite(series["stationary_entropy"])), color="gray", ls=":", lw=1.2, label="H(pi)")
    loss_ax.set(xscale="log", xlabel=xlabel, ylabel="cross-entropy (nats)", title="loss")
    for name, color in zip(("change_W", "change_W_V", "change_W_Q", "change_W_K"), COLORS[1:]):
        _band(change_ax, t, series[name], name.replace("change_", ""), color)
    change_ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="||X(t) - X(0)|| / ||X(0)||",
                  title="relative weight change")
    phase = {
        "MLP/value change": np.stack([fraction_done(v) for v in series["change_mlp_value"]]),
        "score gap (diag - offdiag)": np.stack([fraction_done(v) for v in series["score_gap"]]),
        "loss drop": (series["train_loss"][:, :1] - series["train_loss"])
        / (series["train_loss"][:, :1] - series["bayes_train_loss"][:, :1]),
    }
    for (name, values), color in zip(phase.items(), (COLORS[1], COLORS[3], COLORS[0])):
        _band(phase_ax, t, values, name, color)
    phase_ax.set(xscale="log", xlabel=xlabel, ylabel="fraction of total change (loss: of way to Bayes)",
                 title="phase picture")
    _band(attn_ax, t, series["same_token_attention"], "attention on keys = query token", COLORS[2])
    _band(attn_ax, t, series["same_token_uniform"], "uniform attention's share", "gray", "--")
    attn_ax.set(xscale="log", xlabel=xlabel, ylabel="attention from the last query",
                title="same-token attention")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    return _save(fig, path)


def _fmt(value: float | None, spec: str = ".3g") -> str:
    return "-" if value is None else format(value, spec)


def markov(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """Next-token prediction on a random Markov chain per seed: loss against the entropy rate,
    and whether MLP/value and attention move in two phases. Writes metrics.parquet and markov.png
    into `out` and returns the summary text (the caller writes summary.md)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = base.seed_list
    if progress:
        progress(f"markov: training {len(seeds)} seeds, {training_text(base)}")
    training = train_variant(base, out, "markov", lambda checkpoint: train_markov(base, checkpoint, progress))
    series = {**training.series, "step": training.steps, "t": training.t}
    seconds = training.train_s
    columns = long_columns(training)  # in OBSERVABLES' order (a compiled call returns its dict sorted)
    write_metrics(StudyFolder(out).metrics_file, {name: columns[name] for name in ("seed", "step", "t", *OBSERVABLES)})
    if progress:
        progress("markov: drawing the figure")
    figure = _markov_figure(series, out / "markov.png", time_label(base))
    rows = _seed_rows(base, series, [training.kept(i) for i in range(len(seeds))])
    medians = {key: _median_or_none([r[key] for r in rows]) for key in rows[0] if key != "seed"}
    two_phase = medians["score_at_half_mlp"] is not None and medians["score_at_half_mlp"] < PHASE1_SCORE_FRACTION
    verdict = (f"two phases: the MLP/value weights do half their change while the score gap has done under "
               f"{PHASE1_SCORE_FRACTION:.0%} of its own" if two_phase else
               f"no clear two-phase split: the score gap has done {PHASE1_SCORE_FRACTION:.0%} or more of its change "
               "by the time the MLP/value weights have done half of theirs")
    text = (
        f"# markov\n\n{len(seeds)} seeds of `{base.name}`, each its own random chain over d={base.data.d} states "
        f"(rows ~ Dirichlet({MarkovSystem.settings_of(base).alpha:g})), {base.data.n} training sequences and {base.data.n_test} test "
        f"sequences of L={base.data.L} tokens plus the target, m={base.model.m}, m1={base.model.m1}, "
        f"{base.init.scheme} init (c0={base.init.c0}, c1={base.init.c1}), {training_text(base)}; trained in {seconds:.1f} s. Losses in nats. H is the chain's "
        "entropy rate (the Bayes loss in expectation), H_pi its stationary entropy (context ignored). "
        "`same_attn` is the last query's attention on keys equal to its token, `uniform_attn` what uniform "
        "attention gives them. Half-change times are when the MLP/value weights (`t_half_mlp`) and the "
        "diagonal score gap (`t_half_score`) have done half their total change; `loss_phase1` is the training "
        f"loss when the score gap has done {PHASE1_SCORE_FRACTION:.0%} of its change (the end of Phase 1); "
        "`t_loss_half`/`t_loss_90` when the training loss has gone 50%/90% of the way from its start to the Bayes "
        "loss.\n\n"
        + _table(rows, ["seed", "H", "H_pi", "train_loss", "test_loss", "bayes_test", "test_minus_H", "test_acc",
                        "bayes_acc", "same_attn", "uniform_attn", "score_gap", "t_half_mlp", "t_half_score",
                        "score_at_half_mlp", "loss_phase1", "t_loss_half", "t_loss_90"])
        + "\n\nMedians over seeds:\n\n"
        f"- final loss minus entropy rate: test {_fmt(medians['test_minus_H'])}, "
        f"train {_fmt(medians['train_minus_H'])} "
        f"(H {_fmt(medians['H'])}, H(pi) {_fmt(medians['H_pi'])}); test accuracy {_fmt(medians['test_acc'])} "
        f"vs Bayes {_fmt(medians['bayes_acc'])}.\n"
        f"- half-change times: MLP/value t = {_fmt(medians['t_half_mlp'])}, "
        f"score gap t = {_fmt(medians['t_half_score'])} "
        f"(the score gap had done {_fmt(medians['score_at_half_mlp'], '.0%')} of its change by then); loss halfway "
        f"to Bayes at t = {_fmt(medians['t_loss_half'])}, 90% at t = {_fmt(medians['t_loss_90'])}.\n"
        f"- {verdict}; at the end of Phase 1 the training loss is {_fmt(medians['loss_phase1'])} (H(pi) "
        f"{_fmt(medians['H_pi'])}, H {_fmt(medians['H'])}), and the last query ends with "
        f"{_fmt(medians['same_attn'])} of its attention on its own token against "
        f"{_fmt(medians['uniform_attn'])} under uniform attention."
        + "".join(f"\n- {line}" for line in divergence_lines(training))
        + "\n"
    )
    return StudyResult(rows, text, [figure])
