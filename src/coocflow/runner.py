"""One run, end to end: config -> dataset + init -> flow -> observables -> run folder -> figures.

A run is an ensemble of seeds (one by default): each seed draws its own training set, test set
and initialization, and all seeds are integrated in one vmapped, compiled call.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from coocflow import interrupts
from coocflow.config import Config, format1_records
from coocflow.data import Dataset
from coocflow.flow import EnsembleTraining, event_record, integrate, observation_steps, observation_times, stack_seeds
from coocflow.model import Transformer
from coocflow.model.state import State
from coocflow.observables import Problem
from coocflow.observables.ensemble import first_time_all_correct
from coocflow.observables.registry import neuron_only
from coocflow.storage import FORMAT_VERSION, atomic_write_json, write_arrays, write_metrics, write_state
from coocflow.storage.checkpoint import RunCheckpoint
from coocflow.storage.folders import RunFolder
from coocflow.storage.paths import refuse_existing_out, write_folder_atomically
from coocflow.storage.provenance import provenance
from coocflow.systems.eq1 import Eq1System, build_model, build_problem, gram_source
from coocflow.systems.registry import system_code

INIT_NOTES = {
    "kaiming": "kaiming: uniform(-c/sqrt(fan_in), c/sqrt(fan_in)), fan-in d for W_Q, W_K, W_V (c = c0) and m for W (c = c1); a uniform on {+1,-1}",
    "theory": "theory (Condition 1): W_Q, W_K, W_V ~ N(0, (c0/sqrt(L m))^2), W ~ N(0, (c1/sqrt(m1))^2); a uniform on {+1,-1}",
}
TIME_CONVENTIONS = {
    "flow": "t is the flow time of d(theta)/dt = -grad L, integrated by an adaptive Runge-Kutta solver",
    "discrete": "t = lr * steps (gradient descent is the explicit-Euler solution of the flow)",
}


stack = stack_seeds
"""Stack pytrees on a new leading (seed) axis (`flow.stack_seeds`)."""


def build_ensemble(config: Config) -> tuple[Transformer, Problem]:
    """Initial weights and problems of every seed, stacked on a leading seed axis."""
    seeds = config.seed_list
    return stack([build_model(config, s) for s in seeds]), stack([build_problem(config, s) for s in seeds])


def unstack(tree, index: int):
    return jax.tree.map(lambda leaf: leaf[index], tree)


@dataclass
class RunResult:
    """A trained ensemble: batched initial weights and problems, the trajectory, T1 per seed."""

    config: Config
    problem: Problem
    initial: Transformer
    trajectory: EnsembleTraining
    t1: list[float | None]
    resumed: dict | None = None

    @property
    def seeds(self) -> tuple[int, ...]:
        return self.trajectory.seeds

    @property
    def status(self) -> list[str]:
        return self.trajectory.status

    @property
    def divergence(self) -> list[dict | None]:
        return self.trajectory.divergence

    @property
    def series(self) -> dict[str, np.ndarray]:
        """Series of the first seed, 1-D over observed times (its valid observations only)."""
        return self.seed_series(0)

    def seed_series(self, index: int) -> dict[str, np.ndarray]:
        tr = self.trajectory
        keep = tr.kept(index)
        return {"t": tr.t[:keep], "step": tr.steps[:keep],
                **{k: v[index, :keep] for k, v in tr.series.items()}}

    def table(self) -> dict[str, np.ndarray]:
        """The metrics table: one row per (seed, observed time), valid observations only."""
        rows = [{"seed": np.full(len(s["t"]), seed, dtype=np.int64), **s}
                for seed, s in ((seed, self.seed_series(i)) for i, seed in enumerate(self.seeds))]
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


def observation_grid(config: Config) -> tuple[np.ndarray, np.ndarray]:
    """The observation grid (flow times for the flow, optimizer steps for discrete methods) with
    `observe.snapshots` (and the paper's T1 = `Config.paper_t1`) joined in, and the
    sorted indices of the snapshot observations in it.

    A snapshot time within 1e-9 t_end of a grid time replaces it (so it is observed exactly at
    the time asked for); discrete methods take the nearest step, t = lr * step."""
    o = config.observe
    declared = () if config.paper_t1 is None or config.paper_t1 > config.t_end else (config.paper_t1,)
    if config.is_flow:
        grid = observation_times(config.t_end, config.flow_start, o.points, o.spacing)
        wanted = np.asarray((*o.snapshots, *declared), dtype=np.float64)
        for time_ in wanted:
            nearest = int(np.argmin(np.abs(grid - time_)))
            if abs(grid[nearest] - time_) <= 1e-9 * config.t_end:
                grid[nearest] = time_
    else:
        grid = observation_steps(config.train.steps, o.points, o.spacing)
        wanted = np.clip(np.rint(np.asarray((*o.snapshots, *declared), dtype=np.float64) / config.optimizer.lr), 0,
                         config.train.steps).astype(np.int64)
    grid = np.union1d(grid, wanted)
    return grid, np.searchsorted(grid, np.unique(wanted))


def record_hash(record: dict) -> str:
    """SHA-256 of a stored config record's canonical JSON."""
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def config_hash(config: Config) -> str:
    """SHA-256 of the resolved config's canonical JSON: equal hashes mean the same run."""
    return record_hash(config.to_dict())


def config_hashes(config: Config) -> tuple[str, ...]:
    """Every hash a checkpoint or a study's variant of this run may carry: `config_hash`, then
    those of the format-1 records that read as `config` (written before config format 2)."""
    return (config_hash(config), *(record_hash(record) for record in format1_records(config)))


def train(config: Config, progress: Callable[[float], None] | None = None,
          checkpoint_in: Path | None = None) -> RunResult:
    """Build every seed's problem and initial weights and follow the flow as configured (eq. (1)
    as a system, `Eq1System`, through `flow.system.integrate`).

    With `checkpoint_in` (a run folder begun by `begin_run_folder`), the state is checkpointed
    there every `observe.checkpoint_every_s` seconds and a run that finds a checkpoint continues
    from it; the result is bit for bit the uninterrupted run's.
    """
    model, problem = build_ensemble(config)
    checkpoint = (RunCheckpoint(checkpoint_in, config_hashes(config), config.observe.checkpoint_every_s,
                                system_code(config.system))
                  if checkpoint_in is not None else None)
    grid, snapshot_obs = observation_grid(config)
    training = integrate(Eq1System.from_config(config), config, checkpoint, progress, grid, snapshot_obs,
                         ensemble=(model, problem.train, problem.test))
    t1 = [first_time_all_correct(training.t, training.series["min_margin"][i]) for i in range(training.n_seeds)]
    return RunResult(config, problem, model, training, t1, training.resumed)


def begin_run_folder(out: Path, config: Config, force: bool = False, extra: dict[str, dict] | None = None) -> Path:
    """Create the run folder with only its config.json (and the JSON files `extra` names): a run
    in progress, resumable with `coocflow run --resume` (the folder appears whole, by one
    rename, or not at all)."""
    out = Path(out)
    refuse_existing_out(out, force)
    if out.exists():
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    with interrupts.shielded():
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        atomic_write_json(RunFolder(staging).config_file, config.to_dict())
        for name, record in (extra or {}).items():
            atomic_write_json(staging / name, record)
        os.replace(staging, out)
    return out


def state_arrays(model: State, data: Dataset) -> dict[str, np.ndarray]:
    """Weights and training set under the golden-file keys (Grams under the Gram keys, with N, Z,
    a when the neurons are resolved)."""
    return {"tokens": np.asarray(data.tokens), "labels": np.asarray(data.labels), "groups": np.asarray(data.groups),
            **{key: np.asarray(value) for key, value in model.arrays().items()}}


FINAL_KEYS = ("t", "loss", "train_acc", "test_loss", "test_acc", "min_margin", "G_mu1", "G_mu2", "G_mu3",
              "A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2", "R")


def _spread(values: list[float | None]) -> dict:
    found = np.array([v for v in values if v is not None], dtype=float)
    if not found.size:
        return {"reached": 0, "of": len(values)}
    q10, q50, q90 = np.quantile(found, [0.1, 0.5, 0.9])
    return {"reached": int(found.size), "of": len(values), "median": float(q50), "q10": float(q10),
            "q90": float(q90), "min": float(found.min()), "max": float(found.max())}


FLOAT32_RESOLUTION = float(np.finfo(np.float32).eps)
REJECTED_SHARE_WARNING = 0.3


def health_warnings(result: RunResult) -> list[str]:
    """Numerical health, stated in the summary: float32 too coarse for the observed score changes
    (a change below 100 float32 ulps of the score is mostly rounding), T1 at the first observed
    time (Phase 1 not resolved, as at large widths, where T1 ~ 1/m), and a flow solver that
    rejects many steps (the flow is stiff here: an implicit solver or looser tolerances help)."""
    warnings = []
    series = result.trajectory.series
    if result.config.dtype == "float32":
        scores = [k for k in ("A_mu1_mu2", "A_mu2_mu1", "A_mu3_mu1", "A_mu3_mu2") if k in series]
        for name in scores:
            values = series[name]
            change = np.nanmax(np.abs(values - values[:, :1]))
            scale = np.nanmax(np.abs(values))
            if change < 100 * FLOAT32_RESOLUTION * max(scale, 1e-30):
                warnings.append(f"float32: {name} changes by {change:.2g}, under 100 float32 ulps of its size "
                                f"{scale:.2g}; use dtype = \"float64\"")
    t = result.trajectory.t
    first = float(t[1]) if len(t) > 1 else None
    if first is not None and any(t1 is not None and t1 <= first for t1 in result.t1):
        config = result.config
        fix = (f"--set observe.start={first / 100:g} (the flow's first observed time)" if config.is_flow else
               f"--set optimizer.lr={config.optimizer.lr / 100:g} --set train.steps={config.train.steps * 100}")
        warnings.append(f"resolution: T1 is the first observed time t = {first:g}, so Phase 1 ended before any "
                        f"observation; observe earlier: {fix}")
    asked = result.config.observe.points
    if len(t) < asked and result.trajectory.status.count("completed") == len(result.seeds):
        config = result.config
        grid = ("t_end / observe.start + 1" if config.is_flow else "train.steps + 1")
        fix = (f"--set observe.start={config.t_end / (asked - 1):g}" if config.is_flow
               else f"--set train.steps={asked - 1} (or fewer points)")
        warnings.append(f"observe.points: {asked} asked, {len(t)} observed: the grid has at most {grid} = "
                        f"{len(t)} distinct times; for more: {fix}")
    stats = result.trajectory.stats
    if stats.get("num_steps"):
        for seed, steps, rejected in zip(result.seeds, stats["num_steps"], stats["num_rejected_steps"]):
            if steps and rejected / steps > REJECTED_SHARE_WARNING:
                warnings.append(f"stiffness: seed {seed}: the {stats['solver']} solver rejected {rejected} of {steps} "
                                "steps; try solver.name=kvaerno5 or a looser solver.rtol")
    return warnings


def summary(result: RunResult) -> dict:
    """Headline numbers, stored in the manifest and printed by `coocflow show`.

    For an ensemble, `final` and `T1` are medians over the seeds that have them, `T1_spread`
    gives the 10-90% range, and `per_seed` lists each seed.
    """
    tr = result.trajectory
    per_seed = []
    for i, seed in enumerate(result.seeds):
        s = result.seed_series(i)
        per_seed.append({"seed": seed, "status": tr.status[i], "T1": result.t1[i],
                         "initial_loss": float(s["loss"][0]) if len(s["loss"]) else None,
                         "final": {k: float(s[k][-1]) for k in FINAL_KEYS} if len(s["loss"]) else None,
                         "divergence": tr.divergence[i], **event_record(tr, i)})
    finished = [p for p in per_seed if p["final"] is not None]
    statuses = set(tr.status)
    return {
        "status": statuses.pop() if len(statuses) == 1 else "partial",
        "seeds": list(result.seeds),
        "divergence": next((d for d in tr.divergence if d), None),
        "T1": result.t1[0] if len(result.seeds) == 1 else _spread(result.t1).get("median"),
        "T1_spread": _spread(result.t1),
        "observed_points": int(len(tr.t)),
        "initial_loss": float(np.median([p["initial_loss"] for p in finished])) if finished else None,
        "final": {k: float(np.median([p["final"][k] for p in finished])) for k in FINAL_KEYS} if finished else None,
        "per_seed": per_seed,
        "solver_stats": tr.stats,
        **({"event_settings": tr.event_settings} if tr.event_settings else {}),
        "warnings": health_warnings(result),
    }


def _states(result: RunResult, model: State) -> dict[str, np.ndarray]:
    """Golden-key arrays; a leading seed axis only for ensembles of more than one seed."""
    arrays = state_arrays(model, result.problem.train)
    if len(result.seeds) == 1:
        arrays = {k: v if k in ("m", "m1") else v[0] for k, v in arrays.items()}
    return arrays




def snapshot_files(result: RunResult) -> dict[str, dict[str, np.ndarray]]:
    """The weights the driver kept, as the arrays of `state_t1.npz` and `state_snapshots.npz`
    (run folder format in storage/run_folder.py); a file is left out when it would hold nothing.

    A seed's weights are NaN (and `valid` false) at a snapshot after it diverged or stopped,
    and at T1 when it never had every sample correct (its `t` is NaN, its `step` -1)."""
    snaps = result.trajectory.snapshots
    if snaps is None:
        return {}
    tr = result.trajectory
    single = len(result.seeds) == 1
    kept = np.array([tr.kept(i) for i in range(tr.n_seeds)])
    files = {}

    def blank(arrays: dict[str, np.ndarray], valid: np.ndarray) -> dict[str, np.ndarray]:
        """NaN weights where `valid` (seed axis first) is false; `a` is fixed, so always valid."""
        out = dict(arrays)
        for key in moving:
            shape = valid.shape + (1,) * (arrays[key].ndim - valid.ndim)
            out[key] = np.where(valid.reshape(shape), arrays[key], np.nan)
        return out

    kept_keys = tuple(key for key in snaps.t1_state.arrays() if key not in ("m", "m1"))
    moving = tuple(k for k in kept_keys if k != "a")
    first_hits = [np.flatnonzero(np.asarray(tr.series["min_margin"][i]) > 0) for i in range(tr.n_seeds)]
    t1_ok = np.array([hits.size > 0 and int(hits[0]) == int(snaps.t1_obs[i]) for i, hits in enumerate(first_hits)])
    if t1_ok.any():
        arrays = blank(state_arrays(snaps.t1_state, result.problem.train), t1_ok)
        at = np.clip(snaps.t1_obs, 0, len(tr.t) - 1)
        arrays["t"] = np.where(t1_ok, tr.t[at], np.nan)
        arrays["step"] = np.where(t1_ok, tr.steps[at], -1)
        files[RunFolder.STATE_T1] = ({k: v if k in ("m", "m1") else v[0] for k, v in arrays.items()} if single
                                 else arrays)
    if len(snaps.obs):
        valid = snaps.obs[:, None] < kept[None, :]  # (snapshots, seeds)
        per_time = [blank({k: np.asarray(getattr(model, k)) for k in kept_keys}, valid[k])
                    for k, model in enumerate(snaps.states)]
        arrays = {key: np.stack([p[key] for p in per_time]) for key in kept_keys}
        arrays["valid"] = valid
        if single:
            arrays = {k: v[:, 0] for k, v in arrays.items()}
        grid = np.minimum(snaps.obs, len(tr.t) - 1)
        arrays["t"] = np.where(snaps.obs < len(tr.t), tr.t[grid], np.nan)
        arrays["step"] = np.where(snaps.obs < len(tr.t), tr.steps[grid], -1)
        files[RunFolder.SNAPSHOTS] = arrays
    return files


def write_run(result: RunResult, out: Path, force: bool = False,
              figures: Callable[[RunResult, Path], None] | None = None) -> Path:
    """`write_run_files`, then the figures drawn into the finished folder (`figures`)."""
    write_run_files(result, out, force, figures=() if figures is None else ("figure1.png", "overview.png"))
    if figures is not None:
        figures(result, Path(out))
    return Path(out)


def write_run_files(result: RunResult, out: Path, force: bool = False, figures: tuple[str, ...] = ()) -> Path:
    """Write the run folder but its figures atomically: everything goes to a hidden sibling, then
    one rename (which replaces the in-progress folder and its checkpoint, if the run had one). An
    interrupt meanwhile waits for the rename (`interrupts.shielded`), so finished training is
    never lost and no hidden staging folder is left behind; one while the figures are drawn
    afterwards leaves the run complete (`coocflow run --resume` draws what is missing)."""
    return write_folder_atomically(out, force, lambda staging: _write_staged(result, staging, figures))


def _write_staged(result: RunResult, staging: Path, figures: tuple[str, ...]) -> None:
    """Every file of the run folder but the figures, into `staging`; the manifest lists the
    `figures` to be drawn next."""
    config = result.config
    snapshots = snapshot_files(result)
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": config.name,
        "config_hash": config_hash(config),
        "seed": config.seed_list[0],
        "dtype": config.dtype,
        "method": config.train.method,
        "time_convention": TIME_CONVENTIONS["flow" if config.is_flow else "discrete"],
        "init": INIT_NOTES[config.init.scheme],
        "space": config.model.space,
        **({"gram_init": gram_source(config), "absent_columns": [] if config.model.neurons else neuron_only()}
           if config.model.space == "gram" else {}),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "timings": {"train_s": result.trajectory.train_s},
        "resumed": result.resumed,
        "figures": list(figures),
        **summary(result),
        "snapshots": {name: [float(t) if np.isfinite(t) else None for t in np.atleast_1d(arrays["t"])]
                      for name, arrays in snapshots.items()},
        "system_code": system_code(config.system),
        **provenance(),
    }
    folder = RunFolder(staging)
    atomic_write_json(folder.config_file, config.to_dict())
    write_metrics(folder.metrics_file, result.table())
    write_state(folder.state_file("init"), _states(result, result.initial))
    write_state(folder.state_file("final"), _states(result, result.trajectory.final))
    for name, arrays in snapshots.items():
        write_arrays(staging / name, arrays)
    test = result.problem.test
    arrays = {"tokens": test.tokens, "labels": test.labels, "groups": test.groups}
    write_arrays(folder.test_set_file,
                 {k: np.asarray(v)[0] if len(result.seeds) == 1 else np.asarray(v) for k, v in arrays.items()})
    atomic_write_json(folder.manifest_file, manifest)
