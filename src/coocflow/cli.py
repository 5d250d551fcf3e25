"""The `coocflow` command line: run, show, experiments, keys."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from coocflow.errors import CoocflowError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Gradient-flow dynamics of a one-layer transformer learning word co-occurrence.")
console = Console()
errors = Console(stderr=True)


@app.command()
def run(
    target: str = typer.Argument(..., help="an experiment name (see `coocflow experiments`) or a config .toml"),
    set_: list[str] = typer.Option([], "--set", help="override a config key, e.g. --set train.lr=0.05"),
    seed: Optional[int] = typer.Option(None, "--seed", help="random seed for data and initialization"),
    out: Optional[Path] = typer.Option(None, "--out", help="run folder to write (default runs/NAME-TIMESTAMP)"),
    force: bool = typer.Option(False, "--force", help="replace --out if it exists"),
) -> None:
    """Train as configured and write a run folder with metrics, states and figures."""
    from coocflow.api import resolve_config, run_and_write

    config = resolve_config(target, set_, seed)
    if out is None:
        import datetime as dt

        out = Path("runs") / f"{config.name}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"
    if out.exists() and not force:
        raise CoocflowError(f"--out {out}: folder exists; pass --force to replace it or choose another --out")
    console.print(f"[bold]{config.name}[/]: n={config.data.n} L={config.data.L} d={config.data.d} "
                  f"m={config.model.m} m1={config.model.m1} init={config.init.scheme} "
                  f"{config.train.method} lr={config.train.lr} steps={config.train.steps} "
                  f"(t_end={config.t_end:g}) seed={config.seed} {config.dtype}")
    columns = (TextColumn("training"), BarColumn(), TextColumn("{task.completed}/{task.total} steps"),
               TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("train", total=config.train.steps)
        folder, result = run_and_write(config, out, force=force,
                                       progress=lambda done: bar.update(task, completed=done))
    _print_summary(folder)
    if result.trajectory.status == "diverged":
        div = result.trajectory.divergence
        raise CoocflowError(
            f"run diverged: {div['quantity']} became non-finite at step {div['step']} (t={div['t']:g}); "
            f"kept {len(result.series['t'])} observations in {folder}; lower train.lr")
    console.print(f"figure: [bold]{folder / 'figure1.png'}[/]")


@app.command()
def show(run_dir: Path = typer.Argument(..., help="a run folder written by `coocflow run`")) -> None:
    """Print a run's configuration, T1, final loss and key observables."""
    _print_summary(run_dir)


def _print_summary(run_dir: Path) -> None:
    from coocflow.storage import load_run

    loaded = load_run(run_dir)
    man, cfg = loaded.manifest, loaded.config
    table = Table(title=f"{man['name']}  ({run_dir})", show_header=False)
    table.add_row("status", str(man["status"]))
    table.add_row("config", f"n={cfg['data']['n']} L={cfg['data']['L']} d={cfg['data']['d']} "
                            f"({cfg['data']['random_tokens']}) m={cfg['model']['m']} m1={cfg['model']['m1']}")
    table.add_row("init", man["init"])
    table.add_row("training", f"{cfg['train']['method']} lr={cfg['train']['lr']} steps={cfg['train']['steps']} "
                              f"seed={man['seed']} {man['dtype']}")
    t1 = man.get("T1")
    table.add_row("T1 (all train correct)", "not reached" if t1 is None else f"{t1:.4g}")
    final = man["final"]
    table.add_row("loss", f"{man['initial_loss']:.4g} -> {final['loss']:.4g} at t={final['t']:.4g}")
    table.add_row("train / test acc", f"{final['train_acc']:.3f} / {final['test_acc']:.3f} "
                                      f"(test loss {final['test_loss']:.4g})")
    table.add_row("G(mu1), G(mu2), G(mu3)", f"{final['G_mu1']:.4g}, {final['G_mu2']:.4g}, {final['G_mu3']:.4g}")
    m = loaded.metrics
    deltas = ", ".join(f"{k[2:].replace('_', ',')}: {m[k][-1] - m[k][0]:+.3g}"
                       for k in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2"))
    table.add_row("score change A(T)-A(0)", deltas)
    table.add_row("R(t) final", f"{final['R']:.4g}")
    if man.get("divergence"):
        table.add_row("divergence", str(man["divergence"]))
    table.add_row("wall time", f"{man['timings'].get('train_s', float('nan')):.2f} s (training, compile included)")
    console.print(table)


@app.command()
def experiments() -> None:
    """List the named experiments."""
    from coocflow.experiments import EXPERIMENTS

    table = Table("name", "description")
    for exp in EXPERIMENTS.values():
        table.add_row(exp.name, exp.description)
    console.print(table)


@app.command()
def keys() -> None:
    """List every config key with its default."""
    from coocflow.config import Config, all_keys

    defaults = Config().to_dict()
    table = Table("key", "default")
    for key in all_keys():
        node = defaults
        for part in key.split("."):
            node = node[part]
        table.add_row(key, repr(node))
    console.print(table)


def main() -> None:
    """Entry point: user errors become one red line and exit code 2, never a traceback."""
    try:
        app()
    except CoocflowError as err:
        errors.print(f"[red]error:[/] {err}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        errors.print("[red]interrupted[/]")
        sys.exit(130)
