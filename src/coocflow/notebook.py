"""The Python API a notebook user expects: `coocflow.run`, `coocflow.load`, `coocflow.verify`.

A `Run` is a run folder read back: its config, manifest, metrics table and weights. Runs are
always written to a folder (under runs/ like the CLI, unless `out` is given), so a run made in
a notebook and one made by the CLI are the same object and can be verified and reported alike.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from coocflow.api import execute, resolve_config, study_of
from coocflow.config import Config, config_from_dict
from coocflow.estimate import estimate
from coocflow.report import write_report
from coocflow.storage import load_run
from coocflow.storage.folders import RunFolder, StudyFolder, SweepFolder
from coocflow.storage.paths import default_out, refuse_existing_out


@dataclass
class Run:
    """A run folder, loaded: `metrics` is a pyarrow Table (one row per seed and observed time;
    `.to_pandas()`, Polars and DuckDB take it directly)."""

    folder: Path
    config: dict[str, Any]
    manifest: dict[str, Any]
    metrics: pa.Table
    state_init: dict[str, np.ndarray]
    state_final: dict[str, np.ndarray]

    @property
    def seeds(self) -> list[int]:
        return list(self.manifest.get("seeds") or [self.manifest["seed"]])

    @property
    def T1(self) -> float | None:
        """T1 of the run (the median over seeds for an ensemble)."""
        return self.manifest.get("T1")

    def series(self, name: str, seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(t, values) of one metrics column for one seed (default: the first)."""
        table = self.metrics.to_pydict()
        if name not in table:
            raise KeyError(f"'{name}' is not a metrics column; see Run.metrics.column_names")
        seed = self.seeds[0] if seed is None else seed
        rows = np.asarray(table["seed"]) == seed
        return np.asarray(table["t"])[rows], np.asarray(table[name])[rows]

    def plot(self, kind: str = "", columns: list[str] | None = None):
        """A Matplotlib figure: `columns` against t (median and 10-90% band over seeds), or the run's
        own figure as its System's run type draws it (`TrainedRun.plot`): for eq. (1) `figure1` (the
        paper's Figure 1, the default) or `overview`; for another System every observable (its
        training.png)."""
        from coocflow.plots import SeriesView  # lazy: defers JAX, 1-3.6 s
        from coocflow.run import run_type  # lazy: defers JAX, 1-3.6 s

        columns_of = {name: np.asarray(col) for name, col in self.metrics.to_pydict().items()}
        title = str(self.manifest.get("name", self.folder.name))
        if columns:
            return _columns_figure(SeriesView.from_metrics(columns_of), columns, title)
        return run_type(config_from_dict(self.config).system).plot(columns_of, self.manifest, title, kind)

    def report(self) -> Path:
        """Write and return the run's self-contained report.html."""
        return write_report(self.folder)

    def __repr__(self) -> str:
        return (f"Run({self.manifest.get('name')!r}, seeds={self.seeds}, T1={self.T1}, "
                f"rows={self.metrics.num_rows}, folder='{self.folder}')")


@dataclass
class Study:
    """A study folder, loaded (`coocflow run deep`, `coocflow.run("deep")`, ...): its summary, its
    figures and every table it wrote, by path relative to the folder (`metrics.parquet`,
    `variants/<name>/metrics.parquet`), as pyarrow Tables."""

    folder: Path
    config: dict[str, Any]
    manifest: dict[str, Any]
    summary: str
    figures: list[Path]
    tables: dict[str, pa.Table]

    @property
    def name(self) -> str:
        return str(self.manifest["study"])

    def __repr__(self) -> str:
        return f"Study({self.name!r}, tables={sorted(self.tables)}, folder='{self.folder}')"


def _load_study(folder: Path, manifest: dict[str, Any]) -> Study:
    study = StudyFolder(folder)
    tables = {str(path.relative_to(folder)): pq.read_table(path) for path in sorted(folder.rglob("*.parquet"))}
    return Study(folder, study.config_record(), manifest, study.summary_file.read_text(),
                 [folder / name for name in manifest.get("figures", [])], tables)


def _columns_figure(view, columns: list[str], title: str):
    import matplotlib.pyplot as plt  # lazy: defers matplotlib, 0.7 s

    from coocflow.plots.figures import band_curve  # lazy: defers JAX, 1-3.6 s

    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    shown = view.t > 0
    for name in columns:
        band_curve(ax, view.t[shown], view.series[name][:, shown], name)
    ax.set(xscale="log", xlabel="flow time t", title=title)
    ax.legend(fontsize=8)
    return fig


def load(folder: str | Path) -> Run | Study:
    """Read a folder written by `coocflow run` or `coocflow.run` (no pickle, any version of the
    documented format): a `Run`, or a `Study` when it holds a study."""
    run = RunFolder(folder)
    if run.manifest_file.is_file():
        manifest = run.manifest()
        if "study" in manifest:
            return _load_study(run.path, manifest)
    loaded = load_run(run.path)
    return Run(run.path, loaded.config, loaded.manifest, pq.read_table(run.metrics_file),
               loaded.state_init, loaded.state_final)


def run(experiment_or_config: str | Path | Config = "paper", *, seeds: int | Sequence[int] | None = None,
        seed: int | None = None, out: str | Path | None = None,
        overrides: Mapping[str, Any] | Sequence[str] | None = None, figures: bool = True,
        force: bool = False) -> Run | Study:
    """Train and write a run folder (default `runs/NAME-TIMESTAMP`, like `coocflow run`), then
    load it; see `coocflow.run` for the arguments. A study's name (deep, markov, ...) runs the
    study, as `coocflow run NAME` does (`api.execute`), and returns a `Study`. A run estimated to
    take over `estimate.LONG_RUN_SECONDS` (by its System's cost model, where it has one) says so on
    stderr before it starts. The folder is locked and checkpointed while it trains, so an
    interrupted run continues with `coocflow run --resume FOLDER`."""
    if isinstance(overrides, str):
        overrides = [overrides]
    resolved = resolve_config(experiment_or_config, overrides or (), seed, seeds)
    folder = Path(out) if out is not None else default_out(resolved.name)
    refuse_existing_out(folder, force)
    if study_of(resolved) is None:
        cost = estimate(resolved)
        if cost is not None and cost.long:  # said before the work starts, as `coocflow run` does
            print(f"{resolved.name}: {cost.sentence()}", file=sys.stderr, flush=True)
    execute(resolved, folder, force=force, figures=figures)
    return load(folder)


def verify(target: Run | str | Path):
    """Judge the theorem its System declares on a run, or on a `coocflow sweep` folder of one, as `coocflow
    verify` does, write verify.json/.md (and .png) there and return the verdicts: on eq. (1)'s run the
    paper's `Verification` (`.pass_rates()`, `.to_dict()`), else the `TheoremVerdict` (docs/theorems.md)."""
    from coocflow.verify.judge import sweep_runs  # lazy: defers JAX, 1-3.6 s
    from coocflow.verify.folders import verify_folders  # lazy: defers JAX, 1-3.6 s

    folder = target.folder if isinstance(target, Run) else Path(target)
    if SweepFolder(folder).spec_file.is_file():
        runs = sweep_runs(folder)
        return verify_folders(runs.folders, runs.axis, runs.values, str(folder), folder).result
    return verify_folders([folder], target=str(folder)).result
