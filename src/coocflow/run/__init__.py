"""One run path for every System, eq. (1) included: config -> system -> integrate -> run folder ->
figures. `train` gives a `TrainedRun` of the class the System names (`AbstractSystem.run_type`: the
generic `TrainedRun`, or eq. (1)'s `Eq1TrainedRun`), and the folder functions write, draw and read
any of them.

The package is also the Python API's `coocflow.run(...)`: calling it trains and writes a run folder
and loads it (`RunPackage.__call__`, which is `coocflow.notebook.run`)."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any, Mapping, Sequence

from coocflow.config import Config

from coocflow.run.base import TrainedRun, config_hash, config_hashes, long_columns, record_hash, run_type, train
from coocflow.run.folder import (
    begin_run_folder,
    draw_figures,
    read_states,
    train_and_write,
    write_run,
    write_run_files,
)

__all__ = ["TrainedRun", "begin_run_folder", "config_hash", "config_hashes", "draw_figures", "long_columns",
           "read_states", "record_hash", "run_type", "train", "train_and_write", "write_run", "write_run_files"]


class RunPackage(types.ModuleType):
    """This package, callable: `coocflow.run` names both the layer and the API's function, so the
    package is the function (module classes, Python's data model, "Customizing module attribute
    access")."""

    def __call__(self, experiment_or_config: str | Path | Config = "paper", *,
                 seeds: int | Sequence[int] | None = None, seed: int | None = None, out: str | Path | None = None,
                 overrides: Mapping[str, Any] | Sequence[str] | None = None, figures: bool = True,
                 force: bool = False) -> Any:
        """Train and write a run folder, then load it, exactly as `coocflow run` does (a study's
        name, such as `deep`, runs that study and returns a `Study`). A run estimated to take over a
        minute prints its estimate (stderr) before it starts.

        Args:
            experiment_or_config: An experiment name (`coocflow experiments`), a config .toml, a run
                folder (start from its configuration), or a `Config`.
            seeds: N consecutive seeds from `seed`, or an explicit list; one vmapped ensemble.
            seed: The first (or only) seed.
            out: The run folder; default `runs/NAME-TIMESTAMP`, like the CLI.
            overrides: Dotted keys, as a mapping (`{"optimizer.lr": 0.05}`) or `--set` strings
                (`["optimizer.lr=0.05"]`).
            figures: Also draw figure1.png and overview.png.
            force: Replace `out` if it exists.

        Returns:
            The written run, loaded (`coocflow.notebook.Run`), or a `Study` for a study's name.
        """
        from coocflow.notebook import run  # lazy: the API above this layer (pyproject.toml's contract says why)

        return run(experiment_or_config, seeds=seeds, seed=seed, out=out, overrides=overrides, figures=figures,
                   force=force)


sys.modules[__name__].__class__ = RunPackage
