"""`coocflow run --check-reproduce DIR`: re-run a run folder's config and compare every number.

The same config and seeds on the same machine give bit-identical results (a test checks it);
this command checks it for any folder, and names each metrics column or weight that differs and
by how much, so a changed library version or machine shows up as numbers, not as a feeling.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from coocflow.config import config_from_dict


@dataclass
class Difference:
    name: str
    max_abs: float
    max_rel: float


def _compare(name: str, old: np.ndarray, new: np.ndarray) -> Difference | None:
    old, new = np.asarray(old), np.asarray(new)
    if old.shape != new.shape:
        return Difference(f"{name} (shape {old.shape} vs {new.shape})", float("inf"), float("inf"))
    if old.dtype.kind not in "fc":
        return None if np.array_equal(old, new) else Difference(name, float("inf"), float("inf"))
    if np.array_equal(old, new, equal_nan=True):
        return None
    gap = np.abs(old - new)
    return Difference(name, float(np.nanmax(gap)), float(np.nanmax(gap / np.maximum(np.abs(old), 1e-300))))


def _train_again(config) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The metrics table and the final arrays (named as the run folder's state_final.npz names them)
    of training `config` again, whatever its System (`coocflow.run`)."""
    from coocflow.run import train  # lazy: defers JAX, 1-3.6 s

    run = train(config)
    return run.table(), run.final_arrays()


def check_reproduce(folder: Path, accept_changed_code: bool = False) -> tuple[list[Difference], dict]:
    """Train the folder's config again, whatever its system; every metrics column and final array
    (the system's own names) that differs, or that only one of the two has. A System whose code
    changed since the run is refused unless `accept_changed_code` (the numbers would differ for that)."""
    from coocflow.api import refuse_changed_code  # lazy: defers pyarrow, 0.3 s
    from coocflow.storage import load_run  # lazy: defers pyarrow, 0.3 s

    stored = load_run(Path(folder))
    config = config_from_dict(stored.config)
    refuse_changed_code(Path(folder), stored.manifest.get("system_code"), config.system, "check it",
                        accept_changed_code)
    table, final = _train_again(config)
    differences = [d for name in sorted(set(stored.metrics) | set(table))
                   if (d := _compare(f"metrics.{name}", stored.metrics.get(name, np.array([])),
                                     table.get(name, np.array([])))) is not None]
    differences += [d for name in sorted(set(stored.state_final) | set(final))
                    if (d := _compare(f"state_final.{name}", stored.state_final.get(name, np.array([])),
                                      final.get(name, np.array([])))) is not None]
    return differences, {"rows": len(table["t"]), "columns": len(table), "weights": len(final)}
