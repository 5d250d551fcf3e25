"""Ctrl-C (SIGINT) and SIGTERM at any moment of `coocflow run`: exit code 130 and one line,
never a traceback or a crash, and a run interrupted between chunks resumes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TINY, coocflow_here

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
    done = coocflow_here("run", "--resume", out, "--no-figures")
    assert done.returncode == 0, done.stderr
    assert (out / "manifest.json").is_file()


INTERRUPT_AT = r"""
import os, signal, sys
moment, out = sys.argv[1], sys.argv[2]

def interrupting(function, when=lambda *args, **kwargs: True):
    state = {"sent": False}

    def wrapped(*args, **kwargs):
        if not state["sent"] and when(*args, **kwargs):
            state["sent"] = True
            os.kill(os.getpid(), signal.SIGINT)
        return function(*args, **kwargs)
    return wrapped

if moment == "writing":
    import coocflow.run.folder as folder
    folder.write_arrays = interrupting(folder.write_arrays)
elif moment == "rename":
    os.replace = interrupting(os.replace, lambda source, *rest: ".partial-" in str(source)
                              and os.path.exists(os.path.join(source, "manifest.json")))
elif moment == "figures":
    import coocflow.plots.figures as figures
    figures.figure1 = interrupting(figures.figure1)
elif moment == "report":
    import coocflow.report.write as write
    write.run_report = interrupting(write.run_report)
elif moment == "report-file":
    import pathlib
    pathlib.Path.write_bytes = interrupting(pathlib.Path.write_bytes, lambda path, data: "report.html" in path.name)
from coocflow.cli import main
sys.argv = ["coocflow", *sys.argv[3:]]
main()
"""
"""Runs the command line with SIGINT sent to itself at one moment of finishing a run."""
FINISHED_RUN = [x for k, v in {**TINY, "train.steps": 100}.items() for x in ("--set", f"{k}={v}")]


def _interrupt_at(moment: str, out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", INTERRUPT_AT, moment, str(out), *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})


def _left_behind(out: Path) -> list[str]:
    """Hidden staging folders or temporary files in or beside the run folder."""
    return [p.name for folder in (out.parent, out) for p in folder.iterdir()
            if p.name.startswith(".") or p.name.endswith(".tmp")]


@pytest.mark.parametrize("moment", ["writing", "rename", "figures"])
def test_an_interrupt_after_training_keeps_the_finished_run(moment, tmp_path):
    """SIGINT while the folder is written, during its final rename or while the figures are drawn:
    exit 130 with one line saying the run is complete, the folder whole and loadable, nothing hidden
    left behind, and `--resume` draws the figures without training again."""
    from coocflow.storage import load_run

    out = tmp_path / "run"
    done = _interrupt_at(moment, out, "run", "paper", *FINISHED_RUN, "--out", str(out))
    assert done.returncode == 130, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "complete and kept" in line, done.stderr
    assert f"coocflow run --resume {out}" in line and "figure1.png" in line
    assert load_run(out).manifest["figures"] == ["figure1.png", "overview.png"]
    assert not (out / "figure1.png").exists() and _left_behind(out) == []
    resumed = coocflow_here("run", "--resume", out)
    assert resumed.returncode == 0 and "drew its missing figures" in resumed.stdout, resumed.stderr
    assert (out / "figure1.png").stat().st_size > 10000 and (out / "overview.png").is_file()


def test_an_interrupt_during_the_report_leaves_the_run_as_it_was(tmp_path):
    """SIGINT while `coocflow report` builds the page (it leaves at once: no report.html) and while
    it writes the file (the file is finished first): exit 130, no temporary file, the run untouched."""
    from coocflow.storage import load_run

    out = tmp_path / "run"
    subprocess.run([str(BIN), "run", "paper", *FINISHED_RUN, "--out", str(out), "--no-figures"], check=True,
                   capture_output=True, timeout=300)
    before = sorted(p.name for p in out.iterdir())
    done = _interrupt_at("report", out, "report", str(out))
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in out.iterdir()) == before and _left_behind(out) == []
    done = _interrupt_at("report-file", out, "report", str(out))
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(before + ["report.html"]) and _left_behind(out) == []
    assert (out / "report.html").read_text().rstrip().endswith("</html>")
    assert load_run(out).manifest["figures"] == []


def test_an_interrupted_width_sweep_keeps_its_runs_and_names_the_command_that_resumes(tmp_path):
    """`verify --scaling` interrupted: exit 130, one line, the same command with its --out;
    --force, which would delete the kept widths, is not in it."""
    out = tmp_path / "widths"
    sets = [x for k, v in LONG.items() if k != "model.m" for x in ("--set", f"{k}={v}")]
    args = [str(BIN), "verify", "paper", "--scaling", "m", "--values", "8,12", *sets, "--seeds", "1", "--force"]
    process = subprocess.Popen([*args, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COLUMNS": "200"})
    _wait_for(out / "runs" / "m-8" / "config.json", process)
    time.sleep(1.0)
    line = _interrupted(process)
    resume = " ".join(arg for arg in args[1:] if arg != "--force")
    assert f"kept in {out / 'runs'}" in line and line.endswith(f"resume with: coocflow {resume} --out {out}"), line


def test_an_interrupted_power_table_says_how_to_run_it_again(tmp_path):
    process = subprocess.Popen([str(BIN), "power", "--trials", "500"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "COLUMNS": "200"})
    time.sleep(6.0)
    assert process.poll() is None, process.stderr.read()
    line = _interrupted(process, signal.SIGTERM)
    assert line.endswith("run again: coocflow power --trials 500"), line
