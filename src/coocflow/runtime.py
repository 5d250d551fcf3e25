"""Process-wide JAX settings, applied without importing JAX.

JAX reads `JAX_*` environment variables when it is first imported, so setting them here makes
every later `import jax` (in this process and in the worker processes it starts) use float64
and the persistent compilation cache. Where JAX is already imported, its config is updated.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from platformdirs import user_cache_dir

CACHE_ENV = "COOCFLOW_CACHE_DIR"
"""Where compiled programs are kept: a folder, or `off` (also `0`, `none`, empty) to disable."""
CACHE_OFF = ("off", "0", "none", "")
MIN_COMPILE_SECONDS = "0"
"""Cache every program, however quick to compile: a run also compiles dozens of tiny eager
programs (initialization, data), which together cost about a second per process (measured on
`run tiny`: warm 3.1 s with JAX's 1 s threshold, 2.0-2.5 s with none)."""


def default_cache_dir() -> Path:
    """The user's cache folder for this tool (e.g. ~/.cache/coocflow/jax on Linux)."""
    return Path(user_cache_dir("coocflow")) / "jax"


def compilation_cache_dir() -> Path | None:
    """The persistent compilation cache in force: COOCFLOW_CACHE_DIR, else JAX's own
    JAX_COMPILATION_CACHE_DIR, else the default; None when disabled."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in CACHE_OFF else Path(chosen).expanduser()
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return Path(os.environ["JAX_COMPILATION_CACHE_DIR"])
    return default_cache_dir()


EQUINOX_ERRORS = "nan"
"""How Equinox's runtime checks (used inside Diffrax) report: `nan` makes a failed check return
NaN, which the driver's divergence detection stops on and reports, instead of raising through a
host callback. A program holding a host callback is never written to JAX's persistent cache,
so with Equinox's default the flow recompiled in every process (measured: `run paper` with the
flow to t = 1e6, 11.2 s warm before, 5.9 s after). Set EQX_ON_ERROR yourself to override."""


def configure_jax() -> None:
    """float64, the compilation cache and Equinox's error mode, for this process and its
    children."""
    os.environ.setdefault("EQX_ON_ERROR", EQUINOX_ERRORS)
    settings = {"JAX_ENABLE_X64": "1"}
    cache = compilation_cache_dir()
    if cache is not None:
        settings["JAX_COMPILATION_CACHE_DIR"] = str(cache)
        os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", MIN_COMPILE_SECONDS)
    else:
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
    os.environ.update(settings)
    if "jax" in sys.modules:
        import jax  # lazy: defers JAX, 1-3.6 s

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_compilation_cache_dir", settings.get("JAX_COMPILATION_CACHE_DIR"))
