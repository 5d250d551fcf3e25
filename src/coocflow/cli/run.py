"""`coocflow run` (and `--resume`, `--check-reproduce`): train, write the folder, print its summary."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from coocflow import interrupts
from coocflow.cli.app import _refuse_unused, app, confirm_long_work, console, print_whole, say
from coocflow.config import config_from_dict
from coocflow.errors import ConfigError, CoocflowError, Interrupted, RunFolderError
from coocflow.estimate import estimate
from coocflow.experiments import EXPERIMENTS


@app.command()
def run(
    target: Optional[str] = typer.Argument(None, metavar="TARGET",
                                           help="an experiment name (coocflow experiments), a config .toml, "
                                                "or a run folder / its config.json to start from its configuration"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a config key, e.g. --set optimizer.lr=0.05"),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="random seed for data and initialization"),
    seeds: Optional[int] = typer.Option(None, "--seeds", metavar="N",
                                        help="run N seeds (seed, seed+1, ...) as one vmapped ensemble"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="run folder to write (default runs/NAME-TIMESTAMP)"),
    force: bool = typer.Option(False, "--force", help="replace --out if it exists"),
    figures: Optional[bool] = typer.Option(None, "--figures/--no-figures",
                                           help="draw figure1.png and overview.png (default: yes)"),
    pdf: bool = typer.Option(False, "--pdf", help="also write figure1.pdf"),
    resume: Optional[Path] = typer.Option(None, "--resume", metavar="DIR",
                                          help="continue the interrupted run in DIR from its last checkpoint"),
    check_reproduce: bool = typer.Option(False, "--check-reproduce",
                                         help="TARGET is a run folder: re-run its config and report every number that differs"),
    yes: bool = typer.Option(False, "--yes", "-y", help="start work estimated over 30 minutes without asking"),
    accept_changed_code: bool = typer.Option(False, "--accept-changed-code",
                                             help="with --resume or --check-reproduce: go on although the System's "
                                                  "code changed since the run was recorded"),
) -> None:
    """Train as configured and write a run folder with metrics, states and figures.

    Examples: coocflow run tiny | coocflow run paper --seeds 8 | coocflow run runs/paper --set optimizer.lr=0.05
    """
    if accept_changed_code and resume is None and not check_reproduce:
        raise CoocflowError("--accept-changed-code: applies to --resume DIR or --check-reproduce; add one or drop it")
    if resume is not None:
        given = [flag for flag, value in (("TARGET", target), ("--set", set_), ("--seed", seed), ("--seeds", seeds),
                                          ("--out", out), ("--force", force), ("--check-reproduce", check_reproduce))
                 if value]
        if given:
            raise CoocflowError(f"--resume: continues the folder's own config.json; drop {', '.join(given)}")
        return _resume(resume, _figure_formats(figures, pdf), yes, accept_changed_code)
    if target is None:
        raise CoocflowError("run: pass an experiment name, a config .toml or a run folder (or --resume DIR); "
                            "`coocflow experiments` lists the names")
    if check_reproduce:
        _refuse_unused("--check-reproduce (it re-runs the folder's own config)",
                       (("--set", set_), ("--seed", seed), ("--seeds", seeds), ("--out", out), ("--force", force),
                        ("--figures/--no-figures", figures is not None), ("--pdf", pdf)))
        return _check_reproduce(Path(target), accept_changed_code)

    if target in EXPERIMENTS and EXPERIMENTS[target].study:
        _refuse_unused(f"{target} (a study writes its own figures)",
                       (("--figures/--no-figures", figures is not None), ("--pdf", pdf)))
    _train_and_write(target, set_, seed, seeds, out, force, figures=_figure_formats(figures, pdf), yes=yes)


def _figure_formats(figures: Optional[bool], pdf: bool) -> tuple[str, ...]:
    """The figure formats a run writes: PNG unless --no-figures, plus PDF with --pdf."""
    if figures is False:
        if pdf:
            raise ConfigError("--pdf: draws figure1.pdf, which --no-figures turns off; drop one of them")
        return ()
    return ("png", "pdf") if pdf else ("png",)


def _resume(folder: Path, figures: tuple[str, ...], yes: bool = False, accept_changed_code: bool = False) -> None:
    from coocflow.api import recorded_code, refuse_changed_code, resumable_config  # lazy: defers pyarrow, 0.3 s
    from coocflow.experiments.study_folder import study_of_folder, study_progress  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.checkpoint import read_checkpoint_meta  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s

    folder = Path(folder)
    run = RunFolder(folder)
    if folder.is_dir() and not run.config_file.is_file() and not run.manifest_file.exists():
        raise RunFolderError(f"--resume {folder}: not a folder `coocflow run` started (no {run.CONFIG}); of the "
                             "studies only deep and markov checkpoint, so re-run the others")
    config = resumable_config(folder)
    if config is None:
        from coocflow.api import draw_figures, missing_figures  # lazy: defers pyarrow, 0.3 s

        missing = missing_figures(folder)
        if missing:
            drawn = draw_figures(folder)
            console.print(f"{folder}: the run is complete; drew its missing figures: {', '.join(map(str, drawn))}")
            return
        console.print(f"{folder}: the run is complete (manifest.json exists); nothing to resume")
        return
    study = study_of_folder(folder)
    if study is not None:
        if figures != ("png",):
            raise ConfigError("--no-figures/--pdf: not used with a study (it writes its own figures); drop them")
        console.print(f"resuming the {study} study in {folder}: {study_progress(folder)}")
        _run_study(config, folder, False, resume=True)
        return
    refuse_changed_code(folder, recorded_code(run), config.system, "resume it", accept_changed_code)
    meta = read_checkpoint_meta(folder)
    where = (f"its checkpoint at observation {meta['next_obs']} of {meta['n_obs']}" if meta
             else "t = 0 (it stopped before its first checkpoint)")
    console.print(f"resuming {folder} from {where}")
    _train_and_write(None, [], None, None, folder, False, resume_config=config, figures=figures,
                     restored=meta is not None, yes=yes)


def _interrupted_message(out: Path) -> Interrupted:
    from coocflow.storage.checkpoint import read_checkpoint_meta  # lazy: defers JAX, 1-3.6 s
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s

    if not out.is_dir():
        return Interrupted(f"interrupted before {out} was created; nothing to resume")
    if RunFolder(out).manifest_file.is_file():
        from coocflow.api import missing_figures  # lazy: defers pyarrow, 0.3 s

        missing = missing_figures(out)
        return Interrupted(f"interrupted after training: the run in {out} is complete and kept" + (
            f"; its figures were not drawn ({', '.join(missing)}): `coocflow run --resume {out}` draws them"
            if missing else ""))
    meta = read_checkpoint_meta(out)
    where = (f"a checkpoint at observation {meta['next_obs']} of {meta['n_obs']}" if meta
             else "no checkpoint yet, so it restarts from t = 0")
    return Interrupted(f"interrupted: {out} holds {where}; continue with `coocflow run --resume {out}`")


def _check_reproduce(folder: Path, accept_changed_code: bool = False) -> None:
    from coocflow.reproduce import check_reproduce  # lazy: defers NumPy, 0.1 s

    console.print(f"re-running the config of {folder} ...")
    differences, counted = check_reproduce(folder, accept_changed_code)
    if not differences:
        console.print(f"[green]reproduced bit for bit[/]: {counted['rows']} rows x {counted['columns']} metrics columns "
                      f"and {counted['weights']} final arrays")
        return
    table = Table(title=f"{len(differences)} quantities differ")
    for column in ("quantity", "max abs difference", "max rel difference"):
        table.add_column(column)
    for d in differences:
        table.add_row(d.name, f"{d.max_abs:.3g}", f"{d.max_rel:.3g}")
    print_whole(table)
    raise CoocflowError(f"{folder}: not reproduced: {len(differences)} quantities differ (largest relative "
                        f"difference {max(d.max_rel for d in differences):.3g}); see the table above")


def _train_and_write(target: Optional[str], set_: list[str], seed: Optional[int], seeds: Optional[int],
                     out: Optional[Path], force: bool, resume_config=None, figures: tuple[str, ...] = ("png",),
                     restored: bool = False, yes: bool = False) -> Path:
    from coocflow.api import (  # lazy: defers pyarrow, 0.3 s
        _names_a_run,
        config_of_target,
        describe,
        resolve_config,
        resume_run,
        run_and_write,
        study_of,
        time_axis_changes,
    )
    from coocflow.storage.folders import RunFolder  # lazy: defers pyarrow, 0.3 s

    config = resume_config or resolve_config(target, set_, seed, seeds)
    if resume_config is None and study_of(config) is not None:
        return _run_study(config, out, force)
    if resume_config is None and set_ and _names_a_run(target):
        base = config_of_target(target)
        moved = time_axis_changes(base, config)
        console.print(f"a variant of {target}, named [bold]{escape(config.name)}[/]"
                      + (f"; on the time axis: {', '.join(moved)}" if moved else "; the time axis is unchanged"),
                      highlight=False)
    if out is None:
        from coocflow.storage.paths import default_out  # lazy: defers pyarrow, 0.3 s

        out = default_out(config.name)
    if resume_config is None:
        from coocflow.storage.paths import refuse_existing_out  # lazy: defers pyarrow, 0.3 s

        refuse_existing_out(out, force)
    console.print(describe(config))

    cost = estimate(config)
    if cost is not None and cost.long:
        console.print(f"[yellow]{escape(cost.sentence())}[/]", highlight=False)
    confirm_long_work(cost.seconds if cost is not None else 0.0, f"training {config.name}", yes)
    columns = (TextColumn("{task.description:<9}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    import coocflow.storage.checkpoint  # noqa: F401  (the interrupt message reads it, and may not import)  # lazy: defers JAX, 1-3.6 s

    interrupts.set_message(lambda: str(_interrupted_message(out)))
    with contextlib.ExitStack() as between_chunks:
        try:
            with Progress(*columns, console=console, transient=False) as bar:
                task = bar.add_task("compiling", total=1.0)
                calls = {"n": 0}

                def update(done: float) -> None:
                    calls["n"] += 1
                    if calls["n"] == int(restored) + 1:
                        bar.update(task, description="training")
                        between_chunks.enter_context(interrupts.deferred())
                    bar.update(task, completed=done)

                folder, result = (resume_run(out, progress=update, figures=figures,
                                             accept_changed_code=True)  # `_resume` checked it, before training
                                  if resume_config is not None
                                  else run_and_write(config, out, force=force, progress=update, figures=figures))
        except KeyboardInterrupt:
            raise _interrupted_message(out) from None
    interrupts.set_message(None)
    _print_summary(folder)
    drawn = [folder / name for name in RunFolder(folder).manifest().get("figures", [])]
    if drawn:
        console.print(f"figures: [bold]{drawn[0]}[/]" + "".join(f", {path}" for path in drawn[1:]))
    failed = [(seed, status, div) for seed, status, div in zip(result.seeds, result.status, result.divergence)
              if status != "completed"]
    if failed:
        seed, status, div = failed[0]
        why = div.get("reason") or f"{div['quantity']} became non-finite"
        fix = "" if div.get("reason") else "; lower optimizer.lr" + (
            " or use dtype=float64 (float32 overflows past 3.4e38)" if config.dtype == "float32" else "")
        if div.get("last_finite_t") is None and not div.get("reason"):  # at the first observation: the start itself
            raise CoocflowError(
                f"{len(failed)} of {len(result.seeds)} seeds {status} (seed {seed}: {div['quantity']} is non-finite at "
                f"t={div['t']:g}, the first observation, so nothing was observed); the initial parameters are not "
                f"finite: check the initialization (the folder {folder} keeps them)")
        raise CoocflowError(
            f"{len(failed)} of {len(result.seeds)} seeds {status} (seed {seed}: {why} at t={div['t']:g}, "
            f"last finite observation t={div['last_finite_t']}); observations before it are kept in {folder}{fix}")
    return folder


def _run_study(config, out: Optional[Path], force: bool, resume: bool = False) -> Path:
    """Run the study `config` names (`api.run_study`) with a status line, then print its summary;
    an interrupted deep or markov study says how to continue."""
    from coocflow.api import describe, run_study, study_of  # lazy: defers pyarrow, 0.3 s
    from coocflow.experiments.study_folder import (  # lazy: defers JAX, 1-3.6 s
        RESUMABLE_STUDIES,
        divergence_message,
        study_progress,
    )
    from coocflow.storage.folders import StudyFolder  # lazy: defers pyarrow, 0.3 s

    name = config.name
    if out is None:
        from coocflow.storage.paths import default_out  # lazy: defers pyarrow, 0.3 s

        out = default_out(name)
    resumable = study_of(config) in RESUMABLE_STUDIES
    console.print(describe(config))

    def interrupted() -> str:
        return f"interrupted: {out}: {study_progress(out)}; continue with `coocflow run --resume {out}`"

    if resumable:
        interrupts.set_message(interrupted)
    try:
        with console.status(f"running the {name} study...") as status:
            folder, record = run_study(config, out, force=force, resume=resume,
                                       progress=lambda text: status.update(f"{name}: {text}"))
    except KeyboardInterrupt:
        if not resumable or not StudyFolder(out).config_file.is_file():
            raise
        raise Interrupted(interrupted()) from None
    finally:
        interrupts.set_message(None)
    study = StudyFolder(folder)
    console.print(study.summary_file.read_text())
    figures = [folder / name for name in study.manifest()["figures"]]
    say(f"written: {', '.join(str(p) for p in figures)}, {study.summary_file}")
    diverged = divergence_message(record, folder)
    if diverged:
        raise CoocflowError(diverged)
    return folder


def _last(values):
    """Each seed's last valid observation."""
    import numpy as np  # lazy: defers NumPy, 0.1 s

    return np.array([row[np.isfinite(row)][-1] if np.isfinite(row).any() else np.nan for row in values])


def _training_text(config) -> str:
    """How a run trains, in its own terms: the flow by its solver, end and tolerances and where
    its grid starts; a discrete method by its rate and steps (and the flow time they reach)."""
    train, solver, optimizer = config.train, config.solver, config.optimizer
    if config.is_flow:
        return (f"flow ({solver.name}, rtol={solver.rtol:g}, atol={solver.atol:g}) to t={config.t_end:g}, "
                f"observed from t={config.flow_start:.3g}")
    return f"{train.method} lr={optimizer.lr:g} steps={train.steps} (t={config.t_end:g})"


def _print_summary(run_dir: Path) -> None:
    import numpy as np  # lazy: defers NumPy, 0.1 s

    from coocflow.storage import load_run  # lazy: defers pyarrow, 0.3 s
    from coocflow.storage.run_folder import pivot_metrics  # lazy: defers pyarrow, 0.3 s

    loaded = load_run(run_dir)
    man, cfg = loaded.manifest, loaded.config
    table = Table(title=f"{man['name']}  ({run_dir})", show_header=False)
    if "system" in man:
        _print_system_summary(man, cfg, table)
        return
    table.add_row("status", str(man["status"]))
    table.add_row("config", f"n={cfg['data']['n']} L={cfg['data']['L']} d={cfg['data']['d']} "
                            f"({cfg['data']['random_tokens']}) m={cfg['model']['m']} m1={cfg['model']['m1']}")
    table.add_row("init", man["init"])
    if man.get("space") == "gram":
        table.add_row("space", f"gram: A, P, K, V, G, s integrated (initial Grams from {man.get('gram_init')}); "
                               f"not available here (they need W's neurons): {', '.join(man.get('absent_columns') or [])}")
    table.add_row("training", f"{_training_text(config_from_dict(cfg))} seed={man['seed']} {man['dtype']}")
    if len(man.get("seeds", [man["seed"]])) > 1:
        spread = man["T1_spread"]
        t1_text = (f"median {spread['median']:.4g} (10-90%: {spread['q10']:.4g}-{spread['q90']:.4g}, "
                   f"reached by {spread['reached']}/{spread['of']} seeds)") if spread.get("reached") else "not reached"
        table.add_row("seeds", f"{len(man['seeds'])}: {man['seeds'][0]}..{man['seeds'][-1]}")
        table.add_row("T1 (all train correct)", t1_text)
        table.add_row("per-seed status", ", ".join(f"{st}: {sum(p['status'] == st for p in man['per_seed'])}"
                                                   for st in sorted({p['status'] for p in man['per_seed']})))
    else:
        t1 = man.get("T1")
        table.add_row("T1 (all train correct)", "not reached" if t1 is None else f"{t1:.4g}")
    for warning in man.get("warnings") or []:
        table.add_row("[yellow]warning[/]", warning)
    final = man["final"]
    if final is None:
        table.add_row("result", "no valid observation")
        print_whole(table)
        return
    median = " (median over seeds)" if len(man.get("seeds", [])) > 1 else ""
    table.add_row("loss" + median, f"{man['initial_loss']:.4g} -> {final['loss']:.4g} at t={final['t']:.4g}")
    if {"train_acc", "test_acc", "test_loss"} <= set(final):  # a lean run (observe.only) may lack them
        table.add_row("train / test acc", f"{final['train_acc']:.3f} / {final['test_acc']:.3f} "
                                          f"(test loss {final['test_loss']:.4g})")
    if {"G_mu1", "G_mu2", "G_mu3"} <= set(final):
        table.add_row("G(mu1), G(mu2), G(mu3)", f"{final['G_mu1']:.4g}, {final['G_mu2']:.4g}, {final['G_mu3']:.4g}")
    _, series = pivot_metrics(loaded.metrics)
    deltas = ", ".join(f"{k[2:].replace('_', ',')}: {np.nanmedian(_last(series[k]) - series[k][:, 0]):+.3g}"
                       for k in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2") if k in series)
    if deltas:
        table.add_row("score change A(T)-A(0)" + median, deltas)
    if "R" in final:
        table.add_row("R(t) final", f"{final['R']:.4g}")
    if cfg.get("observe", {}).get("only"):
        table.add_row("recorded", f"{len(series)} observables (observe.only); no figures")
    if man.get("divergence"):
        table.add_row("stopped early", str(man["divergence"]))
    _solver_and_events(man, table)
    table.add_row("wall time", f"{man['timings'].get('train_s', float('nan')):.2f} s (training, compile included)")
    _system_code(man, table)
    print_whole(table)


def _solver_and_events(man: dict, table: Table) -> None:
    """The flow's solver statistics and the system's event times (`flow.events`), medians over seeds."""
    import numpy as np  # lazy: defers NumPy, 0.1 s

    median = " (median over seeds)" if len(man.get("seeds", [])) > 1 else ""
    stats = man.get("solver_stats") or {}
    if stats.get("num_steps"):
        table.add_row("solver", f"{stats['solver']}: {int(np.median(stats['num_steps']))} steps "
                                f"({int(np.median(stats['num_rejected_steps']))} rejected), "
                                f"~{int(np.median(stats['gradient_evaluations']))} gradient evaluations" + median)
    per_seed = [p for p in man.get("per_seed") or [] if p.get("events")]
    if per_seed:
        parts = []
        for name in per_seed[0]["events"]:
            found = [p["events"][name] for p in per_seed if p["events"].get(name) is not None]
            located = sum(name in p.get("events_located", []) for p in per_seed)
            parts.append(f"{name} {np.median(found):.6g}" + ("" if located == len(per_seed) else
                                                              f" ({located}/{len(per_seed)} located)")
                         if found else f"{name} not reached")
        table.add_row("events (located)" + median, ", ".join(parts))


def _system_code(man: dict, table: Table) -> None:
    """The code the run's System was defined by (`systems.registry.system_code`), when recorded."""
    code = man.get("system_code")
    if code:
        version = f", coocflow {code['coocflow']}" if code.get("coocflow") else ""
        table.add_row("system code", f"{code['file']} (sha256 {code['sha256'][:12]}{version})")


def _print_system_summary(man: dict, cfg: dict, table: Table) -> None:
    """The summary of a system's run: status, training, and each scalar observable from t = 0 to the end."""
    table.add_row("status", str(man["status"]))
    table.add_row("system", str(man["system"]))
    if cfg.get("settings"):
        table.add_row("settings", ", ".join(f"{key}={value}" for key, value in cfg["settings"].items()))
    table.add_row("training", f"{_training_text(config_from_dict(cfg))} seeds={man['seeds']} {man['dtype']}")
    final = man.get("final")
    if final is None:
        table.add_row("result", "no valid observation")
    else:
        median = " (median over seeds)" if len(man["seeds"]) > 1 else ""
        table.add_row(man["loss_name"] + median, f"{man['initial_loss']:.4g} -> {final[man['loss_name']]:.4g} "
                                                  f"at t={final['t']:.4g}")
        table.add_row("final" + median, ", ".join(f"{k} {v:.4g}" for k, v in final.items()
                                                  if k not in ("t", man["loss_name"]))[:400])
    if man.get("divergence"):
        table.add_row("stopped early", str(man["divergence"]))
    _solver_and_events(man, table)
    table.add_row("wall time", f"{man['timings'].get('train_s', float('nan')):.2f} s (training, compile included)")
    _system_code(man, table)
    print_whole(table)
