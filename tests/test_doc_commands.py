"""The documentation's commands and snippets are ones that work (README.md and docs/*.md).

Every `coocflow` command line of a shell block is read by the command-line interface's own parser
(the command, every flag and the type of every value: what a typo or a renamed flag breaks), and
where its target is a named experiment or a file of examples/, its configuration is resolved with
its `--set`, `--seed` and `--seeds` (every key and value the page passes exists and validates), all
without training. Every Python block compiles, and every name it imports from coocflow exists. The
commands and Python blocks themselves run, page by page with small configurations, in
tests/test_doc_runs.py (`.ci/run`, after `make test`)."""

import ast
import re
import shlex

import pytest
import typer

from conftest import REPO
from coocflow.cli import app

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHELL = ("sh", "bash", "")


def blocks(language: tuple[str, ...]):
    """(page, code) of every fenced block in one of `language` (no tag: "")."""
    for page in PAGES:
        for tag, body in FENCE.findall(page.read_text()):
            if tag in language:
                yield page, body


def documented_commands() -> list[tuple[str, list[str]]]:
    """(where, arguments after `coocflow`) of every command line in the pages' shell blocks: lines
    joined at a trailing backslash, comments and a redirection dropped, an optional argument shown
    as `[runs]` taken as given."""
    found = []
    for page, body in blocks(SHELL):
        for line in body.replace("\\\n", " ").splitlines():
            if not re.match(r"(\S*/)?coocflow\s", line.strip()):
                continue  # output, prose or another program
            words = shlex.split(line.strip().replace("[", "").replace("]", ""), comments=True)
            if ">" in words:
                words = words[: words.index(">")]
            found.append((f"{page.name}: {line.strip()[:80]}", words[1:]))
    return found


COMMANDS = documented_commands()


def test_the_pages_have_commands_to_check():
    assert len(COMMANDS) > 60
    assert any(args[:2] == ["verify", "theory"] for _, args in COMMANDS)


def _parse(args: list[str]) -> tuple[str, dict]:
    """The command's name and its parameters as the parser reads them (an error if it cannot)."""
    group = typer.main.get_command(app)
    if args[0].startswith("-"):  # the program's own options (--version, -h): they print and exit
        try:
            group.make_context("coocflow", list(args))
        except typer.Exit:
            pass
        return "", {}
    parent = group.context_class(group, info_name="coocflow")
    command = group.get_command(parent, args[0])
    assert command is not None, f"no command {args[0]!r}"
    return args[0], command.make_context(args[0], list(args[1:]), parent=parent).params


def test_every_documented_command_parses(capsys):
    failures = []
    for where, args in COMMANDS:
        try:
            _parse(args)
        except Exception as err:  # noqa: BLE001  (every kind of parser error is a finding here)
            failures.append(f"{where}: {type(err).__name__}: {err}")
    capsys.readouterr()  # what --version and -h printed
    assert not failures, "\n".join(failures)


def _resolvable(target: str) -> bool:
    from coocflow.experiments import EXPERIMENTS

    return target in EXPERIMENTS or (target.startswith("examples/") and target.endswith(".toml"))


def test_every_documented_configuration_resolves(monkeypatch):
    """run and verify on a named experiment or an example file: the configuration the command would
    train, with the page's overrides, is valid (keys, values, seeds; a System's own settings)."""
    from coocflow.api import resolve_config
    from coocflow.experiments import EXPERIMENTS
    from coocflow.experiments.catalog import check_study_config

    monkeypatch.chdir(REPO)
    checked, failures = 0, []
    for where, args in COMMANDS:
        name, params = _parse(args)
        target = params.get("target")
        if name not in ("run", "verify") or not isinstance(target, str) or not _resolvable(target):
            continue
        try:
            config = resolve_config(target, params.get("set_") or (), seed=params.get("seed"),
                                    n_seeds=params.get("seeds"))
            if config.name in EXPERIMENTS and EXPERIMENTS[config.name].study:
                check_study_config(EXPERIMENTS[config.name].study, config)
        except Exception as err:  # noqa: BLE001
            failures.append(f"{where}: {type(err).__name__}: {err}")
        checked += 1
    assert not failures, "\n".join(failures)
    assert checked >= 25


def _imports(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("coocflow"):
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("coocflow"):
                    yield alias.name, None


@pytest.mark.parametrize("page, code", list(blocks(("python",))), ids=lambda v: getattr(v, "name", ""))
def test_every_python_block_compiles_and_imports_what_exists(page, code):
    """A block with `...` (an excerpt of a class, as in systems.md) compiles too; what it imports
    from coocflow, and every `coocflow.NAME` it calls, exists."""
    import importlib

    tree = ast.parse(code, filename=str(page))
    for module, name in _imports(tree):
        imported = importlib.import_module(module)
        assert name is None or hasattr(imported, name), f"{page.name}: {module} has no {name}"
    import coocflow

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "coocflow":
            assert hasattr(coocflow, node.attr), f"{page.name}: coocflow has no {node.attr}"
