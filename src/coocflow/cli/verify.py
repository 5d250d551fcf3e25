"""`coocflow verify` (and `--scaling`): the claims checked on a run or over a width sweep, printed as a summary."""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import typer
import typer.core
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from coocflow import interrupts
from coocflow.cli.app import (
    _refuse_unused,
    again_command,
    app,
    confirm_long_work,
    console,
    print_whole,
    say,
)
from coocflow.cli.run import _train_and_write
from coocflow.errors import CoocflowError
from coocflow.experiments import EXPERIMENTS


@app.command()
def verify(
    target: str = typer.Argument(..., metavar="TARGET",
                                 help="a run folder, a sweep folder (every job judged), a folder `verify --scaling KEY` "
                                      "made (judged again), an experiment name, or a config .toml (run first)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a config key when running first"),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="seed when running first"),
    seeds: Optional[int] = typer.Option(None, "--seeds", metavar="N", help="run N seeds first and report pass rates"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="run folder to write when running first"),
    force: bool = typer.Option(False, "--force", help="replace --out if it exists"),
    scaling: Optional[str] = typer.Option(None, "--scaling", metavar="AXIS",
                                          help="fit every claimed rate over a sweep: for eq. (1) the widths m, m1 or both (m and m1 "
                                               "together); for a System's declared theorem any config key"),
    values: Optional[str] = typer.Option(None, "--values", metavar="W,W,...",
                                         help="values for --scaling, comma-separated (default: the experiment's widths, "
                                              "with m1 its neuron counts at its fixed m, else 32,64,128,256; for a "
                                              "declared theorem its rate's design)"),
    strict: bool = typer.Option(False, "--strict",
                                help="exit non-zero when any check fails where its premises are met"),
    full: bool = typer.Option(False, "--full", help="print every table (premises, each claim's evidence, "
                                                     "identities) instead of the summary"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS",
                                      help="with --scaling: train the sweep's runs as Ray tasks: local (start Ray "
                                           "here), auto, or an address"),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="with --scaling --ray local: Ray's CPUs (default: the cores)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="start training estimated over 30 minutes without asking"),
    accept_changed_code: bool = typer.Option(False, "--accept-changed-code",
                                             help="with --scaling: reuse or resume the sweep's runs although their "
                                                  "System's code changed since they were recorded"),
) -> None:
    """Check every claim of the paper on a run: premises, claims, identities (verify.json/.md/.png);
    on another System's run, the theorem it declares (docs/theorems.md).

    Examples: coocflow verify runs/paper | coocflow verify tiny --seeds 4 | coocflow verify theory --scaling both |
    coocflow verify examples/saxe.toml --scaling system.top
    """
    if scaling is not None:
        _verify_scaling(target, set_, seed, seeds, out, force, scaling, values, strict, full, ray, workers, yes,
                        accept_changed_code)
        return
    _refuse_unused("verify without --scaling", (("--values", values), ("--ray", ray), ("--workers", workers),
                                                ("--accept-changed-code", accept_changed_code)))
    from coocflow.storage.folders import (  # lazy: defers pyarrow, 0.3 s
        RunFolder,
        SweepFolder,
        TheoremSweepFolder,
        kind_of,
        read_json_object,
    )
    from coocflow.verify.judge import sweep_runs  # lazy: defers JAX, 1-3.6 s
    from coocflow.verify.folders import check_reads, verify_folders  # lazy: defers JAX, 1-3.6 s

    folder = Path(target)
    if folder.is_dir() and SweepFolder(folder).spec_file.is_file():
        _refuse_unused(f"{folder}, an existing sweep", (("--set", set_), ("--seed", seed), ("--seeds", seeds),
                                                       ("--out", out), ("--force", force)))
        runs = sweep_runs(folder)
        _refuse_without_theorem(runs.system, str(folder))
        if runs.axis is None and runs.varying:
            say(f"the jobs differ in {', '.join(runs.varying)}: rates need one numeric key to be judged along")
        _note_changed_code(runs.folders)
        _show(_judged(lambda: verify_folders(runs.folders, runs.axis, runs.values, str(folder), folder)), full, strict)
        return
    if folder.is_dir() and kind_of(folder) is TheoremSweepFolder:  # `verify --scaling KEY`'s folder: judged again
        _refuse_unused(f"{folder}, an existing sweep", (("--set", set_), ("--seed", seed), ("--seeds", seeds),
                                                       ("--out", out), ("--force", force)))
        record = read_json_object(folder / TheoremSweepFolder.RECORD)
        folders = [folder / TheoremSweepFolder.RUNS / Path(run["folder"]).name for run in record.get("runs", [])]
        if not folders:
            raise CoocflowError(f"verify {folder}: its verify.json names no run; run the `verify --scaling` that made it again")
        _refuse_without_theorem(RunFolder.open(folders[0]).system(), str(folder))
        _note_changed_code(folders)
        _show(_judged(lambda: verify_folders(folders, record.get("axis"), [float(run["value"]) for run in record["runs"]],
                                             str(folder), folder)), full, strict)
        return
    if folder.is_dir():
        _refuse_unused(f"{folder}, an existing run (to change it, `coocflow run {folder} --set ...` "
                       "then verify the new folder)",
                       (("--set", set_), ("--seed", seed), ("--seeds", seeds), ("--out", out), ("--force", force)))
        _refuse_without_theorem(RunFolder.open(folder).system(), str(folder))
        _note_changed_code([folder])
    else:
        from coocflow.api import resolve_config  # lazy: defers pyarrow, 0.3 s

        config = resolve_config(target, set_, seed, seeds)
        check_reads(_refuse_without_theorem(config.system, target), config)
        folder = _train_and_write(target, set_, seed, seeds, out, force, yes=yes)
    _show(_judged(lambda: verify_folders([folder], target=str(folder))), full, strict)


def _note_changed_code(folders: list[Path]) -> None:
    """One line when runs were trained with System code other than today's: `verify` judges them with
    today's declarations (judging old runs under an edited theorem is a use), where resuming, reusing or
    re-checking them is refused; the line says which file changed and how."""
    from coocflow.api import recorded_code  # lazy: defers pyarrow, 0.3 s
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.systems.registry import code_change, system_code  # lazy: defers JAX, 1-3.6 s

    now: dict[str, dict] = {}
    changes = []
    for path in folders:
        run = RunFolder(Path(path))
        if not run.complete:
            continue  # verify_folders says what the folder lacks
        system = run.system()
        try:
            now.setdefault(system, system_code(system))
        except CoocflowError:
            continue  # the System cannot be loaded: verify says so in its own line
        change = code_change(recorded_code(run), now[system])
        if change:
            changes.append(change)
    if changes:
        runs = ("the run was trained with different code of its System" if len(folders) == 1
                else f"{len(changes)} of {len(folders)} runs were trained with different code of their System")
        say(f"note: {runs} than today's ({changes[0]}); today's theorem judges what that code made", "yellow")


def _refuse_without_theorem(system: str, target: str):
    """The theorem `system` declares; one line and exit 2, before any training, for a System that declares none."""
    from coocflow.verify.folders import declared_theorem  # lazy: defers JAX, 1-3.6 s

    return declared_theorem(system, target)


def _judged(judge: Callable[[], Any], doing: str = "judging") -> Any:
    """`judge()`, with each warning raised in a user's own file (a theorem's functions, a System's
    observables: a NumPy division by zero, say) said once, in one line naming the file and line and what
    was being done (`doing`), instead of Python's two lines (the line's source echoed); other warnings go
    on as before. Where Python was asked to turn warnings into errors (`-W error`), they stay errors."""
    if any(option.split(":")[0] == "error" for option in sys.warnoptions):
        return judge()
    library = (str(Path(__file__).resolve().parents[1]), sys.prefix, sys.base_prefix, "<")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")  # once per place, as Python shows them
            return judge()
    finally:  # outside the catching: a warning passed on is not caught again
        for warning in caught:
            if str(warning.filename).startswith(library):
                warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
            else:
                say(f"note: {Path(warning.filename).name}:{warning.lineno} warned while {doing}: "
                    f"{warning.category.__name__}: {warning.message}", "yellow")


def _show(report, full: bool, strict: bool) -> None:
    """Print a theorem's `render.Report` (its sentences whole, its tables at the width their cells need);
    with `strict`, exit 1 on a finding."""
    _emit(report.printed(full))
    failed = report.findings()
    if strict and failed:
        raise CoocflowError(f"verify --strict: {len(failed)} {report.findings_of} failed with their premises met: "
                            f"{', '.join(failed)}")


def _emit(printed: list) -> None:
    """Each `render.Line` said whole (`say`), each other renderable printed whole (`print_whole`)."""
    from coocflow.verify.render import Line  # lazy: defers the verifier's imports

    for item in printed:
        if isinstance(item, Line):
            if item.markup:
                console.print(item.text)
            else:
                say(item.text, item.style, indent=item.indent)
        else:
            print_whole(item)


def _verify_scaling(target, set_, seed, seeds, out, force, axis, values, strict, full=False, ray=None,
                    workers=None, yes=False, accept_changed_code=False) -> None:
    """`verify --scaling AXIS` for every System: the sweep its theorem designs along AXIS
    (`verify.scaling.design_for`: eq. (1)'s widths, else one run per value of a config key), its runs
    trained, reused or resumed here or on Ray (`api.run_scaling`), then judged and shown."""
    from coocflow.api import resolve_config, run_scaling  # lazy: defers pyarrow, 0.3 s
    from coocflow.estimate import total_seconds  # lazy: defers the config model
    from coocflow.report import write_report  # lazy: defers pyarrow, 0.3 s
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.verify.scaling import ScalingRequest, design_for  # lazy: defers JAX, 1-3.6 s
    from coocflow.verify.folders import check_reads, declared_theorem  # lazy: defers JAX, 1-3.6 s

    declared = resolve_config(target, set_, seed, None if seeds is None else seeds)
    if ray:
        from coocflow.sweep.execute import require_ray  # lazy: defers pyarrow, 0.3 s

        require_ray()
    elif workers is not None:
        raise CoocflowError("--workers: sets Ray's CPUs for --ray local; add --ray local or drop --workers")
    theorem = declared_theorem(declared.system, target)
    check_reads(theorem, declared)
    design = design_for(theorem, axis)
    request = ScalingRequest(str(target), axis, values, seeds,
                             lambda overrides, n: resolve_config(target, [*overrides, *set_], seed, n),
                             tuple(set_), EXPERIMENTS.get(str(target)))
    plan = design.plan(theorem, request)
    out = _scaling_out(out, plan.base.name, plan.axis, force)
    planned = design.runs(plan, out)
    confirm_long_work(total_seconds(run.config for run in planned if not RunFolder(run.folder).complete),
                      f"training the {plan.kind}'s runs in {out}", yes)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    resume = again_command(out)
    interrupts.set_message(lambda: f"interrupted: the finished {plan.unit} are kept in {out / 'runs'} (an unfinished "
                                   f"one from its last checkpoint); resume with: {resume}")
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(plan.title, total=len(planned))

        def progress(run) -> None:
            if bar.tasks[0].description != plan.title:
                bar.advance(task)
            bar.update(task, description=run.description)

        def on_ray(runs) -> None:
            missing = [run.job(accept_changed_code) for run in runs if not RunFolder(run.folder).complete]
            if missing:
                _train_on_ray(missing, out, ray, workers, bar, task, plan.title, plan.unit)

        done = _judged(lambda: run_scaling(theorem, design, plan, out, str(target), accept_changed_code, progress,
                                           on_ray if ray else None), doing="training and judging")
    interrupts.set_message(None)
    page = write_report(out)
    _emit(done.report.printed(full))
    say(f"report: {page}")
    failed = done.report.findings()
    if strict and failed:
        raise CoocflowError(f"verify --strict: {len(failed)} {done.report.findings_of} failed with their premises met: "
                            f"{', '.join(failed)}")


def _scaling_out(out: Optional[Path], name: str, axis: str, force: bool) -> Path:
    """The sweep's folder: `out` or a new default one; an existing folder that is not a sweep's (no
    runs/) is refused unless --force, and --force starts a sweep's over."""
    from coocflow.storage.paths import default_out, refuse_existing_out  # lazy: defers pyarrow, 0.3 s

    if out is None:
        out = default_out(name, prefix=f"scaling-{axis}-")
    if out.exists() and not (out / "runs").is_dir():
        refuse_existing_out(out, force)
    elif force and out.exists():
        shutil.rmtree(out)
    return out


def _train_on_ray(jobs: list[dict], out: Path, address: str, workers: Optional[int], bar, task, what: str,
                  runs: str) -> None:
    """Every job (`{"id", "config", "folder", "accept_changed_code"}`: one run into its folder, reused
    or resumed as `api.ensure_run` decides) as a Ray task (`sweep.execute.run_folder_job`), the progress
    bar saying how many are trained; a run that fails stops the sweep with its line."""
    from coocflow.sweep.execute import run_folder_job, run_on_ray  # lazy: defers pyarrow, 0.3 s

    failed, done = [], {"n": 0}

    def report(result: dict) -> None:
        done["n"] += 1
        bar.update(task, description=f"{what} (trained {done['n']} of {len(jobs)} on Ray)")
        if result["state"] != "done":
            failed.append(result)

    run_on_ray(out, jobs, address, workers or os.cpu_count() or 1, report, lambda job_id: None, task=run_folder_job)
    if failed:
        raise CoocflowError(f"{len(failed)} of {len(jobs)} {runs} failed on Ray ({failed[0]['id']}: "
                            f"{failed[0].get('error')}); run the command again to retry them")
