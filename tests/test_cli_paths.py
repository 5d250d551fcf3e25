"""The paths a researcher takes through the command line: help, a template to start from,
listing runs, showing the newest, a variant of an existing run, and no silently dropped option."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import TINY, coocflow_here

BIN = Path(sys.executable).parent / "coocflow"
COMMANDS = ("run", "show", "ls", "experiments", "keys", "verify", "sweep", "sweep-status", "sweep-plot", "report",
            "docs", "export", "compare", "bench")


def coocflow_process(*args, cwd=None):
    """The installed executable in a new process (what a user runs; `coocflow_here` runs the same
    command in this process)."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


coocflow = coocflow_here


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_renders_plainly_with_an_example(command):
    done = coocflow(command, "-h")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "Example" in text, text
    for empty in ("()", "[]", "( ", ", ,", ", )"):
        assert empty not in text, f"{command} -h shows {empty!r}: {text}"
    assert "<bool>" not in text and "<str>" not in text and "<int>" not in text and "<path>" not in text


def test_sweep_help_keeps_its_brackets():
    assert "[set], [grid], [zip]" in coocflow("sweep", "--help").stdout


def test_version_and_short_help():
    done = coocflow_process("--version")
    assert done.returncode == 0 and done.stdout.startswith("coocflow ")
    assert "Commands" in coocflow("-h").stdout


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A folder holding runs/ with one tiny run written by the CLI, as a user would have."""
    root = tmp_path_factory.mktemp("workspace")
    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    done = coocflow("run", "paper", *sets, "--out", "runs/first", "--no-figures", cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def test_a_run_folder_is_a_starting_point(workspace):
    variant = coocflow("run", "runs/first", "--set", "optimizer.lr=0.05", "--out", "runs/variant", "--no-figures",
                       cwd=workspace)
    assert variant.returncode == 0, variant.stderr
    import json

    first = json.loads((workspace / "runs/first/config.json").read_text())
    second = json.loads((workspace / "runs/variant/config.json").read_text())
    assert second["optimizer"]["lr"] == 0.05 and second["name"] == f"{first['name']}-lr0.05"
    assert {**second, "optimizer": None, "name": None} == {**first, "optimizer": None, "name": None}
    again = coocflow("run", "runs/first/config.json", "--out", "runs/again", "--no-figures", cwd=workspace)
    assert again.returncode == 0, again.stderr
    assert json.loads((workspace / "runs/again/config.json").read_text()) == first


def test_ls_and_show_newest(workspace):
    listed = coocflow("ls", cwd=workspace)
    assert listed.returncode == 0, listed.stderr
    assert "first" in listed.stdout and "completed" in listed.stdout and "m=8" in listed.stdout
    newest = coocflow("show", cwd=workspace)
    assert newest.returncode == 0, newest.stderr
    assert "newest run: runs/" in newest.stdout and "T1" in newest.stdout
    empty = coocflow("show", cwd=workspace / "runs")
    assert empty.returncode == 2 and "no runs under runs/" in empty.stderr


def test_mistyped_run_folder_suggests_the_right_one(workspace):
    done = coocflow("show", "runs/frist", cwd=workspace)
    assert done.returncode == 2 and "does not exist; did you mean runs/first?" in done.stderr


def test_verify_refuses_overrides_for_an_existing_run(workspace):
    done = coocflow("verify", "runs/first", "--set", "optimizer.lr=0.5", cwd=workspace)
    assert done.returncode == 2 and "--set: not used with runs/first, an existing run" in done.stderr
    assert not (workspace / "runs/first/verify.json").exists()


def test_keys_explain_and_the_template_is_a_complete_config(tmp_path):
    from coocflow.config import Config, all_keys, config_from_dict

    listed = coocflow("keys").stdout
    assert "meaning" in listed and "learning rate" in listed
    template = coocflow("keys", "--toml").stdout
    tree = tomllib.loads(template)
    assert config_from_dict(tree) == Config()
    for key in all_keys():
        section, _, name = key.rpartition(".")
        assert name in (tree[section] if section else tree), key
    assert template.count("\n# ") + template.startswith("# ") >= len(all_keys())
    from_paper = coocflow("keys", "--toml", "--from", "paper").stdout
    path = tmp_path / "mine.toml"
    path.write_text(from_paper)
    from coocflow.api import resolve_config

    assert resolve_config(str(path)).replace({"name": "paper"}) == resolve_config("paper")
