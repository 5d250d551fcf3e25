"""`coocflow report`: one self-contained HTML page for a run folder or a sweep folder.

Plotly draws the interactive figures; its JavaScript and every figure's data are inlined, so
the page opens without a network. Every string that comes from a config, a manifest or a
folder name is HTML-escaped. The Matplotlib PNG/PDF figures stay the ones for papers.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
from plotly.offline import get_plotlyjs

from coocflow.config import flatten_dotted
from coocflow.errors import RunFolderError
from coocflow.verify.paper.saved import SavedState, seed_arrays
from coocflow.storage import load_run
from coocflow.storage.folders import RunFolder, ScalingFolder
from coocflow.storage.run_folder import pivot_metrics
from coocflow.sweep import SweepStore, aggregate, read_record
from coocflow.sweep.aggregate import headline_column

GROUP_TITLES = {
    "loss": "Losses", "accuracy": "Accuracy and margins", "mlp": "MLP: G and ||u||", "scores": "Attention scores A",
    "attention": "Attention weights", "value": "Value Grams", "balance": "Balancing of gradients (Lemmas 4.4-4.5)",
    "dynamics": "Coupled system (Appendix C)",
}
PHASE_COLORS = {"T0.5": "#2ca02c", "T1": "#d62728", "phase2_start": "#9467bd"}


def _table(rows: list[dict], columns: list[str]) -> str:
    def cell(value) -> str:
        if isinstance(value, float):
            return html.escape(f"{value:.4g}")
        return html.escape("" if value is None else str(value))

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _log_toggle() -> list[dict]:
    """Plotly buttons that switch the time axis between log and linear."""
    return [{"type": "buttons", "direction": "right", "x": 1.0, "xanchor": "right", "y": 1.15, "showactive": True,
             "buttons": [{"label": "log t", "method": "relayout", "args": [{"xaxis.type": "log"}]},
                         {"label": "linear t", "method": "relayout", "args": [{"xaxis.type": "linear"}]}]}]


def _series_traces(t: np.ndarray, values: np.ndarray, name: str, color: str) -> list[dict]:
    """Median line (and 10-90% band over seeds when there are several) for one column."""
    from coocflow.observables import median_band  # lazy: defers JAX, 1-3.6 s

    low, mid, high = median_band(values)
    shown = t > 0
    x = t[shown].tolist()
    traces = []
    if values.shape[0] > 1:
        traces.append({"x": x + x[::-1], "y": _clean(high[shown]) + _clean(low[shown])[::-1], "fill": "toself",
                       "fillcolor": color, "opacity": 0.2, "line": {"width": 0}, "hoverinfo": "skip",
                       "showlegend": False, "legendgroup": name, "type": "scatter", "mode": "lines"})
    traces.append({"x": x, "y": _clean(mid[shown]), "name": name, "legendgroup": name, "type": "scatter",
                   "mode": "lines", "line": {"color": color, "width": 1.8}})
    return traces


def _clean(values: np.ndarray) -> list:
    return [None if not np.isfinite(v) else float(v) for v in values]


PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def _figure(traces: list[dict], title: str, ytitle: str, ylog: bool = False, shapes: list | None = None) -> dict:
    return {"data": traces, "layout": {
        "title": {"text": title}, "height": 380, "margin": {"l": 60, "r": 20, "t": 60, "b": 50},
        "xaxis": {"type": "log", "title": {"text": "flow time t"}},
        "yaxis": {"type": "log" if ylog else "linear", "title": {"text": ytitle}},
        "updatemenus": _log_toggle(), "shapes": shapes or [], "legend": {"font": {"size": 10}}}}


def _phase_lines(boundaries: dict[str, float | None]) -> list[dict]:
    return [{"type": "line", "xref": "x", "yref": "paper", "x0": value, "x1": value, "y0": 0, "y1": 1,
             "line": {"color": PHASE_COLORS[name], "dash": "dot", "width": 1}}
            for name, value in boundaries.items() if value and name in PHASE_COLORS]


def _median_boundaries(metrics: dict[str, np.ndarray]) -> dict[str, float | None]:
    from coocflow.verify.paper import first_time_all_correct, phase_boundaries  # lazy: defers JAX, 1-3.6 s

    seeds = np.unique(metrics["seed"]) if "seed" in metrics else [None]
    found: dict[str, list[float]] = {}
    for seed in seeds:
        rows = metrics["seed"] == seed if seed is not None else slice(None)
        series = {k: np.asarray(v)[rows] for k, v in metrics.items()}
        try:
            bounds = phase_boundaries(series)
        except KeyError:  # a folder without the rate columns: T1 only
            bounds = {"T1": first_time_all_correct(series["t"], series["min_margin"])}
        for name, value in bounds.items():
            if value is not None:
                found.setdefault(name, []).append(value)
    return {name: float(np.median(values)) for name, values in found.items()}


def run_figures(metrics: dict[str, np.ndarray]) -> tuple[list[dict], dict[str, float | None]]:
    """The timeline and one figure per observable group, as Plotly figure dicts."""
    from coocflow.observables import OBSERVABLES  # lazy: defers JAX, 1-3.6 s

    t, series = pivot_metrics(metrics)
    bounds = _median_boundaries(metrics)
    figures = [_timeline(bounds, float(t[-1]))]
    for group, title in GROUP_TITLES.items():
        names = [n for n, obs in OBSERVABLES.items() if obs.group == group and n in series]
        if not names:
            continue
        traces = []
        for name, color in zip(names, PALETTE * 4):
            traces += _series_traces(t, series[name], name, color)
        ylog = group == "loss"
        figure = _figure(traces, title, "value", ylog=ylog, shapes=_phase_lines(bounds))
        if not ylog:
            _large_on_right_axis(figure, {name: series[name] for name in names})
        figures.append(figure)
        if group == "scores":
            figures += _score_change_figure(t, series, bounds)
    return figures, bounds


SCALE_GAP = 5.0
"""A quantity whose largest size exceeds SCALE_GAP times the median of its figure's goes on a
right-hand axis, so it does not flatten the others (||u||^2 ~ 300 beside G ~ 10)."""


def _large_on_right_axis(figure: dict, series: dict[str, np.ndarray]) -> None:
    """Move the traces of the figure's much larger quantities onto a second y axis."""
    sizes = {name: float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
             for name, values in series.items()}
    typical = float(np.median(list(sizes.values())))
    large = [name for name, size in sizes.items() if size > SCALE_GAP * typical > 0]
    if not large or len(large) == len(sizes):
        return
    for trace in figure["data"]:
        if trace.get("legendgroup") in large:
            trace["yaxis"] = "y2"
            if "name" in trace:
                trace["name"] = f"{trace['name']} (right axis)"
    figure["layout"]["yaxis2"] = {"overlaying": "y", "side": "right", "showgrid": False,
                                  "title": {"text": ", ".join(large)}}
    figure["layout"]["legend"].update({"x": 1.08, "xanchor": "left"})


def _score_change_figure(t: np.ndarray, series: dict[str, np.ndarray], bounds: dict) -> list[dict]:
    """A(t) - A(0) of the target scores: the learned change, which the initial scores hide."""
    names = [name for name in series if name.startswith("A_mu")]
    traces = []
    for name, color in zip(names, PALETTE * 4):
        traces += _series_traces(t, series[name] - series[name][:, :1], f"{name} - A(0)", color)
    return [_figure(traces, "Score changes A(t) - A(0)", "change since t = 0", shapes=_phase_lines(bounds))] if traces else []


TOKEN_NAMES = {0: "mu1", 1: "mu2", 2: "mu3"}
HEATMAP_TOKENS = 64
"""Score heatmaps show at most the first 64 tokens (mu_1, mu_2, mu_3, then random tokens), so a
large vocabulary does not bloat the page."""
ATTENTION_GROUPS = (0, 1, 3)
"""The attention heatmaps show the first training sample of I1 (mu_1 and mu_2, y = +1), I2
(mu_1 only) and I4 (neither)."""


def _first_seed(state: dict[str, np.ndarray]) -> SavedState:
    """The first seed's state of a state file (ensembles have a leading seed axis)."""
    return SavedState.of(seed_arrays(state)[0])


def _rounded(z: np.ndarray) -> list:
    return [[float(f"{v:.4g}") if np.isfinite(v) else None for v in row] for row in np.asarray(z)]


def _heatmap_grid(panels: list[list[dict | None]], title: str, height: int, layout: dict) -> dict:
    """Heatmap panels in rows and columns (None: an empty cell); each panel holds z, x, y,
    title, its coloraxis and a hover template. Rows of z are drawn top to bottom."""
    rows, cols = len(panels), max(len(row) for row in panels)
    data, annotations = [], []
    layout = {"title": {"text": title}, "height": height, "margin": {"l": 60, "r": 90, "t": 70, "b": 40},
              "annotations": annotations, **layout}
    count = 0
    for r, row in enumerate(panels):
        for c, panel in enumerate(row):
            if panel is None:
                continue
            count += 1
            axis = "" if count == 1 else str(count)
            x0, x1 = c / cols + 0.03, (c + 1) / cols - 0.03
            y0, y1 = 1 - (r + 1) / rows + 0.06, 1 - r / rows - 0.03
            data.append({"type": "heatmap", "z": _rounded(panel["z"]), "x": panel["x"], "y": panel["y"],
                         "coloraxis": panel["coloraxis"], "xaxis": f"x{axis}", "yaxis": f"y{axis}",
                         "hovertemplate": panel["hover"] + "<extra></extra>", **panel.get("extra", {})})
            layout[f"xaxis{axis}"] = {"domain": [x0, x1], "anchor": f"y{axis}", "type": "category",
                                      "tickfont": {"size": 9}}
            layout[f"yaxis{axis}"] = {"domain": [y0, y1], "anchor": f"x{axis}", "type": "category",
                                      "autorange": "reversed", "tickfont": {"size": 9}}
            annotations.append({"text": panel["title"], "x": (x0 + x1) / 2, "y": y1, "xref": "paper", "yref": "paper",
                                "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 12}})
    return {"data": data, "layout": layout}


def _colorbar(title: str, y: float, length: float, **scale) -> dict:
    return {**scale, "colorbar": {"title": {"text": title}, "y": y, "len": length, "thickness": 14}}


def _weights_at(run) -> list[tuple[str, SavedState]]:
    """(label, first-seed weights) at t = 0, at T1 (state_t1.npz) and at the end."""
    man = run.manifest
    first = (man.get("per_seed") or [{}])[0]
    moments = [("t = 0", _first_seed(run.state_init))]
    if run.state_t1 is not None:
        t1 = _first_seed(run.state_t1)
        if t1.t is not None and np.isfinite(t1.t):
            moments.append((f"T1 = {t1.t:.4g}", t1))
    divergence = first.get("divergence") or {}
    end = divergence.get("weights_t")
    if end is None:
        rows = run.metrics["seed"] == run.metrics["seed"][0] if "seed" in run.metrics else slice(None)
        end = float(np.max(run.metrics["t"][rows]))
    moments.append((f"end t = {end:.4g}" + (" (last finite)" if divergence else ""), _first_seed(run.state_final)))
    return moments


def snapshot_figures(run) -> tuple[list[dict], str]:
    """Heatmaps of the first seed at t = 0, T1 and the end: the score matrix A = W_K^T W_Q with
    its change A(t) - A(0) beneath, and the attention of three training samples. Also a caption."""
    moments = _weights_at(run)
    init = moments[0][1]
    d = init.scores.shape[-1]
    shown = min(d, HEATMAP_TOKENS)
    names = [TOKEN_NAMES.get(v, f"r{v}") for v in range(shown)]
    base = init.scores[:shown, :shown]
    hover = "key %{y}, query %{x}: %{z}"
    raw = [{"z": state.scores[:shown, :shown], "x": names, "y": names, "title": f"A at {label}",
            "coloraxis": "coloraxis", "hover": hover} for label, state in moments]
    change = [None] + [{"z": state.scores[:shown, :shown] - base, "x": names, "y": names,
                        "title": f"A - A(0) at {label}", "coloraxis": "coloraxis2", "hover": hover}
                       for label, state in moments[1:]]
    scores = _heatmap_grid([raw, change], "Score matrix A = W_K^T W_Q (first seed): raw, and its change beneath",
                           720, {"coloraxis": _colorbar("A", 0.78, 0.45, colorscale="RdBu", cmid=0),
                                 "coloraxis2": _colorbar("A - A(0)", 0.22, 0.45, colorscale="RdBu", cmid=0)})
    scores["layout"]["annotations"].append({
        "text": "below each A(t):<br>its change since t = 0<br>(the initial scores<br>hide the learned part)",
        "x": 1 / (2 * len(raw)), "y": 0.25, "xref": "paper", "yref": "paper", "showarrow": False,
        "font": {"size": 12, "color": "#555"}})
    tokens, groups, labels = init.tokens, init.groups, init.labels
    samples = [int(np.flatnonzero(groups == g)[0]) for g in ATTENTION_GROUPS if (groups == g).any()]
    rows = []
    for i in samples:
        positions = [f"{pos}:{TOKEN_NAMES.get(int(v), f'r{int(v)}')}" for pos, v in enumerate(tokens[i])]
        rows.append([{"z": state.attention(tokens[i]), "x": positions, "y": positions,
                      "title": f"sample {i} (I{int(groups[i]) + 1}, y = {labels[i]:+.0f}), {label}",
                      "coloraxis": "coloraxis", "hover": "query %{x} gives key %{y}: %{z}",
                      "extra": {"texttemplate": "%{z:.3f}", "textfont": {"size": 10}} if len(positions) <= 10 else {}}
                     for label, state in moments])
    L = tokens.shape[-1]
    attention = _heatmap_grid(rows, "Attention of three training samples (first seed): column = query position, "
                              "row = key position", 260 * len(rows) + 60,
                              {"coloraxis": _colorbar(f"weight<br>(white: 1/L = {1 / L:.3g})", 0.5, 0.9,
                                                      colorscale="RdBu", cmid=1 / L)})
    caption = ("<p class=\"meta\">Weights of the first seed at t = 0, at T1 (the first time every training sample "
               "is correct) and at the end, from state_init.npz, state_t1.npz and state_final.npz. "
               f"A[nu, mu] is the score of key token nu for query token mu (rows: keys, columns: queries"
               f"{f'; the first {shown} of {d} tokens' if shown < d else ''}). Each attention column is a softmax over "
               "the sample's keys; the model sums G(x_h) p_l[h] over every query l and key h (eq. (1)).</p>")
    return [scores, attention], caption


def _timeline(bounds: dict[str, float | None], end: float) -> dict:
    """Phase 1 from t = 0 to T1, Phase 2 from T1 to the end, with T0.5 and the start of the
    score drift marked; labels alternate above and below so close events stay readable."""
    t1 = bounds.get("T1")
    first = min([v for v in bounds.values() if v] + [end]) / 10 or 1e-3
    bars = []
    if t1:
        bars.append({"type": "bar", "orientation": "h", "y": ["phases"], "x": [t1 - first], "base": [first],
                     "name": "Phase 1 (until T1)", "marker": {"color": "#aec7e8"}})
        bars.append({"type": "bar", "orientation": "h", "y": ["phases"], "x": [end - t1], "base": [t1],
                     "name": "Phase 2", "marker": {"color": "#ffbb78"}})
    events = sorted((value, name) for name, value in bounds.items() if value and name in PHASE_COLORS)
    marks = [{"type": "scatter", "mode": "markers+text", "x": [value], "y": ["events"], "text": [f"{name} = {value:.3g}"],
              "textposition": ("top center", "bottom center")[i % 2], "name": name, "cliponaxis": False,
              "marker": {"color": PHASE_COLORS[name], "size": 11}}
             for i, (value, name) in enumerate(events)]
    if not bars and not marks:
        marks = [{"type": "scatter", "mode": "markers", "x": [end], "y": ["events"], "name": "end"}]
    return {"data": bars + marks, "layout": {
        "title": {"text": "Phase timeline (median over seeds)"}, "height": 260, "barmode": "overlay",
        "margin": {"l": 60, "r": 20, "t": 70, "b": 40}, "xaxis": {"type": "log", "title": {"text": "flow time t"}},
        "updatemenus": _log_toggle()}}


def _verification_html(folder: Path) -> str:
    from coocflow.verify.paper.verify import verdict_text  # lazy: defers JAX, 1-3.6 s

    path = RunFolder(folder).verify_file("json")
    if not path.is_file():
        return "<p>No verification yet: run <code>coocflow verify " + html.escape(str(folder)) + "</code>.</p>"
    record = json.loads(path.read_text())
    first = {c["name"]: c for c in record["per_seed"][0]["checks"]} if record.get("per_seed") else {}
    rows = []
    for name, rate in record["pass_rates"].items():
        check = first.get(name, {})
        rows.append({"check": name, "claim": check.get("claim", ""), "threshold": check.get("threshold", ""),
                     "verdict": verdict_text(rate), "measured (first seed)": check.get("sentence", "")})
    appendix = record.get("appendix_c", {})
    error = appendix.get("max_relative_error")
    note = (f"<p>Implementation identity, Appendix C closed forms against the JVP at the run's saved states: max "
            f"relative error {error:.2e} (tolerance {appendix.get('tolerance', '')}).</p>" if error is not None else
            "<p>Appendix C closed forms: not evaluated (no weights saved: Gram space).</p>")
    premises = record.get("premises") or []
    premise_rows = [{"premise": p.get("id"), "statement": p.get("statement"), "measured": p.get("value"),
                     "needs": p.get("threshold"),
                     "met": {True: "met", False: "not met", None: "n/a"}[p.get("met")] + (
                         f" ({p.get('note')})" if p.get("note") and p.get("met") is not True else "")}
                    for p in premises]
    head = ""
    if premise_rows:
        head = (f"<h3>Premises of the theorems</h3><p>{html.escape(str(record.get('premises_summary') or ''))}</p>"
                + _table(premise_rows, ["premise", "statement", "measured", "needs", "met"]))
    claim_rows = [{"claim": f"{c['id']} ({c['where']}): {c['statement']}", "premises": c["premises"],
                   "evidence": "; ".join(f"{e['name']} ({e['verdict']})" for e in c["evidence"]),
                   "verdict": c["verdict"]} for c in record.get("claims") or []]
    if claim_rows:
        head += ("<h3>Claims</h3><p>One row per claim of docs/claims.md; rates in m need "
                 "<code>coocflow verify --scaling both</code>.</p>"
                 + _table(claim_rows, ["claim", "premises", "evidence", "verdict"]))
    return head + "<h3>Checks</h3>" + _table(rows, ["check", "claim", "threshold", "verdict", "measured (first seed)"]) + note


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
.figure {{ margin: 0.5em 0 1.5em; }}
.meta {{ color: #555; font-size: 13px; }}
details {{ margin: 0.5em 0 1em; }}
</style>
<script>{plotly}</script></head>
<body>
<h1>{title}</h1>
{body}
<script>
const FIGURES = {figures};
for (const [id, fig] of Object.entries(FIGURES)) {{
  Plotly.newPlot(id, fig.data, fig.layout, {{responsive: true, displaylogo: false}});
}}
</script>
</body></html>
"""


def _page(title: str, sections: list[str], figures: dict[str, dict]) -> str:
    figures_json = json.dumps(figures).replace("</", "<\\/")
    return PAGE.format(title=html.escape(title), plotly=get_plotlyjs(), body="\n".join(sections),
                       figures=figures_json)


def _figure_divs(figures: list[dict], prefix: str) -> tuple[str, dict[str, dict]]:
    ids = {f"{prefix}{i}": fig for i, fig in enumerate(figures)}
    return "".join(f'<div class="figure" id="{i}"></div>' for i in ids), ids


def run_report(folder: Path) -> str:
    """The page of one run folder: header, config and provenance, timeline, every observable
    group (seed bands for ensembles; much larger quantities on a right-hand axis, score changes
    beside the scores), heatmaps of the scores and attention at t = 0, T1 and the end, and the
    verification table."""
    run = load_run(folder)
    man = run.manifest
    figures, bounds = run_figures(run.metrics)
    divs, ids = _figure_divs(figures, "fig")
    heatmaps, heatmap_caption = snapshot_figures(run)
    heatmap_divs, heatmap_ids = _figure_divs(heatmaps, "heat")
    git = man.get("git", {}) if isinstance(man.get("git"), dict) else {}
    header = [
        {"field": "status", "value": man.get("status")},
        {"field": "seeds", "value": ", ".join(map(str, man.get("seeds") or [man.get("seed")]))},
        {"field": "method", "value": man.get("method")}, {"field": "time convention", "value": man.get("time_convention")},
        {"field": "initialization", "value": man.get("init")}, {"field": "created", "value": man.get("created")},
        {"field": "space", "value": _space_text(man)},
        {"field": "T1 (median)", "value": man.get("T1")},
        {"field": "phase boundaries (median)", "value": ", ".join(f"{k} = {v:.4g}" for k, v in bounds.items() if v)},
        {"field": "git commit", "value": (f"{git.get('commit')}{' (uncommitted changes)' if git.get('dirty') else ''}"
                                          if git.get("commit") else "not a git checkout")},
        {"field": "packages", "value": ", ".join(f"{k} {v}" for k, v in (man.get("versions") or {}).items())},
        {"field": "device", "value": json.dumps(man.get("device")) if man.get("device") else None},
    ]
    config_rows = [{"key": k, "value": v} for k, v in flatten_dotted(run.config).items()]
    images = "".join(f'<p class="meta">{html.escape(p.name)} is in the run folder (for papers).</p>'
                     for p in sorted(Path(folder).glob("figure1.png")))
    sections = [
        f'<p class="meta">{html.escape(str(folder))}</p>',
        "<h2>Run</h2>", _table(header, ["field", "value"]),
        "<details><summary>Resolved configuration</summary>" + _table(config_rows, ["key", "value"]) + "</details>",
        "<h2>Phases and observables</h2>", divs, images,
        "<h2>Scores and attention at t = 0, T1 and the end</h2>", heatmap_caption, heatmap_divs,
        "<h2>Verification</h2>", _verification_html(Path(folder)),
    ]
    return _page(f"coocflow report: {man.get('name', Path(folder).name)}", sections, {**ids, **heatmap_ids})


def system_report(folder: Path) -> str:
    """The page of a system's run folder (coocflow/run/base.py): header, configuration and
    provenance, and one figure per observable (a vector observable's entries share one), the
    loss first on a log axis; median and 10-90% band over seeds."""
    run = load_run(folder)
    man = run.manifest
    t, series = pivot_metrics(run.metrics)
    groups: dict[str, list[str]] = {}
    for name in series:
        stem, _, entry = name.rpartition("_")
        groups.setdefault(stem if entry.isdigit() and f"{stem}_1" in series else name, []).append(name)
    loss = man.get("loss_name", "loss")
    figures = []
    for group in sorted(groups, key=lambda name: name != loss):
        traces = [trace for name, color in zip(groups[group], PALETTE * 4) for trace in _series_traces(t, series[name], name, color)]
        figure = _figure(traces, group, "value", ylog=group == loss)
        figure["layout"]["xaxis"]["title"]["text"] = "flow time t" if man.get("method") == "flow" else "t = lr x steps"
        figures.append(figure)
    divs, ids = _figure_divs(figures, "fig")
    git = man.get("git", {}) if isinstance(man.get("git"), dict) else {}
    final = man.get("final") or {}
    header = [
        {"field": "system", "value": man.get("system")}, {"field": "status", "value": man.get("status")},
        {"field": "seeds", "value": ", ".join(map(str, man.get("seeds") or []))},
        {"field": "method", "value": man.get("method")}, {"field": "time convention", "value": man.get("time_convention")},
        {"field": "created", "value": man.get("created")},
        {"field": f"{loss} (median over seeds)", "value": f"{man.get('initial_loss')} -> {final.get(loss)} at t = {final.get('t')}"},
        {"field": "git commit", "value": (f"{git.get('commit')}{' (uncommitted changes)' if git.get('dirty') else ''}"
                                          if git.get("commit") else "not a git checkout")},
        {"field": "packages", "value": ", ".join(f"{k} {v}" for k, v in (man.get("versions") or {}).items())},
    ]
    final_rows = [{"observable": key, "final (median over seeds)": value} for key, value in final.items()]
    config_rows = [{"key": k, "value": v} for k, v in flatten_dotted(run.config).items()]
    sections = [
        f'<p class="meta">{html.escape(str(folder))}</p>',
        "<h2>Run</h2>", _table(header, ["field", "value"]),
        "<details><summary>Resolved configuration</summary>" + _table(config_rows, ["key", "value"]) + "</details>",
        "<h2>Observables</h2>", divs, "<h2>Final values</h2>", _table(final_rows, ["observable", "final (median over seeds)"]),
        "<h2>Theorem</h2>", _theorem_html(Path(folder)),
    ]
    return _page(f"coocflow report: {man.get('name', Path(folder).name)}", sections, ids)


def _theorem_html(folder: Path) -> str:
    """The verdicts of the theorem the System declares, from verify.json (docs/theorems.md)."""
    record = _verify_record(folder)
    if "theorem" not in record:
        return ("<p>No verdicts yet: <code>coocflow verify " + html.escape(str(folder)) + "</code> judges the theorem "
                "the System declares, if it declares one.</p>")
    rows = [{"claim": c["id"], "statement": c["statement"], "evidence": c["evidence"], "verdict": c["verdict"],
             "measured": c["sentence"] + (f" Power: {c['power']['sentence']}" if c.get("power") else "")}
            for c in record["claims"]]
    premises = [{"premise": p["id"], "statement": p["statement"], "met": p["met"]} for p in record.get("premises") or []]
    return (f"<p>{html.escape(record['theorem'])}</p>"
            + (_table(premises, ["premise", "statement", "met"]) if premises else "")
            + _table(rows, ["claim", "statement", "evidence", "verdict", "measured"]))


def _space_text(manifest: dict) -> str:
    """What was integrated; for the Gram space, where the initial Grams came from and which
    observables it cannot have."""
    if manifest.get("space") != "gram":
        return "weights (W_Q, W_K, W_V, W)"
    absent = ", ".join(manifest.get("absent_columns") or [])
    return (f"gram (A, P, K, V, G, s; initial Grams from {manifest.get('gram_init')}); not available in the Gram "
            f"space, because they need the individual neurons of W: {absent}")


def sweep_report(folder: Path) -> str:
    """The page of a sweep: spec, job states, the per-seed summary table and T1 against every
    numeric axis (medians and bands over seeds)."""
    record = read_record(folder)
    store = SweepStore(folder)
    states = store.states()
    done = any(state == "done" for state in states.values())
    y = headline_column(folder) if done else "T1"
    figures = []
    axes = record["axes"]
    for axis in axes:
        values = record["grid"].get(axis) or record["zip"].get(axis)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            continue
        others = [a for a in axes if a != axis]
        try:
            lines = aggregate(folder, axis, y, by=others[0] if others else None)
        except RunFolderError:
            continue
        traces = []
        for line, color in zip(lines, PALETTE * 4):
            label = f"{others[0]} = {line['group']}" if others else y
            if line["slope"] is not None:
                label += f" (slope {line['slope']:.2f})"
            x = line["x"].tolist()
            traces.append({"x": x + x[::-1], "y": _clean(line["high"]) + _clean(line["low"])[::-1], "fill": "toself",
                           "fillcolor": color, "opacity": 0.2, "line": {"width": 0}, "showlegend": False,
                           "hoverinfo": "skip", "type": "scatter", "mode": "lines"})
            traces.append({"x": x, "y": _clean(line["median"]), "name": label, "type": "scatter",
                           "mode": "lines+markers", "line": {"color": color}})
        figure = _figure(traces, f"{y} against {axis}", f"{y} (median, 10-90% over seeds)", ylog=True)
        figure["layout"]["xaxis"]["title"]["text"] = axis
        figures.append(figure)
    divs, ids = _figure_divs(figures, "agg")
    summary_rows = []
    if done:
        table = store.read_table("summary").to_pydict()
        keep = ["job", "seed", "status", "T1", "phase2_start", "final.loss", "final.test_acc", "checks_passed"]
        if "T1" not in table:
            keep = ["job", "seed", "status", "t_end"] + [name for name in table if name.startswith("final.")]
        summary_rows = [{k: table[k][i] for k in keep if k in table} for i in range(len(table["job"]))]
    counts = {s: sum(v == s for v in states.values()) for s in ("done", "failed", "pending")}
    sections = [
        f'<p class="meta">{html.escape(str(folder))}</p>',
        "<h2>Sweep</h2>",
        _table([{"field": "base", "value": record["base"]}, {"field": "seeds", "value": len(record["seeds"])},
                {"field": "axes", "value": ", ".join(axes)},
                {"field": "jobs", "value": ", ".join(f"{n} {s}" for s, n in counts.items())},
                {"field": "overrides", "value": json.dumps(record["set"])}], ["field", "value"]),
        "<h2>Aggregates</h2>", divs or "<p>No numeric axis with finished jobs yet.</p>",
        "<h2>Jobs</h2>", _table([{"job": j, "state": s} for j, s in states.items()], ["job", "state"]),
        "<details><summary>Per-seed summary</summary>"
        + _table(summary_rows, list(summary_rows[0]) if summary_rows else ["job"]) + "</details>",
    ]
    if "theorem" in _verify_record(Path(folder)):
        sections += ["<h2>Theorem</h2>", _theorem_html(Path(folder))]
    return _page(f"coocflow sweep report: {record['name']}", sections, ids)


def theorem_sweep_report(folder: Path) -> str:
    """The page of a declared theorem's sweep (`verify TARGET --scaling KEY`): the verdicts, and each
    rate's quantity against the key for every seed with the fitted and claimed slopes."""
    record = _verify_record(Path(folder))
    figures = []
    for claim in record.get("claims", []):
        rate, values = claim.get("rate"), claim.get("values") or {}
        if not rate or not values.get("values"):
            continue
        x = values["axis"]
        traces = [{"x": x, "y": [row[s] for row in values["values"]], "mode": "markers", "name": f"seed {s + 1}",
                   "marker": {"size": 7}} for s in range(len(values["values"][0]))]
        for exponent, name, dash in ((rate.get("exponent"), "fitted", "solid"), (rate["test"]["predicted"], "claimed", "dash")):
            if exponent is None:
                continue
            middle = float(np.exp(np.mean(np.log(np.abs(np.asarray(values["values"], float))))))
            centre = float(np.exp(np.mean(np.log(np.asarray(x, float)))))
            traces.append({"x": x, "y": [middle * (v / centre) ** exponent for v in x], "mode": "lines",
                           "name": f"{name} {exponent:+.3f}", "line": {"dash": dash}})
        figure = _figure(traces, f"{claim['id']}: {claim['statement']}", values.get("ylabel", "quantity"), ylog=True)
        figure["layout"]["xaxis"]["title"]["text"] = record.get("axis") or "axis"
        figures.append(figure)
    divs, ids = _figure_divs(figures, "rate")
    runs = [{"value": run["value"], "folder": run["folder"], "seeds": ", ".join(map(str, run["seeds"]))}
            for run in record.get("runs", [])]
    sections = [f'<p class="meta">{html.escape(str(folder))}</p>', "<h2>Theorem</h2>", _theorem_html(Path(folder)),
                "<h2>Rates</h2>", divs or "<p>No rate along this sweep's key.</p>",
                "<h2>Runs</h2>", _table(runs, ["value", "folder", "seeds"])]
    return _page(f"coocflow theorem report: {record.get('theorem', '')}", sections, ids)


def _verify_record(folder: Path) -> dict:
    path = RunFolder(folder).verify_file("json")
    return json.loads(path.read_text()) if path.is_file() else {}


def _rate_figure(report: dict, rate: dict) -> dict:
    """One claimed rate: every seed's value against width (log-log), the per-width medians, the
    fitted power law and the claim's prediction anchored at the first median."""
    name = rate["quantity"]
    points = [(row["value"], abs(row[name])) for row in report["rows"]
              if row.get(name) and row.get("c0") == rate.get("c0", row.get("c0"))]
    traces = []
    if points:
        x, y = zip(*points)
        traces.append({"x": list(x), "y": list(y), "mode": "markers", "type": "scatter", "name": "seeds",
                       "marker": {"size": 5, "opacity": 0.5, "color": PALETTE[0]}})
    values = report["values"]
    medians = [None if v is None else abs(v) for v in rate["medians"]]
    traces.append({"x": values, "y": medians, "mode": "markers", "type": "scatter", "name": "median",
                   "marker": {"size": 8, "color": "black"}})
    fit = rate["fit"]
    if fit["exponent"] is not None:
        widths = fit["widths"]
        traces.append({"x": widths, "y": [fit["prefactor"] * (w / fit["reference_width"]) ** fit["exponent"] for w in widths],
                       "mode": "lines", "type": "scatter", "name": f"fit {fit['exponent']:+.2f}", "line": {"color": "black"}})
    anchor = next((i for i, v in enumerate(medians) if v), None)
    if rate["predicted"] is not None and rate["kind"] != "decays" and anchor is not None:
        traces.append({"x": values, "y": [medians[anchor] * (w / values[anchor]) ** rate["predicted"] for w in values],
                       "mode": "lines", "type": "scatter", "name": f"claim {rate['predicted']:+g}",
                       "line": {"color": PALETTE[3], "dash": "dash"}})
    c0 = f", c0 = {rate['c0']:g}" if len(report.get("c0_values", [])) > 1 else ""
    title = f"{rate['claim']}: {rate['label']}{c0} ({rate['verdict']})"
    return {"data": traces, "layout": {"title": {"text": title, "font": {"size": 12}}, "height": 340,
                                       "margin": {"l": 60, "r": 20, "t": 50, "b": 45},
                                       "xaxis": {"type": "log", "title": {"text": f"width ({report['axis']})"}},
                                       "yaxis": {"type": "log"}, "legend": {"font": {"size": 9}}}}


def scaling_report(folder: Path) -> str:
    """The page of a width sweep (`coocflow verify --scaling`): design, premises per width, the
    claims table with each claim's evidence, and every claimed rate as an interactive log-log plot."""
    from coocflow.verify.paper.claims import summary_line  # lazy: defers JAX, 1-3.6 s

    report = json.loads(ScalingFolder(folder).record_file.read_text())
    widths = [{"width": w["value"], "c0": w.get("c0", report["config"]["init"]["c0"]), "m": w["m"], "m1": w["m1"],
               "space": w["space"],
               "premises not met": ", ".join(p["id"] for p in w["premises"] if p["met"] is False) or "none"}
              for w in report["widths"]]
    claims = [{"claim": f"{c['id']} ({c['where']}): {c['statement']}", "premises": c["premises"],
               "evidence": " | ".join(f"{e['name']} ({e['verdict']}): {e['text']}" for e in c["evidence"]),
               "verdict": c["verdict"]} for c in report.get("claims", [])]
    shown = [r for r in report["rates"] if r["source"] == "quantity"]
    divs, figures = _figure_divs([_rate_figure(report, r) for r in shown], "rate")
    sections = [f"<p class=\"meta\">{html.escape(folder.name)}: {len(report['seeds'])} seeds per width; widths "
                f"{html.escape(', '.join(map(str, report['values'])))} over {html.escape(report['axis'])}; the "
                f"one-width checks at width {report.get('base_width')}.</p>",
                "<h2>Widths</h2>", _table(widths, ["width", "c0", "m", "m1", "space", "premises not met"]),
                "<h2>Claims</h2>", f"<p>{html.escape(summary_line(report.get('claims', [])))}.</p>",
                _table(claims, ["claim", "premises", "evidence", "verdict"]),
                "<h2>Claimed rates</h2>", divs]
    return _page(f"width scaling: {report['config']['name']}", sections, figures)
