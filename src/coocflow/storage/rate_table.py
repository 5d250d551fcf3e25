"""A width sweep as a table for `coocflow fit-rate`: columns `m`, `seed`, `value`, one row per
(width, seed), from a CSV or Parquet file (PyArrow reads both). A seed id that appears at several
widths names the same seed there (the same data, other widths): the fit pairs them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from coocflow.errors import CoocflowError

REQUIRED_COLUMNS = ("m", "seed", "value")
MIN_WIDTHS = 3


class RateTableError(CoocflowError):
    """A rate table is missing, unreadable, or cannot be fitted as a power law."""


@dataclass(frozen=True)
class RateTable:
    """Values grouped by width: `widths` ascending, `values[i]` the seeds' values at widths[i]."""

    widths: tuple[float, ...]
    values: tuple[np.ndarray, ...]
    seeds: int
    by_seed: np.ndarray | None = None
    """widths x seed ids (NaN: that seed has no value at that width), when some seed id appears at
    two or more widths: the paired table the rate test fits within seeds."""


def read_rate_table(path: Path) -> RateTable:
    """Read and validate `path`; every problem is one line naming the column or row and the fix."""
    path = Path(path)
    if not path.is_file():
        raise RateTableError(f"{path}: no such file; give a CSV or Parquet table with columns m, seed, value")
    try:
        table = pq.read_table(path) if path.suffix.lower() in (".parquet", ".pq") else pa_csv.read_csv(path)
    except Exception as err:  # noqa: BLE001 - any reader failure is the user's file, said in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RateTableError(f"{path}: cannot be read as {'Parquet' if path.suffix.lower() in ('.parquet', '.pq') else 'CSV'} "
                             f"({first}); write columns m, seed, value") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise RateTableError(f"{path}: missing column {', '.join(missing)} (found {', '.join(table.column_names) or 'none'}); "
                             "the table needs columns m, seed, value")
    try:
        m, value = (np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=np.float64) for c in ("m", "value"))
    except (TypeError, ValueError):
        raise RateTableError(f"{path}: columns m and value must be numbers") from None
    seed = table.column("seed").to_pylist()
    bad_m = np.flatnonzero(~np.isfinite(m) | (m <= 0))
    if bad_m.size:
        raise RateTableError(f"{path}: row {bad_m[0] + 1}: m = {m[bad_m[0]]} must be a positive width")
    bad_value = np.flatnonzero(np.isfinite(value) & (value <= 0))
    if bad_value.size:
        raise RateTableError(f"{path}: row {bad_value[0] + 1}: value = {value[bad_value[0]]:g} is not positive; a power law "
                             "is fitted to positive values (fit |value|, or drop the row)")
    widths = sorted(set(m.tolist()))
    groups = tuple(value[(m == w) & np.isfinite(value)] for w in widths)
    kept = [(w, g) for w, g in zip(widths, groups) if g.size]
    if len(kept) < MIN_WIDTHS:
        raise RateTableError(f"{path}: {len(kept)} width(s) with values; a rate needs at least {MIN_WIDTHS} widths of m")
    duplicate = _duplicate(m, seed)
    if duplicate is not None:
        raise RateTableError(f"{path}: m = {duplicate[0]:g}, seed = {duplicate[1]} appears twice; one row per (m, seed)")
    kept_widths = [w for w, _ in kept]
    return RateTable(tuple(kept_widths), tuple(g for _, g in kept), max(g.size for _, g in kept),
                     _by_seed(m, seed, value, kept_widths))


def _by_seed(m: np.ndarray, seed: list, value: np.ndarray, widths: list[float]) -> np.ndarray | None:
    """The widths x seeds table, or None when no seed id is seen at two widths (nothing to pair)."""
    named = [(w, s, v) for w, s, v in zip(m.tolist(), seed, value.tolist())
             if s is not None and not (isinstance(s, float) and math.isnan(s)) and math.isfinite(v)]
    ids = sorted({s for _, s, _ in named}, key=str)
    row_of, column_of = {w: i for i, w in enumerate(widths)}, {s: j for j, s in enumerate(ids)}
    table = np.full((len(widths), len(ids)), np.nan)
    for w, s, v in named:
        if w in row_of:
            table[row_of[w], column_of[s]] = v
    return table if np.any(np.sum(np.isfinite(table), axis=0) >= 2) else None


def _duplicate(m: np.ndarray, seed: list) -> tuple[float, object] | None:
    seen = set()
    for width, s in zip(m.tolist(), seed):
        key = (width, s)
        if key in seen and not (isinstance(s, float) and math.isnan(s)):
            return key
        seen.add(key)
    return None
