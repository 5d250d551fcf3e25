"""coocflow: the gradient-flow dynamics of Yang et al. (NeurIPS 2024), runnable and checkable.

Importing coocflow does not import JAX, so `coocflow --help` and the read-only commands start
at once. It arranges, for whenever JAX is imported, float64 (the default dtype of every run;
float32 stays selectable per run with `dtype = "float32"`) and JAX's persistent compilation
cache (`coocflow.runtime`).

The Python API: `run` trains and writes a run folder, `load` reads one, `verify` checks it (`run` and
`verify` are also the packages of the run path and of the verifier, callable as these functions).
"""

from __future__ import annotations

import typing as _typing

from coocflow import runtime as _runtime

_runtime.configure_jax()

__version__ = "0.1.0"

if _typing.TYPE_CHECKING:
    from pathlib import Path

    from coocflow.notebook import Run, Study


def load(folder: str | Path) -> "Run | Study":
    """Read a folder written by `coocflow run` or `coocflow.run` (no pickle; only the documented
    format): a `Run`, or a `Study` for a study's folder."""
    from coocflow.notebook import load as _load  # lazy: defers pyarrow, 0.3 s

    return _load(folder)


def __getattr__(name: str):
    """`coocflow.run` and `coocflow.verify`, imported on first use (PEP 562): the packages of the run path
    and of the verifier, each callable as the API's function (`coocflow.run.RunPackage.__call__`,
    `coocflow.verify.VerifyPackage.__call__`)."""
    if name in ("run", "verify"):
        import importlib  # lazy: only the two packages load this way

        return importlib.import_module(f"coocflow.{name}")
    raise AttributeError(f"module 'coocflow' has no attribute {name!r}")


__all__ = ["__version__", "load", "run", "verify"]


def __dir__() -> list[str]:
    """What `dir(coocflow)` shows: the API, not the names its own module imports."""
    return sorted(__all__)
