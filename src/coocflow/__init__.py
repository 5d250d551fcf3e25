"""coocflow: the gradient-flow dynamics of Yang et al. (NeurIPS 2024), runnable and checkable.

Importing coocflow does not import JAX, so `coocflow --help` and the read-only commands start
at once. It arranges, for whenever JAX is imported, float64 (the default dtype of every run;
float32 stays selectable per run with `dtype = "float32"`) and JAX's persistent compilation
cache (`coocflow.runtime`).

The Python API: `run` trains and writes a run folder, `load` reads one, `verify` checks it.
"""

from __future__ import annotations

import typing as _typing

from coocflow import runtime as _runtime

_runtime.configure_jax()

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Mapping, Sequence

    from coocflow.config import Config
    from coocflow.notebook import Run, Study
    from coocflow.theorems.paper.verify import Verification


def run(experiment_or_config: "str | Path | Config" = "paper", *, seeds: int | Sequence[int] | None = None,
        seed: int | None = None, out: str | Path | None = None,
        overrides: Mapping[str, Any] | Sequence[str] | None = None, figures: bool = True,
        force: bool = False) -> "Run | Study":
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
        The written run, loaded (`Run`), or a `Study` for a study's name.
    """
    from coocflow.notebook import run as _run  # lazy: defers pyarrow, 0.3 s

    return _run(experiment_or_config, seeds=seeds, seed=seed, out=out, overrides=overrides, figures=figures,
                force=force)


def load(folder: str | Path) -> "Run | Study":
    """Read a folder written by `coocflow run` or `coocflow.run` (no pickle; only the documented
    format): a `Run`, or a `Study` for a study's folder."""
    from coocflow.notebook import load as _load  # lazy: defers pyarrow, 0.3 s

    return _load(folder)


def verify(target: "Run | str | Path") -> "Verification":
    """Every check of `coocflow verify` on a run (a `Run` or its folder); writes
    verify.json/.md/.png into the folder. `.pass_rates()` counts verdicts per check, `.table()`
    is the same as a pyarrow Table."""
    from coocflow.notebook import verify as _verify  # lazy: defers pyarrow, 0.3 s

    return _verify(target)


__all__ = ["__version__", "load", "run", "verify"]


def __dir__() -> list[str]:
    """What `dir(coocflow)` shows: the API, not the names its own module imports."""
    return sorted(__all__)
