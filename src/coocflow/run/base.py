"""A trained run of any System and what its folder holds: `TrainedRun`, the abstract pattern's base with
the generic implementation, which eq. (1) refines (`run.eq1.Eq1TrainedRun`) and a user's System may too.

The folder is the run folder format (storage/run_folder.py):

    config.json      the resolved configuration; `system` names the system
    manifest.json    format version, `system`, the loss's name, status and finals per seed (medians
                     over seeds in `final`), timings, solver statistics, versions, git commit
    metrics.parquet  seed, step, t, then one column per observable (a vector observable one column
                     per entry: NAME_1, NAME_2, ...); a seed's rows stop where it stopped
    state_init.npz   the system's named parameters at t = 0 (`AbstractSystem.arrays`), seed axis first
    state_final.npz  the same at the end (each seed's last finite parameters)
    training.png     every observable over time (median and 10-90% band over seeds)

A System names the `TrainedRun` class of its runs (`AbstractSystem.run_type`); everything that trains,
writes, draws or re-trains a run goes through that class, so no caller asks which System it is.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

import numpy as np

from coocflow.config import Config, format1_records
from coocflow.errors import ConfigError
from coocflow.flow.system import EnsembleTraining, event_record, integrate
from coocflow.storage import FORMAT_VERSION
from coocflow.storage.checkpoint import RunCheckpoint
from coocflow.storage.folders import RunFolder
from coocflow.storage.provenance import provenance
from coocflow.systems.base import AbstractSystem
from coocflow.systems.registry import BUILT_IN, class_code, named_object, system_class, system_code, system_of

TIME_CONVENTIONS = {
    "flow": "t is the flow time of d(theta)/dt = -grad L, integrated by an adaptive Runge-Kutta solver",
    "discrete": "t = lr * steps (gradient descent is the explicit-Euler solution of the flow)",
}

Figures = bool | Sequence[str]
"""What to draw: False for nothing, True for a run's figures as PNG, or the formats ("png", "pdf")
of the figures that come in several (eq. (1)'s figure1)."""


def record_hash(record: dict) -> str:
    """SHA-256 of a stored config record's canonical JSON."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def config_hash(config: Config) -> str:
    """SHA-256 of the resolved config's canonical JSON: equal hashes mean the same run."""
    return record_hash(config.to_dict())


def config_hashes(config: Config) -> tuple[str, ...]:
    """Every hash a checkpoint or a study's variant of this run may carry: `config_hash`, then
    those of the format-1 records that read as `config` (written before config format 2)."""
    return (config_hash(config), *(record_hash(record) for record in format1_records(config)))


def checkpoint_in(folder: Path | None, config: Config) -> RunCheckpoint | None:
    """The checkpoint of a run training into the begun folder `folder` (None: no checkpoints)."""
    if folder is None:
        return None
    return RunCheckpoint(folder, config_hashes(config), config.observe.checkpoint_every_s, system_code(config.system))


def series_columns(training: EnsembleTraining, entry_prefix: str = "_") -> dict[str, np.ndarray]:
    """The observed series as (seeds, times) arrays, a vector observable split into one series per
    entry (`NAME{entry_prefix}1`, ...)."""
    columns = {}
    for name, values in training.series.items():
        values = np.asarray(values, dtype=np.float64)
        if values.ndim == 2:
            columns[name] = values
        else:
            for entry in range(values.shape[2]):
                columns[f"{name}{entry_prefix}{entry + 1}"] = values[:, :, entry]
    return columns


def long_columns(training: EnsembleTraining, entry_prefix: str = "_") -> dict[str, np.ndarray]:
    """Every observation as a long table: `seed`, `step`, `t`, then `series_columns`, one row per
    seed x observed time, NaN from a stopped seed's first non-finite observation on (what a study
    keeps; `TrainedRun.table` keeps the valid rows only)."""
    n_obs, n_seeds = len(training.steps), len(training.seeds)
    return {"seed": np.repeat(np.asarray(training.seeds, dtype=np.int64), n_obs),
            "step": np.tile(training.steps.astype(np.int64), n_seeds),
            "t": np.tile(np.asarray(training.t, dtype=np.float64), n_seeds),
            **{name: values.reshape(-1) for name, values in series_columns(training, entry_prefix).items()}}


def _finals(series: dict[str, np.ndarray], t: np.ndarray, keep: int) -> dict | None:
    if keep == 0:
        return None
    return {"t": float(t[keep - 1]), **{name: float(values[keep - 1]) for name, values in series.items()}}


@dataclass
class TrainedRun:
    """A trained System: its configuration, the System and the ensemble's training. The methods
    below are the generic run folder; a System's own `TrainedRun` subclass (`AbstractSystem.run_type`)
    overrides the parts its folder adds to (eq. (1): its T1 state, test set and figures)."""

    config: Config
    system: AbstractSystem
    training: EnsembleTraining

    FIGURE: ClassVar[str] = "training.png"

    @classmethod
    def train(cls, config: Config, progress: Callable[[float], None] | None = None,
              checkpoint_folder: Path | None = None) -> "TrainedRun":
        """Train `config.system` as `config.train` says; with `checkpoint_folder` (a folder begun by
        `run.begin_run_folder`) it checkpoints there and continues from a checkpoint it finds,
        bit for bit the uninterrupted run."""
        system = system_of(config)
        return cls(config, system, integrate(system, config, checkpoint_in(checkpoint_folder, config), progress))

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.training.seeds

    @property
    def status(self) -> list[str]:
        return self.training.status

    @property
    def divergence(self) -> list[dict | None]:
        return self.training.divergence

    @property
    def resumed(self) -> dict | None:
        return self.training.resumed

    def table(self) -> dict[str, np.ndarray]:
        """The metrics table: one row per (seed, observed time), valid observations only."""
        columns = series_columns(self.training)
        parts = []
        for index, seed in enumerate(self.seeds):
            keep = self.training.kept(index)
            parts.append({"seed": np.full(keep, seed, dtype=np.int64), "step": self.training.steps[:keep],
                          "t": self.training.t[:keep], **{name: values[index, :keep] for name, values in columns.items()}})
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}

    def arrays(self, params: Any) -> dict[str, np.ndarray]:
        """Seed-stacked parameters as the folder's named arrays (`AbstractSystem.arrays`)."""
        return {name: np.asarray(value) for name, value in self.system.arrays(params).items()}

    def files(self) -> dict[str, dict[str, np.ndarray]]:
        """The folder's array files by name, in the order they are written."""
        return {RunFolder.STATE_INIT: self.arrays(self.training.initial),
                RunFolder.STATE_FINAL: self.arrays(self.training.final)}

    def final_arrays(self) -> dict[str, np.ndarray]:
        """The final parameters as state_final.npz holds them (what `--check-reproduce` compares)."""
        return self.files()[RunFolder.STATE_FINAL]

    def manifest(self, figures: tuple[str, ...]) -> dict:
        """What the folder says about the run (manifest.json); `figures` are those drawn next."""
        config, training = self.config, self.training
        columns = series_columns(training)
        per_seed = []
        for index, seed in enumerate(self.seeds):
            keep = training.kept(index)
            mine = {name: values[index] for name, values in columns.items()}
            per_seed.append({"seed": seed, "status": training.status[index],
                             "initial_loss": float(mine[self.system.loss_name][0]) if keep else None,
                             "final": _finals(mine, training.t, keep), "divergence": training.divergence[index],
                             **event_record(training, index)})
        finished = [p for p in per_seed if p["final"] is not None]
        statuses = set(training.status)
        return {
            "format_version": FORMAT_VERSION, "name": config.name, "system": config.system,
            "loss_name": self.system.loss_name, **({"listed_keys": list(self.system.listed_keys)}
                                                   if self.system.listed_keys else {}),
            "config_hash": config_hash(config), "seed": self.seeds[0],
            "seeds": list(self.seeds), "dtype": config.dtype, "method": config.train.method,
            "time_convention": TIME_CONVENTIONS["flow" if config.is_flow else "discrete"],
            "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "timings": {"train_s": training.train_s}, "resumed": training.resumed, "figures": list(figures),
            "status": statuses.pop() if len(statuses) == 1 else "partial",
            "divergence": next((d for d in training.divergence if d), None),
            "observed_points": int(len(training.t)),
            "initial_loss": float(np.median([p["initial_loss"] for p in finished])) if finished else None,
            "final": ({key: float(np.median([p["final"][key] for p in finished])) for key in finished[0]["final"]}
                      if finished else None),
            "per_seed": per_seed, "solver_stats": training.stats,
            **({"event_settings": training.event_settings} if training.event_settings else {}),
            "system_code": self.code(), **provenance(),
        }

    def code(self) -> dict:
        """The code of the System this run trained with (`systems.registry.class_code`): the source its
        class was defined by, not the file as it may be now."""
        return class_code(type(self.system), built_in=self.config.system in BUILT_IN)

    def figures_drawn(self, figures: Figures) -> Figures:
        """Of the figures asked for, those this run can draw (all by default)."""
        return figures

    @classmethod
    def figure_names(cls, figures: Figures) -> tuple[str, ...]:
        """The files `draw_figures` writes for `figures`."""
        return (cls.FIGURE,) if figures else ()

    def draw_figures(self, folder: Path, figures: Figures) -> list[Path]:
        """Draw the figures into the written folder `folder`, just after training."""
        return type(self).redraw(folder) if figures else []

    @classmethod
    def redraw(cls, folder: Path) -> list[Path]:
        """Draw a complete run folder's figures (those its manifest lists) from its metrics table (what
        `coocflow run --resume` does for a run interrupted while drawing them)."""
        from coocflow.plots.system import system_figure  # lazy: defers Matplotlib, 0.5 s
        from coocflow.storage.run_folder import pivot_metrics, read_metrics  # lazy: defers pyarrow, 0.3 s

        run = RunFolder(folder)
        config, manifest = run.config(), run.manifest()
        t, series = pivot_metrics(read_metrics(run.metrics_file))
        label = "flow time t" if config.is_flow else "t = lr x steps"
        return [system_figure(t, series, manifest.get("loss_name", "loss"), cls.title(config), label,
                              run.path / cls.FIGURE)]

    @classmethod
    def plot(cls, columns: dict[str, np.ndarray], manifest: dict, title: str, kind: str = ""):
        """A Matplotlib figure of a run folder's metrics table (`columns`, the long table) for a
        notebook: every observable over time, as training.png (`kind` is for the runs that draw more
        than one figure)."""
        from coocflow.plots import SeriesView  # lazy: defers Matplotlib, 0.5 s
        from coocflow.plots.system import training_figure  # lazy: defers Matplotlib, 0.5 s

        view = SeriesView.from_metrics(columns)
        time_label = "flow time t" if manifest.get("method") == "flow" else "t = lr x steps"
        return training_figure(view.t, view.series, manifest.get("loss_name", "loss"), title, time_label)

    @classmethod
    def title(cls, config: Config) -> str:
        """One line saying what the run trains and how."""
        seeds = config.seed_list
        seed_text = f"seed={seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds (median, 10-90% band)"
        train, solver, optimizer = config.train, config.solver, config.optimizer
        method = (f"flow ({solver.name}, rtol={solver.rtol:g}) to t={config.t_end:g}" if config.is_flow
                  else f"{train.method} lr={optimizer.lr:g} for {train.steps} steps")
        return f"{config.name}: system {config.system}, {method}, {seed_text}"


def run_type(system: str) -> type[TrainedRun]:
    """The `TrainedRun` class of the System `system` names (`Config.system`; its `run_type`)."""
    spec = system_class(system).run_type
    found = named_object(spec, field=f"{system}'s run_type")
    if not (isinstance(found, type) and issubclass(found, TrainedRun)):
        raise ConfigError(f"system: {system}'s run_type {spec!r} is not a subclass of coocflow.run.TrainedRun; "
                          "name one as 'path/to/file.py:ClassName' or 'package.module:ClassName'")
    return found


def train(config: Config, progress: Callable[[float], None] | None = None,
          checkpoint_folder: Path | None = None) -> TrainedRun:
    """Train `config` (any System) into a `TrainedRun` of its System's `run_type`."""
    return run_type(config.system).train(config, progress, checkpoint_folder)
