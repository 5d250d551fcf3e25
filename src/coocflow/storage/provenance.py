"""What is saved next to every result so it can be trusted and reproduced."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import jax

PACKAGES = ("coocflow", "jax", "jaxlib", "equinox", "diffrax", "optax", "numpy", "pyarrow", "matplotlib")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> dict[str, str | bool | None]:
    """Commit of the coocflow source tree (None when not installed from a git checkout)."""
    source = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if commit else None}


def device_info() -> dict[str, str]:
    device = jax.devices()[0]
    return {"platform": device.platform, "device": str(device), "kind": getattr(device, "device_kind", "")}


def provenance() -> dict:
    return {
        "versions": package_versions(),
        "git": git_commit(),
        "device": device_info(),
        "command": " ".join(sys.argv),
    }
