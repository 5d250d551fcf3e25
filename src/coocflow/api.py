"""The Python API behind the CLI (and notebooks)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from coocflow.config import Config, config_from_dict, load_toml, parse_override
from coocflow.errors import ConfigError, RunFolderError
from coocflow.experiments import EXPERIMENTS, get_experiment
from coocflow.plots import SeriesView, write_run_figures
from coocflow.runner import RunResult, begin_run_folder, train, write_run
from coocflow.storage.checkpoint import run_lock
from coocflow.storage.run_folder import read_json_object


def resolve_config(target: str, overrides: list[str] = (), seed: int | None = None,
                   n_seeds: int | None = None) -> Config:
    """An experiment name or a TOML path, then `--set` overrides, then `--seed` and `--seeds N`
    (N consecutive seeds starting at the seed)."""
    if target in EXPERIMENTS:
        config = get_experiment(target).config()
    elif target.endswith(".toml") or Path(target).exists():
        tree = load_toml(Path(target))
        tree.setdefault("name", Path(target).stem)
        config = config_from_dict(tree)
    else:
        raise ConfigError(f"unknown experiment or config file '{target}': choose one of "
                          f"{', '.join(EXPERIMENTS)} or pass a .toml file")
    parsed = dict(parse_override(text) for text in overrides)
    if seed is not None:
        parsed["seed"] = seed
    config = config.replace(parsed) if parsed else config
    if n_seeds is not None:
        if n_seeds < 1:
            raise ConfigError(f"--seeds: must be at least 1 (got {n_seeds})")
        config = config.replace({"seeds": list(range(config.seed, config.seed + n_seeds))})
    return config


def _figures(result: RunResult, folder: Path) -> None:
    view = SeriesView(result.trajectory.t, result.trajectory.series, result.t1)
    write_run_figures(view, folder, title=_title(result.config))


def _title(c: Config) -> str:
    seeds = c.seed_list
    seed_text = f"seed={seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds (median, 10-90% band)"
    if c.is_flow:
        method = f"flow ({c.train.solver}, rtol={c.train.rtol:g}) to t={c.t_end:g}"
    else:
        method = f"{c.train.method} lr={c.train.lr:g}" + (f" batch={c.train.batch_size}" if c.train.batch_size else "")
    return (f"{c.name}: n={c.data.n}, L={c.data.L}, d={c.data.d} ({c.data.random_tokens}), m={c.model.m}, "
            f"m1={c.model.m1}, init={c.init.scheme} (c0={c.init.c0:g}, c1={c.init.c1:g}), {method}, {seed_text}")


def run_and_write(config: Config, out: Path, force: bool = False,
                  progress: Callable[[int], None] | None = None, figures: bool = True) -> tuple[Path, RunResult]:
    """Train `config` and write its run folder (with figures unless `figures` is false).

    The folder exists from the start, holding config.json and the checkpoints of the run in
    progress, so a killed run continues with `resume_run(out)`.
    """
    begin_run_folder(out, config, force=force)
    with run_lock(out):
        result = train(config, progress, checkpoint_in=Path(out))
        return write_run(result, out, figures=_figures if figures else None), result


def resumable_config(folder: Path) -> Config | None:
    """The config of an interrupted run folder, or None when the run there is complete."""
    folder = Path(folder)
    if not folder.is_dir():
        raise RunFolderError(f"--resume {folder}: no such folder; pass the --out folder of the interrupted run")
    if (folder / "manifest.json").exists():
        return None
    if not (folder / "config.json").is_file():
        raise RunFolderError(f"--resume {folder}: not a folder `coocflow run` started (no config.json); "
                             "studies do not checkpoint, so re-run them")
    return config_from_dict(read_json_object(folder / "config.json"))


def resume_run(folder: Path, progress: Callable[[int], None] | None = None,
               figures: bool = True) -> tuple[Path, RunResult]:
    """Continue an interrupted run from its last checkpoint (or from t = 0 if it has none) and
    write the run folder; the result equals the uninterrupted run's bit for bit."""
    config = resumable_config(folder)
    if config is None:
        raise RunFolderError(f"--resume {folder}: the run is complete (manifest.json exists); nothing to resume")
    with run_lock(folder):
        result = train(config, progress, checkpoint_in=Path(folder))
        return write_run(result, folder, figures=_figures if figures else None), result


def describe(c: Config) -> str:
    """One line saying what a run will do."""
    return f"[bold]{c.name}[/]: {_title(c).split(': ', 1)[1]}, {c.dtype}"
