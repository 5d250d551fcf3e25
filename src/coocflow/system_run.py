"""A run of any system, end to end: config -> system -> integrate -> run folder -> figure.

The folder is the run folder format (storage/run_folder.py) with the system's own state:

    config.json      the resolved configuration; `system` names the system
    manifest.json    format version, `system`, the loss's name, status and finals per seed (medians
                     over seeds in `final`), timings, solver statistics, versions, git commit
    metrics.parquet  seed, step, t, then one column per observable (a vector observable one column
                     per entry: NAME_1, NAME_2, ...); a seed's rows stop where it stopped
    state_init.npz   the system's named parameters at t = 0 (`AbstractSystem.arrays`), seed axis first
    state_final.npz  the same at the end (each seed's last finite parameters)
    training.png     every observable over time (median and 10-90% band over seeds)

While it trains the folder holds config.json and checkpoint.npz, so `coocflow run --resume`
continues it bit for bit; the rest appears by one rename when training ends.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from coocflow import interrupts
from coocflow.config import Config
from coocflow.flow.system import EnsembleTraining, event_record, integrate
from coocflow.plots.system import system_figure
from coocflow.runner import TIME_CONVENTIONS, config_hash, config_hashes
from coocflow.storage import FORMAT_VERSION, atomic_write_json, write_arrays, write_metrics
from coocflow.storage.checkpoint import RunCheckpoint, run_lock
from coocflow.storage.folders import RunFolder
from coocflow.storage.paths import write_folder_atomically
from coocflow.storage.provenance import provenance
from coocflow.storage.run_folder import pivot_metrics, read_metrics, read_state
from coocflow.systems.base import AbstractSystem
from coocflow.systems.registry import system_code, system_of

FIGURE = "training.png"


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
    keeps; `SystemRun.table` keeps the valid rows only)."""
    n_obs, n_seeds = len(training.steps), len(training.seeds)
    return {"seed": np.repeat(np.asarray(training.seeds, dtype=np.int64), n_obs),
            "step": np.tile(training.steps.astype(np.int64), n_seeds),
            "t": np.tile(np.asarray(training.t, dtype=np.float64), n_seeds),
            **{name: values.reshape(-1) for name, values in series_columns(training, entry_prefix).items()}}


@dataclass
class SystemRun:
    """A trained system: its configuration, the system and the ensemble's training."""

    config: Config
    system: AbstractSystem
    training: EnsembleTraining

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.training.seeds

    @property
    def status(self) -> list[str]:
        return self.training.status

    @property
    def divergence(self) -> list[dict | None]:
        return self.training.divergence

    def table(self) -> dict[str, np.ndarray]:
        """The metrics table: one row per (seed, observed time), valid observations only."""
        columns = series_columns(self.training)
        parts = []
        for index, seed in enumerate(self.seeds):
            keep = self.training.kept(index)
            parts.append({"seed": np.full(keep, seed, dtype=np.int64), "step": self.training.steps[:keep],
                          "t": self.training.t[:keep], **{name: values[index, :keep] for name, values in columns.items()}})
        return {key: np.concatenate([part[key] for part in parts]) for key in parts[0]}


def train_system_run(config: Config, progress: Callable[[float], None] | None = None,
                     checkpoint_in: Path | None = None) -> SystemRun:
    """Train `config.system` as `config.train` says; with `checkpoint_in` (a folder begun by
    `runner.begin_run_folder`) it checkpoints there and continues from a checkpoint it finds."""
    system = system_of(config)
    checkpoint = (RunCheckpoint(checkpoint_in, config_hashes(config), config.observe.checkpoint_every_s,
                                system_code(config.system))
                  if checkpoint_in is not None else None)
    return SystemRun(config, system, integrate(system, config, checkpoint, progress))


def _finals(series: dict[str, np.ndarray], t: np.ndarray, keep: int) -> dict | None:
    if keep == 0:
        return None
    return {"t": float(t[keep - 1]), **{name: float(values[keep - 1]) for name, values in series.items()}}


def manifest_of(run: SystemRun, figures: tuple[str, ...]) -> dict:
    """What a system's run folder says about it (manifest.json)."""
    config, training = run.config, run.training
    columns = series_columns(training)
    per_seed = []
    for index, seed in enumerate(run.seeds):
        keep = training.kept(index)
        mine = {name: values[index] for name, values in columns.items()}
        per_seed.append({"seed": seed, "status": training.status[index],
                         "initial_loss": float(mine[run.system.loss_name][0]) if keep else None,
                         "final": _finals(mine, training.t, keep), "divergence": training.divergence[index],
                         **event_record(training, index)})
    finished = [p for p in per_seed if p["final"] is not None]
    statuses = set(training.status)
    return {
        "format_version": FORMAT_VERSION, "name": config.name, "system": config.system,
        "loss_name": run.system.loss_name, "config_hash": config_hash(config), "seed": run.seeds[0],
        "seeds": list(run.seeds), "dtype": config.dtype, "method": config.train.method,
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
        "system_code": system_code(config.system), **provenance(),
    }


def _stacked_arrays(system: AbstractSystem, params) -> dict[str, np.ndarray]:
    return {name: np.asarray(value) for name, value in system.arrays(params).items()}


def write_system_run_files(run: SystemRun, out: Path, force: bool = False, figures: tuple[str, ...] = ()) -> Path:
    """Write the run folder but its figures, whole (`write_folder_atomically`); the manifest lists
    the `figures` to draw next (`draw_system_figures`)."""
    def fill(staging: Path) -> None:
        folder = RunFolder(staging)
        atomic_write_json(folder.config_file, run.config.to_dict())
        write_metrics(folder.metrics_file, run.table())
        write_arrays(folder.state_file("init"), _stacked_arrays(run.system, run.training.initial))
        write_arrays(folder.state_file("final"), _stacked_arrays(run.system, run.training.final))
        atomic_write_json(folder.manifest_file, manifest_of(run, figures))

    return write_folder_atomically(out, force, fill)


def title_of(config: Config) -> str:
    """One line saying what a system's run trains and how."""
    seeds = config.seed_list
    seed_text = f"seed={seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds (median, 10-90% band)"
    train, solver, optimizer = config.train, config.solver, config.optimizer
    method = (f"flow ({solver.name}, rtol={solver.rtol:g}) to t={config.t_end:g}" if config.is_flow
              else f"{train.method} lr={optimizer.lr:g} for {train.steps} steps")
    return f"{config.name}: system {config.system}, {method}, {seed_text}"


def draw_system_figures(folder: Path) -> list[Path]:
    """Draw a complete system run folder's figure from its metrics table (what a run does after
    writing the folder, and `coocflow run --resume` when an interrupt stopped it)."""
    run = RunFolder(folder)
    config, manifest = run.config(), run.manifest()
    t, series = pivot_metrics(read_metrics(run.metrics_file))
    label = "flow time t" if config.is_flow else "t = lr x steps"
    return [system_figure(t, series, manifest.get("loss_name", "loss"), title_of(config), label, run.path / FIGURE)]


def train_and_write_system(config: Config, out: Path, progress: Callable[[float], None] | None = None,
                           figures: bool = True) -> SystemRun:
    """Train into the begun folder `out` (`runner.begin_run_folder`; under its lock, checkpointing
    it) and write the folder; from the end of training to the folder's rename an interrupt waits
    (`interrupts.shielded`). The figure comes after, and an interrupt there keeps the run."""
    with run_lock(out), interrupts.shielded():
        with interrupts.exposed():
            run = train_system_run(config, progress, checkpoint_in=out)
        write_system_run_files(run, out, figures=(FIGURE,) if figures else ())
    if figures:
        draw_system_figures(out)
    return run


def read_states(folder: Path) -> tuple[Any, Any]:
    """The parameters at t = 0 and at the end of a system's run folder, decoded by the system's own
    codec (`AbstractSystem.from_arrays`) into its parameter type, seed axis first."""
    run = RunFolder.open(folder)
    system = system_of(run.config())
    return tuple(system.from_arrays(read_state(run.state_file(which), system=run.system()))
                 for which in ("init", "final"))
