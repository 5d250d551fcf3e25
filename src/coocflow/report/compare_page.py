"""The report page of a comparison folder (compare.json from `coocflow compare`).

The differences and results tables, and one interactive Plotly figure per compared column with
every run (median and 10-90% band over seeds for an ensemble) and each run's T1 marked in its
color. The run folders are read again for the curves; a run folder that has gone since is named
and left out of the figures. Every string from a config, a manifest or a folder is escaped.
"""

from __future__ import annotations

import html
from pathlib import Path

from coocflow.compare import _ylog, format_value, read_comparison, result_rows
from coocflow.errors import CoocflowError
from coocflow.report.html import PALETTE, _figure, _figure_divs, _page, _series_traces, _table
from coocflow.storage import load_run
from coocflow.storage.run_folder import pivot_metrics


def _t1_lines(t1s: list[tuple[float, str]]) -> list[dict]:
    return [{"type": "line", "xref": "x", "yref": "paper", "x0": t1, "x1": t1, "y0": 0, "y1": 1,
             "line": {"color": color, "dash": "dash", "width": 1}} for t1, color in t1s]


def comparison_figures(comparison) -> tuple[list[dict], list[str]]:
    """One Plotly figure per compared column, and a note for each run folder that could not be read."""
    series, notes, t1s = [], [], []
    for label, folder, result, color in zip(comparison.labels, comparison.resolved, comparison.results, PALETTE * 10):
        try:
            run = load_run(Path(folder))
        except CoocflowError as err:
            notes.append(f"{label}: left out of the figures ({err})")
            continue
        t, pivoted = pivot_metrics(run.metrics)
        series.append((label, color, t, pivoted))
        t1 = result.get("T1")
        if isinstance(t1, (int, float)) and t1 > 0:
            t1s.append((t1, color))
    figures = []
    for column in comparison.columns:
        traces, grids = [], []
        for label, color, t, pivoted in series:
            if column in pivoted:
                # Plotly renders a subset of HTML in trace names and decodes entities: escaped,
                # a name shows literally and cannot inject markup
                traces += _series_traces(t, pivoted[column], html.escape(label), color)
                grids.append(pivoted[column][:, t > 0])
        ylog = _ylog(column, grids)
        figures.append(_figure(traces, f"{column} (dashed: T1 of each run)", column, ylog=ylog, shapes=_t1_lines(t1s)))
    return figures, notes


def comparison_report(folder: Path) -> str:
    """The page of a comparison folder: which runs, what differs, the results side by side and
    one figure per compared column."""
    folder = Path(folder)
    comparison = read_comparison(folder)
    labels = comparison.labels
    figures, notes = comparison_figures(comparison)
    divs, ids = _figure_divs(figures, "cmp")
    runs = [{"run": label, "folder": given, "resolved": resolved}
            for label, given, resolved in zip(labels, comparison.folders, comparison.resolved)]
    diff_rows = [{"key": key, **{label: format_value(v) for label, v in zip(labels, values)}}
                 for key, values in comparison.differences.items()]
    result_table = [{"result": title, **dict(zip(labels, cells))} for title, cells in result_rows(comparison)]
    sections = [
        f'<p class="meta">{html.escape(str(folder))}</p>',
        "<h2>Runs</h2>", _table(runs, ["run", "folder", "resolved"]),
        "<h2>Configuration differences</h2>",
        _table(diff_rows, ["key", *labels]) if diff_rows else "<p>None: the configurations are identical.</p>",
        "<h2>Results</h2>", _table(result_table, ["result", *labels]),
        "".join(f'<p class="warning">warning: {html.escape(w)}</p>' for w in comparison.warnings),
        "<h2>Observables</h2>",
        "".join(f'<p class="meta">{html.escape(note)}</p>' for note in notes),
        divs,
    ]
    return _page(f"coocflow comparison: {' vs '.join(labels)}", sections, ids)
