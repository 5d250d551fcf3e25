"""Study folders: the resumable training `deep` and `markov` share.

A study trains each of its variants (`flow.system.integrate`)
with a checkpoint of its own (checkpoint-<variant>.npz), keeps a finished variant's series
(variant-<variant>.npz: JSON meta and arrays, no pickle), and holds config.json and study.json
from the start, so `coocflow run --resume` continues a killed study bit for bit.
"""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from coocflow.config import Config
from coocflow.errors import RunFolderError
from coocflow.flow.system import EnsembleTraining
from coocflow.flow.trajectory import Checkpoint
from coocflow.run import begin_run_folder, config_hashes
from coocflow.storage.atomic import atomic_write_bytes
from coocflow.storage.checkpoint import RunCheckpoint
from coocflow.storage.folders import StudyFolder, read_json_object

RESUMABLE_STUDIES = ("deep", "markov")
"""Studies whose folder checkpoints and continues with `coocflow run --resume`."""

VARIANT_FORMAT = 1


def divergence_lines(training: EnsembleTraining) -> list[str]:
    """One summary line per diverged seed: when and why it stopped."""
    return [f"seed {seed} diverged: {record['quantity']} became non-finite at t = {record['t']:.3g} "
            f"(step {record['step']}); its {record['observation']} observations before are kept and its row "
            "uses them, its later metrics are NaN"
            for seed, record in zip(training.seeds, training.divergence) if record is not None]


def begin_study_folder(out: Path, config: Config, study: str, force: bool = False) -> Path:
    """Create a resumable study folder holding only config.json and study.json (it appears
    whole, by one rename, or not at all), refusing an existing `out` unless `force`."""
    return begin_run_folder(out, config, force, extra={StudyFolder.STUDY: {"study": study, "format": VARIANT_FORMAT}})


def study_of_folder(folder: Path) -> str | None:
    """The resumable study a folder holds (its study.json), or None when it holds none."""
    path = StudyFolder(folder).study_file
    if not path.is_file():
        return None
    study = read_json_object(path).get("study")
    if study not in RESUMABLE_STUDIES:
        raise RunFolderError(f"{path}: names study {study!r}, not one of {', '.join(RESUMABLE_STUDIES)}")
    return study


def train_variant(config: Config, out: Path, variant: str,
                  train: Callable[[Checkpoint | None], EnsembleTraining]) -> EnsembleTraining:
    """`train(checkpoint)` a study's variant. In a study folder (study.json) it checkpoints into
    checkpoint-VARIANT.npz every `observe.checkpoint_every_s` and continues from one it finds;
    the finished series go to variant-VARIANT.npz (which replaces the checkpoint), so a study
    resumed after that does not train the variant again. Elsewhere it just trains."""
    out = Path(out)
    folder = StudyFolder(out)
    if not folder.study_file.is_file():
        return _without_weights(train(None))
    digests = config_hashes(config)
    if folder.variant_file(variant).is_file():
        return read_variant(out, variant, digests)
    checkpoint = RunCheckpoint(out, digests, config.observe.checkpoint_every_s)
    checkpoint.path = folder.checkpoint_file(variant)
    training = _without_weights(train(checkpoint))
    training.resumed = checkpoint.resumed_from
    write_variant(out, variant, digests[0], training)
    checkpoint.path.unlink(missing_ok=True)
    return training


def _without_weights(training: EnsembleTraining) -> EnsembleTraining:
    """The training with `weights_t` left out of its divergence records: a study keeps no weights."""
    training.divergence = [None if record is None else {k: v for k, v in record.items() if k != "weights_t"}
                           for record in training.divergence]
    return training


def write_variant(out: Path, variant: str, digest: str, training: EnsembleTraining) -> None:
    """variant-VARIANT.npz: a `meta` JSON string (config hash, seeds, status, divergence,
    training seconds, resumed), `steps`, `t` and `series_<name>`; no pickle."""
    meta = {"format": VARIANT_FORMAT, "config_hash": digest, "seeds": list(training.seeds),
            "status": training.status, "divergence": training.divergence, "train_s": training.train_s,
            "resumed": training.resumed}
    buffer = io.BytesIO()
    np.savez(buffer, meta=np.array(json.dumps(meta)), steps=training.steps, t=training.t,
             **{f"series_{name}": values for name, values in training.series.items()})
    atomic_write_bytes(StudyFolder(out).variant_file(variant), buffer.getvalue())


def _read_npz(path: Path, what: str) -> tuple[dict, dict[str, np.ndarray]]:
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
        if not isinstance(meta, dict) or meta.get("format") != VARIANT_FORMAT:
            raise ValueError
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        raise RunFolderError(f"{path}: not a readable {what}; delete it to train the variant again") from None
    return meta, arrays


def read_variant(out: Path, variant: str, digests: Sequence[str]) -> EnsembleTraining:
    """The finished variant `write_variant` kept, refused when written for another config (its hash
    not among `digests`, `run.config_hashes`)."""
    path = StudyFolder(out).variant_file(variant)
    meta, arrays = _read_npz(path, "finished variant")
    if meta.get("config_hash") not in digests:
        raise RunFolderError(f"{path}: was written for another config (config.json changed?); restore that "
                             "config.json or delete it to train the variant again")
    return EnsembleTraining(
        seeds=tuple(meta["seeds"]), steps=arrays.pop("steps"), t=arrays.pop("t"),
        series={k[len("series_"):]: v for k, v in arrays.items() if k.startswith("series_")},
        status=list(meta["status"]), divergence=list(meta["divergence"]), train_s=float(meta["train_s"]),
        resumed=meta["resumed"])


def study_record(out: Path) -> dict:
    """What a study folder's manifest says about its trained variants: per variant its seeds,
    status, divergence records, training seconds and where it resumed from; overall `status`
    ("completed", "diverged" when every seed did, else "partial")."""
    variants = {}
    for path in StudyFolder(out).variant_files():
        meta, _ = _read_npz(path, "finished variant")
        variants[path.stem[len("variant-"):]] = {key: meta[key] for key in
                                                 ("seeds", "status", "divergence", "train_s", "resumed")}
    statuses = {status for record in variants.values() for status in record["status"]}
    status = statuses.pop() if len(statuses) == 1 else "partial" if statuses else "completed"
    return {"status": status, "variants": variants}


def study_progress(out: Path) -> str:
    """How far an unfinished study folder got, per variant, in words."""
    parts = [f"{path.stem[len('variant-'):]} is trained (its figures and summary are still to write)"
             for path in StudyFolder(out).variant_files()]
    for path in StudyFolder(out).checkpoint_files():
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
            where = f"at observation {meta['next_obs']} of {meta['n_obs']}"
        except (OSError, ValueError, KeyError, zipfile.BadZipFile):
            where = "(unreadable)"
        parts.append(f"{path.stem[len('checkpoint-'):]} has a checkpoint {where}")
    return "; ".join(parts) if parts else "no checkpoint yet, so training restarts from t = 0"


def divergence_message(record: dict, out: Path) -> str | None:
    """One line about the seeds that diverged in a study, or None when none did."""
    failed = [(name, seed, div) for name, variant in record.get("variants", {}).items()
              for seed, div in zip(variant["seeds"], variant["divergence"]) if div is not None]
    if not failed:
        return None
    total = sum(len(variant["seeds"]) for variant in record["variants"].values())
    name, seed, div = failed[0]
    return (f"{len(failed)} of {total} seeds diverged ({name} seed {seed}: {div['quantity']} became non-finite at "
            f"t={div['t']:g}, last finite observation t={div['last_finite_t']}); observations before it are kept "
            f"in {out}; lower optimizer.lr")


def clear_study_progress(out: Path) -> None:
    """Remove a finished study folder's checkpoints, kept variants and lock file, and the
    temporary files of writes a kill interrupted (hidden, `.tmp` in their name)."""
    out = Path(out)
    leftovers = [p for p in out.iterdir() if p.name.startswith(".") and ".tmp" in p.name and p.is_file()]
    folder = StudyFolder(out)
    for path in [*folder.checkpoint_files(), *folder.variant_files(), out / ".lock", *leftovers]:
        path.unlink(missing_ok=True)
