"""`coocflow bench`, `fit-rate`, `power`: the speed benchmark and the rate test for anyone's data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.progress import Progress
from rich.table import Table

from coocflow import interrupts
from coocflow.cli.app import again_command, app, console, print_whole, say
from coocflow.errors import CoocflowError
from coocflow.experiments.registry import EXPERIMENTS


@app.command()
def bench(
    case: list[str] = typer.Option([], "--case", metavar="NAME",
                                   help="run only these cases: gd, ensemble, flow, large, process, gram, gram-wide, scaling (repeatable)"),
    quick: bool = typer.Option(False, "--quick", help="fewer steps, a shorter flow and one warm repeat, for a fast look"),
    json_out: Optional[Path] = typer.Option(None, "--json", metavar="FILE", help="also write the results to this JSON file"),
) -> None:
    """Speed and memory benchmarks, each with its ratio against a baseline measured in the same run;
    `process` times whole commands (help, run tiny, run paper, the flow, verify) cold and warm.

    Example: coocflow bench --case process --json bench.json
    """
    from coocflow.bench import CASES, run_all  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage import atomic_write_json  # lazy: defers pyarrow, 0.3 s

    unknown = [c for c in case if c not in CASES]
    if unknown:
        raise CoocflowError(f"--case {unknown[0]}: choose from {', '.join(CASES)}")
    with console.status("benchmarking (each case in its own process)..."):
        results = run_all(tuple(case) or CASES, quick)
    table = Table("case", "measured", "target", "met", "baseline", "ratio", "peak RSS", "detail")
    for r in results:
        if "failed" in r:
            table.add_row(r["case"], "[red]failed[/]", "", "", "", "", "", r["failed"])
            continue
        rss = "-" if r["peak_rss_mib"] != r["peak_rss_mib"] else f"{r['peak_rss_mib']:.0f} MiB"
        table.add_row(r["case"], f"{r['value']:.3g} {r['unit']}", f"{r['target']:g}", "yes" if r["met"] else "[red]no[/]",
                      f"{r['baseline']:.3g} ({r['baseline_name']})", f"{r['ratio']:.2f}x", rss, r["detail"])
    print_whole(table)
    if json_out is not None:
        atomic_write_json(json_out, results)


KIND_NAMES = {"order": "order", "upper": "upper bound", "lower": "lower bound", "decays": "decays"}


@app.command("fit-rate")
def fit_rate(
    table: Path = typer.Argument(..., metavar="TABLE", help="CSV or Parquet file with columns m, seed, value"),
    exponent: float = typer.Option(..., "--exponent", metavar="P", help="the claimed exponent p of value ~ m^p (0 for decays)"),
    kind: str = typer.Option("order", "--kind", metavar="KIND", help="order (Theta), upper (O), lower (Omega) or decays (1/poly(m))"),
    tol: Optional[float] = typer.Option(None, "--tol", metavar="T", help="allowed exponent error, fixed before looking (default 0.1)"),
    log_power: int = typer.Option(0, "--log-power", metavar="K", help="factors of log m the statement carries (a tilde: 1)"),
    json_output: bool = typer.Option(False, "--json", help="print one JSON object (verdict, exponent, ci, ...) instead of text"),
    unpaired: bool = typer.Option(False, "--unpaired", help="treat each (m, seed) as its own draw: do not pair a seed id across widths"),
) -> None:
    """Judge a power law in your own width sweep with coocflow's rate test: the exponent, its 95%
    interval, the slope over the largest third of the widths, and pass / fail / inconclusive /
    vacuous. A seed id seen at several widths is the same seed there (the same data): the fit pairs
    it across widths unless --unpaired. Exit code: 0 pass, 1 fail, 3 inconclusive, 4 vacuous, 2 bad
    input.

    Example: coocflow fit-rate sweep.csv --exponent -1 --kind order --json
    """
    from coocflow.verify.rate_judge import ORDER_TOLERANCE, RateTest, judge_rate  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.rate_table import read_rate_table  # lazy: defers pyarrow, 0.3 s

    if kind not in KIND_NAMES:
        raise CoocflowError(f"--kind {kind}: choose order, upper, lower or decays")
    if kind == "decays" and exponent != 0:
        raise CoocflowError("--kind decays tests exponent < 0: give --exponent 0")
    if tol is not None and not (tol >= 0):
        raise CoocflowError(f"--tol {tol}: give a non-negative exponent tolerance, e.g. --tol 0.1")
    if log_power < 0:
        raise CoocflowError(f"--log-power {log_power}: give 0 or more factors of log m")
    data = read_rate_table(table)
    test = RateTest(exponent, KIND_NAMES[kind], 0.0 if kind == "decays" else (ORDER_TOLERANCE if tol is None else tol), log_power)
    paired = data.by_seed is not None and not unpaired
    judged = judge_rate(test, data.widths, data.by_seed if paired else data.values, name=table.stem, paired=paired)
    if json_output:
        print(json.dumps(judged.to_dict()))
    else:
        colour = {"pass": "green", "fail": "red", "inconclusive": "yellow", "vacuous": "magenta"}.get(judged.verdict, "white")
        console.print(f"{table}: {len(data.widths)} widths, m = {data.widths[0]:g}..{data.widths[-1]:g}, up to "
                      f"{data.seeds} seeds" + (", paired across widths" if paired else ""), highlight=False)
        console.print(judged.sentence().rsplit(": ", 1)[0], highlight=False, soft_wrap=True)
        console.print(f"verdict: [{colour}]{judged.verdict}[/]", highlight=False)
    raise typer.Exit(FIT_RATE_EXIT[judged.verdict])


FIT_RATE_EXIT = {"pass": 0, "fail": 1, "inconclusive": 3, "vacuous": 4}
"""`coocflow fit-rate`'s exit code per verdict, so a script can gate on it: 0 pass, 1 fail,
3 inconclusive, 4 vacuous; 2 stays every command's bad input (a one-line error)."""


@app.command()
def power(
    trials: int = typer.Option(200, "--trials", metavar="N", help="simulated sweeps per cell"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="also write the table as Markdown (e.g. docs/power.md)"),
) -> None:
    """The rate test's power at the default theory sweep (its widths and seeds): how often a
    Theta(m^p) claim passes when the true exponent is off by 0..0.3, at seed spreads 0.01..0.5, and
    on curves shaped like the dynamics' (seed offsets, log factors, two-term crossovers), true and false.

    Example: coocflow power --out docs/power.md
    """
    from coocflow.verify.power import (  # lazy: defers JAX, 1-3.6 s
        ERRORS,
        NOISES,
        SCENARIO_NOISES,
        power_markdown,
        power_table,
        scenario_table,
        scenarios,
    )
    from coocflow.verify.rate_judge import RateTest  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage import atomic_write_text  # lazy: defers pyarrow, 0.3 s

    if trials < 1:
        raise CoocflowError(f"--trials {trials}: give a positive number of simulated sweeps")
    theory = EXPERIMENTS["theory"]
    widths, seeds, test = [float(m) for m in theory.scaling_widths], theory.scaling_seeds, RateTest(-1.0)
    again = again_command()
    interrupts.set_message(lambda: f"interrupted before the table was written (nothing to keep); run again: {again}")
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("simulating sweeps",
                            total=len(ERRORS) * len(NOISES) + len(scenarios(widths)) * len(SCENARIO_NOISES))
        cells = power_table(test, widths, seeds, trials, progress=lambda: bar.advance(task))
        shapes = scenario_table(widths, seeds, trials, progress=lambda: bar.advance(task))
    interrupts.set_message(None)
    command = "coocflow power" + (f" --trials {trials}" if trials != 200 else "") + (f" --out {out}" if out else "")
    text = power_markdown(cells, test, widths, seeds, command, shapes)
    console.print(text, highlight=False, markup=False)
    if out is not None:
        atomic_write_text(out, text)
        say(f"written: {out}")
