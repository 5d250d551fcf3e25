"""Atomic writes: a file appears whole or not at all (temp file in the same folder + rename)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

from coocflow import interrupts


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def atomic_write_with(path: Path, write: Callable[[Path], None]) -> None:
    """Call `write(tmp_path)` and rename the result onto `path` (same filesystem). An interrupt
    meanwhile waits for the rename (`interrupts.shielded`), so none leaves a temporary file behind."""
    path = Path(path)
    with interrupts.shielded():
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; results are for sharing
        try:
            write(Path(tmp))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    atomic_write_with(path, lambda tmp: tmp.write_bytes(data))


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} as JSON")
