"""Running a sweep's jobs: in this process, in local worker processes, or as Ray tasks.

Every executor calls the same `run_job`, which writes the job's run folder and table rows into
the store itself; the executors only schedule and report. A job that raises is recorded in
`failed/<id>.json` with its error line and the others go on.
"""

from __future__ import annotations

import multiprocessing
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from coocflow import interrupts
from coocflow.api import ensure_run, recorded_code, refuse_changed_code
from coocflow.config import config_from_dict
from coocflow.errors import ConfigError, CoocflowError
from coocflow.runtime import configure_jax
from coocflow.storage import atomic_write_json, load_run
from coocflow.storage.folders import RunFolder
from coocflow.sweep.spec import SweepSpec, program_key
from coocflow.sweep.store import SweepStore

FINALS = ("loss", "test_loss", "test_acc", "train_acc", "min_margin", "G_mu1", "G_mu2", "G_mu3",
          "A_mu1_mu2", "A_mu3_mu1", "p_q1_k2", "p_q1_k3")


def _axis_columns(axes: dict, rows: int) -> dict[str, np.ndarray]:
    return {key: np.full(rows, value) for key, value in axes.items()}


def event_columns(per_seed: list[dict]) -> dict[str, np.ndarray]:
    """`event.NAME` per seed: the event's time located between observations to the solver's
    tolerance (coocflow/flow/events.py), NaN where the seed never reached it; `event_on_grid.NAME`
    true where the time is the first observation at which it held instead (discrete training, or
    an event that held at the first observation after the start)."""
    names = sorted({name for p in per_seed for name in (p.get("events") or {})})
    columns = {}
    for name in names:
        times = [(p.get("events") or {}).get(name) for p in per_seed]
        columns[f"event.{name}"] = np.array([np.nan if t is None else t for t in times], dtype=np.float64)
        columns[f"event_on_grid.{name}"] = np.array(
            [t is not None and name not in (p.get("events_located") or ()) for t, p in zip(times, per_seed)])
    return columns


class _SeriesOnly(NamedTuple):
    series: dict[str, np.ndarray]


def summary_rows(run_folder: Path, job_id: str, axes: dict, checks: bool = True) -> dict[str, np.ndarray]:
    """One row per seed: status, phase boundaries (on the observation grid), the located event
    times (`event_columns`), final values and, with `checks`, each check's verdict."""
    from coocflow.verify.paper import phase_boundaries  # lazy: defers JAX, 1-3.6 s
    from coocflow.verify.paper.checks import run_checks  # lazy: defers JAX, 1-3.6 s
    from coocflow.verify.paper.reading import seed_data, seed_series  # lazy: defers JAX, 1-3.6 s

    run = load_run(run_folder)
    per_seed = {p["seed"]: p for p in run.manifest["per_seed"]}
    if "system" in run.manifest:
        return {**system_summary_rows(run.manifest, job_id), **_axis_columns(axes, len(per_seed))}
    rows = []
    # Without checks only the series are read: the saved states of `seed_data` cost 1.8 ms a seed.
    seeds = seed_data(run) if checks else [(seed, _SeriesOnly(series)) for _, seed, series in seed_series(run)]
    for seed, data in seeds:
        bounds = phase_boundaries(data.series)
        verdicts = ({f"check.{c.name}": (np.nan if c.passed is None else float(c.passed)) for c in run_checks(data)}
                    if checks else None)
        rows.append({"job": job_id, "seed": seed, "status": per_seed[seed]["status"],
                     "T1": np.nan if bounds["T1"] is None else bounds["T1"],
                     "T0.5": np.nan if bounds["T0.5"] is None else bounds["T0.5"],
                     "phase2_start": np.nan if bounds["phase2_start"] is None else bounds["phase2_start"],
                     "t_end": bounds["end"],
                     **{f"final.{k}": float(data.series[k][-1]) if k in data.series else np.nan  # observe.only
                        for k in FINALS},
                     **({"checks_passed": int(sum(v == 1.0 for v in verdicts.values())), **verdicts}
                        if verdicts is not None else {})})
    columns = {k: np.array([r[k] for r in rows]) for k in rows[0]}
    return {**columns, **event_columns([per_seed[seed] for seed in columns["seed"].tolist()]), **_axis_columns(axes, len(rows))}


def system_summary_rows(manifest: dict, job_id: str) -> dict[str, np.ndarray]:
    """One row per seed of a system's run (coocflow/run/base.py): status, the time it reached,
    and the final value of every scalar observable (NaN where a seed has none)."""
    per_seed = manifest["per_seed"]
    names = sorted({key for p in per_seed if p["final"] for key in p["final"] if key != "t"})
    return {"job": np.array([job_id] * len(per_seed)), "seed": np.array([p["seed"] for p in per_seed]),
            "status": np.array([p["status"] for p in per_seed]),
            "t_end": np.array([p["final"]["t"] if p["final"] else np.nan for p in per_seed]),
            **{f"final.{name}": np.array([p["final"].get(name, np.nan) if p["final"] else np.nan for p in per_seed])
               for name in names}, **event_columns(per_seed)}


def run_job(root: str, job: dict) -> dict:
    """Train one job (all its seeds), write its run folder, then its metrics rows, then its
    summary rows (the `done` marker). Never raises: a failure is recorded and returned. `traced`:
    the programs this job traced (0 where an earlier job of the same process traced them)."""
    configure_jax()  # float64 and the compilation cache in worker processes

    from coocflow.flow.discrete import TRACE_COUNTS  # lazy: defers JAX, 1-3.6 s

    store, job_id, start = SweepStore(Path(root)), job["id"], time.perf_counter()
    traced_before = sum(TRACE_COUNTS.values())
    try:
        config, folder = config_from_dict(job["config"]), store.job_folder(job_id)
        outcome = ensure_run(config, folder)
        folder, metrics = outcome.folder, outcome.metrics
        store.write_table("metrics", job_id, {"job": np.full(len(metrics["t"]), job_id), **metrics,
                                              **_axis_columns(job["axes"], len(metrics["t"]))})
        store.write_table("summary", job_id, summary_rows(folder, job_id, job["axes"], job.get("checks", True)))
        store.failed_file(job_id).unlink(missing_ok=True)
        return {"id": job_id, "state": "done", "seconds": time.perf_counter() - start,
                "traced": sum(TRACE_COUNTS.values()) - traced_before}
    except Exception as err:  # a job's failure must not stop the sweep
        line = str(err) if isinstance(err, CoocflowError) else f"{type(err).__name__}: {err}"

        atomic_write_json(store.failed_file(job_id), {"id": job_id, "error": line.splitlines()[0] if line else type(err).__name__,
                                                      "traceback": traceback.format_exc(limit=8)})
        return {"id": job_id, "state": "failed", "error": line, "seconds": time.perf_counter() - start}


def run_folder_job(root: str, job: dict) -> dict:
    """Train one run of a `verify --scaling` sweep (`verify.scaling.ScalingRun.job`) into its folder,
    resuming or reusing it as `api.ensure_run` decides. Never raises: a failure is returned, with its line."""
    configure_jax()

    start = time.perf_counter()
    try:
        outcome = ensure_run(config_from_dict(job["config"]), Path(job["folder"]), job.get("accept_changed_code", False))
        return {"id": job["id"], "state": "done", "how": outcome.how, "seconds": time.perf_counter() - start}
    except Exception as err:  # one run's failure is reported, not raised in a remote task
        line = str(err) if isinstance(err, CoocflowError) else f"{type(err).__name__}: {err}"
        return {"id": job["id"], "state": "failed", "error": line.splitlines()[0] if line else type(err).__name__,
                "seconds": time.perf_counter() - start}


Report = Callable[[dict], None]
"""Called with each finished job's result; the CLI's progress display listens here."""
Started = Callable[[str], None]


def refuse_changed_jobs(spec: SweepSpec, store: SweepStore) -> None:
    """One line, before anything runs, when a finished job's System code differs from what its run
    recorded: its results would stand beside those of the new code (`--accept-changed-code` keeps them)."""
    current: dict[str, dict] = {}  # each System's code read once, not once per job
    for job in spec.jobs:
        if store.state(job.id) == "done":
            folder = store.job_folder(job.id)
            recorded = recorded_code(RunFolder(folder))
            if recorded and job.config.system not in current:
                from coocflow.systems.registry import system_code  # lazy: defers JAX, 1-3.6 s

                current[job.config.system] = system_code(job.config.system)
            refuse_changed_code(folder, recorded, job.config.system,
                                "keep its results in this sweep (or sweep into a new --out)",
                                now=current.get(job.config.system))


def pending_jobs(spec: SweepSpec, store: SweepStore, retry_failed: bool) -> list[dict]:
    """The jobs left to run, those that share a compiled program (`program_key`) next to each other,
    so that a worker runs them one after another on the program it traced once."""
    wanted = ("pending", "failed") if retry_failed else ("pending",)
    todo = [job for job in spec.jobs if store.state(job.id) in wanted]
    first_of: dict[str, int] = {}
    keys = [first_of.setdefault(program_key(job.config), len(first_of)) for job in todo]
    return [{**job.to_dict(), "checks": spec.checks} for _, job in sorted(zip(keys, todo), key=lambda pair: pair[0])]


def run_in_process(root: Path, jobs: list[dict], report: Report, started: Started) -> None:
    for job in jobs:
        started(job["id"])
        report(run_job(str(root), job))


def run_in_workers(root: Path, jobs: list[dict], workers: int, report: Report, started: Started) -> None:
    """Jobs in `workers` spawned processes (JAX does not survive fork), each job once."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        queue, running = list(jobs), {}
        while queue or running:
            while queue and len(running) < workers:
                job = queue.pop(0)
                running[pool.submit(run_job, str(root), job)] = job
                started(job["id"])
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                job = running.pop(future)
                try:
                    report(future.result())
                except Exception as err:  # the worker process itself died
                    report({"id": job["id"], "state": "failed", "error": f"worker died: {err}"})


def require_ray():
    """The `ray` module, or a one-line error saying how to install it (`coocflow sweep --ray` asks
    for it before creating anything)."""
    try:
        import ray  # lazy: optional extra, imported where used
    except ImportError:
        raise ConfigError("--ray: Ray is not installed; pip install 'coocflow[ray]'") from None
    return ray


def run_on_ray(root: Path, jobs: list[dict], address: str, workers: int, report: Report, started: Started,
               task: Callable[[str, dict], dict] = run_job) -> None:
    """The same jobs as Ray tasks (`task`: a sweep's `run_job`, or a `verify --scaling` sweep's `run_folder_job`);
    `address` is `local` (start a Ray instance here with `workers` CPUs), `auto` (the running
    cluster) or a cluster address. The tasks write into the folder themselves, so it must be on a
    filesystem every node sees."""
    ray = require_ray()
    if address == "local":
        # The local instance's processes inherit this environment (PYTHONPATH, JAX's cache folder): a
        # runtime_env repeating it cost 1.5 s more before the first task ran (measured, 2 cores).
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    interrupts.reclaim()  # Ray's driver installs a SIGTERM handler that aborts: ours stops Ray's processes
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(task)
        pending = {}
        for job in jobs:
            pending[remote.remote(str(root), job)] = job
            started(job["id"])
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1)
            for ref in finished:
                job = pending.pop(ref)
                try:
                    report(ray.get(ref))
                except Exception as err:  # the task's process died
                    report({"id": job["id"], "state": "failed", "error": f"Ray task failed: {type(err).__name__}"})
    finally:
        ray.shutdown()
