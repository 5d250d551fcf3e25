"""What eq. (1)'s verifier reads of a run folder: each seed's series in time order (`seed_series`) and
its view for the checks (`seed_data`: series, saved states at the start, T1 and the end, the
configuration's scales, the events the flow located), read once per folder and `[verify]` settings
(`seed_views`)."""

from __future__ import annotations

import dataclasses
import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from coocflow.config import config_from_dict
from coocflow.storage import LoadedRun, load_run
from coocflow.storage.folders import RunFolder
from coocflow.verify.paper.checks import SeedData
from coocflow.verify.paper.saved import SavedState, seed_arrays, seed_states
from coocflow.verify.paper.scales import scales_of


def declared_t1(config: dict) -> float | None:
    """The paper's T1 = C_T1 / U0 declared by a run folder's config (`Config.paper_t1`), or None
    (older folders and settings that use the first all-correct time)."""
    c_t1 = config.get("verify", {}).get("c_t1", 0.0)
    if not c_t1 or config["init"]["scheme"] != "theory":
        return None
    return c_t1 / (config["init"]["c1"] ** 2 * config["model"]["m"])


def _snapshot_at(snapshots: dict | None, index: int, time: float, initial: dict) -> SavedState | None:
    """One seed's saved state at flow time `time` from state_snapshots.npz, with the data and the
    fixed arrays (tokens, labels, a, widths) of its initial state (None if it was not kept)."""
    if snapshots is None:
        return None
    times = np.ravel(snapshots["t"])
    hits = np.flatnonzero(np.isclose(times, time, rtol=1e-9, atol=0.0))
    if not hits.size:
        return None
    at = int(hits[0])
    ensemble = np.ndim(snapshots["valid"]) == 2 if "valid" in snapshots else False
    pick = (lambda v: v[at, index]) if ensemble else (lambda v: v[at])
    state = {k: np.asarray(pick(np.asarray(v))) for k, v in snapshots.items()
             if k not in ("t", "step", "valid") and np.ndim(v) >= 1 and np.shape(v)[0] == times.size}
    if "valid" in snapshots and not bool(pick(np.asarray(snapshots["valid"]))):
        return None
    return SavedState.of({**initial, **state, "t": np.asarray(times[at])})


def seed_series(run: LoadedRun) -> list[tuple[int, int, dict[str, np.ndarray]]]:
    """(index in the manifest's `seeds`, seed, its metrics in time order) for each seed with at least
    one valid observation: what `seed_data` builds on, and all a sweep's summary needs without checks."""
    metrics = run.metrics
    seeds = [int(s) for s in run.manifest.get("seeds", [run.manifest["seed"]])]
    # One stable sort by (seed, t) and a split, not a mask per seed: that cost rows x seeds (6 s for a
    # job of 1000 seeds); the rows of each seed come out in the order the per-seed sort gave them.
    if not len(metrics["t"]):
        return []
    if "seed" not in metrics:  # a folder written before the column: every row is each seed's
        order = np.argsort(np.asarray(metrics["t"]), kind="stable")
        return [(index, seed, {k: np.asarray(v)[order] for k, v in metrics.items()}) for index, seed in enumerate(seeds)]
    order = np.lexsort((np.asarray(metrics["t"]), np.asarray(metrics["seed"])))
    ordered = {k: np.asarray(v)[order] for k, v in metrics.items()}
    sorted_seeds = ordered["seed"]
    out = []
    for index, seed in enumerate(seeds):
        start, stop = np.searchsorted(sorted_seeds, seed, "left"), np.searchsorted(sorted_seeds, seed, "right")
        if start == stop:
            continue
        out.append((index, seed, {k: v[start:stop] for k, v in ordered.items()}))
    return out


def seed_data(run: LoadedRun) -> list[tuple[int, SeedData]]:
    """Each seed's series, saved states (initial, T1, final) and the configuration's scales.

    Seeds are matched to the stacked states through the manifest's `seeds` list; a seed with
    no valid observation (it diverged at t = 0) is skipped.
    """
    scales = scales_of(run.config)
    paper_t1 = declared_t1(run.config)
    initial_arrays = seed_arrays(run.state_init)
    per_seed = {"init": [SavedState.of(arrays) for arrays in initial_arrays], "final": seed_states(run.state_final),
                "T1": seed_states(run.state_t1) if run.state_t1 is not None else None}
    out = []
    for index, seed, series in seed_series(run):
        states = {name: (None if stack is None else stack[index]) for name, stack in per_seed.items()}
        if states["T1"] is not None and states["T1"].t is not None and not np.isfinite(states["T1"].t):
            states["T1"] = None
        if paper_t1 is not None:
            states["T1"] = _snapshot_at(run.state_snapshots, index, paper_t1, initial_arrays[index])
        entry = next((p for p in run.manifest.get("per_seed", []) if p.get("seed") == seed), {})
        located = {name: entry["events"][name] for name in entry.get("events_located", [])}
        out.append((seed, SeedData(series, scales.m, n=scales.n, L=scales.L, events=located,
                                   event_settings=run.manifest.get("event_settings", {}),
                                   A_init=states["init"].scores, A_final=states["final"].scores,
                                   states=states, scales=scales, t1_declared=paper_t1, config=run.config,
                                   loss_exponent=run.config.get("verify", {}).get("loss_exponent", 1.0),
                                   sandwich_c=run.config.get("verify", {}).get("sandwich_c", 0.0))))
    return out


def verify_settings(run: LoadedRun) -> dict:
    """The `[verify]` settings `run` is judged with: its config's, all defaults filled (a caller may have
    replaced them: a sweep judges the same runs at several C_T1)."""
    return config_from_dict(run.config).to_dict()["verify"]


@lru_cache(maxsize=2)
def _seed_views(folder: str, written_ns: int, verify_json: str) -> dict[int, SeedData]:
    """Every seed's view of a run folder read with the `[verify]` settings `verify_json` (keyed by when
    its manifest was written, so a rewritten folder is read again)."""
    run = load_run(Path(folder))
    run = dataclasses.replace(run, config={**run.config, "verify": json.loads(verify_json)})
    return {seed: data for seed, data in seed_data(run)}


def seed_views(folder: Path, verify: dict | None = None) -> dict[int, SeedData]:
    """Every seed's view of a run folder by seed (read once while the folder is unchanged), read with the
    `[verify]` settings `verify` (None: the folder's own); a seed with no valid observation (it diverged
    at t = 0) has none."""
    if verify is None:
        verify = RunFolder(folder).config().to_dict()["verify"]
    return _seed_views(str(folder), RunFolder(folder).manifest_file.stat().st_mtime_ns,
                       json.dumps(verify, sort_keys=True))
