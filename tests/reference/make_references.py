"""The stored reference metrics of issue 21, item 8 (a redesign changes no number), and their check.

`python tests/reference/make_references.py` writes them from the code at hand; `--check` runs the
same experiments and compares every column of every metrics table with the stored one, to a
relative `REFERENCE_RTOL` (bit for bit where the arithmetic is unchanged), printing what differs
and exiting 1. Run it with the default XLA flags: the test suite compiles at
`--xla_backend_optimization_level=0`, which moves some columns by a few ulps (measured: 6.5e-12
relative in the balance ratio bal_S2_S3 of `run paper`), so tests/test_references.py runs this
file in a subprocess without that flag."""

import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from coocflow.api import execute, resolve_config

HERE = Path(__file__).resolve().parent
REFERENCE_RTOL = 1e-12
REFERENCES = {
    "paper_gd": ("paper", {}),
    "paper_flow": ("paper", {"train.method": "flow", "train.t_end": 300.0}),
    "deep": ("deep", {}),
    "markov": ("markov", {}),
}
"""name: (experiment, overrides): `run paper` by GD and by the flow to t = 300, `run deep`, `run markov`."""


def reference_tables(experiment: str, overrides: dict, out: Path) -> dict:
    """Every metrics table the run writes (a study's include its variants), by path in its folder."""
    folder = execute(resolve_config(experiment, overrides), out, force=True, figures=False)
    return {str(path.relative_to(folder)): pq.read_table(path) for path in sorted(folder.rglob("metrics.parquet"))}


def differences(name: str, tables: dict) -> list[str]:
    """Every table or column of `tables` that is not the stored reference's `name`."""
    stored = {str(path.relative_to(HERE / name)): path for path in sorted((HERE / name).rglob("*.parquet"))}
    found = [] if sorted(tables) == sorted(stored) else [f"{name}: tables {sorted(tables)} != {sorted(stored)}"]
    for path in sorted(set(tables) & set(stored)):
        got, want = tables[path], pq.read_table(stored[path])
        if got.column_names != want.column_names:
            found.append(f"{name}/{path}: columns differ")
            continue
        for column in want.column_names:
            a, b = got.column(column).to_numpy(), want.column(column).to_numpy()
            if a.shape != b.shape:
                found.append(f"{name}/{path}:{column}: {a.shape[0]} rows, stored {b.shape[0]}")
            elif not np.issubdtype(b.dtype, np.floating):
                if not np.array_equal(a, b):
                    found.append(f"{name}/{path}:{column} differs")
            elif not np.allclose(a, b, rtol=REFERENCE_RTOL, atol=0, equal_nan=True):
                relative = np.nanmax(np.abs(a - b) / np.maximum(np.abs(b), 1e-300))
                found.append(f"{name}/{path}:{column} differs by up to {relative:.2g} (relative)")
    return found


def main(check: bool) -> int:
    with tempfile.TemporaryDirectory() as scratch:
        found = []
        for name, (experiment, overrides) in REFERENCES.items():
            tables = reference_tables(experiment, overrides, Path(scratch) / name)
            if check:
                found += differences(name, tables)
                continue
            for path, table in tables.items():
                target = HERE / name / path
                target.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(table, target, compression="zstd")
                print(f"written: {target} ({table.num_rows} rows x {table.num_columns} columns)")
    for line in found:
        print(line)
    if check:
        print(f"{len(REFERENCES)} reference runs: " + ("all equal" if not found else f"{len(found)} differences"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:]))
