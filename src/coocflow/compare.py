"""`coocflow compare`: two or more finished run folders side by side.

A comparison folder holds

    compare.json   the folders (as given and resolved), the configuration keys that differ,
                   the key results of each run (the flow solver's steps and gradient
                   evaluations, a system's own final observables as `final NAME`, the event
                   times as `event NAME`) and the plotted columns
    compare.png    one panel per column, every run a line (median and 10-90% band over seeds
                   for an ensemble) on a shared log time axis, each run's T1 marked

and `coocflow report` turns it into an interactive page (`coocflow.report.compare_page`).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coocflow.config import flatten_dotted
from coocflow.errors import ConfigError, RunFolderError
from coocflow.storage import load_run
from coocflow.storage.atomic import _jsonable, atomic_write_text
from coocflow.storage.folders import ComparisonFolder, RunFolder, read_json_object
from coocflow.storage.paths import default_out, is_in_progress
from coocflow.systems.traits import traits_of

COMPARE_FORMAT = 1
RESULT_FIELDS = (
    ("status", "status"),
    ("seeds", "seeds"),
    ("T1", "T1 (median over seeds)"),
    ("initial_loss", "initial loss"),
    ("final_loss", "final loss"),
    ("final_t", "final t"),
    ("final_train_acc", "final train acc"),
    ("final_test_acc", "final test acc"),
    ("final_G_mu1", "final G(mu1)"),
    ("final_G_mu2", "final G(mu2)"),
    ("final_G_mu3", "final G(mu3)"),
    ("common_t", "common time (the shortest run's end)"),
    ("loss_at_common_t", "loss at the common time"),
    ("first_t", "first observed t > 0"),
    ("delta_A_mu1_mu2", "A_mu1_mu2(T) - A_mu1_mu2(0)"),
    ("solver_steps", "flow solver steps (median over seeds)"),
    ("gradient_evaluations", "gradient evaluations (median over seeds)"),
    ("wall_s", "wall time (s, training)"),
)
"""(key in each result dict, row title) in display order; every result also has run, name, folder."""
NOT_COLUMNS = ("seed", "t", "step")


@dataclass
class Comparison:
    """A written comparison: `differences` maps each dotted config key whose value differs to
    its values (one per run, None where a run lacks the key; `name` last); `results` holds one
    dict per run (keys `run`, `name`, `folder` and those of RESULT_FIELDS)."""

    folder: Path
    figure: Path
    differences: dict[str, list[Any]]
    results: list[dict[str, Any]]
    columns: list[str]
    labels: list[str] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def config_differences(configs: list[dict]) -> dict[str, list[Any]]:
    """Dotted keys whose values are not all equal across `configs`, in the order of the first
    config (keys only some configs have after them), `name` last."""
    flat = [flatten_dotted(c) for c in configs]
    keys: list[str] = []
    for tree in flat:
        keys += [k for k in tree if k not in keys]
    missing = object()
    out = {}
    for key in sorted(keys, key=lambda k: k == "name"):  # stable: only moves `name` to the end
        values = [tree.get(key, missing) for tree in flat]
        canonical = {json.dumps(v, sort_keys=True, default=str) if v is not missing else "\0missing" for v in values}
        if len(canonical) > 1:
            out[key] = [None if v is missing else v for v in values]
    return out


def _check_folders(folders: list[Path]) -> list[Path]:
    """The folders resolved, or one line naming the first problem."""
    if len(folders) < 2:
        raise ConfigError(f"compare: needs at least two run folders (got {len(folders)}); "
                          "pass two or more folders written by `coocflow run`")
    seen: dict[Path, Path] = {}
    for folder in folders:
        if not folder.exists():
            raise RunFolderError(f"{folder}: does not exist; pass a folder written by `coocflow run`")
        if not folder.is_dir():
            raise RunFolderError(f"{folder}: is a file, not a run folder; pass a folder written by `coocflow run`")
        if is_in_progress(folder):
            raise RunFolderError(f"{folder}: a run in progress or interrupted, not a finished run; "
                                 f"let it finish or continue it with `coocflow run --resume {folder}`")
        real = folder.resolve()
        if real in seen:
            raise ConfigError(f"compare: {folder} is given twice (as {seen[real]} and {folder}); "
                              "pass each run folder once")
        seen[real] = folder
    return list(seen)


def _labels(runs) -> list[str]:
    """One distinct label per run: its name, with the folder added where names repeat."""
    names = [str(r.manifest.get("name") or r.path.name) for r in runs]
    labels = [n if names.count(n) == 1 else f"{n} [{r.path.name}]" for n, r in zip(names, runs)]
    if len(set(labels)) < len(labels):
        labels = [f"{n} [{r.path}]" for n, r in zip(names, runs)]
    if len(set(labels)) < len(labels):
        labels = [f"{label} #{i + 1}" for i, label in enumerate(labels)]
    return labels


def available_columns(metrics: dict[str, np.ndarray]) -> list[str]:
    return [name for name, column in metrics.items()
            if name not in NOT_COLUMNS and np.issubdtype(np.asarray(column).dtype, np.number)]


def default_columns(runs) -> list[str]:
    """The columns drawn without --columns: those the runs' System names (`Traits.compare_columns`)
    when they all train one; else each run's loss, then the first columns every run has, four in all."""
    systems = {RunFolder(run.path).system() for run in runs}
    named = traits_of(next(iter(systems))).compare_columns if len(systems) == 1 else ()
    if named:
        return list(named)
    shared = [name for name in available_columns(runs[0].metrics)
              if all(name in run.metrics for run in runs[1:])]
    losses = [name for name in dict.fromkeys(run.manifest.get("loss_name", "loss") for run in runs) if name in shared]
    return (losses + [name for name in shared if name not in losses])[:4]


def parse_columns(columns: list[str] | str) -> list[str]:
    """`--columns loss,G_mu1` (or a list, each item possibly comma-separated) -> names (without
    --columns, `default_columns`)."""
    items = [columns] if isinstance(columns, str) else list(columns)
    names = [part.strip() for item in items for part in str(item).split(",") if part.strip()]
    if not names:
        raise ConfigError("--columns: no column given; pass names such as loss,G_mu1 (see docs/metrics.md)")
    return list(dict.fromkeys(names))


def _check_columns(columns: list[str], runs, labels: list[str]) -> None:
    available = {label: set(available_columns(run.metrics)) for label, run in zip(labels, runs)}
    union = sorted(set().union(*available.values()))
    for column in columns:
        if column in union:
            continue
        close = sorted(difflib.get_close_matches(column, union, n=3, cutoff=0.5),  # ties alphabetically
                       key=lambda c: (-difflib.SequenceMatcher(None, column, c).ratio(), c))
        hint = f"did you mean {' or '.join(close)}?" if close else "see docs/metrics.md for the columns"
        raise ConfigError(f"--columns: {column!r} is not a metrics column of these runs; {hint}")


def _finite(value: Any) -> Any:
    """NaN and infinities as None, NumPy scalars as Python numbers (strict JSON)."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _last_valid(row: np.ndarray) -> float:
    finite = row[np.isfinite(row)]
    return float(finite[-1]) if finite.size else float("nan")


def _first_valid(row: np.ndarray) -> float:
    finite = row[np.isfinite(row)]
    return float(finite[0]) if finite.size else float("nan")


def pivot(metrics: dict[str, np.ndarray], column: str) -> tuple[np.ndarray, np.ndarray]:
    """Times and a (seeds, times) array of one column of a long metrics table (NaN where a seed
    has no observation)."""
    t_col = np.asarray(metrics["t"], dtype=float)
    seed_col = np.asarray(metrics["seed"]) if "seed" in metrics else np.zeros(len(t_col), dtype=np.int64)
    seeds = np.unique(seed_col)
    t = np.unique(t_col)
    grid = np.full((len(seeds), len(t)), np.nan)
    grid[np.searchsorted(seeds, seed_col), np.searchsorted(t, t_col)] = np.asarray(metrics[column], dtype=float)
    return t, grid


def run_results(run, label: str) -> dict[str, Any]:
    """The key results of one loaded run, as `coocflow show` prints them."""
    man = run.manifest
    final = man.get("final") or {}
    seeds = man.get("seeds") or [man.get("seed")]
    delta = None
    if "A_mu1_mu2" in run.metrics:
        _, grid = pivot(run.metrics, "A_mu1_mu2")
        changes = np.array([_last_valid(row) - _first_valid(row) for row in grid])
        if np.isfinite(changes).any():
            delta = float(np.nanmedian(changes))
    result = {
        "run": label, "name": man.get("name"), "folder": str(run.path),
        "status": man.get("status"), "seeds": len(seeds), "T1": man.get("T1"),
        "initial_loss": man.get("initial_loss"), "final_loss": final.get(man.get("loss_name", "loss")), "final_t": final.get("t"),
        "final_train_acc": final.get("train_acc"), "final_test_acc": final.get("test_acc"),
        "final_G_mu1": final.get("G_mu1"), "final_G_mu2": final.get("G_mu2"), "final_G_mu3": final.get("G_mu3"),
        "delta_A_mu1_mu2": delta, "wall_s": (man.get("timings") or {}).get("train_s"),
    }
    stats = man.get("solver_stats") or {}
    if stats.get("num_steps"):
        result["solver_steps"] = float(np.median(stats["num_steps"]))
        result["gradient_evaluations"] = float(np.median(stats["gradient_evaluations"]))
    shown = {"t", man.get("loss_name", "loss")} | {key[len("final_"):] for key in result if key.startswith("final_")}
    if "system" in man:  # a system's own observables (eq. (1)'s are the fixed fields)
        result.update({f"final {name}": value for name, value in final.items() if name not in shown})
    located = [p for p in man.get("per_seed") or [] if p.get("events")]
    for name in (located[0]["events"] if located else ()):
        found = [p["events"][name] for p in located if p["events"].get(name) is not None]
        result[f"event {name}"] = float(np.median(found)) if found else None
    return {key: _finite(value) for key, value in result.items()}


def _ylog(column: str, grids: list[np.ndarray]) -> bool:
    from coocflow.observables import OBSERVABLES  # lazy: defers JAX, 1-3.6 s

    obs = OBSERVABLES.get(column)
    if obs is None or obs.group != "loss":
        return False
    values = np.concatenate([g[np.isfinite(g)] for g in grids]) if grids else np.array([])
    return values.size > 0 and bool((values > 0).all())


def draw_figure(runs, labels: list[str], columns: list[str], path: Path) -> Path:
    """compare.png: one panel per column, one line (or median and band) per run, shared log time
    axis, each run's T1 (median over seeds) a dashed line in the run's color; written atomically."""
    from coocflow.plots.figures import band_curve, plt  # lazy: defers JAX, 1-3.6 s
    from coocflow.plots.save import save_figure  # lazy: beside the figures

    n = len(columns)
    ncols = min(n, 2)
    nrows = math.ceil(n / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.5 * ncols, 3.8 * nrows), sharex=True,
                             constrained_layout=True, squeeze=False)
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for ax, column in zip(axes.ravel(), columns):
        grids = []
        absent = []
        for run, label, color in zip(runs, labels, colors):
            if column not in run.metrics:
                absent.append(label)
                continue
            t, grid = pivot(run.metrics, column)
            shown = t > 0
            band_curve(ax, t[shown], grid[:, shown], label, color)
            grids.append(grid[:, shown])
            t1 = run.manifest.get("T1")
            if isinstance(t1, (int, float)) and t1 > 0:
                ax.axvline(t1, color=color, lw=1, ls="--", alpha=0.8)
        ax.set_xscale("log")
        if _ylog(column, grids):
            ax.set_yscale("log")
        ax.set_ylabel(column)
        ax.set_title(column + (f" (not in {', '.join(absent)})" if absent else ""), fontsize=9)
        ax.grid(alpha=0.3, which="both", lw=0.4)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("flow time t (dashed: T1 of each run)")
    if n > 1 and nrows > 1 and n % 2:  # the lone last panel's neighbour above carries the axis label
        axes[-2][-1].set_xlabel("flow time t (dashed: T1 of each run)")
        axes[-2][-1].xaxis.set_tick_params(labelbottom=True)
    axes[0][0].legend(fontsize=7, loc="best")
    return save_figure(fig, path, dpi=130, fmt="png")


def _prepare_out(out: Path | None, resolved: list[Path]) -> Path:
    if out is None:
        out = default_out("compare")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out}: is a file; choose a folder")
    if out.resolve() in resolved:
        raise ConfigError(f"--out {out}: is one of the compared run folders; choose another folder")
    if out.is_dir() and any(out.iterdir()) and not ComparisonFolder(out).record_file.is_file():
        raise ConfigError(f"--out {out}: folder exists and is not a comparison folder; choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    return out


def value_at(metrics: dict[str, np.ndarray], column: str, time: float) -> float | None:
    """The median over seeds of `column` at flow time `time`, interpolated linearly in log t
    between the observations around it (exact at an observed time); None outside the observed span."""
    t, grid = pivot(metrics, column)
    positive = t > 0
    if not positive.any() or time < t[positive][0] or time > t[-1]:
        return None
    per_seed = [np.interp(np.log(time), np.log(t[positive][np.isfinite(row[positive])]),
                          row[positive][np.isfinite(row[positive])]) for row in grid if np.isfinite(row[positive]).any()]
    return float(np.median(per_seed)) if per_seed else None


def time_axis_warnings(runs, labels: list[str]) -> list[str]:
    """What differs between the runs' time axes: their end (results at the end are then at
    different times; the common time is the shortest end) and their first observed time."""
    ends = [float(np.max(run.metrics["t"])) for run in runs]
    firsts = [float(np.min(np.asarray(run.metrics["t"])[np.asarray(run.metrics["t"]) > 0], initial=np.inf))
              for run in runs]
    warnings = []
    if not np.allclose(ends, ends[0], rtol=1e-9):
        spans = ", ".join(f"{label} {end:g}" for label, end in zip(labels, ends))
        warnings.append(f"the runs end at different flow times ({spans}): their final values are not at one time; "
                        f"compare them at the common time t = {min(ends):g} (the rows 'loss at the common time')")
    if not np.allclose(firsts, firsts[0], rtol=1e-9):
        grid = ", ".join(f"{label} {first:g}" for label, first in zip(labels, firsts))
        warnings.append(f"the runs are observed on different grids (first observed t > 0: {grid}); the figure "
                        "shows each on its own")
    return warnings


def compare_runs(folders: list[Path], columns: list[str] | None = None, out: Path | None = None) -> Comparison:
    """Load the run folders, find their configuration differences and key results, draw the
    chosen columns for all runs, and write compare.json and compare.png to `out` (by default
    runs/compare-TIMESTAMP)."""
    folders = [Path(f) for f in folders]
    resolved = _check_folders(folders)
    runs = [load_run(folder) for folder in folders]
    labels = _labels(runs)
    names = parse_columns(columns) if columns is not None else default_columns(runs)
    _check_columns(names, runs, labels)
    differences = config_differences([run.config for run in runs])
    results = [run_results(run, label) for run, label in zip(runs, labels)]
    common = min(float(np.max(run.metrics["t"])) for run in runs)
    for run, result in zip(runs, results):
        t = np.asarray(run.metrics["t"])
        loss = run.manifest.get("loss_name", "loss")
        result.update(common_t=common, loss_at_common_t=_finite(value_at(run.metrics, loss, common)),
                      first_t=float(t[t > 0].min()) if (t > 0).any() else None)
    warnings = time_axis_warnings(runs, labels)
    out = _prepare_out(out, resolved)
    figure = draw_figure(runs, labels, names, ComparisonFolder(out).figure_file)
    comparison = Comparison(folder=out, figure=figure, differences=differences, results=results, columns=names,
                            labels=labels, folders=[str(f) for f in folders], resolved=[str(p) for p in resolved],
                          warnings=warnings)
    record = {
        "format": "coocflow-compare", "format_version": COMPARE_FORMAT,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "folders": comparison.folders, "resolved": comparison.resolved, "labels": labels, "columns": names,
        "differences": differences, "results": results, "figure": figure.name, "warnings": warnings,
    }
    atomic_write_text(ComparisonFolder(out).record_file, json.dumps(record, indent=2, default=_jsonable) + "\n")
    return comparison


def read_comparison(folder: Path) -> Comparison:
    """A comparison folder's compare.json read back."""
    comparison = ComparisonFolder(folder)
    folder = comparison.path
    record = read_json_object(comparison.record_file)
    if record.get("format_version") != COMPARE_FORMAT:
        raise RunFolderError(f"{comparison.record_file}: comparison format {record.get('format_version')!r} is not "
                             f"the supported format {COMPARE_FORMAT}; re-run `coocflow compare`")
    try:
        return Comparison(folder=folder, figure=folder / record["figure"], differences=record["differences"],
                          results=record["results"], columns=record["columns"], labels=record["labels"],
                          folders=record["folders"], resolved=record["resolved"],
                          warnings=record.get("warnings", []))
    except KeyError as err:
        raise RunFolderError(f"{comparison.record_file}: missing {err}; re-run `coocflow compare`") from None


def format_value(value: Any) -> str:
    """A table cell: floats to 4 significant digits, missing values as an em dash."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def result_rows(comparison: Comparison) -> list[tuple[str, list[str]]]:
    """(row title, one formatted cell per run) for the results table: the fixed fields, then a
    system's own final observables and the event times; a row no run has a value for (the paper's
    quantities, for other systems) is left out."""
    fields = list(RESULT_FIELDS)
    for prefix, title in (("final ", "final {} (a system's own observable)"), ("event ", "{} (median, located)")):
        names = dict.fromkeys(key for r in comparison.results for key in r if key.startswith(prefix))
        fields += [(key, title.format(key[len(prefix):])) for key in names]
    return [(title, [format_value(r.get(key)) for r in comparison.results]) for key, title in fields
            if any(r.get(key) is not None for r in comparison.results)]


def render_comparison(comparison: Comparison, console) -> None:
    """Print the configuration differences and the results, one column per run (Rich tables)."""
    from rich.markup import escape  # lazy: defers Rich
    from rich.table import Table  # lazy: defers Rich

    labels = comparison.labels or [r["run"] for r in comparison.results]
    if comparison.differences:
        diff = Table(title="configuration differences")
        diff.add_column("key")
        for label in labels:
            diff.add_column(escape(label))
        for key, values in comparison.differences.items():
            diff.add_row(escape(key), *(escape(format_value(v)) for v in values))
        console.print(diff)
    else:
        console.print("configuration differences: none (the configurations are identical)")
    results = Table(title="results")
    results.add_column("")
    for label in labels:
        results.add_column(escape(label), justify="right")
    for title, cells in result_rows(comparison):
        results.add_row(title, *(escape(c) for c in cells))
    console.print(results)
    for warning in comparison.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
