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


def check_reproduce(folder: Path) -> tuple[list[Difference], dict]:
    """Train the folder's config again; every metrics column and weight that differs."""
    from coocflow.runner import state_arrays, train  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage import load_run  # lazy: defers pyarrow, 0.3 s

    stored = load_run(Path(folder))
    result = train(config_from_dict(stored.config))
    table = result.table()
    differences = [d for name in sorted(set(stored.metrics) | set(table))
                   if (d := _compare(f"metrics.{name}", stored.metrics.get(name, np.array([])),
                                     table.get(name, np.array([])))) is not None]
    final = state_arrays(result.trajectory.final, result.problem.train)
    if len(result.seeds) == 1:
        final = {k: v[0] for k, v in final.items()}
    differences += [d for name in sorted(final)
                    if (d := _compare(f"state_final.{name}", stored.state_final[name], final[name])) is not None]
    return differences, {"rows": len(table["t"]), "columns": len(table), "weights": len(final)}
