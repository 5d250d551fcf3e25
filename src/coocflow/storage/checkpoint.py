"""Checkpoints of a run in progress, and the in-progress run folder that holds them.

While `coocflow run` trains, its output folder holds `config.json` and, after the first chunk
boundary past `observe.checkpoint_every_s` seconds, `checkpoint.npz`: the driver's whole state
(weights, optimizer state, step counter or flow time, each seed's last finite weights, the
observations so far, divergence bookkeeping, solver statistics). The seeds and the step counter
fix every random draw, so nothing else is needed to continue. The file is replaced atomically,
so a kill at any moment leaves either the previous checkpoint or the new one. `manifest.json`
is written last, with the finished run, which removes the checkpoint.

The checkpoint is one npz (no pickle): a `meta` string of JSON, then `carry_<i>`, `good_<i>`
(pytree leaves in JAX's flattening order), `series_<name>`, `extra_<key>` (chunks x seeds),
`alive`, `bad_index` and `good_obs`.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from coocflow.errors import RunFolderError
from coocflow.storage.atomic import atomic_write_bytes
from coocflow.storage.folders import RunFolder


@dataclass
class DriveState:
    """Everything `drive` holds at a chunk boundary, so a run can continue from it exactly.

    `carry` is the integrator's state (weights, optimizer state, step counter or flow time);
    `good_params` each seed's last finite weights at a chunk boundary and `good_obs` the
    observation they belong to (0: the initial weights); `series` the observations so far, shape
    (seeds, next_obs); `extras` one dict of per-seed outputs (solver statistics) per chunk done.
    A checkpoint is this state written to disk (`RunCheckpoint`); it lives here, below the
    driver (coocflow.flow.trajectory), so that storage never imports the flow.
    """

    next_obs: int
    carry: Any
    good_params: Any
    good_obs: np.ndarray
    alive: np.ndarray
    bad_index: np.ndarray
    bad_quantity: list[str | None]
    series: dict[str, np.ndarray]
    extras: list[dict[str, np.ndarray]]

    @classmethod
    def start(cls, carry: Any, params_of: Callable[[Any], Any], n_seeds: int) -> "DriveState":
        return cls(next_obs=0, carry=carry, good_params=params_of(carry), good_obs=np.zeros(n_seeds, dtype=np.int64),
                   alive=np.ones(n_seeds, dtype=bool),
                   bad_index=np.full(n_seeds, -1), bad_quantity=[None] * n_seeds, series={}, extras=[])


CHECKPOINT_FILE = RunFolder.CHECKPOINT
CHECKPOINT_FORMAT = RunFolder.CHECKPOINT_FORMAT
LOCK_FILE = ".lock"


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on a run folder while a process trains into it, so a second
    `--resume` of the same folder is refused instead of racing; the OS drops the lock when the
    process dies, even by SIGKILL, so a stale lock never blocks a resume."""
    path = Path(folder) / LOCK_FILE
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            raise RunFolderError(f"{folder}: another coocflow process (pid {holder}) is training this run; "
                                 "wait for it to finish or stop it, then resume") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def _flat(tree, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}_{i}": np.asarray(leaf) for i, leaf in enumerate(jax.tree.leaves(tree))}


class AddedLater:
    """Marks a part of a driver's carry that checkpoints written before it existed lack: such a
    part must come last in the carry, and a checkpoint without its leaves restores with the
    part as the run starts it (`flow.events.EventCarry`)."""


def _later_leaves(template) -> int:
    """How many trailing leaves of `template` belong to `AddedLater` parts at its end."""
    parts = jax.tree.leaves(template, is_leaf=lambda x: isinstance(x, AddedLater))
    count = 0
    for part in reversed(parts):
        if not isinstance(part, AddedLater):
            break
        count += len(jax.tree.leaves(part))
    return count


def _unflat(arrays: dict[str, np.ndarray], prefix: str, template, path: Path):
    leaves, treedef = jax.tree.flatten(template)
    saved = [arrays.get(f"{prefix}_{i}") for i in range(len(leaves))]
    later = _later_leaves(template)
    first_missing = len(leaves) - later
    if later and f"{prefix}_{first_missing}" not in arrays and all(a is not None for a in saved[:first_missing]):
        saved = saved[:first_missing] + [np.asarray(leaf) for leaf in leaves[first_missing:]]
    if f"{prefix}_{len(leaves)}" in arrays or any(a is None for a in saved):
        raise RunFolderError(f"{path}: checkpoint does not match this run's model or optimizer; "
                             "delete it to restart the run from t = 0")
    for leaf, array in zip(leaves, saved):
        if np.shape(leaf) != array.shape or np.asarray(leaf).dtype != array.dtype:
            raise RunFolderError(f"{path}: checkpoint holds a {array.dtype}{list(array.shape)} array where this run "
                                 f"has {np.asarray(leaf).dtype}{list(np.shape(leaf))}; delete it to restart from t = 0")
    return jax.tree.unflatten(treedef, [jnp.asarray(a) if isinstance(leaf, jax.Array) else a
                                        for leaf, a in zip(leaves, saved)])


def read_checkpoint_meta(folder: Path) -> dict | None:
    """The JSON header of a folder's checkpoint, or None when it has none (`RunFolder.checkpoint_meta`)."""
    return RunFolder(folder).checkpoint_meta()


def _read(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if not {"alive", "bad_index", "good_obs"} <= set(arrays):
            raise KeyError("bookkeeping arrays")
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        raise RunFolderError(f"{path}: not a readable checkpoint; delete it to restart the run from t = 0") from None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise RunFolderError(f"{path}: checkpoint format {meta.get('format') if isinstance(meta, dict) else None!r} "
                             f"is not {CHECKPOINT_FORMAT}; delete it to restart the run from t = 0")
    return meta, arrays


class RunCheckpoint:
    """Saves the driver's state into `folder` at most every `every_s` wall seconds (0: at every
    chunk boundary) and restores it, refusing a checkpoint written for another config.

    `config_hashes` are the run's config hash, which a save records, then any other hash a
    checkpoint of the same run may carry (one written before config format 2); `code` is the
    System's `systems.registry.system_code`, which a save records for `--resume` to compare."""

    def __init__(self, folder: Path, config_hashes: Sequence[str], every_s: float, code: dict | None = None):
        self.path = Path(folder) / CHECKPOINT_FILE
        self.code = code
        self.config_hash, *self.earlier_hashes = config_hashes
        self.every_s = every_s
        self.started = time.perf_counter()
        self.last_save = self.started
        self.elapsed_before = 0.0
        self.resumed_from: dict | None = None

    @property
    def elapsed_s(self) -> float:
        """Training wall time over all sessions of this run, this one up to now included."""
        return self.elapsed_before + time.perf_counter() - self.started

    def save(self, state: DriveState, n_obs: int, now: bool = False) -> None:
        """Write `state` if `every_s` has passed since the last write (or `now`, on interrupt);
        a finished or wholly diverged run needs none, and neither does one that has not started."""
        due = now or time.perf_counter() - self.last_save >= self.every_s
        if not due or state.next_obs in (0, n_obs) or not state.alive.any():
            return
        extra_keys = sorted(state.extras[0]) if state.extras else []
        meta = {"format": CHECKPOINT_FORMAT, "config_hash": self.config_hash, "next_obs": state.next_obs,
                "n_obs": n_obs, "chunks_done": len(state.extras), "bad_quantity": state.bad_quantity,
                "elapsed_s": self.elapsed_s, "saved_unix": time.time(),
                **({"system_code": self.code} if self.code else {})}
        arrays = {"meta": np.array(json.dumps(meta)), "alive": state.alive, "bad_index": state.bad_index,
                  "good_obs": state.good_obs,
                  **_flat(state.carry, "carry"), **_flat(state.good_params, "good"),
                  **{f"series_{k}": v for k, v in state.series.items()},
                  **{f"extra_{k}": np.stack([e[k] for e in state.extras]) for k in extra_keys}}
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)
        atomic_write_bytes(self.path, buffer.getvalue())
        self.last_save = time.perf_counter()

    def restore(self, initial: DriveState) -> DriveState:
        """The saved state, or `initial` when there is no checkpoint yet."""
        if not self.path.is_file():
            return initial
        meta, arrays = _read(self.path)
        if meta.get("config_hash") not in (self.config_hash, *self.earlier_hashes):
            raise RunFolderError(f"{self.path}: checkpoint was written for another config (config.json changed?); "
                                 "restore that config.json or delete the checkpoint to restart from t = 0")
        series = {k[len("series_"):]: v for k, v in arrays.items() if k.startswith("series_")}
        extra = {k[len("extra_"):]: v for k, v in arrays.items() if k.startswith("extra_")}
        chunks = int(meta["chunks_done"])
        self.elapsed_before = float(meta["elapsed_s"])
        self.resumed_from = {"observation": int(meta["next_obs"]), "of": int(meta["n_obs"]),
                             "train_s_before": self.elapsed_before}
        return DriveState(
            next_obs=int(meta["next_obs"]),
            carry=_unflat(arrays, "carry", initial.carry, self.path),
            good_params=_unflat(arrays, "good", initial.good_params, self.path),
            good_obs=arrays["good_obs"].astype(np.int64),
            alive=arrays["alive"].astype(bool), bad_index=arrays["bad_index"].astype(initial.bad_index.dtype),
            bad_quantity=list(meta["bad_quantity"]), series=series,
            extras=[{k: v[i] for k, v in extra.items()} for i in range(chunks)])
