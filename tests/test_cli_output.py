"""What the command line prints, in a terminal and in a pipe: sentences whole (wrapped to a width, or
one line each), tables never folded in a pipe, and a question before work estimated over 30 minutes."""

import importlib

import pytest
import typer
from rich.console import Console
from rich.table import Table

from coocflow.estimate import CONFIRM_SECONDS

cli_app = importlib.import_module("coocflow.cli.app")  # the module (coocflow.cli.app is also the Typer app's name)
SENTENCE = ("By T1 = 0.00061 the neurons' sample values moved by up to 0.00414, 7.03 x s0 s1 sqrt(m/L) "
            "(the lemma's own 4R/L term is 17.7 x it)")


@pytest.fixture
def pipe(monkeypatch, capsys):
    """A pipe: not a terminal, COLUMNS unset, output captured."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(cli_app, "console", Console(soft_wrap=True, force_terminal=False))
    return capsys


def test_a_pipe_gets_whole_lines_and_columns_wraps_without_cutting(pipe, monkeypatch):
    cli_app.say(f"fail*  E7     {SENTENCE}", indent=14)
    assert pipe.readouterr().out == f"fail*  E7     {SENTENCE}\n"
    monkeypatch.setenv("COLUMNS", "60")
    cli_app.say(f"fail*  E7     {SENTENCE}", indent=14)
    lines = pipe.readouterr().out.splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 60 and all(line.startswith(" " * 14) for line in lines[1:])
    assert " ".join(" ".join(lines).split()) == " ".join(f"fail*  E7     {SENTENCE}".split())


def test_a_table_in_a_pipe_is_as_wide_as_its_cells(pipe):
    table = Table("claim", "evidence")
    table.add_row("E7", SENTENCE)
    cli_app.print_whole(table)
    assert any(SENTENCE in line for line in pipe.readouterr().out.splitlines())


def test_long_work_asks_in_a_terminal_and_says_so_in_a_pipe(pipe, monkeypatch):
    long = CONFIRM_SECONDS * 2
    cli_app.confirm_long_work(long, "training theory", yes=False)
    out = pipe.readouterr().out
    assert "estimated at 60 min" in out and "no terminal to ask, so it starts" in out
    cli_app.confirm_long_work(long, "training theory", yes=True)
    cli_app.confirm_long_work(CONFIRM_SECONDS / 2, "training theory", yes=False)
    assert pipe.readouterr().out == ""

    asked = []
    monkeypatch.setattr(cli_app.sys.stdin, "isatty", lambda: True)
    monkeypatch.setattr(cli_app, "console", Console(force_terminal=True))
    monkeypatch.setattr(typer, "confirm", lambda text, default: asked.append((text, default)) or False)
    with pytest.raises(typer.Exit) as stopped:
        cli_app.confirm_long_work(long, "training theory", yes=False)
    assert stopped.value.exit_code == 1 and asked[0][1] is False and "Start it?" in asked[0][0]
    monkeypatch.setattr(typer, "confirm", lambda text, default: True)
    cli_app.confirm_long_work(long, "training theory", yes=False)
    assert "add --yes" in pipe.readouterr().out
