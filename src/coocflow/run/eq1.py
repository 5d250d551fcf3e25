"""eq. (1)'s runs: `Eq1TrainedRun`, the `TrainedRun` of `Eq1System` (its `run_type`). Its folder adds to the
generic one what the paper's system keeps: the states under the golden-file keys (with the training
set), the weights at T1 (`state_t1.npz`) and at `observe.snapshots`, the test set, the headline T1
per seed with health warnings in the manifest, and Figure 1 with the overview instead of
training.png (docs/definitions.md, "TrainedRun folders"). The flow, the observables and the events are
the System's, through the same `flow.system.integrate` as every System.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import jax
import numpy as np

from coocflow.config import Config
from coocflow.data import Dataset
from coocflow.flow import (EnsembleTraining, event_record, in_threads, integrate, observation_steps, observation_times,
                           stack_seeds)
from coocflow.model import Transformer
from coocflow.model.state import State
from coocflow.observables import Problem
from coocflow.observables.ensemble import first_time_all_correct
from coocflow.observables.registry import neuron_only
from coocflow.run.base import TIME_CONVENTIONS, Figures, TrainedRun, checkpoint_in, config_hash
from coocflow.storage import FORMAT_VERSION
from coocflow.storage.folders import RunFolder
from coocflow.storage.provenance import provenance
from coocflow.storage.run_folder import state_file_arrays
from coocflow.systems.eq1 import Eq1System, build_model, build_problem, gram_source, initial_state, seed_keys

INIT_NOTES = {
    "kaiming": "kaiming: uniform(-c/sqrt(fan_in), c/sqrt(fan_in)), fan-in d for W_Q, W_K, W_V (c = c0) and m for W (c = c1); a uniform on {+1,-1}",
    "theory": "theory (Condition 1): W_Q, W_K, W_V ~ N(0, (c0/sqrt(L m))^2), W ~ N(0, (c1/sqrt(m1))^2); a uniform on {+1,-1}",
}
stack = stack_seeds
"""Stack pytrees on a new leading (seed) axis (`flow.stack_seeds`)."""


def build_ensemble(config: Config) -> tuple[Transformer, Problem]:
    """Initial weights and problems of every seed, stacked on a leading seed axis."""
    seeds = config.seed_list
    if len(seeds) == 1:  # its key directly: a vmapped derivation would compile a program for one seed
        models = [build_model(config, seeds[0])]
    else:
        # One thread per core: a seed's draw is a few large operations that release the GIL (at m = 75281
        # with the neurons, 20 M Gaussians and their Grams: 8 seeds 12.3 -> 8.8 s on 2 cores, the same bits).
        models = in_threads(functools.partial(initial_state, config), list(seed_keys(seeds)))
    return stack(models), stack([build_problem(config, s, host=True) for s in seeds])


def unstack(tree, index: int):
    return jax.tree.map(lambda leaf: leaf[index], tree)


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


@dataclass
class Eq1TrainedRun(TrainedRun):
    """A trained ensemble of eq. (1): the generic run, its problems (training and test sets per
    seed) and T1 per seed (the first all-correct observed time)."""

    problem: Problem = None
    t1: list[float | None] = None

    @classmethod
    def train(cls, config: Config, progress: Callable[[float], None] | None = None,
              checkpoint_folder: Path | None = None) -> "Eq1TrainedRun":
        """Build every seed's problem and initial weights and follow the flow as configured, observed
        on `observation_grid` (the paper's T1 and `observe.snapshots` joined in)."""
        model, problem = build_ensemble(config)
        grid, snapshot_obs = observation_grid(config)
        system = Eq1System.from_config(config)
        training = integrate(system, config, checkpoint_in(checkpoint_folder, config), progress, grid, snapshot_obs,
                             ensemble=(model, problem.train, problem.test))
        t1 = [first_time_all_correct(training.t, training.series["min_margin"][i]) for i in range(training.n_seeds)]
        return cls(config, system, training, problem, t1)

    @functools.cached_property
    def kept_weights(self) -> dict[str, dict[str, np.ndarray]]:
        """`snapshot_files`, built once: both the folder's files and its manifest read them."""
        return snapshot_files(self)

    @property
    def trajectory(self) -> EnsembleTraining:
        """The ensemble's training (`TrainedRun.training`), by the name eq. (1)'s code reads it."""
        return self.training

    @property
    def initial(self) -> State:
        """The seed-stacked initial weights (or Grams)."""
        return self.training.initial

    @property
    def series(self) -> dict[str, np.ndarray]:
        """Series of the first seed, 1-D over observed times (its valid observations only)."""
        return self.seed_series(0)

    def seed_series(self, index: int) -> dict[str, np.ndarray]:
        tr = self.training
        keep = tr.kept(index)
        return {"t": tr.t[:keep], "step": tr.steps[:keep],
                **{k: v[index, :keep] for k, v in tr.series.items()}}

    def table(self) -> dict[str, np.ndarray]:
        """The metrics table: one row per (seed, observed time), valid observations only."""
        rows = [{"seed": np.full(len(s["t"]), seed, dtype=np.int64), **s}
                for seed, s in ((seed, self.seed_series(i)) for i, seed in enumerate(self.seeds))]
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}

    def files(self) -> dict[str, dict[str, np.ndarray]]:
        """state_init.npz and state_final.npz under the golden-file keys (Grams under the Gram keys),
        the kept weights (`snapshot_files`), then the test set."""
        files = {RunFolder.STATE_INIT: state_file_arrays(_states(self, self.initial)),
                 RunFolder.STATE_FINAL: state_file_arrays(_states(self, self.training.final)), **self.kept_weights}
        test = self.problem.test
        arrays = {"tokens": test.tokens, "labels": test.labels, "groups": test.groups}
        files[RunFolder.TEST_SET] = {k: np.asarray(v)[0] if len(self.seeds) == 1 else np.asarray(v)
                                     for k, v in arrays.items()}
        return files

    def final_arrays(self) -> dict[str, np.ndarray]:
        return _states(self, self.training.final)

    def manifest(self, figures: tuple[str, ...]) -> dict:
        config = self.config
        snapshots = self.kept_weights
        return {
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
            "timings": {"train_s": self.training.train_s},
            "resumed": self.resumed,
            "figures": list(figures),
            **summary(self),
            "snapshots": {name: [float(t) if np.isfinite(t) else None for t in np.atleast_1d(arrays["t"])]
                          for name, arrays in snapshots.items()},
            "system_code": self.code(),
            **provenance(),
        }

    def figures_drawn(self, figures: Figures) -> Figures:
        """None for a lean run (`observe.only`): Figure 1 and the overview read observables it did not
        record."""
        return False if self.config.observe.only else figures

    @classmethod
    def figure_names(cls, figures: Figures) -> tuple[str, ...]:
        """figure1 in each format asked for (True: PNG), then overview.png."""
        if not figures:
            return ()
        formats = ("png",) if figures is True else tuple(figures)
        return tuple(f"figure1.{fmt}" for fmt in formats) + ("overview.png",)

    def draw_figures(self, folder: Path, figures: Figures) -> list[Path]:
        """Figure 1 and the overview from the run in memory."""
        from coocflow.plots import SeriesView, write_run_figures  # lazy: defers Matplotlib, 0.5 s

        if not figures:
            return []
        formats = ("png",) if figures is True else tuple(figures)
        view = SeriesView(self.training.t, self.training.series, self.t1)
        return write_run_figures(view, folder, title=self.title(self.config), formats=formats)

    @classmethod
    def redraw(cls, folder: Path) -> list[Path]:
        import pyarrow.parquet as pq  # lazy: defers pyarrow, 0.3 s

        from coocflow.plots import SeriesView, write_run_figures  # lazy: defers Matplotlib, 0.5 s

        run = RunFolder(folder)
        table = pq.read_table(run.metrics_file)
        columns = {name: table.column(name).to_numpy() for name in table.column_names}
        formats = tuple(name.split(".", 1)[1] for name in run.manifest()["figures"] if name.startswith("figure1."))
        return write_run_figures(SeriesView.from_metrics(columns), run.path, title=cls.title(run.config()),
                                 formats=formats)

    @classmethod
    def plot(cls, columns: dict[str, np.ndarray], manifest: dict, title: str, kind: str = "figure1"):
        """`figure1` (the paper's Figure 1) or `overview`, from the metrics table."""
        from coocflow.plots import SeriesView  # lazy: defers Matplotlib, 0.5 s
        from coocflow.plots.figures import figure1, overview  # lazy: defers Matplotlib, 0.5 s

        kind = kind or "figure1"
        if kind not in ("figure1", "overview"):
            raise ValueError(f"kind must be figure1 or overview (got {kind!r}); or pass columns=[...]")
        view = SeriesView.from_metrics(columns)
        return figure1(view, title) if kind == "figure1" else overview(view, title)

    @classmethod
    def title(cls, c: Config) -> str:
        seeds = c.seed_list
        seed_text = f"seed={seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds (median, 10-90% band)"
        if c.is_flow:
            method = f"flow ({c.solver.name}, rtol={c.solver.rtol:g}) to t={c.t_end:g}"
        else:
            method = (f"{c.train.method} lr={c.optimizer.lr:g}"
                      + (f" batch={c.train.batch_size}" if c.train.batch_size else ""))
        return (f"{c.name}: n={c.data.n}, L={c.data.L}, d={c.data.d} ({c.data.random_tokens}), m={c.model.m}, "
                f"m1={c.model.m1}, init={c.init.scheme} (c0={c.init.c0:g}, c1={c.init.c1:g}), {method}, {seed_text}")


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


def health_warnings(result: Eq1TrainedRun) -> list[str]:
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


def summary(result: Eq1TrainedRun) -> dict:
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
                         "final": {k: float(s[k][-1]) for k in FINAL_KEYS if k in s} if len(s["loss"]) else None,
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
        "final": ({k: float(np.median([p["final"][k] for p in finished])) for k in finished[0]["final"]}
                  if finished else None),
        "per_seed": per_seed,
        "solver_stats": tr.stats,
        **({"event_settings": tr.event_settings} if tr.event_settings else {}),
        "warnings": health_warnings(result),
    }


def _states(result: Eq1TrainedRun, model: State) -> dict[str, np.ndarray]:
    """Golden-key arrays; a leading seed axis only for ensembles of more than one seed."""
    arrays = state_arrays(model, result.problem.train)
    if len(result.seeds) == 1:
        arrays = {k: v if k in ("m", "m1") else v[0] for k, v in arrays.items()}
    return arrays




def snapshot_files(result: Eq1TrainedRun) -> dict[str, dict[str, np.ndarray]]:
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


