"""A run's folder, for every System the same way: begun with config.json (a run in progress,
resumable), written whole by one rename when training ends, figures drawn after.

While a run trains its folder holds config.json and checkpoint.npz, so `coocflow run --resume`
continues it bit for bit; the rest appears by one rename when training ends. An interrupt from
the end of training to that rename waits (`interrupts.shielded`), so finished training is never
lost; one while the figures are drawn leaves the run complete (`--resume` draws what is missing).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

from coocflow import interrupts
from coocflow.config import Config
from coocflow.run.base import Figures, TrainedRun, run_type, train
from coocflow.storage import atomic_write_json, write_arrays, write_metrics
from coocflow.storage.checkpoint import run_lock
from coocflow.storage.folders import RunFolder
from coocflow.storage.paths import refuse_existing_out, write_folder_atomically
from coocflow.storage.run_folder import read_state
from coocflow.systems.registry import system_of


def begin_run_folder(out: Path, config: Config, force: bool = False, extra: dict[str, dict] | None = None) -> Path:
    """Create the run folder with only its config.json (and the JSON files `extra` names): a run
    in progress, resumable with `coocflow run --resume` (the folder appears whole, by one
    rename, or not at all)."""
    out = Path(out)
    refuse_existing_out(out, force)
    if out.exists():
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    with interrupts.shielded():
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        atomic_write_json(RunFolder(staging).config_file, config.to_dict())
        for name, record in (extra or {}).items():
            atomic_write_json(staging / name, record)
        os.replace(staging, out)
    return out


def write_run_files(run: TrainedRun, out: Path, force: bool = False, figures: tuple[str, ...] = ()) -> Path:
    """Write the run folder but its figures atomically: everything goes to a hidden sibling, then
    one rename (which replaces the in-progress folder and its checkpoint, if the run had one); the
    manifest lists the `figures` to be drawn next."""
    def fill(staging: Path) -> None:
        folder = RunFolder(staging)
        atomic_write_json(folder.config_file, run.config.to_dict())
        write_metrics(folder.metrics_file, run.table())
        for name, arrays in run.files().items():
            write_arrays(staging / name, arrays)
        atomic_write_json(folder.manifest_file, run.manifest(figures))

    return write_folder_atomically(out, force, fill)


def write_run(run: TrainedRun, out: Path, force: bool = False, figures: Figures = True) -> Path:
    """`write_run_files`, then the figures drawn into the finished folder."""
    figures = run.figures_drawn(figures)
    write_run_files(run, out, force, figures=run.figure_names(figures))
    run.draw_figures(Path(out), figures)
    return Path(out)


def train_and_write(config: Config, out: Path, progress: Callable[[float], None] | None = None,
                    figures: Figures = True) -> TrainedRun:
    """Train into the begun folder `out` (`begin_run_folder`; under its lock, checkpointing it) and
    write the folder; from the end of training to the folder's rename an interrupt waits. The
    figures come after, and an interrupt there keeps the run."""
    with run_lock(out), interrupts.shielded():
        with interrupts.exposed():
            run = train(config, progress, checkpoint_folder=out)
        figures = run.figures_drawn(figures)
        write_run_files(run, out, figures=run.figure_names(figures))
    run.draw_figures(Path(out), figures)
    return run


def draw_figures(folder: Path) -> list[Path]:
    """Draw a complete run folder's figures (those its manifest lists) from its metrics table, as
    the run would have (what `coocflow run --resume` does for a run interrupted while drawing them)."""
    folder = Path(folder)
    return run_type(RunFolder(folder).config().system).redraw(folder)


def read_states(folder: Path) -> tuple[Any, Any]:
    """The parameters at t = 0 and at the end of a run folder, decoded by its System's own codec
    (`AbstractSystem.from_arrays`) into its parameter type, seed axis first."""
    run = RunFolder.open(folder)
    system = system_of(run.config())
    return tuple(system.from_arrays(read_state(run.state_file(which), system=run.system()))
                 for which in ("init", "final"))
