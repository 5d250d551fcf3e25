"""Typed, validated configuration (docs/definitions.md sections 2-5).

A `Config` is a frozen tree of dataclasses. It is built from nested dicts (TOML files,
experiment presets) and dotted `key=value` overrides, and validated at the door: every bad
value raises `ConfigError` with one line naming the field and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin, get_type_hints

from coocflow.errors import ConfigError

RandomTokens = Literal["distinct", "uniform"]
InitScheme = Literal["theory", "kaiming"]
DiscreteMethod = Literal["gd", "sgd", "momentum", "adam", "adamw"]
TrainMethod = Literal["gd", "sgd", "momentum", "adam", "adamw", "flow"]
SolverName = Literal["tsit5", "dopri5", "dopri8", "kvaerno5"]
DType = Literal["float64", "float32"]
GridSpacing = Literal["log-linear", "log", "linear"]
TestTokens = Literal["fresh", "seen", "unseen"]
TrainableSet = Literal["all", "mlp-value"]
Space = Literal["weights", "gram"]
GramSource = Literal["auto", "weights", "sampled"]
"""The choices of the config's string keys: a field annotated with one of these takes exactly
its values, checked where the value is read (`_coerce`), with a did-you-mean for a near miss."""

TRAIN_METHODS = get_args(TrainMethod)
GRAM_METHODS = ("gd", "flow")
"""Methods the Gram space follows exactly: a gradient step and the flow keep the Grams closed;
coordinate-wise optimizers (Adam) and momentum do not."""


@dataclass(frozen=True)
class DataConfig:
    """Data model of docs/definitions.md section 2 (Definition 2.1, Assumption 2.3)."""

    n: int = 60
    L: int = 5
    d: int = 64
    random_tokens: RandomTokens = "uniform"
    n_test: int = 600
    test_tokens: TestTokens = "fresh"
    """Random tokens of the test set: `fresh` (i.i.d. uniform on R, docs/definitions.md section 2), `seen`
    (drawn from the random tokens of the training set) or `unseen` (from those it never holds)."""


@dataclass(frozen=True)
class ModelConfig:
    """Widths of eq. (1): W_Q, W_K, W_V are m x d, W is m1 x m."""

    m: int = 128
    m1: int = 256
    layers: int = 1
    """Depth of the `deep` experiment's pre-LayerNorm transformer; eq. (1) is one layer and
    ignores this."""
    heads: int = 1
    """Attention heads per layer of the `deep` experiment (must divide model.m); eq. (1) has one."""
    space: Space = "weights"
    """What is integrated: `weights` (W_Q, W_K, W_V, W) or `gram`, the closed system of the Grams
    A = W_K^T W_Q, P = W_Q^T W_Q, K = W_K^T W_K, V = W_V^T W_V, G = W_V^T u and s = u^T u
    (Appendix C), exact for gd and the flow and of a size independent of m and m1."""
    neurons: bool = False
    """model.space=gram only: also follow the MLP's neurons through N = W W^T (m1 x m1), Z = W W_V
    (m1 x d) and the fixed a, so neuron-level quantities (<w_j, w_k>, w_j^T W_V mu) are measured at
    any m; costs m1 (m1 + d) numbers. Weight space always has them."""


@dataclass(frozen=True)
class InitConfig:
    """Initialization (docs/definitions.md section 4). c0 scales W_Q, W_K, W_V and c1 scales W, under either scheme."""

    scheme: InitScheme = "kaiming"
    c0: float = 1.0
    c1: float = 1.0
    gram_from: GramSource = "auto"
    """model.space=gram only: where the initial Grams come from. `weights` draws the weights of
    the seed and takes their Grams (the same start as a weight-space run); `sampled` draws the
    Grams directly (Wishart for `theory`, exact at any width; accumulated over row chunks for
    `kaiming`); `auto` takes `weights` while they fit in memory comfortably, else `sampled`."""


@dataclass(frozen=True)
class TrainConfig:
    """What is followed and for how long: `method` picks a discrete optimizer (its settings are
    `[optimizer]`) or the flow (its ODE solver is `[solver]`).

    `flow` integrates d(theta)/dt = -grad L with an adaptive Runge-Kutta solver to `t_end`;
    the discrete methods take `steps` optimizer steps, and their flow time is t = lr * steps
    (`gd` is the explicit-Euler solution of the flow).
    """

    method: TrainMethod = "gd"
    steps: int = 30000
    t_end: float = 0.0
    """The flow's end time; 0 takes where the discrete schedule ends, optimizer.lr * train.steps, so
    `train.method=flow` alone follows the flow its GD twin approximates."""
    batch_size: int = 0
    stop_at: str = ""
    """Stop the run once every seed has reached this: `reached` (the System's own end of learning;
    eq. (1): every training sample correct, T1) or the name of one of the System's first-hit events
    (the flow; eq. (1): all_correct, T0.5, T_prime, T_star). The run ends with the chunk of
    observations in which its last seed got there (`observe.chunks`), so a table of event times
    costs what reaching them costs; empty (the default) runs to the end."""
    trainable: TrainableSet = "all"
    """`all` trains W_Q, W_K, W_V and W; `mlp-value` freezes attention (W_Q, W_K) at init."""


@dataclass(frozen=True)
class OptimizerConfig:
    """The discrete methods' settings (Optax): the learning rate of every method, `momentum` of
    `momentum`, `b1`, `b2`, `eps` of Adam and AdamW, and AdamW's `weight_decay`."""

    lr: float = 0.01
    momentum: float = 0.9
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 1e-4


@dataclass(frozen=True)
class SolverConfig:
    """The flow's ODE solver (Diffrax): an adaptive Runge-Kutta method, its error tolerances and
    its step budget."""

    name: SolverName = "dopri8"
    rtol: float = 1e-6
    atol: float = 1e-9
    max_steps: int = 1_000_000


LOCATE_STEPS_MAX = 256
"""The most `observe.locate_steps` may ask: a locating solve gives up after 1024 steps
(`flow.locate.LOCATE_MAX_STEPS`), and keeps the event's grid time."""


@dataclass(frozen=True)
class ObserveConfig:
    """Observation grid: `points` observed times from t=0 to the end, dense early."""

    points: int = 200
    spacing: GridSpacing = "log-linear"
    chunks: int = 25
    checkpoint_every_s: float = 60.0
    """Wall seconds between checkpoints of `coocflow run` (taken at chunk boundaries, so at most
    `chunks` of them); 0 checkpoints at every chunk boundary."""
    start: float = 0.0
    """The flow's first observed time after t = 0 (the grid is geometric from it, `spacing`); 0
    takes the run's own time scale: 0.01 / U0 under the theory init (U0 = c1^2 m, T1 ~ C_T1 / U0, so
    Phase 1 is observed at every width), else t_end / train.steps (the times a discrete method
    observes over as many steps, so a flow run and its GD twin compare at shared times). Discrete
    methods observe at steps and ignore it."""
    locate: tuple[str, ...] = ()
    """The events the flow locates between observations, to the solver's tolerance (names the System
    declares; eq. (1): all_correct, T0.5, T_prime, T_star); empty locates every one. An event left out
    keeps its first observed time (the sweep's `event_on_grid` column): a table of T1 alone locates
    `["all_correct"]` and saves the other events' locating solves, about half a flow run's cost at
    d = 16. Discrete methods locate nothing (their events are observed steps)."""
    locate_steps: int = 16
    """The fewest steps the solve that locates an event takes between the two observations around it
    (each at most 1/locate_steps of that interval). A root found on a long step's interpolation is only
    as good as the interpolant, so 16 by default; fewer cost less where the interval is short: on the T1
    table (Dopri8, rtol 1e-9) 2 steps move no all-correct time by more than 1e-13 relative of 16, on the
    theory preset (Tsit5) 4 steps move them by up to 1.2e-9 and 2 by up to 7e-8 (measured 2026-12-07)."""
    snapshots: tuple[float, ...] = ()
    """Flow times at which the run keeps the weights (state_snapshots.npz; they join the
    observation grid, discrete methods at the nearest step); the weights at T1 are always kept."""
    only: tuple[str, ...] = ()
    """The observables the run records (names of its System's `observe`); empty records every one.
    What the run itself reads is always added: the loss, the divergence watch and what the System's
    events read. A table of event times needs no more, and the compiled program computes only these:
    eq. (1) has over a hundred observables, and compiling the flow with its nine required ones takes
    about half as long. Figure 1 and `coocflow verify` read many more: a lean run draws no figures,
    and verify names the observable a claim reads that the run did not record."""


@dataclass(frozen=True)
class VerifyConfig:
    """The paper's times, declared before the run (docs/claims.md, time windows)."""

    c_t1: float = 0.0
    """T1 = c_t1 / U0 (Def. E.2, Thm E.26: C_T1/U0 with C_T1 large); 0 takes the first time every
    sample is correct instead (the operational T1, for settings outside the theory's scales)."""
    loss_exponent: float = 2.0
    """T* is the first time the loss is <= m^-k, k = loss_exponent (Thm F.20: Theta(poly(m)))."""
    sandwich_c: float = 0.0
    """Lemma 4.3's C: T0.5 is the earliest time from which (1+C) max(dG1, dG2) <= -dG3 <= (1-C)(dG1 + dG2)
    holds through T1; 0 takes the first time the common token catches up (-dG3 >= max(dG1, dG2))."""


FLOW_START_PER_U0 = 0.01
"""Under the theory init the flow is observed from t = 0.01 / U0: Phase 1 ends near T1 ~ C_T1 / U0,
so it gets about two decades of the geometric grid whatever the width."""


@dataclass(frozen=True)
class Config:
    """A whole run: what to build, how to train it, where to look."""

    name: str = "custom"
    system: str = "eq1"
    """What is trained: `eq1` (the paper's model, eq. (1)), a built-in system (`deep`, `markov`), or
    your own `AbstractSystem` as `path/to/file.py:ClassName` or `package.module:ClassName`
    (docs/systems.md)."""
    seed: int = 0
    seeds: tuple[int, ...] = ()
    dtype: DType = "float64"
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    init: InitConfig = field(default_factory=InitConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    observe: ObserveConfig = field(default_factory=ObserveConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    settings: dict[str, Any] = field(default_factory=dict)
    """The System's own settings (`[settings]` in TOML, `--set settings.KEY=V` or `system.KEY=V`): the
    parameters a System declares as its `Settings` dataclass (docs/systems.md), validated and typed
    by the System itself (`AbstractSystem.settings_of`); stored in config.json only when present, so
    a config without them keeps its hash."""

    @property
    def t_end(self) -> float:
        """Flow time reached at the end of training (`train.t_end`, or optimizer.lr * train.steps)."""
        if self.train.method == "flow" and self.train.t_end > 0:
            return self.train.t_end
        return self.optimizer.lr * self.train.steps

    @property
    def seed_list(self) -> tuple[int, ...]:
        """The seeds of the ensemble: `seeds` when given, else just `seed`."""
        return tuple(self.seeds) if self.seeds else (self.seed,)

    @property
    def is_flow(self) -> bool:
        return self.train.method == "flow"

    @property
    def flow_start(self) -> float:
        """The flow's first observed time after 0: `observe.start`, or the run's own time scale
        (`FLOW_START_PER_U0` / U0 under the theory init, else t_end / train.steps: the grid of as
        many steps as a discrete method takes)."""
        if self.observe.start > 0:
            return self.observe.start
        if self.init.scheme == "theory":
            return FLOW_START_PER_U0 / (self.init.c1**2 * self.model.m)
        return self.t_end / self.train.steps

    @property
    def paper_t1(self) -> float | None:
        """The paper's T1 = C_T1 / U0 (Def. E.2), U0 = s1^2 m m1 = c1^2 m under the theory init;
        None where `verify.c_t1` is 0 (the first all-correct time stands for T1)."""
        if self.verify.c_t1 <= 0:
            return None
        return self.verify.c_t1 / (self.init.c1**2 * self.model.m)

    def every_value(self) -> dict[str, Any]:
        """Every key's value by section, for listings and templates (`coocflow keys`, docs/config.md)."""
        return dataclasses.asdict(self)

    def to_dict(self) -> dict[str, Any]:
        """The config as stored (config.json): every key, and the `format` it is written in, less
        `settings` when empty, `train.stop_at`, `observe.locate` and `observe.only` when unset and `observe.locate_steps` at
        its default, so that a run's record (and the
        hashes of its checkpoints and studies) is what it was before these keys existed."""
        record = {"format": CONFIG_FORMAT, **dataclasses.asdict(self)}
        if not self.settings:
            del record["settings"]
        if not self.train.stop_at:  # runs written before the setting existed keep their hashes
            del record["train"]["stop_at"]
        if not self.observe.locate:  # the same for observe.locate
            del record["observe"]["locate"]
        if not self.observe.only:  # and observe.only
            del record["observe"]["only"]
        if self.observe.locate_steps == ObserveConfig.locate_steps:  # and observe.locate_steps at its default
            del record["observe"]["locate_steps"]
        return record

    def replace(self, overrides: dict[str, Any]) -> "Config":
        """A new validated config with dotted-key overrides applied."""
        tree = self.to_dict()
        for key, value in overrides.items():
            set_dotted(tree, key, value)
        return config_from_dict(tree)



_SECTIONS = {
    "data": DataConfig,
    "model": ModelConfig,
    "init": InitConfig,
    "train": TrainConfig,
    "optimizer": OptimizerConfig,
    "solver": SolverConfig,
    "observe": ObserveConfig,
    "verify": VerifyConfig,
}


CONFIG_FORMAT = 2
"""The layout of a stored config (config.json's `format` key). Format 2 moved the optimizer's
settings from [train] to [optimizer] and the ODE solver's to [solver]; format 1 (no `format` key)
is read through `migrate_format1`, so folders written before still open, resume and are reused."""

RENAMED_KEYS = {
    "train.lr": "optimizer.lr", "train.momentum": "optimizer.momentum", "train.b1": "optimizer.b1",
    "train.b2": "optimizer.b2", "train.eps": "optimizer.eps", "train.weight_decay": "optimizer.weight_decay",
    "train.solver": "solver.name", "train.rtol": "solver.rtol", "train.atol": "solver.atol",
    "train.max_steps": "solver.max_steps",
}
"""Format 1's keys that format 2 moved, to their new names. Wherever a key is given (a TOML file,
`--set`, a sweep's axes) a format-1 name is read as its new one, so old files keep working."""


def current_key(key: str) -> str:
    """`key` under its current name: format 1's (`train.lr`) as format 2's (`optimizer.lr`), a
    System's setting as `settings.KEY` (`system.N` -> `settings.N`); other keys unchanged."""
    if key.startswith("system."):
        return "settings." + key[len("system."):]
    return RENAMED_KEYS.get(key, key)


def is_known_key(key: str) -> bool:
    """Whether a (current) dotted key can be set: one of `all_keys`, or `settings.KEY` (a System's own
    setting, whose name and value the System checks when it is built)."""
    if key.startswith("settings."):
        return bool(key[len("settings."):]) and "." not in key[len("settings."):]
    return key in all_keys()


def _split(key: str) -> tuple[str, str]:
    section, name = key.split(".")
    return section, name


def uses_format1_keys(tree: dict[str, Any]) -> bool:
    """Whether a config tree names a setting by its format-1 key (e.g. [train] lr)."""
    return any(isinstance(tree.get(section), dict) and name in tree[section]
               for section, name in map(_split, RENAMED_KEYS))


def migrate_format1(tree: dict[str, Any]) -> dict[str, Any]:
    """A format-1 config tree in format 2: the renamed keys moved, and the one default whose meaning
    changed written out. Format 1 began a flow's observation grid (init other than theory,
    observe.start = 0) at train.lr, that is on round(t_end / lr) grid steps; format 2 on
    train.steps of them. Where the two differ, observe.start = lr keeps the stored run's times."""
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in tree.items()}
    for old, new in RENAMED_KEYS.items():
        (section, name), (new_section, new_name) = _split(old), _split(new)
        if not isinstance(out.get(section), dict) or name not in out[section]:
            continue
        target = out.setdefault(new_section, {})
        if not isinstance(target, dict):
            continue
        if new_name in target:
            raise ConfigError(f"{old}, {new}: the same setting twice ({old} is its name in config format 1); keep {new}")
        target[new_name] = out[section].pop(name)

    def value(section: str, name: str, default: Any) -> Any:
        table = out.get(section)
        return table.get(name, default) if isinstance(table, dict) else default

    method, scheme = value("train", "method", "gd"), value("init", "scheme", "kaiming")
    lr, steps, t_end = value("optimizer", "lr", 0.01), value("train", "steps", 30000), value("train", "t_end", 0.0)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lr, steps, t_end))
    if method == "flow" and scheme != "theory" and value("observe", "start", 0.0) == 0 and numbers and lr > 0 and steps > 0:
        end = t_end if t_end > 0 else lr * steps
        if max(1, int(round(end / lr))) != steps and isinstance(out.setdefault("observe", {}), dict):
            out["observe"]["start"] = float(lr)
    return out


def current_record(record: dict[str, Any]) -> dict[str, Any]:
    """A stored config record in the current format, unvalidated: a format-1 one (no `format` key,
    format-1 names) migrated, any other as it is. For readers of a folder's raw config.json."""
    if "format" in record or not uses_format1_keys(record):
        return record
    return {"format": CONFIG_FORMAT, **migrate_format1(record)}


def format1_records(config: Config) -> list[dict[str, Any]]:
    """Every format-1 record (config.json as format 1 stored it) that reads as `config`: the records
    whose hashes a checkpoint, study or sweep written before format 2 carries for this run."""
    record = config.to_dict()
    del record["format"]
    for old, new in RENAMED_KEYS.items():
        (section, name), (new_section, new_name) = _split(old), _split(new)
        record[section][name] = record[new_section].pop(new_name)
    del record["optimizer"], record["solver"]
    candidates = [record]
    if record["observe"]["start"] == record["train"]["lr"]:
        candidates.append({**record, "observe": {**record["observe"], "start": 0.0}})
    return [c for c in candidates if config_from_dict(c) == config]


def all_keys() -> list[str]:
    """Every public dotted key, e.g. `data.n`, `optimizer.lr`."""
    keys = [f.name for f in dataclasses.fields(Config) if f.name not in _SECTIONS and f.name != "settings"]
    for section, cls in _SECTIONS.items():
        keys += [f"{section}.{f.name}" for f in dataclasses.fields(cls)]
    return keys


def suggest_key(key: str) -> str | None:
    """The valid key a mistyped one most likely means: a bare name (`lr` -> `optimizer.lr`), a
    mistyped section (`optimiser.lr` -> `optimizer.lr`) or a close spelling."""
    keys = all_keys()
    bare = [k for k in keys if k.rsplit(".", 1)[-1] == key.rsplit(".", 1)[-1]]
    if len(bare) == 1:
        return bare[0]
    close = difflib.get_close_matches(key, keys + list(RENAMED_KEYS), n=1, cutoff=0.6)
    if close:
        return current_key(close[0])
    if "." in key:
        section, name = key.split(".", 1)
        sections = difflib.get_close_matches(section, list(_SECTIONS), n=1, cutoff=0.5)
        if sections and f"{sections[0]}.{name}" in keys:
            return f"{sections[0]}.{name}"
    return None


def _unknown_key(key: str) -> ConfigError:
    if key in RENAMED_KEYS:
        return ConfigError(f"{key}: config format 1's name of {RENAMED_KEYS[key]}, which a format-{CONFIG_FORMAT} "
                           f"config names; write {RENAMED_KEYS[key]}")
    close = suggest_key(key)
    hint = f"did you mean '{close}'?" if close else "see `coocflow keys` for the valid keys"
    return ConfigError(f"unknown config key {key!r}: {hint}")


def _unknown_section(name: str) -> ConfigError:
    close = difflib.get_close_matches(name, list(_SECTIONS), n=1, cutoff=0.4)
    hint = f"did you mean [{close[0]}]?" if close else f"the sections are {', '.join(f'[{s}]' for s in _SECTIONS)}"
    return ConfigError(f"unknown config section [{name}]: {hint} (`coocflow keys --toml` prints a template)")


def set_dotted(tree: dict[str, Any], key: str, value: Any) -> None:
    """Set `tree[a][b] = value` for key `a.b` (a format-1 name read as its new one), refusing keys
    the schema does not have."""
    key = current_key(key)
    if not is_known_key(key):
        raise _unknown_key(key)
    parts = key.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _coerce(key: str, value: Any, kind: Any) -> Any:
    """`value` read as a field of type `kind` (the field's resolved annotation), or one
    ConfigError line naming `key`, what it takes and, for a near miss among choices, the fix."""
    origin = get_origin(kind)
    if origin is Literal:
        choices = get_args(kind)
        if value in choices:
            return value
        close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5) if isinstance(value, str) else []
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"{key}: must be one of {', '.join(choices)} (got {value!r}){hint}")
    if origin is tuple:
        item = get_args(kind)[0]
        example = {int: "[0, 1, 2]", str: '["all_correct"]'}.get(item, "[0.5, 2.0]")
        if not isinstance(value, (list, tuple)):
            what = {int: "whole numbers", str: "names"}.get(item, "numbers")
            raise ConfigError(f"{key}: expected a list of {what}, e.g. {key} = {example}, got {value!r}")
        return tuple(_coerce(f"{key}[{i}]", element, item) for i, element in enumerate(value))
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{key}: expected a whole number, got {value!r}")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if kind is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise AssertionError(f"unhandled field type {kind} for {key}")


def _build_section(cls: type, section: str, values: Any) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(f"{section}: expected a table of keys, got {values!r}")
    types = get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in types:
            raise _unknown_key(f"{section}.{key}")
        kwargs[key] = _coerce(f"{section}.{key}", value, types[key])
    return cls(**kwargs)


def _settings_table(values: Any) -> dict[str, Any]:
    """A System's `[settings]` as given (its System types and checks them): a table of TOML values,
    lists kept as tuples so the config stays comparable."""
    if not isinstance(values, dict):
        raise ConfigError(f"settings: expected a table of the System's settings, e.g. [settings] N = 40, got {values!r}")
    for key, value in values.items():
        if isinstance(value, dict):
            raise ConfigError(f"settings.{key}: a System's setting is a number, string, boolean or list, not a table")
    return {key: tuple(value) if isinstance(value, list) else value for key, value in values.items()}


def type_text(kind: Any) -> str:
    """A field's type in words: the choices of a Literal, `list of X` for a tuple, else its name."""
    if get_origin(kind) is Literal:
        return " | ".join(str(choice) for choice in get_args(kind))
    if get_origin(kind) is tuple:
        return f"list of {get_args(kind)[0].__name__}"
    return getattr(kind, "__name__", str(kind))


def build_table(cls: type, section: str, values: dict[str, Any]) -> Any:
    """The dataclass `cls` from a table of values, each read as its field's type (`_coerce`), with
    one line naming `section.key` for an unknown key (did-you-mean among `cls`'s fields) or a bad
    value: how a System's `Settings` are read from `[settings]`."""
    types = get_type_hints(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in types:
            close = difflib.get_close_matches(key, list(types), n=1, cutoff=0.6)
            hint = (f"did you mean '{section}.{close[0]}'?" if close
                    else f"its settings are {', '.join(types) or 'none'}")
            raise ConfigError(f"unknown setting '{section}.{key}': {hint}")
        kwargs[key] = _coerce(f"{section}.{key}", list(value) if isinstance(value, tuple) else value, types[key])
    return cls(**kwargs)


def config_from_dict(tree: dict[str, Any]) -> Config:
    """Build and validate a `Config` from a nested dict (missing keys take defaults)."""
    if not isinstance(tree, dict):
        raise ConfigError(f"config: expected a table of keys, got {type(tree).__name__}")
    tree = dict(tree)
    version = tree.pop("format", None)
    if version is not None and (type(version) is not int or version not in (1, CONFIG_FORMAT)):
        raise ConfigError(f"format: {version!r} is not a config format this coocflow reads (1 or {CONFIG_FORMAT}); "
                          "upgrade coocflow, or drop the key to read the file as the current format")
    if version == 1 or (version is None and uses_format1_keys(tree)):
        tree = migrate_format1(tree)
    top = get_type_hints(Config)
    kwargs: dict[str, Any] = {}
    for key, value in tree.items():
        if key in _SECTIONS:
            kwargs[key] = _build_section(_SECTIONS[key], key, value)
        elif key == "settings":
            kwargs[key] = _settings_table(value)
        elif key in top:
            kwargs[key] = _coerce(key, value, top[key])
        elif isinstance(value, dict):
            raise _unknown_section(key)
        else:
            raise _unknown_key(key)
    config = Config(**kwargs)
    validate(config)
    return config


def _steps_to(t_end: float, lr: float) -> str:
    """The number of steps of size `lr` that reach `t_end`, as a suggestion (a word where it overflows)."""
    steps = t_end / lr
    return str(max(1, round(steps))) if math.isfinite(steps) else "t_end / lr (too many to count)"


def _need(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


def random_slots(n: int, L: int) -> int:
    """Random-token slots of a training set with exact group sizes (docs/definitions.md section 2)."""
    return (n // 2) * (L - 3) + (n // 6) * 2 * (L - 2) + (n // 6) * (L - 1)


def unsafe_name_reason(text: str) -> str | None:
    """Why `text` cannot be a run or sweep name, or None if it can. Names become folder names
    under the output root (runs/NAME-TIMESTAMP), so they must stay relative and inside it."""
    if not text:
        return "is empty"
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        return "contains control characters"
    if "\\" in text:
        return "contains a backslash"
    if text.startswith(("/", "~")) or text[1:2] == ":":
        return "is an absolute path"
    parts = text.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has an empty, '.' or '..' path part, which could leave the output folder"
    if any(part.startswith(".") for part in parts):
        return "starts a path part with '.' (hidden, and kept for coocflow's temporary folders)"
    return None


NAME_FIX = "names become folder names under runs/, so use letters, digits, '-', '_' and '.', e.g. \"my-run\""


BUILT_IN_SYSTEMS = ("eq1", "deep", "markov")
COOCCURRENCE_SYSTEMS = ("eq1", "deep")
"""The systems trained on the paper's data model (Definition 2.1, Assumption 2.3), whose rules
`_validate_cooccurrence_data` checks; every other system validates the data settings it reads
itself (`AbstractSystem.from_config`)."""


def _validate_cooccurrence_data(d: DataConfig) -> None:
    """The data model's rules (docs/definitions.md section 2), one line per broken one."""
    _need(d.n > 0 and d.n % 6 == 0,
          f"data.n: must be a positive multiple of 6 so the groups are n/2, n/6, n/6, n/6 (got {d.n}); try data.n={max(6, 6 * round(d.n / 6))}")
    _need(d.L >= 3, f"data.L: a sample holds mu_1, mu_2 and mu_3, so L must be >= 3 (got {d.L})")
    _need(d.d >= 4, f"data.d: the vocabulary needs mu_1, mu_2, mu_3 and at least one random token, so d >= 4 (got {d.d})")
    if d.random_tokens == "distinct":
        slots = random_slots(d.n, d.L)
        _need(d.d - 3 >= slots,
              f"data.d: 'distinct' random tokens need d - 3 >= {slots} random slots (got d={d.d}); set data.d={slots + 3} or data.random_tokens=uniform")


def validate(c: Config) -> None:
    """Refuse impossible or nonsensical settings with one line naming the field and the fix."""
    d = c.data
    reason = unsafe_name_reason(c.name)
    _need(reason is None, f"name: {c.name!r} {reason}; {NAME_FIX}")
    _need(c.system in BUILT_IN_SYSTEMS or (c.system.count(":") == 1 and all(c.system.split(":"))),
          f"system: {c.system!r} is neither a built-in system ({', '.join(BUILT_IN_SYSTEMS)}) nor "
          "'path/to/file.py:ClassName' or 'package.module:ClassName' (docs/systems.md)")
    _need(not c.settings or c.system != "eq1",
          "settings: eq. (1) has no settings of its own (its keys are `coocflow keys`); "
          f"drop {', '.join('settings.' + key for key in c.settings)}")
    _need(c.system == "eq1" or c.model.space == "weights",
          f"model.space: the Gram space is eq. (1)'s; the {c.system} system trains its parameters, so drop model.space")
    _need(c.seed >= 0, f"seed: must be >= 0 (got {c.seed})")
    _need(all(s >= 0 for s in c.seeds), f"seeds: every seed must be >= 0 (got {list(c.seeds)})")
    _need(len(set(c.seeds)) == len(c.seeds), f"seeds: must not repeat a seed (got {list(c.seeds)})")
    if c.system in COOCCURRENCE_SYSTEMS:
        _validate_cooccurrence_data(d)
    else:
        _need(d.n > 0, f"data.n: need at least one training sample (got {d.n})")
    _need(d.n_test >= 1, f"data.n_test: need at least one test sample (got {d.n_test})")
    _need(c.system == "deep" or (c.model.layers == 1 and c.model.heads == 1),
          f"model.layers, model.heads: apply to the deep system (system = \"deep\"); {c.system} has one layer and one "
          "head, so drop them")
    _need(c.model.m > 0, f"model.m: must be a positive width (got {c.model.m})")
    _need(c.model.m1 > 0, f"model.m1: must be a positive width (got {c.model.m1})")
    if c.model.space == "gram":
        _need(c.train.method in GRAM_METHODS,
              f"train.method: {c.train.method} is not expressible in the Gram space (only a gradient step and the "
              f"flow keep the Grams closed); use train.method=gd or flow, or model.space=weights")
        _need(c.dtype == "float64" or c.train.method != "flow",
              f"dtype: {c.dtype} is not solved by the flow in the Gram space (its widths m and m1 are float64 leaves "
              "of the state, which Diffrax cannot carry beside float32 Grams); use dtype=float64, train.method=gd, "
              "or model.space=weights")
    else:
        _need(c.init.gram_from == "auto", "init.gram_from: applies with model.space=gram; drop it or set model.space=gram")
        _need(not c.model.neurons, "model.neurons: applies with model.space=gram (weight space always has the neurons); "
              "drop it or set model.space=gram")
    _need(c.init.c0 > 0, f"init.c0: must be > 0 (got {c.init.c0})")
    _need(c.init.c1 > 0, f"init.c1: must be > 0 (got {c.init.c1})")
    t, o, solver = c.train, c.optimizer, c.solver
    _need(o.lr > 0, f"optimizer.lr: must be > 0 (got {o.lr})")
    _need(t.steps > 0, f"train.steps: must be > 0 (got {t.steps})")
    _need(0 <= t.batch_size <= d.n,
          f"train.batch_size: must be between 1 and data.n={d.n}, or 0 for the full batch (got {t.batch_size})")
    _need(0 <= o.momentum < 1, f"optimizer.momentum: must be in [0, 1) (got {o.momentum})")
    _need(0 <= o.b1 < 1 and 0 <= o.b2 < 1, f"optimizer.b1, optimizer.b2: must be in [0, 1) (got {o.b1}, {o.b2})")
    _need(o.eps > 0, f"optimizer.eps: must be > 0 (got {o.eps})")
    _need(o.weight_decay >= 0, f"optimizer.weight_decay: must be >= 0 (got {o.weight_decay})")
    _need(t.t_end >= 0, f"train.t_end: must be >= 0, 0 meaning optimizer.lr * train.steps (got {t.t_end})")
    _need(t.t_end == 0 or t.method == "flow",
          f"train.t_end: applies to train.method=flow; {t.method} runs train.steps steps to t = lr * steps, so set "
              f"train.steps={_steps_to(t.t_end, o.lr)} instead")
    _need(solver.rtol > 0 and solver.atol > 0, f"solver.rtol, solver.atol: must be > 0 (got {solver.rtol}, {solver.atol})")
    _need(solver.max_steps > 0, f"solver.max_steps: must be > 0 (got {solver.max_steps})")
    _need(t.batch_size in (0, d.n) or t.method != "flow",
          "train.batch_size: the flow is full-batch; remove train.batch_size or pick a discrete method")
    _need(c.verify.c_t1 >= 0 and math.isfinite(c.verify.c_t1),
          f"verify.c_t1: T1 = c_t1 / U0 needs c_t1 >= 0, 0 meaning the first all-correct time (got {c.verify.c_t1})")
    _need(c.verify.loss_exponent > 0, f"verify.loss_exponent: T* needs k > 0 in loss <= m^-k (got {c.verify.loss_exponent})")
    _need(0 <= c.verify.sandwich_c < 1, f"verify.sandwich_c: Lemma 4.3's C lies in (0, 1), 0 meaning the catch-up time "
          f"(got {c.verify.sandwich_c})")
    _need(c.verify.c_t1 == 0 or c.init.scheme == "theory",
          "verify.c_t1: U0 = c1^2 m is the theory init's scale; set init.scheme=theory or verify.c_t1=0")
    _need(c.observe.points >= 2, f"observe.points: need at least 2 observed times (got {c.observe.points})")
    _need(c.observe.chunks >= 1, f"observe.chunks: must be >= 1 (got {c.observe.chunks})")
    _need(1 <= c.observe.locate_steps <= LOCATE_STEPS_MAX,
          f"observe.locate_steps: the fewest steps of an event's locating solve, 1 to {LOCATE_STEPS_MAX} "
          f"(got {c.observe.locate_steps}); 16 is the default")
    _need(math.isfinite(c.observe.start) and 0 <= c.observe.start < c.t_end,
          f"observe.start: the first observed flow time must be >= 0 and before the end t = {c.t_end:g} "
          f"(got {c.observe.start}); 0 picks it from the run's time scale")
    _need(c.observe.checkpoint_every_s >= 0,
          f"observe.checkpoint_every_s: must be >= 0 seconds, 0 meaning every chunk (got {c.observe.checkpoint_every_s})")
    snaps = c.observe.snapshots
    _need(all(math.isfinite(s) and s >= 0 for s in snaps),
          f"observe.snapshots: flow times must be finite and >= 0 (got {list(snaps)})")
    _need(all(s <= c.t_end * (1 + 1e-12) for s in snaps),
          f"observe.snapshots: {max(snaps, default=0):g} is after the run's end t = {c.t_end:g}; drop it or lengthen the run "
          f"({'train.t_end' if c.is_flow else 'train.steps'})")


def parse_override(text: str) -> tuple[str, Any]:
    """Parse one `--set key=value`; the value is read as a TOML literal, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text!r}: expected key=value, e.g. --set optimizer.lr=0.05")
    key, raw = (part.strip() for part in text.split("=", 1))
    key = current_key(key)
    if not is_known_key(key):
        raise _unknown_key(key)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML config file into a nested dict, reporting syntax errors with their line."""
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file ({err.strerror})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text, so not a TOML config file") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML: {err}") from None


def flatten_dotted(tree: dict, prefix: str = "") -> dict[str, Any]:
    """{"optimizer": {"lr": 0.1}} -> {"optimizer.lr": 0.1}: a config (or any nested dict) by dotted key."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten_dotted(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
