"""The command line: a run end to end, `show`, and one-line errors for bad input."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY, coocflow_here

BIN = Path(sys.executable).parent / "coocflow"


def coocflow_process(*args, cwd=None):
    """The installed executable in a new process (what a user runs; `coocflow_here` runs the same
    command in this process)."""
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


coocflow = coocflow_here


def test_run_and_show(tmp_path):
    """The installed executable end to end (the other tests run commands in this process)."""
    out = tmp_path / "run"
    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    done = coocflow_process("run", "paper", *sets, "--seed", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "T1" in done.stdout and "figure1.png" in done.stdout
    assert (out / "figure1.png").is_file()
    again = coocflow_process("run", "paper", *sets, "--out", str(out))
    assert again.returncode == 2 and "--force" in again.stderr
    shown = coocflow_process("show", str(out))
    assert shown.returncode == 0 and "loss" in shown.stdout and "seed=3" in shown.stdout


@pytest.mark.parametrize(
    "args,expected",
    [
        (["run", "nosuch"], "unknown experiment 'nosuch'"),
        (["run", "papr"], "did you mean 'paper'?"),
        (["run", "runs/papr"], "runs/papr: does not exist"),
        (["run", "paper", "--set", "lr=0.05"], "did you mean 'optimizer.lr'"),
        (["run", "paper", "--set", "optimizer.lr", "0.05"], "--set optimizer.lr=0.05"),
        (["run", "paper", "--set", "name=x", "--set", "seeds=[0, 1]", "--seeds", "3"], "already lists seeds = [0, 1]"),
        (["run", "generalization", "--no-figures"], "--figures/--no-figures: not used with generalization"),
        (["run", "paper", "--no-figures", "--pdf"], "--pdf"),
        (["verify", "paper", "--values", "32,64"], "--values: not used with verify without --scaling"),
        (["keys", "--from", "paper"], "--from: applies with --toml"),
        (["compare", "/nonexistent/a", "/nonexistent/b"], "does not exist"),
        (["ls", "/nonexistent/runs"], "does not exist"),
        (["run", "paper", "--set", "data.n=61"], "data.n: must be a positive multiple of 6"),
        (["run", "paper", "--set", "trian.lr=1"], "did you mean 'optimizer.lr'"),
        (["run", "paper", "--set", "optimizer.lr"], "expected key=value"),
        (["run", "paper", "--set", "data.random_tokens=distinct"], "data.d: 'distinct'"),
        (["run", "paper", "--seed", "-4"], "seed: must be >= 0"),
        (["show", "/nonexistent/run"], "does not exist"),
        (["run", "paper", "--resume", "/nonexistent/run"], "--resume: continues the folder's own config.json; drop TARGET"),
        (["run", "--resume", "/nonexistent/run"], "--resume /nonexistent/run: no such folder"),
        (["run", "paper", "--set", "name=../../escape"], "name: '../../escape' has an empty, '.' or '..' path part"),
    ],
)
def test_bad_input_is_one_line_without_traceback(args, expected):
    done = coocflow(*args)
    assert done.returncode != 0
    assert expected in done.stderr, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_seed_flag_must_be_a_number():
    done = coocflow("run", "paper", "--seed", "abc")
    assert done.returncode != 0 and "Traceback" not in done.stderr and "--seed" in done.stderr


def test_lists():
    assert "paper-phenomena" in coocflow("experiments").stdout
    assert "optimizer.lr" in coocflow("keys").stdout


def test_seed_ensemble_from_the_command_line(tmp_path):
    out = tmp_path / "ens"
    sets = [x for k, v in TINY.items() for x in ("--set", f"{k}={v}")]
    done = coocflow("run", "paper", *sets, "--seeds", "3", "--out", str(out))
    assert done.returncode == 0, done.stderr
    shown = coocflow("show", str(out))
    assert "median" in shown.stdout and "3: 0..2" in shown.stdout
    bad = coocflow("run", "paper", "--seeds", "0")
    assert bad.returncode == 2 and "--seeds: must be at least 1" in bad.stderr
