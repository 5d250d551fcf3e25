"""Robustness to noise at T1 (MLP aligned) versus late in Phase 2 (attention trained), with a
frozen-attention ablation (testing the authors' answer that Phase 1 leaves a small margin, so
noisy data is misclassified, and that Phase 2's attention enlarges it)."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.data import Dataset
from coocflow.experiments.studies import (
    Progress,
    StudyResult,
    _figure,
    _median_or_none,
    _plot,
    _run_variants,
    _save,
    _table,
)
from coocflow.model import Transformer, logits_embedded
from coocflow.observables import median_band
from coocflow.run import train

TOKEN_NOISE = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
"""Embedding noise levels sigma: each one-hot input row gets Gaussian noise of norm ~ sigma."""
NOISE_DRAWS = 8
LABEL_FLIP = 0.1
"""Fraction of test labels flipped for the label-noise numbers."""
VARIANTS = {"full": {"train.trainable": "all"}, "frozen-attention": {"train.trainable": "mlp-value"}}


def noisy_inputs(tokens: jnp.ndarray, d: int, sigma, key: jax.Array, dtype) -> jnp.ndarray:
    """One-hot rows plus isotropic Gaussian noise with E||noise||^2 = sigma^2."""
    onehot = jax.nn.one_hot(tokens, d, dtype=dtype)
    return onehot + sigma / math.sqrt(d) * jax.random.normal(key, onehot.shape, dtype)


def robustness(model: Transformer, test: Dataset, key: jax.Array) -> dict[str, jnp.ndarray]:
    """Test accuracy under each token-noise level (mean over draws), the clean test margins'
    median, and accuracy and loss against labels with a fixed fraction flipped."""
    d, dtype = model.W_V.shape[1], model.W.dtype
    sigmas = jnp.asarray(TOKEN_NOISE, dtype)
    keys = jax.random.split(key, len(TOKEN_NOISE) * NOISE_DRAWS).reshape(len(TOKEN_NOISE), NOISE_DRAWS, -1)

    def accuracy(sigma, draw_key):
        inputs = noisy_inputs(test.tokens, d, sigma, draw_key, dtype)
        return jnp.mean(test.labels * logits_embedded(model, inputs) > 0)

    per_draw = jax.vmap(jax.vmap(accuracy, in_axes=(None, 0)), in_axes=(0, 0))(sigmas, keys)
    margins = test.labels * logits_embedded(model, jax.nn.one_hot(test.tokens, d, dtype=dtype))
    flipped = jnp.where(jax.random.uniform(jax.random.fold_in(key, 99), test.labels.shape) < LABEL_FLIP, -1.0, 1.0)
    return {"acc_vs_noise": jnp.mean(per_draw, axis=1), "median_margin": jnp.median(margins),
            "flipped_acc": jnp.mean(flipped * margins > 0),
            "flipped_loss": jnp.mean(jax.nn.softplus(-flipped * margins))}


@jax.jit
def _robustness_of_ensemble(model: Transformer, test: Dataset, keys: jax.Array) -> dict[str, jnp.ndarray]:
    return jax.vmap(robustness)(model, test, keys)


def _evaluate(model: Transformer, test: Dataset, seeds) -> dict[str, np.ndarray]:
    keys = jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), 7))(jnp.asarray(seeds))
    return {k: np.asarray(v) for k, v in _robustness_of_ensemble(model, test, keys).items()}


def noise(base: Config, out: Path, progress: Progress | None = None) -> StudyResult:
    """Train with all weights and with attention frozen (W and W_V only); evaluate each at T1
    (rerun to the step where every seed classifies its training set) and at the end."""
    results = _run_variants(base, VARIANTS, out, progress)
    evaluated, rows, t1_steps = {}, [], {}
    for name, result in results.items():
        reached = [t for t in result.t1 if t is not None]
        t1_steps[name] = math.ceil(max(reached) / base.optimizer.lr) if reached and not base.is_flow else None
        at_t1 = result.trajectory.final
        if t1_steps[name] is not None and t1_steps[name] < base.train.steps:
            if progress:
                progress(f"variant {name} again, to step {t1_steps[name]} (T1)")
            at_t1 = train(result.config.replace({"train.steps": t1_steps[name], "observe.points": 2})).trajectory.final
        for when, model in (("T1", at_t1), ("end", result.trajectory.final)):
            found = _evaluate(model, result.problem.test, result.seeds)
            evaluated[f"{name} @ {when}"] = found["acc_vs_noise"]
            for i, seed in enumerate(result.seeds):
                rows.append({"variant": name, "at": when, "seed": seed,
                             **{f"acc_sigma={s:g}": float(found["acc_vs_noise"][i, j]) for j, s in enumerate(TOKEN_NOISE)},
                             "median_margin": float(found["median_margin"][i]),
                             "flipped_acc": float(found["flipped_acc"][i]),
                             "flipped_loss": float(found["flipped_loss"][i])})
    figure = _noise_figure(results, evaluated, out / "noise.png")
    columns = [f"acc_sigma={s:g}" for s in TOKEN_NOISE] + ["median_margin", "flipped_acc", "flipped_loss"]
    medians = [{"variant": name, "at": when, **{c: _median_or_none([r[c] for r in rows if r["variant"] == name and r["at"] == when])
                                                for c in columns}}
               for name in results for when in ("T1", "end")]
    steps_note = ", ".join(f"{name}: step {s}" if s else f"{name}: end (T1 not reached or flow)" for name, s in t1_steps.items())
    text = (f"# noise\n\n{len(base.seed_list)} seeds of `{base.name}`, trained with all weights (`full`) and with W_Q, W_K "
            "frozen at init (`frozen-attention`: only W and W_V train). Each is evaluated at T1 (the step where the "
            f"last seed classifies its training set; {steps_note}) and at the end (t = {base.t_end:g}), on "
            f"{base.data.n_test} i.i.d. test samples. `acc_sigma=s`: test accuracy when every one-hot input row gets "
            f"Gaussian noise of norm ~ s (mean of {NOISE_DRAWS} draws); `median_margin`: median clean test y F; "
            f"`flipped_*`: accuracy and logistic loss against labels with {LABEL_FLIP:.0%} flipped.\n\nMedians over seeds:\n\n"
            + _table(medians, ["variant", "at"] + columns) + "\n\nPer seed:\n\n"
            + _table(rows, ["variant", "at", "seed"] + columns) + "\n")
    return StudyResult(rows, text, [figure])


def _noise_figure(results, evaluated: dict[str, np.ndarray], path: Path) -> Path:
    fig, axes = _figure(1, 2)
    sigmas = np.asarray(TOKEN_NOISE)
    styles = {"T1": "--", "end": "-"}
    for (label, accuracy), color in zip(evaluated.items(), ("tab:blue", "tab:blue", "tab:red", "tab:red")):
        low, mid, high = median_band(accuracy)
        axes[0].plot(sigmas, mid, styles[label.rsplit(" @ ", 1)[1]], color=color, label=label, marker="o", ms=3)
        axes[0].fill_between(sigmas, low, high, color=color, alpha=0.15, lw=0)
    axes[0].set(xlabel="token noise sigma (norm of the noise added to each one-hot row)", ylabel="test accuracy",
                title="accuracy under token noise (dashed: at T1, solid: at the end)")
    for (name, result), (train_color, test_color) in zip(results.items(), (("tab:blue", "tab:cyan"), ("tab:red", "tab:orange"))):
        _plot(axes[1], result, "loss", f"{name}: train", train_color)
        _plot(axes[1], result, "test_loss", f"{name}: test", test_color)
    axes[1].set(xscale="log", yscale="log", xlabel="t = lr x steps", ylabel="loss", title="training and test loss")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    return _save(fig, path)
