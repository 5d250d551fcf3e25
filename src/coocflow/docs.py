"""Reference pages generated from the code: the config schema and the metrics columns.

`coocflow docs` (or `python -m coocflow.docs`) rewrites docs/config.md and docs/metrics.md; a
test checks the committed pages equal what this module generates, so they cannot drift.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Literal, get_args, get_origin, get_type_hints

from coocflow.config import _SECTIONS, Config

HELP = {
    "name": "run name, used in titles and default folder names",
    "system": "what trains: `eq1` (eq. (1)), `deep`, `markov`, or your own as `file.py:Class` / `module:Class` (docs/systems.md)",
    "seed": "seed of data and initialization (a single run)",
    "seeds": "an ensemble: these seeds run as one compiled call per CPU core; empty means just `seed`",
    "dtype": "float64 or float32",
    "data.n": "training samples, a multiple of 6: groups n/2, n/6, n/6, n/6 (Assumption 2.3 (i))",
    "data.L": "tokens per sample, >= 3",
    "data.d": "vocabulary size: 0 = mu_1, 1 = mu_2, 2 = mu_3, 3.. random tokens",
    "data.random_tokens": "`distinct` (Assumption 2.3 (ii), needs d - 3 >= random slots) or `uniform` (i.i.d. slots)",
    "data.n_test": "i.i.d. test samples",
    "data.test_tokens": "random tokens of the test set: `fresh` (uniform on R), `seen` or `unseen` in training",
    "model.m": "width of W_Q, W_K, W_V (m x d)",
    "model.m1": "neurons of the linear MLP (W is m1 x m)",
    "model.layers": "`deep` experiment only: pre-LayerNorm blocks",
    "model.heads": "`deep` experiment only: attention heads per block (divides m)",
    "model.space": "`weights` (integrate W_Q, W_K, W_V, W) or `gram` (the closed system of the Grams A, P, K, V, G, s: exact for gd and flow, cost independent of m and m1)",
    "model.neurons": "model.space=gram: also follow the neurons of W through N = W W^T and Z = W W_V (m1 (m1 + d) numbers), so neuron-level quantities are measured at any width",
    "init.gram_from": "model.space=gram: `weights` (Grams of the seed's drawn weights, the weight-space start), `sampled` (drawn directly: Wishart for theory, row chunks for kaiming) or `auto` (weights while they fit)",
    "init.scheme": "`kaiming` (uniform +-c/sqrt(fan_in)) or `theory` (Condition 1: Gaussian, sigma0 = c0/sqrt(L m), sigma1 = c1/sqrt(m1))",
    "init.c0": "scale of W_Q, W_K, W_V",
    "init.c1": "scale of W",
    "train.method": "gd, sgd, momentum, adam, adamw, or flow (the ODE, integrated by Diffrax)",
    "optimizer.lr": "learning rate of the discrete methods, whose flow time is t = lr x steps (where a flow run with train.t_end = 0 ends)",
    "train.steps": "optimizer steps (discrete methods; the flow's default end time is lr x steps)",
    "train.batch_size": "sgd: samples per step, reshuffled every epoch (0 = full batch)",
    "optimizer.momentum": "momentum: heavy-ball coefficient",
    "optimizer.b1": "adam, adamw: first-moment decay",
    "optimizer.b2": "adam, adamw: second-moment decay",
    "optimizer.eps": "adam, adamw: denominator epsilon",
    "optimizer.weight_decay": "adamw: decoupled weight decay",
    "train.t_end": "flow: end time (0 = lr x steps)",
    "solver.rtol": "flow: relative tolerance of the adaptive solver",
    "solver.atol": "flow: absolute tolerance",
    "solver.name": "flow: dopri8, tsit5, dopri5, or kvaerno5 (implicit)",
    "solver.max_steps": "flow: solver step budget per chunk of the observation grid",
    "train.stop_at": "stop once every seed got here: `reached` (eq. (1): all samples correct) or a first-hit event (flow: all_correct, T0.5, T_prime, T_star); empty = run to the end",
    "train.trainable": "`all`, or `mlp-value` to freeze W_Q and W_K at init (the noise ablation)",
    "observe.points": "observed times, t = 0 and the end included",
    "observe.spacing": "`log-linear` (3/4 geometric, 1/4 even), `log` or `linear`",
    "observe.chunks": "compiled calls the run is split into (the progress bar moves between them)",
    "observe.checkpoint_every_s": "`coocflow run`: wall seconds between checkpoints, taken at chunk boundaries (0 = every chunk); `--resume` continues from the last",
    "observe.start": "the flow's first observed time after 0 (its grid is geometric from there); 0 = the run's own time scale: 0.01/U0 under the theory init (U0 = c1^2 m, so Phase 1 is observed at any width), else t_end / train.steps (the grid of a discrete method over as many steps, so a flow run and its GD twin share times)",
    "observe.locate": "the events the flow locates between observations, to the solver's tolerance (eq. (1): all_correct, T0.5, T_prime, T_star); empty = every one. The others keep their first observed time: `[\"all_correct\"]` for a table of T1 alone",
    "observe.locate_steps": "flow: the fewest steps of each event's locating solve between its two observations (each at most 1/this of that interval); 16 (default) keeps a root on a long step's interpolant as good as the solve; 1 to 256, fewer cost less (the T1 table's all-correct times move by under 1e-13 at 2)",
    "observe.only": "the observables the run records (its System's names); empty = every one. The loss, the divergence watch and what the events read are always added, and the compiled program computes only these (eq. (1): 9 of over 100 for a table of event times, about half the compile time); a lean run draws no figures",
    "observe.snapshots": "flow times at which the run keeps the weights (state_snapshots.npz; discrete methods: the nearest step); the weights at T1 are always kept (state_t1.npz)",
    "verify.c_t1": "the paper's T1 = c_t1 / U0 (Def. E.2, Thm E.26), declared before the run; its state is kept as a snapshot. 0 (default) uses the first all-correct time (needs init.scheme=theory otherwise)",
    "verify.sandwich_c": "Lemma 4.3's C, declared: T0.5 is the earliest time from which (1+C) max(dG1, dG2) <= -dG3 <= (1-C)(dG1 + dG2) holds through T1; 0 (default) uses the first time the common token catches up",
    "verify.loss_exponent": "k of T* = the first time the loss is <= m^-k (Thm F.20: Theta(poly(m)); at least 2 makes that testable)",
}


def _toml_value(value) -> str:
    """A default as a TOML literal."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return repr(value)


def toml_template(config: Config | None = None) -> str:
    """A complete, commented TOML config: every key with its meaning and its value in `config`
    (default: the defaults). `coocflow keys --toml > my.toml`, edit, `coocflow run my.toml`."""
    values = (config or Config()).every_value()
    lines = ["# coocflow configuration: every key, with its meaning (see docs/config.md).",
             "# Run it with `coocflow run THIS.toml`; delete the keys you keep at their defaults.", ""]
    sections = []
    for f in dataclasses.fields(Config):
        if f.name in _SECTIONS:
            sections.append(f.name)
            continue
        if f.name == "settings":
            continue
        lines += [f"# {HELP[f.name]}", f"{f.name} = {_toml_value(values[f.name])}"]
    for section in sections:
        lines += ["", f"[{section}]"]
        for g in dataclasses.fields(_SECTIONS[section]):
            lines += [f"# {HELP[f'{section}.{g.name}']}", f"{g.name} = {_toml_value(values[section][g.name])}"]
    if values.get("settings"):
        lines += ["", "# The System's own settings (`coocflow keys --system SPEC` lists them).", "[settings]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in values["settings"].items()]
    return "\n".join(lines) + "\n"


def config_reference() -> str:
    defaults = Config().every_value()
    lines = ["# Configuration reference", "",
             "Generated from `coocflow/config.py` by `coocflow docs`. Set keys in a TOML file (sections as tables) "
             "or with `--set key=value`; every value is validated before anything runs.", "",
             "| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    top = get_type_hints(Config)
    for f in dataclasses.fields(Config):
        if f.name == "settings":
            continue
        if f.name in _SECTIONS:
            types = get_type_hints(_SECTIONS[f.name])
            for g in dataclasses.fields(_SECTIONS[f.name]):
                key = f"{f.name}.{g.name}"
                lines.append(f"| `{key}` | {_type_text(types[g.name])} | `{defaults[f.name][g.name]!r}` | {HELP[key]} |")
        else:
            lines.append(f"| `{f.name}` | {_type_text(top[f.name])} | `{defaults[f.name]!r}` | {HELP[f.name]} |")
    lines.append("| `settings.KEY` | the System's | the System's | a System's own settings (`[settings]`, or "
                 "`--set system.KEY=V`), declared by its `Settings` and listed by `coocflow keys --system SPEC` "
                 "([systems](systems.md)) |")
    return "\n".join(lines) + "\n"


def _type_text(kind) -> str:
    """A field's type as the reference shows it: the choices of a Literal, else the type's name."""
    if get_origin(kind) is Literal:
        return " \\| ".join(f"`{choice}`" for choice in get_args(kind))
    if get_origin(kind) is tuple:
        return f"list of {get_args(kind)[0].__name__}"
    return kind.__name__


def metrics_reference() -> str:
    from coocflow.observables import OBSERVABLES  # lazy: defers JAX, 1-3.6 s

    lines = ["# Metrics columns", "",
             "Generated from `coocflow/observables/registry.py` by `coocflow docs`. `metrics.parquet` has one row "
             "per seed and observed time: `seed`, `t` (flow time), `step` (-1 for the flow), then these columns in "
             "this order. Every column is a named pure function of (weights, training and test set); the same "
             "functions feed the solver, the checks and the figures.", "",
             "| column | group | definition |", "| --- | --- | --- |"]
    for name, obs in OBSERVABLES.items():
        lines.append(f"| `{name}` | {obs.group} | {obs.doc.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write_docs(folder: Path) -> list[Path]:
    from coocflow.storage import atomic_write_text  # lazy: defers pyarrow, 0.3 s

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pages = {"config.md": config_reference(), "metrics.md": metrics_reference()}
    for name, text in pages.items():
        atomic_write_text(folder / name, text)
    return [folder / name for name in pages]


if __name__ == "__main__":
    import sys

    print("\n".join(str(p) for p in write_docs(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"))))
