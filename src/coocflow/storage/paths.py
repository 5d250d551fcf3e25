"""Output paths built from names in configs and sweep specs stay inside their output root."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from coocflow.errors import ConfigError

DEFAULT_ROOT = Path("runs")


def inside(root: Path, relative: str, field: str) -> Path:
    """`root / relative`, refused (naming `field`) if it resolves outside `root`; names are
    validated when configs load, and this check holds even for a symlink inside the root."""
    root = Path(root)
    target = root / relative
    if Path(relative).is_absolute() or not target.resolve().is_relative_to(root.resolve()):
        raise ConfigError(f"{field}: {relative!r} would write outside {root}/; pass --out to choose a folder")
    return target


def default_out(name: str, prefix: str = "") -> Path:
    """runs/PREFIX-NAME-TIMESTAMP, the folder a command writes when --out is not given."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return inside(DEFAULT_ROOT, f"{prefix}{name}-{stamp}", "name")
