"""`coocflow show`, `ls`, `experiments`, `keys`: what exists and what can be set."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.console import Console
from rich.measure import Measurement
from rich.table import Column, Table

from coocflow.cli.app import app, console, line_width, print_whole, say
from coocflow.cli.run import _print_summary
from coocflow.config import Config, all_keys
from coocflow.docs import HELP, toml_template
from coocflow.errors import ConfigError
from coocflow.experiments import EXPERIMENTS


@app.command()
def show(run_dir: Optional[Path] = typer.Argument(None, metavar="[RUN_DIR]",
                                                 help="a run folder, or a sweep, width sweep, theorem sweep or "
                                                      "comparison (default: the newest run under runs/)")) -> None:
    """Print a run's configuration, T1, final loss and key observables; of another folder coocflow
    writes, what it is, how far it got and where its results are.

    Example: coocflow show runs/paper
    """
    if run_dir is None:
        from coocflow.listing import newest_run  # lazy: defers pyarrow, 0.3 s

        run_dir = newest_run()
        console.print(f"newest run: {run_dir}")
    from coocflow.storage.folders import RunFolder, StudyFolder, kind_of  # lazy: defers pyarrow, 0.3 s

    if kind_of(run_dir) not in (None, RunFolder, StudyFolder):
        _print_other_folder(Path(run_dir))
        return
    study = StudyFolder(run_dir)
    if study.manifest_file.is_file() and study.summary_file.is_file():
        record = study.manifest()
        if "study" in record:
            console.print(study.summary_file.read_text())
            console.print(f"study {record['study']} ({record.get('status', 'completed')}); figures: "
                          + ", ".join(str(Path(run_dir) / name) for name in record.get("figures", [])),
                          soft_wrap=True, highlight=False)
            return
    _print_summary(run_dir)


def _print_other_folder(folder: Path) -> None:
    """`show` of a sweep, width or theorem sweep, or comparison folder: its `ls` line (what it is, how far it
    got) and where its results are, with the commands that read it, instead of a run folder's missing files."""
    from coocflow.listing import describe_folder  # lazy: defers pyarrow, 0.3 s
    from coocflow.storage.folders import (  # lazy: defers pyarrow, 0.3 s
        ComparisonFolder,
        ScalingFolder,
        SweepFolder,
        TheoremSweepFolder,
        kind_of,
    )

    entry = describe_folder(folder)
    kind = kind_of(folder)
    say(f"{folder}: a {entry.kind} folder, {entry.status} ({entry.config})")
    if kind is SweepFolder:
        where = (f"its jobs: `coocflow sweep-status {folder}`; its tables: {folder / 'table'} (Parquet: summary, one "
                 f"row a run; metrics, one file a job); one job's run: `coocflow show {SweepFolder(folder).jobs}/JOB`")
    elif kind in (ScalingFolder, TheoremSweepFolder):
        record = kind(folder)
        again = (f"`coocflow verify {folder}`" if kind is TheoremSweepFolder else
                 f"the `coocflow verify CONFIG --scaling AXIS --out {folder}` that made it (its finished runs are reused)")
        where = (f"its verdicts: {record.markdown_file} (every number: {record.record_file.name}); its runs: "
                 f"{record.runs}; judged again: {again}")
    else:
        where = f"its record: {ComparisonFolder(folder).record_file}"
    say(f"{where}; its page: `coocflow report {folder}`", indent=2)


@app.command("ls")
def list_runs(folder: Path = typer.Argument(Path("runs"), metavar="[DIR]", help="where to look (default runs/)")) -> None:
    """List the runs, sweeps, studies and comparisons in a folder, newest first.

    Example: coocflow ls runs
    """
    from coocflow.listing import list_folders  # lazy: defers pyarrow, 0.3 s

    entries = list_folders(folder)
    if not entries:
        console.print(f"{folder}: no runs yet; start with `coocflow run tiny`")
        return

    longest_word = max(len(word) for e in entries for word in e.status.split())
    table = Table(Column("folder", no_wrap=True, min_width=max(len(e.name) for e in entries)), "kind",
                  Column("status", min_width=longest_word), "config", "T1", "final loss", "age", title=str(folder))
    for e in entries:
        table.add_row(e.name, e.kind, e.status, e.config, e.t1, e.final_loss, e.age)
    unbounded = Console(width=10_000)
    needed = Measurement.get(unbounded, unbounded.options, table).minimum
    if line_width() is None or needed <= console.width:
        print_whole(table)  # a pipe or file: whole lines; a terminal: its width
        return
    wide = Console(width=needed, file=console.file, force_terminal=console.is_terminal,
                   color_system=console.color_system)
    wide.print(table)  # the names alone overflow the terminal: they stay whole (to copy), the terminal wraps


@app.command()
def experiments() -> None:
    """List the named experiments.

    Example: coocflow experiments
    """
    table = Table("name", "description")
    for exp in EXPERIMENTS.values():
        table.add_row(exp.name, exp.description)
    print_whole(table)


@app.command()
def keys(
    toml: bool = typer.Option(False, "--toml", help="print a complete, commented TOML config to start from"),
    start: Optional[str] = typer.Option(None, "--from", metavar="TARGET",
                                        help="with --toml: the values of an experiment, .toml or run folder"),
    system: Optional[str] = typer.Option(None, "--system", metavar="SPEC",
                                         help="list a System's own settings ([settings]): a built-in name, "
                                              "path/to/file.py:Class or package.module:Class"),
) -> None:
    """List every config key with its default and meaning (or print a TOML template).

    Example: coocflow keys --toml --from paper > my.toml; coocflow run my.toml
    """
    if start is not None and not toml:
        raise ConfigError("--from: applies with --toml; add --toml")
    if system is not None:
        if toml:
            raise ConfigError("--system: lists a System's settings; drop --toml (a TOML with them: --toml --from CONFIG)")
        from coocflow.systems.registry import settings_reference  # lazy: defers JAX, 1-3.6 s

        rows = settings_reference(system)
        if not rows:
            console.print(f"the {system} system declares no settings of its own (\\[settings]); its keys are "
                          "the built-in ones (`coocflow keys`)")
            return
        table = Table("key", "type", "default", "meaning", title=f"{system}: its own settings (\\[settings], "
                                                                 "--set system.KEY=V)")
        for key, kind, default, meaning in rows:
            table.add_row(key, kind, repr(default), meaning)
        print_whole(table)
        return
    if toml:
        config = None
        if start is not None:
            from coocflow.api import config_of_target  # lazy: defers pyarrow, 0.3 s

            config = config_of_target(start)
        sys.stdout.write(toml_template(config))
        return
    defaults = Config().every_value()
    table = Table("key", "default", "meaning")
    for key in all_keys():
        node = defaults
        for part in key.split("."):
            node = node[part]
        table.add_row(key, repr(node), HELP[key])
    table.add_row("settings.KEY", "", "a System's own settings: `coocflow keys --system SPEC` lists them")
    print_whole(table)
