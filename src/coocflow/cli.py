"""The `coocflow` command line.

Startup stays light: JAX, Matplotlib and the model are imported inside the commands that
compute, so `--help`, `keys`, `experiments`, `ls` and `show` answer at once. Help is plain
text (no markup: `[set]` in a help string is shown as written).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Optional

import typer
import typer.core
from rich.console import Console
from rich.table import Table

from coocflow import __version__, interrupts
from coocflow.errors import CoocflowError, ConfigError, Interrupted


def _no_type_label(self, ctx) -> None:
    """Arguments are named by their metavar alone (`TARGET`), not a Python type (`<str>`)."""
    return None


typer.core.TyperArgument.display_type_rich = _no_type_label


def _version(value: bool) -> None:
    if value:
        print(f"coocflow {__version__}")
        raise typer.Exit()


app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
                  help="Gradient-flow dynamics of a one-layer transformer learning word co-occurrence "
                       "(Yang et al., NeurIPS 2024).\n\nStart with: coocflow run tiny")
console = Console()
errors = Console(stderr=True)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit")) -> None:
    """Gradient-flow dynamics of a one-layer transformer learning word co-occurrence."""


@app.command()
def run(
    target: Optional[str] = typer.Argument(None, metavar="TARGET",
                                           help="an experiment name (coocflow experiments), a config .toml, "
                                                "or a run folder / its config.json to start from its configuration"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a config key, e.g. --set train.lr=0.05"),
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
) -> None:
    """Train as configured and write a run folder with metrics, states and figures.

    Examples: coocflow run tiny | coocflow run paper --seeds 8 | coocflow run runs/paper --set train.lr=0.05
    """
    if resume is not None:
        given = [flag for flag, value in (("TARGET", target), ("--set", set_), ("--seed", seed), ("--seeds", seeds),
                                          ("--out", out), ("--force", force), ("--check-reproduce", check_reproduce))
                 if value]
        if given:
            raise CoocflowError(f"--resume: continues the folder's own config.json; drop {', '.join(given)}")
        return _resume(resume, _figure_formats(figures, pdf))
    if target is None:
        raise CoocflowError("run: pass an experiment name, a config .toml or a run folder (or --resume DIR); "
                            "`coocflow experiments` lists the names")
    if check_reproduce:
        _refuse_unused("--check-reproduce (it re-runs the folder's own config)",
                       (("--set", set_), ("--seed", seed), ("--seeds", seeds), ("--out", out), ("--force", force),
                        ("--figures/--no-figures", figures is not None), ("--pdf", pdf)))
        return _check_reproduce(Path(target))
    from coocflow.experiments import EXPERIMENTS

    if target in EXPERIMENTS and EXPERIMENTS[target].study:
        _refuse_unused(f"{target} (a study writes its own figures)",
                       (("--figures/--no-figures", figures is not None), ("--pdf", pdf)))
    _train_and_write(target, set_, seed, seeds, out, force, figures=_figure_formats(figures, pdf))


def _figure_formats(figures: Optional[bool], pdf: bool) -> tuple[str, ...]:
    """The figure formats a run writes: PNG unless --no-figures, plus PDF with --pdf."""
    if figures is False:
        if pdf:
            raise ConfigError("--pdf: draws figure1.pdf, which --no-figures turns off; drop one of them")
        return ()
    return ("png", "pdf") if pdf else ("png",)


def _refuse_unused(context: str, options) -> None:
    """Options that cannot apply are refused in one line, never silently dropped."""
    given = [flag for flag, value in options if value]
    if given:
        raise ConfigError(f"{', '.join(given)}: not used with {context}; drop {'it' if len(given) == 1 else 'them'}")


def _resume(folder: Path, figures: tuple[str, ...]) -> None:
    from coocflow.api import resumable_config
    from coocflow.errors import RunFolderError
    from coocflow.experiments.study_folder import study_of_folder, study_progress
    from coocflow.storage.checkpoint import read_checkpoint_meta

    folder = Path(folder)
    if folder.is_dir() and not (folder / "config.json").is_file() and not (folder / "manifest.json").exists():
        raise RunFolderError(f"--resume {folder}: not a folder `coocflow run` started (no config.json); of the "
                             "studies only deep and markov checkpoint, so re-run the others")
    config = resumable_config(folder)
    if config is None:
        from coocflow.api import draw_figures, missing_figures

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
    meta = read_checkpoint_meta(folder)
    where = (f"its checkpoint at observation {meta['next_obs']} of {meta['n_obs']}" if meta
             else "t = 0 (it stopped before its first checkpoint)")
    console.print(f"resuming {folder} from {where}")
    _train_and_write(None, [], None, None, folder, False, resume_config=config, figures=figures,
                     restored=meta is not None)


def _interrupted_message(out: Path) -> Interrupted:
    from coocflow.storage.checkpoint import read_checkpoint_meta

    if not out.is_dir():
        return Interrupted(f"interrupted before {out} was created; nothing to resume")
    if (out / "manifest.json").is_file():
        from coocflow.api import missing_figures

        missing = missing_figures(out)
        return Interrupted(f"interrupted after training: the run in {out} is complete and kept" + (
            f"; its figures were not drawn ({', '.join(missing)}): `coocflow run --resume {out}` draws them"
            if missing else ""))
    meta = read_checkpoint_meta(out)
    where = (f"a checkpoint at observation {meta['next_obs']} of {meta['n_obs']}" if meta
             else "no checkpoint yet, so it restarts from t = 0")
    return Interrupted(f"interrupted: {out} holds {where}; continue with `coocflow run --resume {out}`")


def _check_reproduce(folder: Path) -> None:
    from coocflow.reproduce import check_reproduce

    console.print(f"re-running the config of {folder} ...")
    differences, counted = check_reproduce(folder)
    if not differences:
        console.print(f"[green]reproduced bit for bit[/]: {counted['rows']} rows x {counted['columns']} metrics columns "
                      f"and {counted['weights']} final arrays")
        return
    table = Table(title=f"{len(differences)} quantities differ")
    for column in ("quantity", "max abs difference", "max rel difference"):
        table.add_column(column)
    for d in differences:
        table.add_row(d.name, f"{d.max_abs:.3g}", f"{d.max_rel:.3g}")
    console.print(table)
    raise CoocflowError(f"{folder}: not reproduced: {len(differences)} quantities differ (largest relative "
                        f"difference {max(d.max_rel for d in differences):.3g}); see the table above")


def _train_and_write(target: Optional[str], set_: list[str], seed: Optional[int], seeds: Optional[int],
                     out: Optional[Path], force: bool, resume_config=None, figures: tuple[str, ...] = ("png",),
                     restored: bool = False) -> Path:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from rich.markup import escape

    from coocflow.api import (_names_a_run, config_of_target, describe, resolve_config, resume_run, run_and_write,
                              study_of, time_axis_changes)

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
        from coocflow.storage.paths import default_out

        out = default_out(config.name)
    if resume_config is None:
        from coocflow.storage.paths import refuse_existing_out

        refuse_existing_out(out, force)
    console.print(describe(config))
    from coocflow.estimate import estimate

    cost = estimate(config)
    if cost.long:
        console.print(f"[yellow]{escape(cost.sentence())}[/]", highlight=False)
    columns = (TextColumn("{task.description:<9}"), BarColumn(), TextColumn("{task.percentage:>5.1f}%"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    import coocflow.storage.checkpoint  # noqa: F401  (the interrupt message reads it, and may not import)

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

                folder, result = (resume_run(out, progress=update, figures=figures) if resume_config is not None
                                  else run_and_write(config, out, force=force, progress=update, figures=figures))
        except KeyboardInterrupt:
            raise _interrupted_message(out) from None
    interrupts.set_message(None)
    _print_summary(folder)
    if figures:
        console.print(f"figures: [bold]{folder / 'figure1.png'}[/], {folder / 'overview.png'}"
                      + (f", {folder / 'figure1.pdf'}" if "pdf" in figures else ""))
    failed = [(seed, status, div) for seed, status, div in
              zip(result.seeds, result.trajectory.status, result.trajectory.divergence) if status != "completed"]
    if failed:
        seed, status, div = failed[0]
        why = div.get("reason") or f"{div['quantity']} became non-finite"
        fix = "" if div.get("reason") else "; lower train.lr" + (
            " or use dtype=float64 (float32 overflows past 3.4e38)" if config.dtype == "float32" else "")
        raise CoocflowError(
            f"{len(failed)} of {len(result.seeds)} seeds {status} (seed {seed}: {why} at t={div['t']:g}, "
            f"last finite observation t={div['last_finite_t']}); observations before it are kept in {folder}{fix}")
    return folder


def _run_study(config, out: Optional[Path], force: bool, resume: bool = False) -> Path:
    """Run the study `config` names (`api.run_study`) with a status line, then print its summary;
    an interrupted deep or markov study says how to continue."""
    from coocflow.api import describe, run_study, study_of
    from coocflow.experiments.study_folder import RESUMABLE_STUDIES, divergence_message, study_progress
    from coocflow.storage.run_folder import read_json_object

    name = config.name
    if out is None:
        from coocflow.storage.paths import default_out

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
        if not resumable or not Path(out, "config.json").is_file():
            raise
        raise Interrupted(interrupted()) from None
    finally:
        interrupts.set_message(None)
    console.print((folder / "summary.md").read_text())
    figures = [folder / name for name in read_json_object(folder / "manifest.json")["figures"]]
    console.print(f"written: {', '.join(str(p) for p in figures)}, {folder / 'summary.md'}")
    diverged = divergence_message(record, folder)
    if diverged:
        raise CoocflowError(diverged)
    return folder


@app.command()
def show(run_dir: Optional[Path] = typer.Argument(None, metavar="[RUN_DIR]",
                                                 help="a run folder (default: the newest run under runs/)")) -> None:
    """Print a run's configuration, T1, final loss and key observables.

    Example: coocflow show runs/paper
    """
    if run_dir is None:
        from coocflow.listing import newest_run

        run_dir = newest_run()
        console.print(f"newest run: {run_dir}")
    manifest = Path(run_dir) / "manifest.json"
    if manifest.is_file() and (Path(run_dir) / "summary.md").is_file():
        from coocflow.storage.run_folder import read_json_object

        record = read_json_object(manifest)
        if "study" in record:
            console.print((Path(run_dir) / "summary.md").read_text())
            console.print(f"study {record['study']} ({record.get('status', 'completed')}); figures: "
                          + ", ".join(str(Path(run_dir) / name) for name in record.get("figures", [])),
                          soft_wrap=True, highlight=False)
            return
    _print_summary(run_dir)


@app.command("ls")
def list_runs(folder: Path = typer.Argument(Path("runs"), metavar="[DIR]", help="where to look (default runs/)")) -> None:
    """List the runs, sweeps, studies and comparisons in a folder, newest first.

    Example: coocflow ls runs
    """
    from coocflow.listing import list_folders

    entries = list_folders(folder)
    if not entries:
        console.print(f"{folder}: no runs yet; start with `coocflow run tiny`")
        return
    from rich.measure import Measurement
    from rich.table import Column

    longest_word = max(len(word) for e in entries for word in e.status.split())
    table = Table(Column("folder", no_wrap=True, min_width=max(len(e.name) for e in entries)), "kind",
                  Column("status", min_width=longest_word), "config", "T1", "final loss", "age", title=str(folder))
    for e in entries:
        table.add_row(e.name, e.kind, e.status, e.config, e.t1, e.final_loss, e.age)
    unbounded = Console(width=10_000)
    needed = Measurement.get(unbounded, unbounded.options, table).minimum
    if needed <= console.width:
        console.print(table)
        return
    wide = Console(width=needed, file=console.file, force_terminal=console.is_terminal,
                   color_system=console.color_system)
    wide.print(table)  # the names alone overflow the terminal: they stay whole (to copy), the terminal wraps


def _last(values):
    """Each seed's last valid observation."""
    import numpy as np

    return np.array([row[np.isfinite(row)][-1] if np.isfinite(row).any() else np.nan for row in values])


def _training_text(config) -> str:
    """How a run trains, in its own terms: the flow by its solver, end and tolerances and where
    its grid starts; a discrete method by its rate and steps (and the flow time they reach)."""
    train = config.train
    if config.is_flow:
        return (f"flow ({train.solver}, rtol={train.rtol:g}, atol={train.atol:g}) to t={config.t_end:g}, "
                f"observed from t={config.flow_start:.3g}")
    return f"{train.method} lr={train.lr:g} steps={train.steps} (t={config.t_end:g})"


def _print_summary(run_dir: Path) -> None:
    import numpy as np

    from coocflow.config import config_from_dict
    from coocflow.storage import load_run
    from coocflow.storage.run_folder import pivot_metrics

    loaded = load_run(run_dir)
    man, cfg = loaded.manifest, loaded.config
    table = Table(title=f"{man['name']}  ({run_dir})", show_header=False)
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
        console.print(table)
        return
    median = " (median over seeds)" if len(man.get("seeds", [])) > 1 else ""
    table.add_row("loss" + median, f"{man['initial_loss']:.4g} -> {final['loss']:.4g} at t={final['t']:.4g}")
    table.add_row("train / test acc", f"{final['train_acc']:.3f} / {final['test_acc']:.3f} "
                                      f"(test loss {final['test_loss']:.4g})")
    table.add_row("G(mu1), G(mu2), G(mu3)", f"{final['G_mu1']:.4g}, {final['G_mu2']:.4g}, {final['G_mu3']:.4g}")
    _, series = pivot_metrics(loaded.metrics)
    deltas = ", ".join(f"{k[2:].replace('_', ',')}: {np.nanmedian(_last(series[k]) - series[k][:, 0]):+.3g}"
                       for k in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2"))
    table.add_row("score change A(T)-A(0)" + median, deltas)
    table.add_row("R(t) final", f"{final['R']:.4g}")
    if man.get("divergence"):
        table.add_row("stopped early", str(man["divergence"]))
    stats = man.get("solver_stats") or {}
    if stats.get("num_steps"):
        table.add_row("solver", f"{stats['solver']}: {int(np.median(stats['num_steps']))} steps "
                                f"({int(np.median(stats['num_rejected_steps']))} rejected), "
                                f"~{int(np.median(stats['gradient_evaluations']))} gradient evaluations"
                                + (" (median over seeds)" if median else ""))
    table.add_row("wall time", f"{man['timings'].get('train_s', float('nan')):.2f} s (training, compile included)")
    console.print(table)


@app.command()
def experiments() -> None:
    """List the named experiments.

    Example: coocflow experiments
    """
    from coocflow.experiments import EXPERIMENTS

    table = Table("name", "description")
    for exp in EXPERIMENTS.values():
        table.add_row(exp.name, exp.description)
    console.print(table)


@app.command()
def keys(
    toml: bool = typer.Option(False, "--toml", help="print a complete, commented TOML config to start from"),
    start: Optional[str] = typer.Option(None, "--from", metavar="TARGET",
                                        help="with --toml: the values of an experiment, .toml or run folder"),
) -> None:
    """List every config key with its default and meaning (or print a TOML template).

    Example: coocflow keys --toml --from paper > my.toml; coocflow run my.toml
    """
    from coocflow.config import Config, all_keys
    from coocflow.docs import HELP, toml_template

    if start is not None and not toml:
        raise ConfigError("--from: applies with --toml; add --toml")
    if toml:
        config = None
        if start is not None:
            from coocflow.api import config_of_target

            config = config_of_target(start)
        sys.stdout.write(toml_template(config))
        return
    defaults = Config().to_dict()
    table = Table("key", "default", "meaning")
    for key in all_keys():
        node = defaults
        for part in key.split("."):
            node = node[part]
        table.add_row(key, repr(node), HELP[key])
    console.print(table)


@app.command()
def verify(
    target: str = typer.Argument(..., metavar="TARGET", help="a run folder, an experiment name, or a config .toml (run first)"),
    set_: list[str] = typer.Option([], "--set", metavar="KEY=VALUE", help="override a config key when running first"),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="seed when running first"),
    seeds: Optional[int] = typer.Option(None, "--seeds", metavar="N", help="run N seeds first and report pass rates"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="run folder to write when running first"),
    force: bool = typer.Option(False, "--force", help="replace --out if it exists"),
    scaling: Optional[str] = typer.Option(None, "--scaling", metavar="AXIS",
                                          help="fit every claimed rate over a width sweep: m, m1 or both (m and m1 together)"),
    values: Optional[str] = typer.Option(None, "--values", metavar="W,W,...",
                                         help="widths for --scaling, comma-separated (default: the experiment's, "
                                              "else 32,64,128,256)"),
    strict: bool = typer.Option(False, "--strict",
                                help="exit non-zero when any check fails where its premises are met"),
    full: bool = typer.Option(False, "--full", help="print every table (premises, each claim's evidence, "
                                                     "identities) instead of the summary"),
) -> None:
    """Check every claim of the paper on a run: premises, claims, identities (verify.json/.md/.png).

    Examples: coocflow verify runs/paper | coocflow verify tiny --seeds 4 | coocflow verify theory --scaling both
    """
    if scaling is not None:
        _verify_scaling(target, set_, seed, seeds, out, force, scaling, values, strict, full)
        return
    _refuse_unused("verify without --scaling", (("--values", values),))
    from coocflow.phases.verify import verify_run, write_verification
    from coocflow.storage import load_run

    folder = Path(target)
    if folder.is_dir():
        _refuse_unused(f"{folder}, an existing run (to change it, `coocflow run {folder} --set ...` "
                       "then verify the new folder)",
                       (("--set", set_), ("--seed", seed), ("--seeds", seeds), ("--out", out), ("--force", force)))
    else:
        folder = _train_and_write(target, set_, seed, seeds, out, force)
    loaded = load_run(folder)
    verification = verify_run(loaded)
    write_verification(loaded, verification)
    if full:
        _print_verification(folder, verification)
    else:
        from coocflow.phases.claims import claims_table, summary_line
        from coocflow.phases.verify import width_summary

        table = claims_table(width_summary(verification))
        premises = [{"id": p.id, "met": p.met} for p in verification.premises]
        _print_summary_of_claims(f"verify {folder}: {len(table)} claims, {len(loaded.manifest.get('seeds') or [1])} "
                                 "seed(s)", premises, table, summary_line(table),
                                 [folder / "verify.md", folder / "verify.json"])
    console.print(f"written: {folder / 'verify.json'}, {folder / 'verify.md'}, {folder / 'verify.png'}")
    failed = verification.findings()
    if strict and failed:
        raise CoocflowError(f"verify --strict: {len(failed)} checks failed with their premises met: "
                            f"{', '.join(failed)}")


def _print_verification(folder: Path, verification) -> None:
    """Premises first, then one row per claim, then the implementation identities, then one line
    of counts (claims, and checks x seeds)."""
    from coocflow.phases.claims import claims_table
    from coocflow.phases.verify import APPENDIX_C_CHECK, APPENDIX_C_TOLERANCE, IDENTITIES, width_summary

    rates = verification.pass_rates()
    _print_premises(verification.premises, "premises of the theorems")
    table = claims_table(width_summary(verification))
    _print_claims(table, f"verify {folder}: claims (rates in m: add --scaling both)")
    identities = Table("identity", "verdict", "threshold", "measured", title="implementation identities")
    for i, name in enumerate(_check_names()):
        if name in IDENTITIES:
            first = verification.per_seed[0][i]
            identities.add_row(name, _verdict_text(rates[name]), first.threshold, first.sentence)
    appendix = rates[APPENDIX_C_CHECK]
    states = ", ".join(r["state"] for r in verification.appendix_c)
    identities.add_row(APPENDIX_C_CHECK,
                       _verdict_text(appendix),
                       f"relative error <= {APPENDIX_C_TOLERANCE:g}",
                       f"The closed-form rates of all six kinds of variables match the JVP to "
                       f"{verification.appendix_c_error:.1e} at the run's {states} states (first seed)."
                       if verification.appendix_c else "not evaluated: no weights saved (Gram space)")
    console.print(identities)
    counts = {key: sum(rate.get(key, 0) for rate in rates.values())
              for key in ("passed", "failed", "failed_outside_premises", "unchecked", "no_verdict")}
    premise_line = ""
    if verification.premises:
        met = sum(p.met is True for p in verification.premises)
        premise_line = f"premises {met}/{len(verification.premises)} met; "
    from coocflow.phases.claims import summary_line

    console.print(f"{premise_line}{summary_line(table)}; checks x seeds: {counts['passed']} pass, "
                  f"{counts['failed']} fail, {counts['failed_outside_premises']} fail outside premises, "
                  f"{counts['unchecked']} not applicable, {counts['no_verdict']} diagnostic (no verdict)")


FINDINGS_EXPLAINED = "docs/findings.md, 'What verify finds', and docs/claims.md section 4"
"""Where a verdict against the paper is explained (printed under the summary when a claim fails)."""
SUMMARY_WIDTH = 80


SHORT_VERDICTS = {"pass": "pass", "fail": "FAIL", "fail outside premises": "fail*", "not applicable": "n/a",
                  "inconclusive": "incon.", "no verdict": "-"}
"""Verdicts in the summary's first column; '*' marks a claim whose premises are not all met."""


def _main_number(row: dict) -> str:
    """A claim's main evidence in a few words: the first clause of its first failing (else first
    judged) piece of evidence, without the verdict or seed counts that open a check's text."""
    evidence = row["evidence"]
    judged = [e for e in evidence if e["verdict"] in ("fail", "fail outside premises")] or \
        [e for e in evidence if e["verdict"] in ("pass", "inconclusive")] or evidence
    if not judged:
        return ""
    text = judged[0]["text"]
    head, _, rest = text.partition(". ")
    if rest and re.match(r"(pass|fail|not applicable|inconclusive|\d+/\d+ )", head):
        text = rest
    return text.split("; ")[0].rstrip(".")


def _print_summary_of_claims(title: str, premises, table: list[dict], summary: str, details: list[Path],
                             widths_line: str | None = None, premises_where: str = "") -> None:
    """What verify prints by default, within 60 lines of 80 columns: the premises once, one line per
    claim (its verdict, '*' where the claim's premises are not all met, and its main number), the
    counts, and where the details and the explanations of failures are; `--full` prints every table."""
    from rich.markup import escape

    def get(p, key):
        return p[key] if isinstance(p, dict) else getattr(p, key)

    def say(text: str, style: str | None = None) -> None:
        console.print(f"[{style}]{escape(text)}[/]" if style else escape(text), highlight=False)

    say(title[:SUMMARY_WIDTH])
    unmet = [get(p, "id") for p in premises if get(p, "met") is False]
    if premises:
        met = sum(get(p, "met") is True for p in premises)
        unknown = len(premises) - met - len(unmet)
        say(f"premises{premises_where}: {met} met" + (f", {len(unmet)} not met ({', '.join(unmet)})" if unmet else "")
            + (f", {unknown} not evaluated" if unknown else ""))
    if widths_line:
        say(widths_line[:SUMMARY_WIDTH])
    starred = False
    for row in table:
        outside = any(part.endswith("not met") for part in row["premises"].split(", "))
        label = SHORT_VERDICTS[row["verdict"]]
        if outside and row["verdict"] == "pass":
            label, starred = "pass*", True
        line = f"{label:<7}{row['id']:<7}{_main_number(row)}"
        say(line if len(line) < SUMMARY_WIDTH else line[:SUMMARY_WIDTH - 2] + "…", VERDICT_COLOURS[row["verdict"]])
    if starred or any(row["verdict"] == "fail outside premises" for row in table):
        say("* a premise of the claim is not met: outside the theory's regime")
    say(summary)
    if any(row["verdict"] == "fail" for row in table):
        say(f"failures explained: {FINDINGS_EXPLAINED}")
    say(f"details: {', '.join(map(str, details))}; every table: add --full")


def _print_premises(premises, title: str) -> None:
    if not premises:
        return
    table = Table("premise", "statement", "measured", "needs", "met", title=title)
    for p in premises:
        get = (lambda k: p[k]) if isinstance(p, dict) else (lambda k: getattr(p, k))
        met = {True: "[green]met[/]", False: "[red]not met[/]", None: "[yellow]n/a[/]"}[get("met")]
        table.add_row(get("id"), get("statement"), get("value"), get("threshold"), met)
    console.print(table)


VERDICT_COLOURS = {"pass": "green", "fail": "red", "fail outside premises": "yellow", "not applicable": "bright_black", "inconclusive": "cyan",
                   "no verdict": "bright_black"}


def _print_claims(table: list[dict], title: str) -> None:
    """The claims table, compact: one row per claim, its premises, each piece of evidence on its
    own line (a check's seed counts, or its numbers when it did not pass; a rate's exponent)."""
    from rich.markup import escape

    from rich.table import Column

    claims = Table(Column("claim", max_width=16), Column("premises", max_width=14),
                   Column("evidence", ratio=1, overflow="fold"), Column("verdict", max_width=10),
                   title=title, show_lines=True, expand=True)
    for row in table:
        lines = []
        for e in row["evidence"]:
            text = e["text"] if e["kind"] == "rate" or e["verdict"] != "pass" else e["text"].split(". ", 1)[0]
            lines.append(f"[{VERDICT_COLOURS[e['verdict']]}]{escape(e['name'])}[/]: {escape(text)}")
        unmet = [part.split()[0] for part in row["premises"].split(", ") if part.endswith("not met")]
        premises = ("none (identity)" if row["premises"].startswith("none") else
                    f"not met: {', '.join(unmet)}" if unmet else "met")
        colour = VERDICT_COLOURS[row["verdict"]]
        claims.add_row(f"{row['id']}\n{escape(row['where'])}", premises, "\n".join(lines), f"[{colour}]{row['verdict']}[/]")
    console.print(claims)


def _check_names() -> tuple[str, ...]:
    from coocflow.phases.checks import CHECKS

    return tuple(CHECKS)


def _verdict_text(rate: dict) -> str:
    """The verdict in colour: green pass, red fail (a finding against the paper), yellow the rest."""
    from coocflow.phases.verify import verdict_text

    text = verdict_text(rate)
    colour = ("red" if rate["failed"] else "green" if rate["passed"] == rate["of"] else "yellow")
    return f"[{colour}]{text}[/]"


def _verify_scaling(target, set_, seed, seeds, out, force, axis, values, strict, full=False) -> None:
    from coocflow.api import resolve_config
    from coocflow.phases.claims import summary_line
    from coocflow.phases.scaling import AXES
    from coocflow.report.scaling import base_width, write_scaling
    from coocflow.sweep.width import width_scaling
    from coocflow.storage.paths import default_out, refuse_existing_out

    if axis not in AXES:
        raise CoocflowError(f"--scaling {axis}: choose one of {', '.join(AXES)}")
    from coocflow.experiments import EXPERIMENTS

    experiment = EXPERIMENTS.get(str(target))
    if values is None:
        values = ",".join(map(str, experiment.scaling_widths if experiment and experiment.scaling_widths
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
    config = resolve_config(target, overrides, seed, seeds)
    if out is None:
        out = default_out(config.name, prefix=f"scaling-{axis}-")
    if out.exists() and not (out / "runs").is_dir():
        refuse_existing_out(out, force)
    elif force and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    c0_values = experiment.scaling_c0 if experiment and axis == "both" and not any(
        o.startswith("init.c0=") for o in set_) else ()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("width sweep", total=len(widths) * max(1, len(c0_values)))

        def progress(text: str) -> None:
            if bar.tasks[0].description != "width sweep":
                bar.advance(task)
            bar.update(task, description=f"width sweep ({text.split(', gram', 1)[0].split(', weights', 1)[0]})")

        report = width_scaling(config, axis, widths, out, progress=progress, c0_values=c0_values)
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
        _print_premises(base["premises"], f"premises at m={base['m']}, m1={base['m1']} (the one-width checks' width)")
        for width in report["widths"]:
            unmet = [p["id"] for p in width["premises"] if p["met"] is False]
            console.print(f"  m={width['m']}, m1={width['m1']} ({width['space']}): premises "
                          + (f"not met: {', '.join(unmet)}" if unmet else "all met"))
        _print_claims(table, f"claims: checks at m={base['m']}, rates over {axis} = {', '.join(map(str, widths))}, "
                             f"{len(config.seed_list)} seeds per width")
        console.print(summary_line(table))
    else:
        c0s = report.get("c0_values") or [config.init.c0]
        _print_summary_of_claims(
            f"verify --scaling {axis}: {len(widths)} widths {widths[0]}..{widths[-1]}, c0 "
            f"{'/'.join(f'{c:g}' for c in c0s)}, {len(config.seed_list)} seeds",
            base["premises"], table, summary_line(table), [out / "scaling.md", out / "report.html"],
            premises_where=f" at m={base['m']} (the one-width checks)",
            widths_line=f"premises over the {runs} runs: " + ("all met" if not unmet_at else "all met but " + ", ".join(
                f"{premise} (not met in {count})" for premise, count in unmet_at.items())))
    console.print(f"written: {', '.join(str(path) for path in written)}; runs under {out / 'runs'}")
    findings = [row["id"] for row in table if row["verdict"] == "fail"]
    if strict and findings:
        raise CoocflowError(f"verify --strict: {len(findings)} claims failed with their premises met: {', '.join(findings)}")


@app.command()
def sweep(
    spec: Path = typer.Argument(..., metavar="SPEC", help="a sweep spec .toml (base, seeds, [set], [grid], [zip])"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="sweep folder (default runs/sweep-NAME); re-run to resume"),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", help="parallel worker processes (default: cores, at most the jobs)"),
    ray: Optional[str] = typer.Option(None, "--ray", metavar="ADDRESS", help="run as Ray tasks: local (start Ray here), auto, or an address"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="also re-run jobs that failed before"),
    force: bool = typer.Option(False, "--force", help="delete --out first if it holds a different sweep"),
) -> None:
    """Run every job of a sweep (seeds of one configuration batch into one job), resumably.

    Example: coocflow sweep examples/sweep_m_L.toml --workers 2
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from rich.markup import escape

    from coocflow.sweep import SweepStore, default_figures, load_spec
    from coocflow.sweep.execute import pending_jobs, require_ray, run_in_process, run_in_workers, run_on_ray

    if ray:
        require_ray()
    parsed = load_spec(spec)
    if out is None:
        from coocflow.storage.paths import DEFAULT_ROOT, inside

        out = inside(DEFAULT_ROOT, f"sweep-{parsed.name}", "name")
    store = SweepStore(out)
    store.prepare(parsed, force=force)
    cores = os.cpu_count() or 1
    if workers is not None and not 1 <= workers <= cores:
        raise CoocflowError(f"--workers: must be between 1 and the {cores} cores of this machine (got {workers})")
    todo = pending_jobs(parsed, store, retry_failed)
    workers = workers or max(1, min(cores, len(todo)))
    before = store.states()
    done_before = sum(state == "done" for state in before.values())
    console.print(f"[bold]{parsed.name}[/]: {len(parsed.jobs)} jobs x {len(parsed.seeds)} seeds; "
                  f"{done_before} done, {len(todo)} to run"
                  + (f" on Ray ({ray})" if ray else f" with {workers} worker{'s' if workers > 1 else ''}") + f" -> {out}")
    counts = {"done": done_before, "failed": sum(state == "failed" for state in before.values()) if not retry_failed else 0,
              "running": 0}
    errors_seen = []
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
            if result["state"] == "failed":
                errors_seen.append(result)
            bar.update(task, advance=1, description=describe())

        bar.update(task, description=describe())
        if ray:
            run_on_ray(out, todo, ray, workers, report, started)
        elif workers == 1:
            run_in_process(out, todo, report, started)
        else:
            run_in_workers(out, todo, workers, report, started)
    for failure in errors_seen:
        first = failure["error"].splitlines()[0] if failure.get("error") else ""
        errors.print(f"[red]job {escape(str(failure['id']))} failed:[/] {escape(first)}", highlight=False)
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
    import json

    from coocflow.sweep import SweepStore, read_record

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
    console.print(table)
    totals = {s: sum(v == s for v in states.values()) for s in ("done", "failed", "pending")}
    console.print(", ".join(f"{n} {s}" for s, n in totals.items()))


@app.command("sweep-plot")
def sweep_plot(
    folder: Path = typer.Argument(..., metavar="SWEEP_DIR", help="a sweep folder written by `coocflow sweep`"),
    x: str = typer.Option(..., "--x", metavar="COLUMN", help="an axis (or any summary column), e.g. model.m"),
    y: str = typer.Option("T1", "--y", metavar="COLUMN", help="a summary column, e.g. T1, final.loss, phase2_start"),
    by: Optional[str] = typer.Option(None, "--by", metavar="AXIS", help="one line per value of this axis"),
    linear: bool = typer.Option(False, "--linear", help="linear axes instead of log-log"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="figure path (default SWEEP_DIR/figures/Y_vs_X.png)"),
) -> None:
    """Any summary column against any axis: medians and 10-90% bands over seeds, fitted slope.

    Example: coocflow sweep-plot runs/sweep-m-L --x model.m --y T1 --by data.L
    """
    from coocflow.sweep import aggregate_figure

    path = aggregate_figure(folder, x, y, by, log=False if linear else None, path=out)
    console.print(f"figure: [bold]{path}[/]")


@app.command()
def report(
    folder: Path = typer.Argument(..., metavar="DIR",
                                  help="a run folder (coocflow run), a sweep folder (coocflow sweep) or a comparison (coocflow compare)"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="page to write (default DIR/report.html)"),
) -> None:
    """Write one self-contained, interactive report.html (opens without a network).

    Example: coocflow report runs/paper
    """
    from coocflow.report import write_report

    console.print(f"report: [bold]{write_report(folder, out)}[/]")


@app.command()
def docs(out: Path = typer.Option(Path("docs"), "--out", metavar="DIR", help="folder for config.md and metrics.md")) -> None:
    """Regenerate the config and metrics reference pages from the code.

    Example: coocflow docs --out docs
    """
    from coocflow.docs import write_docs

    for path in write_docs(out):
        console.print(f"written: {path}")


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
    from coocflow.report.tensorboard import export_tensorboard

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
    from coocflow.compare import compare_runs, render_comparison

    comparison = compare_runs(runs, columns, out)
    render_comparison(comparison, console)
    console.print(f"written: {comparison.folder / 'compare.json'}, {comparison.figure}; "
                  f"page: coocflow report {comparison.folder}")


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
    from coocflow.bench import CASES, run_all
    from coocflow.storage import atomic_write_json

    unknown = [c for c in case if c not in CASES]
    if unknown:
        raise CoocflowError(f"--case {unknown[0]}: choose from {', '.join(CASES)}")
    with console.status("benchmarking (each case in its own process)..."):
        results = run_all(tuple(case) or CASES, quick)
    table = Table("case", "measured", "target", "met", "baseline", "ratio", "peak RSS", "detail")
    for r in results:
        if "error" in r:
            table.add_row(r["case"], "[red]failed[/]", "", "", "", "", "", r["error"])
            continue
        rss = "-" if r["peak_rss_mib"] != r["peak_rss_mib"] else f"{r['peak_rss_mib']:.0f} MiB"
        table.add_row(r["case"], f"{r['value']:.3g} {r['unit']}", f"{r['target']:g}", "yes" if r["met"] else "[red]no[/]",
                      f"{r['baseline']:.3g} ({r['baseline_name']})", f"{r['ratio']:.2f}x", rss, r["detail"])
    console.print(table)
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
) -> None:
    """Judge a power law in your own width sweep with coocflow's rate test: the exponent, its 95%
    interval, the slope over the largest third of the widths, and pass / fail / inconclusive.

    Example: coocflow fit-rate sweep.csv --exponent -1 --kind order --json
    """
    import json

    from coocflow.phases.rate_test import ORDER_TOLERANCE, RateTest, judge_rate
    from coocflow.storage.rate_table import read_rate_table

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
    judged = judge_rate(test, data.widths, data.values, name=table.stem)
    if json_output:
        print(json.dumps(judged.to_dict()))
        return
    colour = {"pass": "green", "fail": "red", "inconclusive": "yellow"}.get(judged.verdict, "white")
    console.print(f"{table}: {len(data.widths)} widths, m = {data.widths[0]:g}..{data.widths[-1]:g}, up to {data.seeds} seeds",
                  highlight=False)
    console.print(judged.sentence().rsplit(": ", 1)[0], highlight=False, soft_wrap=True)
    console.print(f"verdict: [{colour}]{judged.verdict}[/]", highlight=False)


@app.command()
def power(
    trials: int = typer.Option(200, "--trials", metavar="N", help="simulated sweeps per cell"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE", help="also write the table as Markdown (e.g. docs/power.md)"),
) -> None:
    """The rate test's power at the default theory sweep (its widths and seeds): how often a
    Theta(m^p) claim passes when the true exponent is off by 0..0.3, at seed spreads 0.01..0.5.

    Example: coocflow power --out docs/power.md
    """
    from rich.progress import Progress

    from coocflow.experiments.registry import EXPERIMENTS
    from coocflow.phases.power import ERRORS, NOISES, power_markdown, power_table
    from coocflow.phases.rate_test import RateTest
    from coocflow.storage import atomic_write_text

    if trials < 1:
        raise CoocflowError(f"--trials {trials}: give a positive number of simulated sweeps")
    theory = EXPERIMENTS["theory"]
    widths, seeds, test = [float(m) for m in theory.scaling_widths], theory.scaling_seeds, RateTest(-1.0)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("simulating sweeps", total=len(ERRORS) * len(NOISES))
        cells = power_table(test, widths, seeds, trials, progress=lambda: bar.advance(task))
    command = "coocflow power" + (f" --trials {trials}" if trials != 200 else "") + (f" --out {out}" if out else "")
    text = power_markdown(cells, test, widths, seeds, command)
    console.print(text, highlight=False, markup=False)
    if out is not None:
        atomic_write_text(out, text)
        console.print(f"written: {out}")


def main() -> None:
    """Entry point: user errors become one red line and exit code 2, never a traceback; Ctrl-C
    or SIGTERM at any moment (compiling included) exits 130 with one line (coocflow.interrupts)."""
    interrupts.install()
    try:
        app(args=_checked_args(sys.argv[1:]), prog_name="coocflow")
    except Interrupted as err:
        message = str(err)
        interrupts.set_message(lambda: message)
        interrupts.exit_interrupted()
    except CoocflowError as err:
        print_error(err)
        sys.exit(getattr(err, "exit_code", 2))
    except KeyboardInterrupt:
        interrupts.exit_interrupted()
    except SystemExit as done:
        if done.code == 130:
            interrupts.exit_interrupted()
        if done.code not in (0, None):
            raise
    _leave()


def print_error(err: Exception, to: Console | None = None) -> None:
    """One red `error:` line; the message itself is printed as written (markup escaped, so a hint
    like pip install 'coocflow[ray]' keeps its brackets)."""
    from rich.markup import escape

    (to or errors).print(f"[red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)


def _leave() -> None:
    """A finished command leaves without the interpreter's teardown (which also restores the
    default Ctrl-C action, so an interrupt landing then would kill the process with a signal
    instead of exiting 130). Ray's own exit hooks stop its local cluster, so it keeps them."""
    if "ray" in sys.modules:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _checked_args(args: list[str]) -> list[str]:
    """Catch `--set key value` (a space for the `=`) before the parser reads `value` as a
    stray argument."""
    for i, arg in enumerate(args[:-1]):
        if arg == "--set" and "=" not in args[i + 1] and i + 2 < len(args) and not args[i + 2].startswith("-"):
            key, value = args[i + 1], args[i + 2]
            raise ConfigError(f"--set {key} {value}: write it as one word, --set {key}={value}")
    return args
