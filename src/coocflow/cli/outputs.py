"""`coocflow report`, `docs`, `export`, `compare`: pages, reference files and comparisons."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
import typer.core

from coocflow.cli.app import app, console, say
from coocflow.docs import write_docs
from coocflow.errors import CoocflowError


@app.command()
def report(
    folder: Path = typer.Argument(..., metavar="DIR",
                                  help="a run folder (coocflow run), a sweep folder (coocflow sweep) or a comparison (coocflow compare)"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="page to write (default DIR/report.html)"),
) -> None:
    """Write one self-contained, interactive report.html (opens without a network).

    Example: coocflow report runs/paper
    """
    from coocflow.report import write_report  # lazy: defers pyarrow, 0.3 s

    console.print(f"report: [bold]{write_report(folder, out)}[/]")


@app.command()
def docs(out: Path = typer.Option(Path("docs"), "--out", metavar="DIR", help="folder for config.md and metrics.md")) -> None:
    """Regenerate the config and metrics reference pages from the code.

    Example: coocflow docs --out docs
    """
    for path in write_docs(out):
        say(f"written: {path}")


@app.command()
def export(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="a run folder written by `coocflow run`"),
    tensorboard: bool = typer.Option(False, "--tensorboard", help="write TensorBoard event files (needs tensorboardX)"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="output folder (default RUN_DIR/tensorboard)"),
) -> None:
    """Export a run's metrics to other tools (TensorBoard).

    Example: coocflow export runs/paper --tensorboard
    """
    if not tensorboard:
        raise CoocflowError("export: choose a format, e.g. --tensorboard")
    from coocflow.report.tensorboard import export_tensorboard  # lazy: defers pyarrow, 0.3 s

    folder = export_tensorboard(run_dir, out)
    console.print(f"TensorBoard logs: [bold]{folder}[/] (tensorboard --logdir {folder})")


@app.command()
def compare(
    runs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="two or more run folders"),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="COL,COL",
                                          help="metrics columns to draw (default loss,G_mu1,A_mu1_mu2,train_acc)"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="comparison folder (default runs/compare-TIMESTAMP)"),
) -> None:
    """Configuration differences and key results side by side, and the chosen observables of
    all runs on shared axes (DIR/compare.png); `coocflow report DIR` makes its page.

    Example: coocflow compare runs/paper runs/paper-lr05 --columns loss,G_mu1
    """
    from coocflow.compare import compare_runs, render_comparison  # lazy: defers pyarrow, 0.3 s

    comparison = compare_runs(runs, columns, out)
    render_comparison(comparison, console)
    say(f"written: {comparison.folder / 'compare.json'}, {comparison.figure}; "
                  f"page: coocflow report {comparison.folder}")
