"""The results store of a sweep: one folder, written only by atomic renames.

    DIR/sweep.json                    the resolved spec, its fingerprint and every job
    DIR/jobs/<id>/                    each job's ordinary run folder (all its seeds)
    DIR/table/metrics/<id>.parquet    the job's metrics rows, every axis value as a column
    DIR/table/summary/<id>.parquet    one row per seed: T1, phase boundaries, finals, checks
    DIR/failed/<id>.json              a failed job's error line

A job is done exactly when its summary file exists (it is written last), so a sweep killed at
any moment resumes by running the jobs without one. `table/metrics` and `table/summary` are
Parquet datasets that DuckDB and Polars read directly, e.g.
`SELECT * FROM 'DIR/table/summary/*.parquet'`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from coocflow.api import training_part
from coocflow.config import Config, config_from_dict
from coocflow.errors import ConfigError, RunFolderError
from coocflow.storage import atomic_write_json
from coocflow.storage.folders import SweepFolder, read_json_object
from coocflow.storage.run_folder import write_parquet
from coocflow.sweep.spec import SweepSpec

SWEEP_FORMAT_VERSION = 1


class SweepStore:
    def __init__(self, root: Path):
        self.root = Path(root)

    def job_folder(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def table_file(self, kind: str, job_id: str) -> Path:
        return self.root / "table" / kind / f"{job_id}.parquet"

    def failed_file(self, job_id: str) -> Path:
        return self.root / "failed" / f"{job_id}.json"

    def state(self, job_id: str) -> str:
        if self.table_file("summary", job_id).is_file():
            return "done"
        return "failed" if self.failed_file(job_id).is_file() else "pending"

    def prepare(self, spec: SweepSpec, force: bool = False) -> None:
        """Create the folder for `spec`, or reopen it if it holds the same sweep (resume), removing
        the staging folders of jobs a killed sweep left half-written (nothing else writes there
        while the sweep is not running)."""
        record = SweepFolder(self.root).spec_file
        current = record.is_file()
        if record.is_file():
            existing = read_record(self.root)
            current = existing.get("fingerprint") == spec.fingerprint
            if not current and not same_jobs(existing, spec):
                if not force:
                    raise RunFolderError(f"--out {self.root}: holds a different sweep ('{existing.get('name')}'); "
                                         "choose another --out, or pass --force to delete it and start over")
                shutil.rmtree(self.root)
        elif self.root.exists() and any(self.root.iterdir()):
            if not force:
                raise RunFolderError(f"--out {self.root}: folder exists and is not a sweep; choose another --out or pass --force")
            shutil.rmtree(self.root)
        for sub in ("jobs", "table/metrics", "table/summary", "failed"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        for leftover in (self.root / "jobs").glob(".*"):
            shutil.rmtree(leftover, ignore_errors=True)
        if not current:
            atomic_write_json(record, {"format_version": SWEEP_FORMAT_VERSION, "fingerprint": spec.fingerprint,
                                       **spec.to_dict(), "axes": spec.axes,
                                       "jobs": [job.to_dict() for job in spec.jobs]})

    def states(self) -> dict[str, str]:
        return {job["id"]: self.state(job["id"]) for job in read_record(self.root)["jobs"]}

    def write_table(self, kind: str, job_id: str, columns: dict[str, np.ndarray]) -> None:
        write_parquet(self.table_file(kind, job_id), columns)

    def read_table(self, kind: str) -> pa.Table:
        """Every finished job's rows of `kind` (metrics or summary) as one Arrow table."""
        files = sorted((self.root / "table" / kind).glob("*.parquet"))
        if not files:
            raise RunFolderError(f"{self.root}: no finished jobs yet (no table/{kind}/*.parquet)")
        return pa.concat_tables([pq.read_table(f) for f in files], promote_options="default")


def same_jobs(record: dict, spec: SweepSpec) -> bool:
    """Whether a stored sweep record holds `spec`'s jobs: the same ids and axes, and configs that
    train the same and declare the same (`api.training_part` and `verify`), each read through its
    format. So a sweep written before config format 2 resumes from its own spec file."""
    def identity(config: Config) -> dict:
        stored = json.loads(json.dumps(config.to_dict()))
        return {**training_part(stored), "verify": stored["verify"]}

    try:
        stored = [(job["id"], job["axes"], identity(config_from_dict(job["config"]))) for job in record.get("jobs", [])]
    except (ConfigError, KeyError, TypeError):
        return False
    return stored == [(job.id, job.axes, identity(job.config)) for job in spec.jobs]


def read_record(root: Path) -> dict:
    path = SweepFolder(root).spec_file
    if not path.is_file():
        raise RunFolderError(f"{root}: not a sweep folder (no {SweepFolder.SPEC}); pass the --out of `coocflow sweep`")
    record = read_json_object(path)
    if record.get("format_version") != SWEEP_FORMAT_VERSION:
        raise RunFolderError(f"{path}: sweep format {record.get('format_version')!r} is not the supported "
                             f"{SWEEP_FORMAT_VERSION}; re-run the sweep with this coocflow version")
    return record
