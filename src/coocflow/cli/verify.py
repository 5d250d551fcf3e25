"""`coocflow verify` (and `--scaling`): the claims checked on a run or over a width sweep, printed as a summary."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

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
from coocflow.systems.traits import traits_of


@app.command()
def verify(
    target: str = typer.Argument(..., metavar="TARGET", help="a run folder, an experiment name, or a config .toml (run first)"),
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
    from coocflow.storage.folders import RunFolder, SweepFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.theorems.judge import sweep_runs  # lazy: defers JAX, 1-3.6 s
    from coocflow.theorems.verify import verify_folders  # lazy: defers JAX, 1-3.6 s

    folder = Path(target)
    if folder.is_dir() and SweepFolder(folder).spec_file.is_file():
        _refuse_unused(f"{folder}, an existing sweep", (("--set", set_), ("--seed", seed), ("--seeds", seeds),
                                                       ("--out", out), ("--force", force)))
        runs = sweep_runs(folder)
        _refuse_without_theorem(runs.system, str(folder))
        if runs.axis is None and runs.varying:
            say(f"the jobs differ in {', '.join(runs.varying)}: rates need one numeric key to be judged along")
        _show(verify_folders(runs.folders, runs.axis, runs.values, str(folder), folder), full, strict)
        return
    if folder.is_dir():
        _refuse_unused(f"{folder}, an existing run (to change it, `coocflow run {folder} --set ...` "
                       "then verify the new folder)",
                       (("--set", set_), ("--seed", seed), ("--seeds", seeds), ("--out", out), ("--force", force)))
        _refuse_without_theorem(RunFolder.open(folder).system(), str(folder))
    else:
        from coocflow.api import resolve_config  # lazy: defers pyarrow, 0.3 s

        _refuse_without_theorem(resolve_config(target, set_, seed, seeds).system, target)
        folder = _train_and_write(target, set_, seed, seeds, out, force, yes=yes)
    _show(verify_folders([folder], target=str(folder)), full, strict)


def _refuse_without_theorem(system: str, target: str) -> None:
    """One line and exit 2, before any training, for a System that declares no theorem."""
    from coocflow.theorems.verify import declared_theorem  # lazy: defers JAX, 1-3.6 s

    declared_theorem(system, target)


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
    from coocflow.theorems.render import Line  # lazy: defers the verifier's imports

    for item in printed:
        if isinstance(item, Line):
            if item.markup:
                console.print(item.text)
            else:
                say(item.text, item.style, indent=item.indent)
        else:
            print_whole(item)


def _training_left(config, axis: str, widths: list[int], out: Path, c0_values) -> float:
    """The estimated seconds (`coocflow.estimate`) of the width sweep's runs not yet complete in `out`."""
    from coocflow.estimate import estimate  # lazy: defers the config model
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.sweep.width import width_runs  # lazy: defers JAX, 1-3.6 s

    planned = width_runs(config, axis, widths, out, c0_values)
    return sum(estimate(run.config).seconds for run in planned if not RunFolder(run.folder).complete)


def _verify_scaling(target, set_, seed, seeds, out, force, axis, values, strict, full=False, ray=None,
                    workers=None, yes=False, accept_changed_code=False) -> None:
    from coocflow.api import resolve_config  # lazy: defers pyarrow, 0.3 s
    from coocflow.theorems.paper.claims import summary_line  # lazy: defers JAX, 1-3.6 s
    from coocflow.theorems.paper.render import claims_rich_table, premises_table, summary_of_claims  # lazy: JAX
    from coocflow.theorems.paper.scaling import AXES  # lazy: defers JAX, 1-3.6 s
    from coocflow.report.scaling import base_width, write_scaling  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.folders import ScalingFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.sweep.width import width_scaling  # lazy: defers JAX, 1-3.6 s

    declared = resolve_config(target, set_, seed, None if seeds is None else seeds)
    if ray:
        from coocflow.sweep.execute import require_ray  # lazy: defers pyarrow, 0.3 s

        require_ray()
    elif workers is not None:
        raise CoocflowError("--workers: sets Ray's CPUs for --ray local; add --ray local or drop --workers")
    if traits_of(declared.system).scaling != "widths" or axis not in AXES:
        _refuse_without_theorem(declared.system, target)
        _verify_declared_scaling(declared, target, axis, values, out, force, strict, yes, accept_changed_code, ray,
                                 workers)
        return

    experiment = EXPERIMENTS.get(str(target))
    along_neurons = axis == "m1" and experiment is not None and bool(experiment.scaling_m1)
    if values is None:
        values = ",".join(map(str, experiment.scaling_m1 if along_neurons else
                              experiment.scaling_widths if experiment and experiment.scaling_widths
                              else (32, 64, 128, 256)))
    if seeds is None:
        seeds = experiment.scaling_seeds if experiment else 4
    try:
        widths = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        raise CoocflowError(f"--values {values!r}: expected comma-separated whole numbers, e.g. 32,64,128") from None
    if len(widths) < 2 or min(widths) < 1:
        raise CoocflowError(f"--values {values!r}: need at least two positive widths to fit an exponent")
    overrides = ["train.method=flow"] + list(set_)
    if along_neurons and experiment.scaling_m1_at and not any(o.startswith("model.m=") for o in set_):
        overrides.insert(1, f"model.m={experiment.scaling_m1_at}")
    config = resolve_config(target, overrides, seed, seeds)
    out = _scaling_out(out, config.name, axis, force)
    out.mkdir(parents=True, exist_ok=True)
    c0_values = experiment.scaling_c0 if experiment and axis == "both" and not any(
        o.startswith("init.c0=") for o in set_) else ()

    confirm_long_work(_training_left(config, axis, widths, out, c0_values),
                      f"training the width sweep's runs in {out}", yes)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("width sweep", total=len(widths) * max(1, len(c0_values)))

        def progress(text: str) -> None:
            if bar.tasks[0].description != "width sweep":
                bar.advance(task)
            bar.update(task, description=f"width sweep ({text.split(', gram', 1)[0].split(', weights', 1)[0]})")

        train = _width_trainer_on_ray(out, ray, workers, bar, task, accept_changed_code) if ray else None
        resume = again_command(out)
        interrupts.set_message(lambda: f"interrupted: the finished widths are kept in {out / 'runs'} (an unfinished "
                                       f"one from its last checkpoint); resume with: {resume}")
        report = width_scaling(config, axis, widths, out, progress=progress, c0_values=c0_values, train=train,
                               accept_changed_code=accept_changed_code)
        interrupts.set_message(None)
    written = write_scaling(out, report, config)
    base = base_width(report, config)
    table = report["claims"]
    unmet_at = {}
    for width in report["widths"]:
        for premise in width["premises"]:
            if premise["met"] is False:
                unmet_at[premise["id"]] = unmet_at.get(premise["id"], 0) + 1
    runs = len(report["widths"])
    if full:
        _emit(premises_table(base["premises"], f"premises at m={base['m']}, m1={base['m1']} (the one-width checks' "
                                               "width)"))
        for width in report["widths"]:
            unmet = [p["id"] for p in width["premises"] if p["met"] is False]
            console.print(f"  m={width['m']}, m1={width['m1']} ({width['space']}): premises "
                          + (f"not met: {', '.join(unmet)}" if unmet else "all met"))
        _emit([claims_rich_table(table, f"claims: checks over all {runs} runs (sentences at m={base['m']}), rates "
                                        f"over {axis} = {', '.join(map(str, widths))}, "
                                        f"{len(config.seed_list)} seeds per width")])
        console.print(summary_line(table))
    else:
        c0s = report.get("c0_values") or [config.init.c0]
        _emit(summary_of_claims(
            f"verify --scaling {axis}: {len(widths)} widths {widths[0]}..{widths[-1]}, c0 "
            f"{'/'.join(f'{c:g}' for c in c0s)}, {len(config.seed_list)} seeds",
            base["premises"], table, summary_line(table), [ScalingFolder(out).markdown_file, ScalingFolder(out).report_file],
            premises_where=f" at m={base['m']} (the sentences' width; checks count every run)",
            widths_line=f"premises over the {runs} runs: " + ("all met" if not unmet_at else "all met but " + ", ".join(
                f"{premise} (not met in {count})" for premise, count in unmet_at.items()))))
    sensitivity = _sensitivity_line(report.get("c_t1_sensitivity"))
    if sensitivity:
        say(sensitivity)
    say(f"written in {out}: {', '.join(path.name for path in written)}; runs under runs/")
    findings = [row["id"] for row in table if row["verdict"] == "fail"]
    if strict and findings:
        raise CoocflowError(f"verify --strict: {len(findings)} claims failed with their premises met: {', '.join(findings)}")


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


def _verify_declared_scaling(config, target: str, axis: str, values: Optional[str], out: Optional[Path], force: bool,
                             strict: bool, yes: bool, accept_changed_code: bool = False, ray: Optional[str] = None,
                             workers: Optional[int] = None) -> None:
    """`verify --scaling KEY` for a System that declares a theorem: one run per value of the config
    key KEY (any key: the System's `settings.X`, `data.n`, `optimizer.lr`, ...), each with the
    config's seeds (paired), reused when complete and resumed when interrupted (`api.ensure_run`),
    here one after another or, with `ray`, as Ray tasks first; then every claim judged over all the
    runs and each rate along KEY."""
    from coocflow.api import ensure_run  # lazy: defers pyarrow, 0.3 s
    from coocflow.config import current_key, is_known_key, suggest_key  # lazy: keeps --help light
    from coocflow.estimate import estimate  # lazy: defers the config model
    from coocflow.storage.folders import RunFolder, TheoremSweepFolder  # lazy: defers pyarrow, 0.3 s
    from coocflow.theorems.declare import Rate  # lazy: defers JAX, 1-3.6 s
    from coocflow.theorems.judge import theorem_of  # lazy: defers JAX, 1-3.6 s

    key = current_key(axis)
    if not is_known_key(key) or key in ("name", "seed", "seeds", "system"):
        close = suggest_key(axis)
        raise CoocflowError(f"--scaling {axis}: not a config key to sweep"
                            + (f"; did you mean {close}?" if close else "; see `coocflow keys` and `coocflow keys --system`"))
    theorem = theorem_of(config.system)
    designs = [claim.design for claim in theorem.claims if isinstance(claim, Rate) and claim.axis == key and claim.design]
    if values is None:
        if not designs:
            raise CoocflowError(f"--values: the theorem declares no design along {key}; give the values, e.g. --values 1,2,4,8")
        points = list(designs[0])
    else:
        try:
            points = [float(v) if any(ch in v for ch in ".eE") else int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise CoocflowError(f"--values {values!r}: expected comma-separated numbers, e.g. 1,2,4,8") from None
    if len(points) < 2 or len(set(points)) < len(points):
        raise CoocflowError(f"--values {values!r}: need at least two distinct values of {key}")
    jobs = []
    for value in points:
        job = config.replace({key: value, "name": f"{config.name}-{key}={value:g}"})
        jobs.append((value, job))
    out = _scaling_out(out, config.name, key, force)
    folders = [TheoremSweepFolder(out).run_folder(key, value) for value, _ in jobs]
    confirm_long_work(sum(estimate(job).seconds for (_, job), folder in zip(jobs, folders)
                          if not RunFolder(folder).complete), f"training the sweep's runs in {out}", yes)
    out.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    resume = again_command(out)
    interrupts.set_message(lambda: f"interrupted: the finished runs are kept in {out / 'runs'} (an unfinished one "
                                   f"from its last checkpoint); resume with: {resume}")
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(f"sweep of {key}", total=len(jobs))
        missing = [{"id": folder.name, "config": job.to_dict(), "folder": str(folder),
                    "accept_changed_code": accept_changed_code}
                   for (_, job), folder in zip(jobs, folders) if not RunFolder(folder).complete]
        if ray and missing:
            _train_on_ray(missing, out, ray, workers, bar, task, f"sweep of {key}", "runs")
        for (value, job), folder in zip(jobs, folders):
            bar.update(task, description=f"sweep of {key} ({key}={value:g})")
            ensure_run(job, folder, accept_changed_code)
            bar.advance(task)
    interrupts.set_message(None)
    from coocflow.theorems.verify import verify_folders  # lazy: defers JAX, 1-3.6 s

    _show(verify_folders(folders, key, [float(value) for value, _ in jobs], target, out), False, strict)


def _sensitivity_line(sensitivity: dict | None) -> str | None:
    """One sentence: the claims whose verdict changes when the same runs are judged at other C_T1
    (each claim's verdicts are in scaling.md)."""
    if not sensitivity:
        return None
    values = "/".join(f"{c:g}" for c in sensitivity["c_t1"])
    changes = sensitivity["changes"]
    return (f"C_T1 = {values}, same runs re-judged: "
            + (f"{len(changes)} claims change ({', '.join(changes)})" if changes else "no verdict changes")
            + "; verdicts in scaling.md")


def _width_trainer_on_ray(out: Path, address: str, workers: Optional[int], bar, task, accept_changed_code: bool = False):
    """`width_scaling`'s `train`: every width as a Ray task (`sweep.execute.run_width_job`), the
    progress bar saying how many are trained; a width that fails stops the sweep with its line."""
    def train(planned) -> None:
        _train_on_ray([{**p.job(), "accept_changed_code": accept_changed_code} for p in planned], out, address,
                      workers, bar, task, "width sweep", "widths")

    return train


def _train_on_ray(jobs: list[dict], out: Path, address: str, workers: Optional[int], bar, task, what: str,
                  runs: str) -> None:
    """Every job (`{"id", "config", "folder", "accept_changed_code"}`: one run into its folder, reused
    or resumed as `api.ensure_run` decides) as a Ray task (`sweep.execute.run_width_job`), the progress
    bar saying how many are trained; a run that fails stops the sweep with its line."""
    from coocflow.sweep.execute import run_on_ray, run_width_job  # lazy: defers pyarrow, 0.3 s

    failed, done = [], {"n": 0}

    def report(result: dict) -> None:
        done["n"] += 1
        bar.update(task, description=f"{what} (trained {done['n']} of {len(jobs)} on Ray)")
        if result["state"] != "done":
            failed.append(result)

    run_on_ray(out, jobs, address, workers or os.cpu_count() or 1, report, lambda job_id: None, task=run_width_job)
    if failed:
        raise CoocflowError(f"{len(failed)} of {len(jobs)} {runs} failed on Ray ({failed[0]['id']}: "
                            f"{failed[0].get('error')}); run the command again to retry them")
