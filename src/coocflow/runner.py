"""One run, end to end: config -> dataset + init -> flow -> observables -> run folder -> figures."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.config import Config
from coocflow.data import Dataset, make_test_set, make_train_set
from coocflow.errors import CoocflowError
from coocflow.flow import Trajectory, integrate_gd, observation_steps
from coocflow.model import Transformer, init_model
from coocflow.observables import Problem
from coocflow.phases import first_time_all_correct
from coocflow.storage import FORMAT_VERSION, atomic_write_json, write_arrays, write_metrics, write_state
from coocflow.storage.provenance import provenance

INIT_NOTES = {
    "kaiming": "kaiming: uniform(-c/sqrt(fan_in), c/sqrt(fan_in)), fan-in d for W_Q, W_K, W_V (c = c0) and m for W (c = c1); a uniform on {+1,-1}",
    "theory": "theory (Condition 1): W_Q, W_K, W_V ~ N(0, (c0/sqrt(L m))^2), W ~ N(0, (c1/sqrt(m1))^2); a uniform on {+1,-1}",
}


def _cast(data: Dataset, dtype) -> Dataset:
    return Dataset(data.tokens, data.labels.astype(dtype), data.groups)


def build_problem(config: Config) -> Problem:
    """Training and test sets of `config`, drawn from its seed."""
    dtype = jnp.dtype(config.dtype)
    return Problem(
        train=_cast(make_train_set(config.data, config.seed), dtype),
        test=_cast(make_test_set(config.data, config.seed), dtype),
    )


def build_model(config: Config) -> Transformer:
    """Initial weights of `config`, drawn from its seed."""
    return init_model(config, jax.random.fold_in(jax.random.PRNGKey(config.seed), 1))


@dataclass
class RunResult:
    config: Config
    problem: Problem
    initial: Transformer
    trajectory: Trajectory
    t1: float | None

    @property
    def series(self) -> dict[str, np.ndarray]:
        return self.trajectory.series


def train(config: Config, progress: Callable[[int], None] | None = None) -> RunResult:
    """Build the problem and initial weights and integrate the flow as configured."""
    problem = build_problem(config)
    initial = build_model(config)
    steps = observation_steps(config.train.steps, config.observe.points, config.observe.spacing)
    start = time.perf_counter()
    trajectory = integrate_gd(initial, problem, steps, config.train.lr, config.train.method,
                              config.observe.chunks, progress)
    trajectory.timings["train_s"] = time.perf_counter() - start
    t1 = first_time_all_correct(trajectory.series["t"], trajectory.series["min_margin"])
    return RunResult(config, problem, initial, trajectory, t1)


def state_arrays(model: Transformer, data: Dataset) -> dict[str, np.ndarray]:
    """Weights and training set under the golden-file keys."""
    return {
        "tokens": np.asarray(data.tokens), "labels": np.asarray(data.labels),
        "groups": np.asarray(data.groups), "W_Q": np.asarray(model.W_Q),
        "W_K": np.asarray(model.W_K), "W_V": np.asarray(model.W_V),
        "W": np.asarray(model.W), "a": np.asarray(model.a),
    }


def summary(result: RunResult) -> dict:
    """The headline numbers of a run, stored in the manifest and printed by `coocflow show`."""
    s = result.series
    final = {k: float(s[k][-1]) for k in ("t", "loss", "train_acc", "test_loss", "test_acc", "min_margin",
                                           "G_mu1", "G_mu2", "G_mu3", "A_mu1_mu2", "A_mu2_mu1",
                                           "A_mu3_mu1", "A_mu3_mu2", "R")}
    return {
        "status": result.trajectory.status,
        "divergence": result.trajectory.divergence,
        "T1": result.t1,
        "observed_points": int(len(s["t"])),
        "initial_loss": float(s["loss"][0]),
        "final": final,
    }


def write_run(result: RunResult, out: Path, force: bool = False,
              figures: Callable[[RunResult, Path], None] | None = None) -> Path:
    """Write the run folder atomically: everything goes to a hidden sibling, then one rename."""
    out = Path(out)
    if out.exists() and not force:
        raise CoocflowError(f"--out {out}: folder exists; pass --force to replace it or choose another --out")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    config = result.config
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": config.name,
        "seed": config.seed,
        "dtype": config.dtype,
        "method": config.train.method,
        "time_convention": "t = lr * steps (gradient descent is the explicit-Euler solution of the flow)",
        "init": INIT_NOTES[config.init.scheme],
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "timings": result.trajectory.timings,
        **summary(result),
        **provenance(),
    }
    atomic_write_json(staging / "config.json", config.to_dict())
    write_metrics(staging / "metrics.parquet", result.series)
    write_state(staging / "state_init.npz", state_arrays(result.initial, result.problem.train))
    write_state(staging / "state_final.npz", state_arrays(result.trajectory.final, result.problem.train))
    write_arrays(staging / "test_set.npz", {"tokens": result.problem.test.tokens,
                                           "labels": result.problem.test.labels,
                                           "groups": result.problem.test.groups})
    if figures is not None:
        figures(result, staging)
    atomic_write_json(staging / "manifest.json", manifest)
    if out.exists():
        trash = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, trash)
        shutil.rmtree(trash)
    os.replace(staging, out)
    return out
