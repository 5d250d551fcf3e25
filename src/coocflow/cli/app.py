"""The command line's application object, its consoles and the helpers every command shares."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap

import typer
import typer.core
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement

from coocflow import __version__
from coocflow.errors import ConfigError


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


console = Console(soft_wrap=not sys.stdout.isatty() and not os.environ.get("COLUMNS", "").isdigit())
"""Standard output: wrapped to a terminal's width (or `COLUMNS`); in a pipe or file without `COLUMNS`,
whole lines (`line_width`)."""


errors = Console(stderr=True)


def line_width() -> int | None:
    """The width sentences are wrapped to: a terminal's (Rich reads `COLUMNS` first), `COLUMNS` in a
    pipe or file when it is set, else None: whole lines, never cut, for `less`, `grep` and files."""
    if console.is_terminal:
        return console.width
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def say(text: str, style: str | None = None, indent: int = 0) -> None:
    """Print one sentence whole: wrapped at `line_width()` with continuation lines indented by `indent`
    (never cut), or on one line where there is no width to keep."""
    width = line_width()
    if width is not None and len(text) > width:
        text = textwrap.fill(text, width, subsequent_indent=" " * indent, break_long_words=False,
                             break_on_hyphens=False)
    console.print(f"[{style}]{escape(text)}[/]" if style else escape(text), highlight=False, soft_wrap=True)


def confirm_long_work(seconds: float, what: str, yes: bool) -> None:
    """Before work estimated over `estimate.CONFIRM_SECONDS`: ask in a terminal (no: stop, exit 1), say
    so and go on where there is no terminal to ask; `--yes` (`yes`) starts without asking."""
    from coocflow.estimate import CONFIRM_SECONDS, duration  # lazy: keeps `coocflow --help` light

    if seconds <= CONFIRM_SECONDS or yes:
        return
    text = f"{what} is estimated at {duration(seconds)} (coocflow.estimate; a guide within a few x)"
    if sys.stdin.isatty() and console.is_terminal:
        if not typer.confirm(f"{text}. Start it?", default=False):
            console.print("not started; add --yes to start without this question")
            raise typer.Exit(1)
        return
    console.print(f"[yellow]{escape(text)}; no terminal to ask, so it starts (--yes skips this note)[/]",
                  highlight=False)


def again_command(out=None, drop: tuple[str, ...] = ("--force", "--yes", "-y")) -> str:
    """The command line that continues this one where an interrupt left it: the same arguments, with
    `--out OUT` added when the command chose OUT itself, and without `drop` (`--force` would delete
    the work kept so far)."""
    args = [arg for arg in sys.argv[1:] if arg not in drop]
    if out is not None and "--out" not in args:
        args += ["--out", str(out)]
    return shlex.join(["coocflow", *args])


def print_whole(renderable) -> None:
    """Print a Rich table at `line_width()`, or where there is none (a pipe or file without `COLUMNS`) at
    the width its longest cells need, so no cell is folded or cut."""
    width = line_width()
    if width is None:
        unbounded = Console(width=10_000)
        width = Measurement.get(unbounded, unbounded.options, renderable).maximum
    if width == console.width:
        console.print(renderable)
        return
    Console(width=width, file=console.file, force_terminal=console.is_terminal,
            color_system=console.color_system).print(renderable)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit")) -> None:
    """Gradient-flow dynamics of a one-layer transformer learning word co-occurrence."""


def _refuse_unused(context: str, options) -> None:
    """Options that cannot apply are refused in one line, never silently dropped."""
    given = [flag for flag, value in options if value]
    if given:
        raise ConfigError(f"{', '.join(given)}: not used with {context}; drop {'it' if len(given) == 1 else 'them'}")


def print_error(err: Exception, to: Console | None = None) -> None:
    """One red `error:` line; the message itself is printed as written (markup escaped, so a hint
    like pip install 'coocflow[ray]' keeps its brackets)."""
    (to or errors).print(f"[red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
