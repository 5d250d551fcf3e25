"""The stored reference metrics that show a redesign changes no number, and their check.

`python tests/reference/make_references.py` writes them from the code at hand; `--check` runs the
same experiments and compares every column of every metrics table with the stored one, printing
what differs and exiting 1. The stored numbers were written on one machine, and XLA splits CPU
reductions by the number of threads and the instruction set, so another machine (or this one on one
core) rounds differently: the comparison allows what the computation can promise across machines
(`machine_tolerance`), each column's difference measured against the column's own scale (its
largest |value|, so a quantity that crosses 0 or a change from init that starts at 0 is held to the
run's scale, not to its smallest value). `--bitwise` asks for bit-for-bit equality instead, which
only a re-run on the machine that wrote them can promise. Run it with the default XLA flags: the test suite compiles at
`--xla_backend_optimization_level=0` and XLA's older fusion emitter (tests/conftest.py), which moves
some columns by a few ulps (measured: 6.5e-12 relative in the balance ratio bal_S2_S3 of `run paper`),
so tests/test_references.py runs this file in a subprocess without those flags."""

import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from coocflow.api import execute, resolve_config, study_of

HERE = Path(__file__).resolve().parent
FLOAT64_EPS = float(np.finfo(np.float64).eps)
ROUNDING_STEPS_FACTOR = 10.0
"""A discrete method: each step's rounding moves the state by about eps relative, and a run of S
steps accumulates at most S of those (no chaotic amplification in these runs: the paper's 30,000 GD
steps differ across machines by 9e-12 relative at most, against S eps = 6.7e-12); 10 S eps
leaves a factor of 10 for the derived columns (ratios, differences of weights)."""
PERTURBATION_ULPS = 4
"""The sensitivity run: the init scale c1 moved by this many ulps (relative 4 eps), the size of the
rounding a different reduction order makes in one step."""
SENSITIVITY = HERE / "sensitivity.json"
"""Per reference and column, how far a 4-ulp change of the init scale moves the column at the end of
the run, in units of the column's scale (`--sensitivity` measures and writes it): a chaotic run (the
Markov task's GD at lr 2) amplifies a rounding difference far beyond S eps, and this is by how much."""
SOLVER_FACTOR = 10.0
"""The flow: a different rounding changes the adaptive solver's accepted steps, and each run is
within its local error control (rtol) of the exact flow, so two runs differ by a few rtol; 10
rtol (measured across machines: 7.6e-7 relative at rtol 1e-6, in R, a ratio of group sums)."""
REFERENCES = {
    "paper_gd": ("paper", {}),
    "paper_flow": ("paper", {"train.method": "flow", "train.t_end": 300.0}),
    "deep": ("deep", {}),
    "markov": ("markov", {}),
}
"""name: (experiment, overrides): `run paper` by GD and by the flow to t = 300, `run deep`, `run markov`."""


def machine_tolerance(config, sensitivity: float = 0.0) -> float:
    """What a run's numbers can promise across machines, relative to each column's scale: 10 rtol for
    the flow (`SOLVER_FACTOR`); for S discrete steps 10 x the larger of S eps (rounding accumulated
    step by step, `ROUNDING_STEPS_FACTOR`) and the column's measured `SENSITIVITY` to a rounding-size
    change at the start (its amplification over the run)."""
    if config.is_flow:
        return SOLVER_FACTOR * config.solver.rtol
    return ROUNDING_STEPS_FACTOR * max(config.train.steps * FLOAT64_EPS, sensitivity)


def perturbed(experiment: str, overrides: dict) -> dict:
    """The overrides with the init scale c1 moved by `PERTURBATION_ULPS` ulps."""
    c1 = resolve_config(experiment, overrides).init.c1
    return {**overrides, "init.c1": c1 * (1 + PERTURBATION_ULPS * FLOAT64_EPS)}


def column_spreads(a_tables: dict, b_tables: dict) -> dict[str, float]:
    """`table:column` -> max |a - b| / max |b| over the floating columns both have."""
    out = {}
    for path in sorted(set(a_tables) & set(b_tables)):
        for column in b_tables[path].column_names:
            a, b = a_tables[path].column(column).to_numpy(), b_tables[path].column(column).to_numpy()
            if np.issubdtype(b.dtype, np.floating) and a.shape == b.shape and np.any(np.isfinite(b)):
                scale = np.nanmax(np.abs(b))
                out[f"{path}:{column}"] = float(np.nanmax(np.abs(a - b)) / scale) if scale > 0 else 0.0
    return out


def reference_tables(experiment: str, overrides: dict, out: Path) -> dict:
    """Every metrics table the run writes (a study's include its variants), by path in its folder."""
    config = resolve_config(experiment, overrides)
    folder = execute(config, out, force=True, **({} if study_of(config) else {"figures": False}))
    return {str(path.relative_to(folder)): pq.read_table(path) for path in sorted(folder.rglob("metrics.parquet"))}


def differences(name: str, tables: dict, tolerance=lambda column: 0.0, worst: dict | None = None) -> list[str]:
    """Every table or column of `tables` that is not the stored reference's `name` within
    `tolerance("table:column")` of the column's scale (0: bit for bit); `worst` collects the largest
    scaled difference per table."""
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
            else:
                same_nan = np.array_equal(np.isnan(a), np.isnan(b))
                scale = np.nanmax(np.abs(b)) if np.any(np.isfinite(b)) else 0.0
                scaled = np.nanmax(np.abs(a - b)) / scale if scale > 0 and np.any(np.isfinite(b)) else 0.0
                if worst is not None:
                    worst[f"{name}/{path}"] = max(worst.get(f"{name}/{path}", 0.0), float(scaled))
                allowed = tolerance(f"{path}:{column}")
                if not same_nan or scaled > allowed or (allowed == 0 and not np.array_equal(a, b, equal_nan=True)):
                    found.append(f"{name}/{path}:{column} differs by up to {scaled:.2g} of the column's scale "
                                 f"(allowed {allowed:.2g})" + ("" if same_nan else "; NaN in other places"))
    return found


def main(check: bool, bitwise: bool = False, sensitivity: bool = False) -> int:
    spreads = json.loads(SENSITIVITY.read_text()) if SENSITIVITY.exists() else {}
    with tempfile.TemporaryDirectory() as scratch:
        found, worst = [], {}
        for name, (experiment, overrides) in REFERENCES.items():
            tables = reference_tables(experiment, overrides, Path(scratch) / name)
            if sensitivity:
                config = resolve_config(experiment, overrides)
                if not config.is_flow:
                    moved = reference_tables(experiment, perturbed(experiment, overrides), Path(scratch) / f"{name}-moved")
                    spreads[name] = column_spreads(moved, tables)
                    print(f"{name}: a {PERTURBATION_ULPS}-ulp init change moves a column by up to "
                          f"{max(spreads[name].values(), default=0):.2g} of its scale")
                continue
            if check:
                config = resolve_config(experiment, overrides)
                of_run = spreads.get(name, {})
                found += differences(name, tables, (lambda column: 0.0) if bitwise else (
                    lambda column, c=config, s=of_run: machine_tolerance(c, s.get(column, 0.0))), worst)
                continue
            for path, table in tables.items():
                target = HERE / name / path
                target.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(table, target, compression="zstd")
                print(f"written: {target} ({table.num_rows} rows x {table.num_columns} columns)")
    for line in found:
        print(line)
    if sensitivity:
        SENSITIVITY.write_text(json.dumps(spreads, indent=1, sort_keys=True) + "\n")
        print(f"written: {SENSITIVITY}")
        return 0
    for table, scaled in worst.items():
        print(f"{table}: largest difference {scaled:.2g} of a column's scale")
    if check:
        print(f"{len(REFERENCES)} reference runs: " + ("all equal" if not found else f"{len(found)} differences"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main("--check" in sys.argv[1:], "--bitwise" in sys.argv[1:], "--sensitivity" in sys.argv[1:]))
