"""Ctrl-C (SIGINT) and SIGTERM at any moment of `coocflow run`: exit code 130 and one line,
never a traceback or a crash, and a run interrupted between chunks resumes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TINY

BIN = Path(sys.executable).parent / "coocflow"
LONG = {**TINY, "train.steps": 60000, "observe.points": 60, "observe.chunks": 30, "observe.checkpoint_every_s": 0}


def _start(out: Path, env_extra: dict | None = None) -> subprocess.Popen:
    sets = [x for k, v in LONG.items() for x in ("--set", f"{k}={v}")]
    env = {**os.environ, "COLUMNS": "200", **(env_extra or {})}
    return subprocess.Popen([str(BIN), "run", "paper", *sets, "--out", str(out), "--no-figures"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(path: Path, process: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert process.poll() is None, f"the run ended before {path.name} appeared: {process.stderr.read()}"
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.005)


def _interrupted(process: subprocess.Popen, signum=signal.SIGINT) -> str:
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, (process.returncode, stderr)
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_interrupt_while_importing(tmp_path):
    """Once the process has begun loading JAX's native library (the first seconds of a run)."""
    process = _start(tmp_path / "run")
    maps = Path(f"/proc/{process.pid}/maps")
    deadline = time.monotonic() + 60
    while "jaxlib" not in maps.read_text():
        assert process.poll() is None and time.monotonic() < deadline, "the run never loaded jaxlib"
        time.sleep(0.002)
    assert "interrupted" in _interrupted(process)
    assert not (tmp_path / "run" / "manifest.json").exists()


def test_interrupt_while_compiling_before_the_first_chunk(tmp_path):
    """The first compilation without a cache (seconds inside XLA): the process leaves at once."""
    out = tmp_path / "run"
    process = _start(out, {"COOCFLOW_CACHE_DIR": "off"})
    _wait_for(out / "config.json", process)
    time.sleep(0.2)
    line = _interrupted(process)
    assert "no checkpoint yet" in line and f"coocflow run --resume {out}" in line
    assert not (out / "checkpoint.npz").exists() and not (out / "manifest.json").exists()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_between_chunks_checkpoints_and_resumes(tmp_path, signum):
    out = tmp_path / "run"
    process = _start(out)
    _wait_for(out / "checkpoint.npz", process)
    line = _interrupted(process, signum)
    assert "holds a checkpoint at observation" in line and f"coocflow run --resume {out}" in line
    done = subprocess.run([str(BIN), "run", "--resume", str(out), "--no-figures"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file()
