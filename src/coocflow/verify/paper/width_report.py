"""What a width sweep (`width_sweep.WidthSweep`) writes and shows: scaling.json, scaling.md and scaling.png
(`write_scaling`), and what `coocflow verify --scaling m|m1|both` prints (`WidthSweepReport`); its page,
report.html, is `coocflow report`'s (`report.html.scaling_report`), which the command writes too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coocflow.config import Config
from coocflow.verify.paper.claims import claims_markdown, claims_table, summary_line
from coocflow.verify.judge import PremiseVerdict
from coocflow.verify.paper.premises import premises_markdown
from coocflow.verify.rate_judge import ORDER_TOLERANCE, log_slack
from coocflow.verify.paper.verify import every_run_summary
from coocflow.verify.paper.scaling import WEIGHT_SPACE_MAX_WIDTH
from coocflow.storage import atomic_write_json, atomic_write_text
from coocflow.storage.folders import ScalingFolder
from coocflow.verify.paper.render import claims_rich_table, premises_table, summary_of_claims
from coocflow.verify.render import Line, Report


def base_width(report: dict, base: Config) -> dict:
    """The width whose one-width checks stand for the claims (at the base c0): the base configuration's
    own width when the sweep has it, else the largest width in weight space, else the largest."""
    widths = [w for w in report["widths"] if w.get("c0", base.init.c0) == base.init.c0] or report["widths"]
    own = [w for w in widths if w["m"] == base.model.m and w["m1"] == base.model.m1]
    weights = [w for w in widths if w["space"] == "weights"]
    return (own or weights[-1:] or widths[-1:])[0]


def write_scaling(out: Path, report: dict, base: Config) -> list[Path]:
    """Complete `report` with the claims table over every run of the sweep (`every_run_summary`: each
    check's verdicts summed over every width and c0; the base width, `base_width`, gives the sentences
    shown) and write scaling.json, scaling.md and scaling.png into `out`, atomically."""
    width = base_width(report, base)
    report["base_width"] = width["value"]
    report["claims"] = claims_table(every_run_summary(report["widths"], width), report["rates"])
    judged = report.pop("c_t1_judged", None)
    if judged:
        report["c_t1_sensitivity"] = c_t1_sensitivity(report, judged, base)
    folder = ScalingFolder(out)
    atomic_write_json(folder.record_file, report)
    atomic_write_text(folder.markdown_file, scaling_markdown(report, base))
    tmp = folder.path / f".{folder.FIGURE}.tmp.png"
    figure(report, tmp)
    tmp.replace(folder.figure_file)
    return [folder.record_file, folder.markdown_file, folder.figure_file]


def c_t1_sensitivity(report: dict, judged: dict[float, dict], base: Config) -> dict:
    """Every claim's verdict (stated, and with P7 relaxed) with the same runs judged
    at each C_T1 of `judged` (`width_sweep.C_T1_SENSITIVITY`) beside the declared one."""
    tables = {float(base.verify.c_t1): report["claims"]}
    for c_t1, again in judged.items():
        tables[float(c_t1)] = claims_table(every_run_summary(again["widths"], base_width(again, base)), again["rates"])
    values = sorted(tables)
    claims = {row["id"]: {"verdicts": [], "verdicts_relaxed": []} for row in report["claims"]}
    for c_t1 in values:
        for row in tables[c_t1]:
            claims[row["id"]]["verdicts"].append(row["verdict"])
            claims[row["id"]]["verdicts_relaxed"].append(row.get("verdict_relaxed") or row["verdict"])
    return {"c_t1": values, "declared": float(base.verify.c_t1), "claims": claims,
            "changes": [claim for claim, v in claims.items() if len(set(v["verdicts"]) - {"not applicable"}) > 1]}


def _sensitivity_markdown(sensitivity: dict | None) -> list[str]:
    if not sensitivity:
        return []
    values = " / ".join(f"{c:g}" for c in sensitivity["c_t1"])
    lines = [f"## C_T1 sensitivity: the same runs judged at C_T1 = {values}", "",
             f"C_T1 = {sensitivity['declared']:g} was declared before any run; it stands for the theorem's \"large "
             "enough\" constant, so every claim is judged again at half and twice it. Checks that read the saved state "
             "at T1 have it only at the declared value and are not applicable at the others; a claim changes when "
             "it gets two different verdicts where it is applicable.", "",
             f"| claim | verdict at C_T1 = {values} | with P7r |", "| --- | --- | --- |"]
    for claim, v in sensitivity["claims"].items():
        mark = " (changes)" if claim in sensitivity["changes"] else ""
        lines.append(f"| {claim} | {' / '.join(v['verdicts'])}{mark} | {' / '.join(v['verdicts_relaxed'])} |")
    return lines + [""]


def _logs_in_tolerance(values) -> str:
    """How many factors of log m the rate test's tolerance is worth over these widths."""
    slack = log_slack([float(v) for v in values])
    return f"{ORDER_TOLERANCE / slack:.1f}" if slack > 0 else "-"


def scaling_markdown(report: dict, base: Config) -> str:
    """scaling.md: the design, the premises per width, the claims table and every fitted rate."""
    base_c0 = report["config"]["init"]["c0"]
    width = next(w for w in report["widths"] if w["value"] == report["base_width"] and w.get("c0", base_c0) == base_c0)
    c0_values = report.get("c0_values", [base_c0])
    lines = [f"# Width scaling: {base.name} over {report['axis']} = {', '.join(map(str, report['values']))}", "",
             f"Seeds per width: {len(report['seeds'])} ({', '.join(map(str, report['seeds']))}); init scale c0 = "
             f"{', '.join(f'{c:g}' for c in c0_values)}, each a whole sweep. Each width is a run folder under `runs/`; "
             f"without resolved neurons, widths up to m = {WEIGHT_SPACE_MAX_WIDTH} run in weight space. Exponents are "
             "least-squares slopes of log|value| fitted within seeds (a seed is the same data at every width, so "
             "seeds are paired across widths) with 95% whole-seed bootstrap intervals "
             "(`coocflow/verify/exponents.py`), judged by the pre-registered rate test (`coocflow/verify/rate_judge.py`, "
             "power: docs/power.md): pass when the whole interval lies in the claim's band, fail when it lies wholly "
             "outside (unless the largest widths' slope reaches or bends toward the band: inconclusive), vacuous "
             "when an upper bound is undercut by more than 1, inconclusive otherwise. Each O~ allows one factor of "
             f"log m; the tolerance 0.1 is itself worth about {_logs_in_tolerance(report['values'])} factors of "
             "log m at these widths. The claims' check verdicts count every run of the sweep; each claim's "
             "verdict with P7 relaxed to L. D.8's own bound (P7r) is given beside the stated one.", "",
             "| width | c0 | m | m1 | space | premises not met |", "| --- | --- | --- | --- | --- | --- |"]
    for w in report["widths"]:
        unmet = [p["id"] for p in w["premises"] if p["met"] is False]
        lines.append(f"| {w['value']} | {w.get('c0', base_c0):g} | {w['m']} | {w['m1']} | {w['space']} | "
                     f"{', '.join(unmet) or 'none'} |")
    lines += ["", f"## Premises at m = {width['m']}, c0 = {base_c0:g} (the width whose sentences the claims table shows; "
              "its verdicts count every run)", "",
              premises_markdown([PremiseVerdict(**p) for p in width["premises"]]).rstrip(), "",
              "## Claims", "", summary_line(report["claims"]) + ".", "", claims_markdown(report["claims"]).rstrip(), "",
              *_sensitivity_markdown(report.get("c_t1_sensitivity")),
              "## Every fitted rate", "",
              "| claim | c0 | quantity | class | exponent (95% CI) | largest widths | band | verdict | medians per width |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for rate in report["rates"]:
        judged = rate.get("judgement", {})
        fit = rate["fit"]
        exponent = "-" if fit["exponent"] is None else (
            f"{fit['exponent']:+.3f} ({fit['low']:+.3f} to {fit['high']:+.3f})" if fit["low"] is not None
            else f"{fit['exponent']:+.3f}")
        local = "-" if judged.get("local_exponent") is None else f"{judged['local_exponent']:+.3f}"
        band = judged.get("band")
        band_text = "-" if band is None else "[" + ", ".join("-inf" if v is None and i == 0 else "+inf" if v is None
                                                             else f"{v:+.3f}" for i, v in enumerate(band)) + "]"
        notes = "; ".join(judged.get("notes", []))
        medians = ", ".join("-" if v is None else f"{v:.3g}" for v in rate["medians"])
        lines.append(f"| {rate['claim']} | {rate.get('c0', base_c0):g} | {rate['label']} | {rate.get('class', 'statement')} | "
                     f"{exponent} | {local} | {band_text} | {rate['verdict']}{f' ({notes})' if notes else ''} | {medians} |")
    return "\n".join(lines) + "\n"


def figure(report: dict, path: Path) -> None:
    """One panel per claimed rate's quantity: seeds, medians, the fit and the prediction. Titles at a
    fixed height and no minor ticks: automatic title placement and log-axis minor ticks took 80% of
    drawing its 48 panels (about 6 s of a 20 s re-check)."""
    import matplotlib  # lazy: defers matplotlib, 0.7 s

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: defers matplotlib, 0.7 s
    from matplotlib.ticker import NullLocator  # lazy: defers matplotlib, 0.7 s

    from coocflow.plots.save import save_figure  # lazy: beside matplotlib

    shown = list(dict.fromkeys(r["quantity"] for r in report["rates"] if r["source"] == "quantity"))
    predicted = {r["quantity"]: r["predicted"] for r in report["rates"] if r["predicted"] is not None}
    columns = 6
    rows = -(-len(shown) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.0 * rows))
    fig.subplots_adjust(left=0.03, right=0.99, bottom=0.02, top=1 - 0.35 / rows, wspace=0.3, hspace=0.45)
    axes = np.atleast_1d(axes).ravel()
    values = np.asarray(report["values"], float)
    base_c0 = report["config"]["init"]["c0"]
    for ax, name in zip(axes, shown):
        points = [(r["value"], abs(r[name])) for r in report["rows"]
                  if r[name] is not None and r[name] != 0 and r.get("c0", base_c0) == base_c0]
        if points:
            x, y = np.array(points, dtype=float).T
            ax.scatter(x, y, s=8, alpha=0.5, color="tab:blue")
        entry = report["quantities"][name]
        medians = np.array([np.nan if not v else abs(v) for v in entry["medians"]], float)
        if not points and not np.isfinite(medians).any():
            ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=ax.transAxes, fontsize=7)
            ax.set_xscale("log")
            ax.set_title(entry["label"], fontsize=7, y=1.0)
            continue
        ax.plot(values, medians, "o", color="black", ms=3)
        fit = entry["fit"]
        if fit["exponent"] is not None:
            ax.plot(values, fit["prefactor"] * (values / fit["reference_width"]) ** fit["exponent"], "k-", lw=1,
                    label=f"fit {fit['exponent']:+.2f}")
        if name in predicted and np.isfinite(medians).any():
            anchor = np.flatnonzero(np.isfinite(medians))[0]
            ax.plot(values, medians[anchor] * (values / values[anchor]) ** predicted[name], "r--", lw=1,
                    label=f"claim {predicted[name]:+g}")
        ax.set(xscale="log", yscale="log")
        ax.set_title(entry["label"], fontsize=7, y=1.0)
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_minor_locator(NullLocator())
        ax.tick_params(labelsize=6)
        if ax.get_legend_handles_labels()[0]:  # a panel with no fit and no claim has nothing to name
            ax.legend(fontsize=6)
        ax.grid(alpha=0.3, lw=0.4)
    for ax in axes[len(shown):]:
        ax.set_visible(False)
    fig.suptitle(f"width scaling over {report['axis']} = {report['values']}, {len(report['seeds'])} seeds each, "
                 f"c0 = {base_c0:g}",
                 fontsize=9)
    save_figure(fig, path, dpi=110)


def sensitivity_line(sensitivity: dict | None) -> str | None:
    """One sentence: the claims whose verdict changes when the same runs are judged at other C_T1
    (each claim's verdicts are in scaling.md)."""
    if not sensitivity:
        return None
    values = "/".join(f"{c:g}" for c in sensitivity["c_t1"])
    changes = sensitivity["changes"]
    return (f"C_T1 = {values}, same runs re-judged: "
            + (f"{len(changes)} claims change ({', '.join(changes)})" if changes else "no verdict changes")
            + "; verdicts in scaling.md")


@dataclass(frozen=True)
class WidthSweepReport(Report):
    """eq. (1)'s theorem judged over a width sweep, as `verify --scaling m|m1|both` shows it: the premises
    at the base width and over every run, one line per claim (or, `full`, every table), the C_T1
    sensitivity and the files written. `result`: scaling.json's content."""

    report: dict
    base: Config
    out: Path
    written: tuple[Path, ...]

    @property
    def result(self) -> dict:
        return self.report

    def printed(self, full: bool = False) -> list[Any]:
        report, config = self.report, self.base
        base, table, widths, axis = base_width(report, config), report["claims"], report["values"], report["axis"]
        runs = len(report["widths"])
        unmet_at: dict[str, int] = {}
        for width in report["widths"]:
            for premise in width["premises"]:
                if premise["met"] is False:
                    unmet_at[premise["id"]] = unmet_at.get(premise["id"], 0) + 1
        if full:
            printed: list[Any] = premises_table(base["premises"], f"premises at m={base['m']}, m1={base['m1']} "
                                                                  "(the one-width checks' width)")
            for width in report["widths"]:
                unmet = [p["id"] for p in width["premises"] if p["met"] is False]
                printed.append(Line(f"  m={width['m']}, m1={width['m1']} ({width['space']}): premises "
                                    + (f"not met: {', '.join(unmet)}" if unmet else "all met")))
            printed += [claims_rich_table(table, f"claims: checks over all {runs} runs (sentences at m={base['m']}), "
                                                 f"rates over {axis} = {', '.join(map(str, widths))}, "
                                                 f"{len(config.seed_list)} seeds per width"),
                        Line(summary_line(table))]
        else:
            c0s = report.get("c0_values") or [config.init.c0]
            folder = ScalingFolder(self.out)
            printed = summary_of_claims(
                f"verify --scaling {axis}: {len(widths)} widths {widths[0]}..{widths[-1]}, c0 "
                f"{'/'.join(f'{c:g}' for c in c0s)}, {len(config.seed_list)} seeds",
                base["premises"], table, summary_line(table), [folder.markdown_file, folder.report_file],
                premises_where=f" at m={base['m']} (the sentences' width; checks count every run)",
                widths_line=f"premises over the {runs} runs: " + ("all met" if not unmet_at else "all met but " + ", ".join(
                    f"{premise} (not met in {count})" for premise, count in unmet_at.items())))
        sensitivity = sensitivity_line(report.get("c_t1_sensitivity"))
        if sensitivity:
            printed.append(Line(sensitivity))
        printed.append(Line(f"written in {self.out}: {', '.join(path.name for path in self.written)}; runs under runs/"))
        return printed

    def findings(self) -> list[str]:
        return [row["id"] for row in self.report["claims"] if row["verdict"] == "fail"]
