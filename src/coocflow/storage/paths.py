"""Output folders: names from configs and sweep specs stay inside the output root, and an existing
folder is replaced only when asked (or resumed when it holds an unfinished run)."""

from __future__ import annotations

import datetime as dt
import difflib
import os
import shutil
from pathlib import Path
from typing import Callable

from coocflow import interrupts
from coocflow.errors import ConfigError, CoocflowError
from coocflow.storage.folders import RunFolder

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


def nearest_sibling(path: Path) -> Path | None:
    """The existing entry beside a mistyped path whose name is closest (`runs/papr` ->
    `runs/paper`), for "did you mean" hints."""
    path = Path(path)
    parent = path.parent
    if not parent.is_dir():
        return None
    names = [p.name for p in parent.iterdir() if not p.name.startswith(".")]
    close = difflib.get_close_matches(path.name, names, n=1, cutoff=0.6)
    return parent / close[0] if close else None


def does_not_exist(path: Path, what: str = "") -> str:
    """One line for a missing path, with the nearest existing name when there is one."""
    near = nearest_sibling(path)
    return f"{path}: {what + ' ' if what else ''}does not exist" + (f"; did you mean {near}?" if near else "")


def is_in_progress(folder: Path) -> bool:
    """A folder `coocflow run` started and has not finished (config.json, no manifest.json)."""
    folder = Path(folder)
    return RunFolder(folder).in_progress


def refuse_existing_out(out: Path, force: bool) -> None:
    """The one check before writing `--out`: an existing folder needs --force, and an unfinished
    run there is pointed to `--resume` instead."""
    out = Path(out)
    if force or not out.exists():
        return
    if is_in_progress(out):
        raise CoocflowError(f"--out {out}: holds an unfinished run; continue it with `coocflow run --resume {out}` "
                            "or pass --force to start over")
    raise CoocflowError(f"--out {out}: folder exists; pass --force to replace it or choose another --out")


def write_folder_atomically(out: Path, force: bool, fill: Callable[[Path], None]) -> Path:
    """Write a whole folder at once: `fill(staging)` writes its files into a hidden sibling, then
    one rename puts it at `out` (replacing the in-progress folder of the same run and its
    checkpoint). An interrupt meanwhile waits for the rename (`interrupts.shielded`), so finished
    work is never lost and no staging folder is left behind; an existing finished folder needs `force`."""
    out = Path(out)
    if not is_in_progress(out):
        refuse_existing_out(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    with interrupts.shielded():
        try:
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir()
            fill(staging)
            if out.exists():
                trash = out.parent / f".{out.name}.old-{os.getpid()}"
                os.replace(out, trash)
                shutil.rmtree(trash)
            os.replace(staging, out)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return out
