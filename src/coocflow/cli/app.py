"""The command line's application object, its consoles and the helpers every command shares."""

from __future__ import annotations

import typer
import typer.core
from rich.console import Console
from rich.markup import escape

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


console = Console()


errors = Console(stderr=True)


@app.callback()
def _options(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                          help="print the version and exit")) -> None:
    """Gradient-flow dynamics of a one-layer transformer learning word co-occurrence."""


def _refuse_unused(context: str, options) -> None:
    """Options that cannot apply are refused in one line, never silently dropped."""
    given = [flag for flag, value in options if value]
    if given:
        raise ConfigError(f"{', '.join(given)}: not used with {context}; drop {'it' if len(given) == 1 else 'them'}")


VERDICT_COLOURS = {"pass": "green", "fail": "red", "fail outside premises": "yellow", "not applicable": "bright_black", "inconclusive": "cyan", "vacuous": "magenta",
                   "holds under an unstated condition": "yellow",
                   "no verdict": "bright_black"}


def print_error(err: Exception, to: Console | None = None) -> None:
    """One red `error:` line; the message itself is printed as written (markup escaped, so a hint
    like pip install 'coocflow[ray]' keeps its brackets)."""
    (to or errors).print(f"[red]error:[/] {escape(str(err))}", highlight=False, soft_wrap=True)
