"""`coocflow sweep`, `sweep-status`, `sweep-plot`."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from coocflow import interrupts
from coocflow.cli.app import app, confirm_long_work, console, errors, print_whole
from coocflow.errors import CoocflowError


@app.command()
def sweep(
    spec: Path = typer.Argument(..., metavar="SPEC", help="a sweep spec .toml (base, seeds, [set], [grid], [zip])"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="sweep folder (default runs/sweep-NAME); re-run to resume"),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", help="parallel worker processes (default: cores, at most the jobs and their program shapes)"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS", help="run as Ray tasks: local (start Ray here), auto, or an address"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="also re-run jobs that failed before"),
    force: bool = typer.Option(False, "--force", help="delete --out first if it holds a different sweep"),
    yes: bool = typer.Option(False, "--yes", "-y", help="start a sweep estimated over 30 minutes without asking"),
    accept_changed_code: bool = typer.Option(False, "--accept-changed-code",
                                             help="keep finished jobs although their System's code changed since"),
) -> None:
    """Run every job of a sweep (seeds of one configuration batch into one job), resumably.

    Example: coocflow sweep examples/sweep_m_L.toml --workers 2
    """
    from coocflow.sweep import SweepStore, default_figures, load_spec  # lazy: defers pyarrow, 0.3 s
    from coocflow.sweep.execute import (  # lazy: defers pyarrow, 0.3 s
        pending_jobs,
        refuse_changed_jobs,
        require_ray,
        run_in_process,
        run_in_workers,
        run_on_ray,
    )

    if ray:
        require_ray()
    parsed = load_spec(spec)
    if out is None:
        from coocflow.storage.paths import DEFAULT_ROOT, inside  # lazy: defers pyarrow, 0.3 s

        out = inside(DEFAULT_ROOT, f"sweep-{parsed.name}", "name")
    store = SweepStore(out)
    store.prepare(parsed, force=force)
    cores = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= cores:
        raise CoocflowError(f"--workers: must be between 1 and the {cores} cores of this machine (got {workers})")
    if not accept_changed_code:
        refuse_changed_jobs(parsed, store)
    todo = pending_jobs(parsed, store, retry_failed)
    programs = parsed.programs
    workers = workers or max(1, min(cores, len(todo), programs))
    before = store.states()
    done_before = sum(state == "done" for state in before.values())
    console.print(f"[bold]{parsed.name}[/]: {len(parsed.jobs)} jobs x {len(parsed.seeds)} seeds; "
                  f"{done_before} done, {len(todo)} to run ({programs} program shape{'s' if programs > 1 else ''})"
                  + (f" on Ray ({ray})" if ray else f" with {workers} worker{'s' if workers > 1 else ''}") + f" -> {out}")
    counts = {"done": done_before, "failed": sum(state == "failed" for state in before.values()) if not retry_failed else 0,
              "running": 0, "traced": 0}
    errors_seen = []
    from coocflow.estimate import total_seconds  # lazy: defers the config model, with the sweep's own imports

    pending = {job["id"] for job in todo}
    confirm_long_work(total_seconds(job.config for job in parsed.jobs if job.id in pending) / max(1, workers),
                      f"the {len(todo)} pending jobs of {parsed.name}", yes)
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} jobs"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("", total=len(parsed.jobs), completed=counts["done"] + counts["failed"])

        def describe() -> str:
            return f"done {counts['done']} · running {counts['running']} · failed {counts['failed']}"

        def started(job_id: str) -> None:
            counts["running"] += 1
            bar.update(task, description=describe())

        def report(result: dict) -> None:
            counts["running"] -= 1
            counts[result["state"]] += 1
            counts["traced"] += result.get("traced", 0)
            if result["state"] == "failed":
                errors_seen.append(result)
            bar.update(task, advance=1, description=describe())

        bar.update(task, description=describe())
        resume = f"coocflow sweep {shlex.quote(str(spec))} --out {shlex.quote(str(out))}"
        interrupts.set_message(lambda: f"interrupted: {counts['done']} of {len(parsed.jobs)} jobs are done and kept, "
                                       f"the workers stopped; resume with: {resume}")
        if ray:
            run_on_ray(out, todo, ray, workers, report, started)
        elif workers == 1:
            run_in_process(out, todo, report, started)
        else:
            run_in_workers(out, todo, workers, report, started)
    interrupts.set_message(None)
    for failure in errors_seen:
        first = failure["error"].splitlines()[0] if failure.get("error") else ""
        errors.print(f"[red]job {escape(str(failure['id']))} failed:[/] {escape(first)}", highlight=False)
    if todo:
        console.print(f"programs traced: {counts['traced']} (jobs that share a program shape reuse it within a worker)")
    if counts["done"]:
        figures = default_figures(out)
        console.print(f"table: {out / 'table'}/{{metrics,summary}}/*.parquet; figures: {', '.join(str(f) for f in figures)}")
    if counts["failed"]:
        raise CoocflowError(f"{counts['failed']} of {len(parsed.jobs)} jobs failed (errors in {out / 'failed'}); "
                            "fix them and re-run with --retry-failed")


@app.command("sweep-status")
def sweep_status(folder: Path = typer.Argument(..., metavar="SWEEP_DIR", help="a sweep folder written by `coocflow sweep`")) -> None:
    """Show which jobs of a sweep are done, failed or pending.

    Example: coocflow sweep-status runs/sweep-m-L
    """
    from coocflow.sweep import SweepStore, read_record  # lazy: defers pyarrow, 0.3 s

    record = read_record(folder)
    store = SweepStore(folder)
    states = store.states()
    table = Table(title=f"{record['name']} ({folder}): {len(states)} jobs x {len(record['seeds'])} seeds")
    for column in ("job", "state", "note"):
        table.add_column(column)
    for job_id, state in states.items():
        note = ""
        if state == "failed":
            note = json.loads(store.failed_file(job_id).read_text()).get("error", "")
        color = {"done": "green", "failed": "red", "pending": "yellow"}[state]
        table.add_row(job_id, f"[{color}]{state}[/]", note)
    print_whole(table)
    totals = {s: sum(v == s for v in states.values()) for s in ("done", "failed", "pending")}
    console.print(", ".join(f"{n} {s}" for s, n in totals.items()))


@app.command("sweep-plot")
def sweep_plot(
    folder: Path = typer.Argument(..., metavar="SWEEP_DIR", help="a sweep folder written by `coocflow sweep`"),
    x: str = typer.Option(..., "--x", metavar="COLUMN", help="an axis (or any summary column), e.g. model.m"),
    y: Optional[str] = typer.Option(None, "--y", metavar="COLUMN",
                                    help="a summary column, e.g. T1, final.loss, phase2_start (default: T1, or a "
                                         "system's final loss)"),
    by: Optional[str] = typer.Option(None, "--by", metavar="AXIS", help="one line per value of this axis"),
    linear: bool = typer.Option(False, "--linear", help="linear axes instead of log-log"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="figure path (default SWEEP_DIR/figures/Y_vs_X.png)"),
) -> None:
    """Any summary column against any axis: medians and 10-90% bands over seeds, fitted slope.

    Example: coocflow sweep-plot runs/sweep-m-L --x model.m --y T1 --by data.L
    """
    from coocflow.sweep import aggregate_figure  # lazy: defers pyarrow, 0.3 s
    from coocflow.sweep.aggregate import headline_column  # lazy: defers pyarrow, 0.3 s

    path = aggregate_figure(folder, x, y or headline_column(folder), by, log=False if linear else None, path=out)
    console.print(f"figure: [bold]{path}[/]")
