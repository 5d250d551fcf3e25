"""Checkpoints and `coocflow run --resume`: a killed run continues to the uninterrupted result,
bit for bit; wrong, corrupted or foreign checkpoints are refused with one line."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import TINY, coocflow_here
from typer.testing import CliRunner

from coocflow.api import resolve_config, resume_run, run_and_write
from coocflow.cli import app
from coocflow.errors import RunFolderError
from coocflow.storage import load_run
from coocflow.storage.checkpoint import CHECKPOINT_FILE, RunCheckpoint, read_checkpoint_meta, run_lock

BIN = Path(sys.executable).parent / "coocflow"

MINIBATCH_MOMENTUM = """
name = "killed"
seeds = [0, 1]
[data]
n = 12
L = 4
d = 16
n_test = 24
[model]
m = 8
m1 = 8
[train]
method = "momentum"
batch_size = 6
steps = 20000
[optimizer]
lr = 0.01
[observe]
points = 60
chunks = 40
checkpoint_every_s = 0
"""


def assert_same_results(a: Path, b: Path) -> None:
    """Metrics, initial and final weights equal bit for bit (NaN where both are NaN)."""
    x, y = pq.read_table(a / "metrics.parquet"), pq.read_table(b / "metrics.parquet")
    assert x.schema.equals(y.schema) and x.num_rows == y.num_rows
    for column in x.column_names:
        assert np.array_equal(x[column].to_numpy(), y[column].to_numpy(), equal_nan=True), column
    for name in ("state_init.npz", "state_final.npz", "test_set.npz"):
        with np.load(a / name) as x, np.load(b / name) as y:
            assert x.files == y.files
            for key in x.files:
                assert np.array_equal(x[key], y[key], equal_nan=True), f"{name}:{key}"


def test_sigkill_then_resume_equals_the_uninterrupted_run(tmp_path):
    """Mini-batch SGD with momentum on two seeds: weights, optimizer state and the step counter
    (which fixes the mini-batch draws) must all come back for the result to be identical."""
    spec = tmp_path / "killed.toml"
    spec.write_text(MINIBATCH_MOMENTUM)
    out = tmp_path / "killed"
    process = subprocess.Popen([str(BIN), "run", str(spec), "--out", str(out), "--no-figures"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not (out / CHECKPOINT_FILE).exists():
        assert process.poll() is None, f"the run ended before its first checkpoint: {process.stderr.read()}"
        assert time.monotonic() < deadline, "no checkpoint within 240 s"
        time.sleep(0.02)
    time.sleep(0.1)
    process.send_signal(signal.SIGKILL)
    process.wait()
    meta = read_checkpoint_meta(out)
    assert not (out / "manifest.json").exists(), "the run finished before it was killed; lengthen it"
    assert 0 < meta["next_obs"] < meta["n_obs"] == 60
    with pytest.raises(RunFolderError, match="--resume"):
        load_run(out)

    resumed = coocflow_here("run", "--resume", out, "--no-figures")
    assert resumed.returncode == 0, resumed.stderr
    assert f"observation {meta['next_obs']} of 60" in resumed.stdout
    assert not (out / CHECKPOINT_FILE).exists() and not (out / "figure1.png").exists()

    reference, _ = run_and_write(resolve_config(str(spec)), tmp_path / "uninterrupted", figures=False)
    assert_same_results(out, reference)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed"]["observation"] == meta["next_obs"]
    assert manifest["config_hash"] == json.loads((reference / "manifest.json").read_text())["config_hash"]

    again = CliRunner().invoke(app, ["run", "--resume", str(out)])
    assert again.exit_code == 0 and "nothing to resume" in again.output


class Killed(Exception):
    """Stands in for a kill: raised right after the nth checkpoint is on disk."""


def kill_after_saves(monkeypatch, saves: int) -> None:
    original = RunCheckpoint.save
    count = {"saved": 0}

    def save_then_die(self, state, n_obs, now=False):
        original(self, state, n_obs, now)
        if self.path.exists():
            count["saved"] += 1
            if count["saved"] == saves:
                raise Killed

    monkeypatch.setattr(RunCheckpoint, "save", save_then_die)


def test_flow_resumes_exactly_and_records_solver_statistics(tmp_path, monkeypatch):
    """The ODE flow restarts its solver at every chunk boundary and sums solver statistics over
    the chunks, so a flow killed after its second chunk resumes to the same numbers and stats."""
    settings = {**TINY, "observe.checkpoint_every_s": 0, "train.method": "flow", "train.t_end": 2.0}
    config = resolve_config("paper", [f"{k}={v}" for k, v in settings.items()])
    reference, _ = run_and_write(config, tmp_path / "reference", figures=False)
    run = load_run(reference)
    stats = run.manifest["solver_stats"]
    assert stats["solver"] == "dopri8" and stats["num_steps"][0] > 0 and stats["gradient_evaluations"][0] > 0
    assert np.all(run.metrics["step"] == -1)
    assert run.metrics["t"][-1] == 2.0
    assert "flow time" in run.manifest["time_convention"]

    kill_after_saves(monkeypatch, 2)
    with pytest.raises(Killed):
        run_and_write(config, tmp_path / "run", figures=False)
    assert read_checkpoint_meta(tmp_path / "run")["chunks_done"] == 2
    monkeypatch.undo()
    folder, _ = resume_run(tmp_path / "run", figures=False)
    assert_same_results(folder, reference)
    assert json.loads((folder / "manifest.json").read_text())["solver_stats"] == stats


def test_a_checkpoint_for_another_config_or_a_corrupted_one_is_refused(tmp_path, monkeypatch):
    config = resolve_config("tiny", [f"{k}={v}" for k, v in {**TINY, "observe.checkpoint_every_s": 0}.items()])
    kill_after_saves(monkeypatch, 1)
    with pytest.raises(Killed):
        run_and_write(config, tmp_path / "run", figures=False)
    monkeypatch.undo()
    run = tmp_path / "run"
    edited = json.loads((run / "config.json").read_text())
    edited["optimizer"]["lr"] = 0.2
    original = (run / "config.json").read_text()
    (run / "config.json").write_text(json.dumps(edited))
    with pytest.raises(RunFolderError, match="another config"):
        resume_run(run)
    (run / "config.json").write_text(original)
    (run / CHECKPOINT_FILE).write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(RunFolderError, match="not a readable checkpoint"):
        resume_run(run)
    (run / CHECKPOINT_FILE).unlink()
    folder, result = resume_run(run, figures=False)
    assert result.resumed is None and (folder / "manifest.json").is_file()


def test_an_ensemble_with_seeds_diverged_before_the_checkpoint_resumes_exactly(tmp_path, monkeypatch):
    """At lr = 1.6 four of eight seeds diverge at observations 25-28; a kill after the ninth
    chunk (27 observations) lands after some of them: their status, record, kept weights and
    NaN-padded series must come back as they were."""
    settings = {**TINY, "optimizer.lr": 1.6, "train.steps": 300, "observe.checkpoint_every_s": 0, "observe.chunks": 10,
                "seeds": list(range(8))}
    config = resolve_config("paper", [f"{k}={v}" for k, v in settings.items()])
    reference, expected = run_and_write(config, tmp_path / "reference", figures=False)
    kill_after_saves(monkeypatch, 9)
    with pytest.raises(Killed):
        run_and_write(config, tmp_path / "run", figures=False)
    saved = read_checkpoint_meta(tmp_path / "run")
    diverged_by_then = [i for i, d in enumerate(expected.trajectory.divergence) if d and d["observation"] < 27]
    assert diverged_by_then and all(saved["bad_quantity"][i] for i in diverged_by_then)
    monkeypatch.undo()
    folder, resumed = resume_run(tmp_path / "run", figures=False)
    assert_same_results(folder, reference)
    assert resumed.trajectory.status == expected.trajectory.status
    assert resumed.trajectory.divergence == expected.trajectory.divergence


def test_ctrl_c_saves_the_last_chunk_and_a_second_process_is_locked_out(tmp_path):
    """With checkpoints an hour apart, Ctrl-C after the second chunk still leaves a checkpoint
    of that chunk (the driver saves on KeyboardInterrupt), and the resumed run is exact. While
    one process trains into a folder, resuming it from another is refused."""
    settings = {**TINY, "observe.checkpoint_every_s": 3600}
    config = resolve_config("tiny", [f"{k}={v}" for k, v in settings.items()])
    reference, _ = run_and_write(config, tmp_path / "reference", figures=False)
    calls = {"n": 0}

    def press_ctrl_c(done):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_and_write(config, tmp_path / "run", progress=press_ctrl_c, figures=False)
    meta = read_checkpoint_meta(tmp_path / "run")
    assert meta["chunks_done"] == 2 and 0 < meta["next_obs"] < meta["n_obs"]
    with run_lock(tmp_path / "run"):
        with pytest.raises(RunFolderError, match="another coocflow process .* is training this run"):
            resume_run(tmp_path / "run", figures=False)
    folder, result = resume_run(tmp_path / "run", figures=False)
    assert result.resumed["observation"] == meta["next_obs"]
    assert_same_results(folder, reference)


def test_sigterm_stops_a_run_with_one_line_saying_how_to_resume(tmp_path):
    out = tmp_path / "preempted"
    spec = tmp_path / "preempted.toml"
    spec.write_text(MINIBATCH_MOMENTUM.replace("checkpoint_every_s = 0", "checkpoint_every_s = 3600"))
    process = subprocess.Popen([str(BIN), "run", str(spec), "--out", str(out), "--no-figures"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "COLUMNS": "300"})
    deadline = time.monotonic() + 240
    while not (out / "config.json").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()
        time.sleep(0.02)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert f"coocflow run --resume {out}" in stderr
    assert not (out / "manifest.json").exists()
