"""Every kind of folder coocflow writes, as a type that owns its file names.

`RunFolder` (a run of eq. (1) or of another system; format in storage/run_folder.py),
`StudyFolder` (a study: summary.md and its variants), `SweepFolder` (coocflow/sweep/store.py),
`ScalingFolder` (a width sweep) and `ComparisonFolder` (`coocflow compare`). Each is a frozen
dataclass around the folder's path with the paths of its files as properties, so no other module
spells a file name; `open_folder` tells which kind a folder is from what it holds, and `open`
refuses a folder that is not (yet) of its kind with one line saying what it is instead.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Union

import numpy as np

from coocflow.config import Config, config_from_dict, current_record
from coocflow.errors import RunFolderError


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from a file, or one RunFolderError line saying what is wrong with it."""
    try:
        record = json.loads(Path(path).read_text())
    except OSError as err:
        raise RunFolderError(f"{path}: cannot read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise RunFolderError(f"{path}: not valid JSON (line {err.lineno}); re-run to regenerate it") from None
    except UnicodeDecodeError:
        raise RunFolderError(f"{path}: not UTF-8 text, so not JSON; re-run to regenerate it") from None
    if not isinstance(record, dict):
        raise RunFolderError(f"{path}: expected a JSON object, got {type(record).__name__}; re-run to regenerate it")
    return record


@dataclass(frozen=True)
class _Folder:
    path: Path

    CONFIG: ClassVar[str] = "config.json"
    MANIFEST: ClassVar[str] = "manifest.json"
    REPORT: ClassVar[str] = "report.html"

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def config_file(self) -> Path:
        return self.path / self.CONFIG

    @property
    def manifest_file(self) -> Path:
        return self.path / self.MANIFEST

    @property
    def report_file(self) -> Path:
        return self.path / self.REPORT

    def manifest(self) -> dict[str, Any]:
        return read_json_object(self.manifest_file)

    def config_record(self) -> dict[str, Any]:
        """config.json as a dict in the current config format (what `coocflow compare` and `show`
        print); a format-1 record comes with its keys moved (`config.current_record`)."""
        return current_record(read_json_object(self.config_file))

    def config(self) -> Config:
        """config.json, validated into a `Config`."""
        return config_from_dict(self.config_record())


@dataclass(frozen=True)
class RunFolder(_Folder):
    """A run folder: config.json from the start, the rest when the run is complete."""

    METRICS: ClassVar[str] = "metrics.parquet"
    STATE_INIT: ClassVar[str] = "state_init.npz"
    STATE_FINAL: ClassVar[str] = "state_final.npz"
    STATE_T1: ClassVar[str] = "state_t1.npz"
    SNAPSHOTS: ClassVar[str] = "state_snapshots.npz"
    TEST_SET: ClassVar[str] = "test_set.npz"
    CHECKPOINT: ClassVar[str] = "checkpoint.npz"
    CHECKPOINT_FORMAT: ClassVar[int] = 1
    VERIFY_JSON: ClassVar[str] = "verify.json"
    VERIFY_MD: ClassVar[str] = "verify.md"
    VERIFY_PNG: ClassVar[str] = "verify.png"
    REQUIRED: ClassVar[tuple[str, ...]] = (_Folder.CONFIG, _Folder.MANIFEST, METRICS, STATE_INIT, STATE_FINAL)

    @property
    def metrics_file(self) -> Path:
        return self.path / self.METRICS

    @property
    def checkpoint_file(self) -> Path:
        return self.path / self.CHECKPOINT

    def state_file(self, which: str) -> Path:
        """`init`, `final`, `t1` or `snapshots`."""
        return self.path / {"init": self.STATE_INIT, "final": self.STATE_FINAL, "t1": self.STATE_T1,
                            "snapshots": self.SNAPSHOTS}[which]

    @property
    def test_set_file(self) -> Path:
        return self.path / self.TEST_SET

    def verify_file(self, suffix: str) -> Path:
        """verify.json, verify.md or verify.png (`suffix` json, md or png)."""
        return self.path / {"json": self.VERIFY_JSON, "md": self.VERIFY_MD, "png": self.VERIFY_PNG}[suffix]

    @property
    def in_progress(self) -> bool:
        """Begun (config.json) and not finished (no manifest.json): resumable."""
        return self.config_file.is_file() and not self.manifest_file.exists()

    @property
    def complete(self) -> bool:
        return self.config_file.is_file() and self.manifest_file.is_file()

    def missing(self) -> list[str]:
        """The files a complete run folder has and this one lacks."""
        return [name for name in self.REQUIRED if not (self.path / name).is_file()]

    def checkpoint_meta(self) -> dict | None:
        """The JSON header of the run's checkpoint (where it stands: `next_obs` of `n_obs`, ...), or
        None when it has none; read without the arrays (`storage.checkpoint` restores those)."""
        path = self.checkpoint_file
        if not path.is_file():
            return None
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
            raise RunFolderError(f"{path}: not a readable checkpoint; delete it to restart the run from t = 0") from None
        if not isinstance(meta, dict) or meta.get("format") != self.CHECKPOINT_FORMAT:
            raise RunFolderError(f"{path}: checkpoint format {meta.get('format') if isinstance(meta, dict) else None!r} "
                                 f"is not {self.CHECKPOINT_FORMAT}; delete it to restart the run from t = 0")
        return meta

    def system(self) -> str:
        """What the run trained: `eq1` (eq. (1)), or the system its manifest names."""
        return self.manifest().get("system", "eq1")

    @classmethod
    def open(cls, path: Path) -> "RunFolder":
        """The complete run folder at `path` (a directory), or one RunFolderError line saying what
        it is instead: a run in progress (and how to resume it), a width sweep, or what it lacks."""
        folder = cls(path)
        missing = folder.missing()
        if missing and folder.in_progress:
            where = "before its first checkpoint"
            meta = folder.checkpoint_meta()
            if meta is not None:
                where = f"with a checkpoint at observation {meta['next_obs']} of {meta['n_obs']}"
            raise RunFolderError(f"{path}: a run in progress or interrupted ({where}); "
                                 f"continue it with `coocflow run --resume {path}`")
        if missing and kind_of(path) is ScalingFolder:
            scaling = ScalingFolder(path)
            raise RunFolderError(f"{path}: a width sweep, not a run folder; its widths are the run folders in "
                                 f"{scaling.runs}, its results {scaling.MARKDOWN} and {scaling.REPORT} "
                                 f"(`coocflow report {path}`)")
        if missing:
            raise RunFolderError(f"{path}: not a complete run folder (missing {', '.join(missing)})")
        return folder


@dataclass(frozen=True)
class StudyFolder(_Folder):
    """A study: config.json, manifest.json (with `study`), summary.md and its figures; deep and
    markov also hold study.json from the start and, while they train, each variant's checkpoint
    and finished series (checkpoint-VARIANT.npz, variant-VARIANT.npz)."""

    STUDY: ClassVar[str] = "study.json"
    SUMMARY: ClassVar[str] = "summary.md"
    METRICS: ClassVar[str] = "metrics.parquet"

    @property
    def study_file(self) -> Path:
        return self.path / self.STUDY

    @property
    def summary_file(self) -> Path:
        return self.path / self.SUMMARY

    @property
    def metrics_file(self) -> Path:
        return self.path / self.METRICS

    def variant_file(self, variant: str) -> Path:
        return self.path / f"variant-{variant}.npz"

    def checkpoint_file(self, variant: str) -> Path:
        return self.path / f"checkpoint-{variant}.npz"

    def variant_files(self) -> list[Path]:
        return sorted(self.path.glob("variant-*.npz"))

    def checkpoint_files(self) -> list[Path]:
        return sorted(self.path.glob("checkpoint-*.npz"))


@dataclass(frozen=True)
class SweepFolder(_Folder):
    """A sweep (coocflow/sweep/store.py): sweep.json, jobs/<id>/ run folders, table/, failed/, figures/."""

    SPEC: ClassVar[str] = "sweep.json"

    @property
    def spec_file(self) -> Path:
        return self.path / self.SPEC

    @property
    def jobs(self) -> Path:
        return self.path / "jobs"

    @property
    def figures(self) -> Path:
        return self.path / "figures"


@dataclass(frozen=True)
class _SweepOfRuns(_Folder):
    """A folder of runs/ with a record (every number), its markdown and its figure."""

    RECORD: ClassVar[str]
    MARKDOWN: ClassVar[str]
    FIGURE: ClassVar[str]
    RUNS: ClassVar[str] = "runs"

    @property
    def record_file(self) -> Path:
        return self.path / self.RECORD

    @property
    def markdown_file(self) -> Path:
        return self.path / self.MARKDOWN

    @property
    def figure_file(self) -> Path:
        return self.path / self.FIGURE

    @property
    def runs(self) -> Path:
        return self.path / self.RUNS


@dataclass(frozen=True)
class ScalingFolder(_SweepOfRuns):
    """A width sweep: scaling.json (every number), scaling.md, scaling.png and runs/<width>/ folders."""

    RECORD: ClassVar[str] = "scaling.json"
    MARKDOWN: ClassVar[str] = "scaling.md"
    FIGURE: ClassVar[str] = "scaling.png"


@dataclass(frozen=True)
class ComparisonFolder(_Folder):
    """`coocflow compare`: compare.json (folders, differences, results) and compare.png."""

    RECORD: ClassVar[str] = "compare.json"
    FIGURE: ClassVar[str] = "compare.png"

    @property
    def record_file(self) -> Path:
        return self.path / self.RECORD

    @property
    def figure_file(self) -> Path:
        return self.path / self.FIGURE


@dataclass(frozen=True)
class TheoremSweepFolder(_SweepOfRuns):
    """A sweep of a declared theorem along one config key (`verify TARGET --scaling KEY` on a System
    that declares one, docs/theorems.md): runs/<KEY=VALUE>/ run folders and the verdicts,
    verify.json, verify.md and verify.png (a run folder's names for them)."""

    RECORD: ClassVar[str] = RunFolder.VERIFY_JSON
    MARKDOWN: ClassVar[str] = RunFolder.VERIFY_MD
    FIGURE: ClassVar[str] = RunFolder.VERIFY_PNG

    def run_folder(self, key: str, value: float) -> Path:
        """Where the run at KEY = value trains."""
        return self.runs / f"{key}={value:g}"


Folder = Union[RunFolder, StudyFolder, SweepFolder, ScalingFolder, ComparisonFolder, TheoremSweepFolder]


def kind_of(path: Path) -> type | None:
    """Which kind of folder `path` is, from what it holds (None: none coocflow wrote, or not yet
    one: a run in progress is a `RunFolder`, a deep or markov study in progress a `StudyFolder`)."""
    path = Path(path)
    if (path / ComparisonFolder.RECORD).is_file():
        return ComparisonFolder
    if (path / SweepFolder.SPEC).is_file():
        return SweepFolder
    if (path / ScalingFolder.RECORD).is_file():
        return ScalingFolder
    if (path / StudyFolder.STUDY).is_file():
        return StudyFolder
    if (path / TheoremSweepFolder.RUNS).is_dir() and (path / TheoremSweepFolder.RECORD).is_file():
        return TheoremSweepFolder
    if (path / _Folder.MANIFEST).is_file():
        return StudyFolder if "study" in read_json_object(path / _Folder.MANIFEST) else RunFolder
    if (path / _Folder.CONFIG).is_file():
        return RunFolder
    return None


def open_folder(path: Path) -> Folder:
    """The typed folder `path` is, or one RunFolderError line saying what coocflow writes."""
    kind = kind_of(path)
    if kind is None:
        raise RunFolderError(f"{path}: neither a run folder (manifest.json, metrics.parquet), a sweep folder "
                             "(sweep.json), a width sweep (scaling.json), a theorem's sweep (verify.json, runs/) nor a "
                             "comparison folder (compare.json); pass a folder written by `coocflow run`, `coocflow sweep`, "
                             "`verify --scaling` or `coocflow compare`")
    return kind(Path(path))
