"""What lies in an output folder: runs, sweeps, studies and comparisons, one line each
(`coocflow ls`, and `coocflow show` without an argument). Reads JSON only, so it is instant."""

from __future__ import annotations

import fcntl
import json
import time
from dataclasses import dataclass
from pathlib import Path

from coocflow.config import current_record
from coocflow.errors import RunFolderError
from coocflow.storage.folders import (
    ComparisonFolder,
    RunFolder,
    ScalingFolder,
    StudyFolder,
    SweepFolder,
    TheoremSweepFolder,
    kind_of,
)
from coocflow.storage.paths import DEFAULT_ROOT, does_not_exist
from coocflow.sweep.store import SweepStore
from coocflow.systems.traits import traits_of


@dataclass(frozen=True)
class Entry:
    """One folder, as `coocflow ls` prints it (every field already text)."""

    name: str
    kind: str
    status: str
    config: str
    t1: str
    final_loss: str
    age: str
    mtime: float


def _json(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def _number(value) -> str:
    return "-" if value is None else f"{value:.4g}"


def _short(value) -> str:
    """A setting's value in a few characters: numbers as %g, lists as [a,b,...]."""
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)


def config_line(config: dict, listed: list[str] | None = None) -> str:
    """The shape, method and seeds of a config dict, in one short line: eq. (1)'s n, L, d and widths;
    another System's name, the built-in keys it reads (`listed`: its manifest's `listed_keys`) and its
    own settings (the data's n, L, d for a System that names neither)."""
    try:
        train, lr = config["train"], config["optimizer"]["lr"]
        seeds = config.get("seeds") or [config.get("seed", 0)]
        how = (f"flow to t={train['t_end'] or lr * train['steps']:g}" if train["method"] == "flow"
               else f"{train['method']} lr={lr:g} x{train['steps']}")
        system = config.get("system", "eq1")
        own = config.get("settings") or {}
        built_in = traits_of(system).listing_keys
        keys = built_in or tuple(listed or ()) or (() if own else ("data.n", "data.L", "data.d"))
        flat = {f"{section}.{key}": value for section in ("data", "model") for key, value in config[section].items()}
        shape = [f"{key if key.split('.')[1] in own else key.split('.')[1]}={_short(flat[key])}"
                 for key in keys if key in flat] + [f"{key}={_short(value)}" for key, value in own.items()]
        name = [] if built_in else [system.rsplit(":", 1)[-1]]
        return " ".join([*name, *shape, how, f"seeds={len(seeds)}"])
    except (KeyError, TypeError, IndexError):
        return "?"


def describe_folder(folder: Path) -> Entry | None:
    """The entry of one folder, or None when it is none of the kinds coocflow writes."""
    now = time.time()
    kind = kind_of(folder)
    if kind is SweepFolder:
        record = _json(SweepFolder(folder).spec_file)
        jobs = record.get("jobs") or []
        try:
            states = list(SweepStore(folder).states().values())
        except RunFolderError:
            states = []
        failed = states.count("failed")
        status = f"{states.count('done')}/{len(jobs)} jobs done" + (f", {failed} failed" if failed else "")
        mtime = SweepFolder(folder).spec_file.stat().st_mtime
        return Entry(folder.name, "sweep", status, f"{len(jobs)} jobs x {len(record.get('seeds') or [])} seeds",
                     "-", "-", _age(now - mtime), mtime)
    if kind is ComparisonFolder:
        record = _json(ComparisonFolder(folder).record_file)
        mtime = ComparisonFolder(folder).record_file.stat().st_mtime
        return Entry(folder.name, "compare", "completed", f"{len(record.get('folders') or [])} runs", "-", "-",
                     _age(now - mtime), mtime)
    if kind is ScalingFolder:
        record = _json(ScalingFolder(folder).record_file)
        mtime = ScalingFolder(folder).record_file.stat().st_mtime
        claims = record.get("claims") or []
        status = (f"{sum(c.get('verdict') == 'pass' for c in claims)}/{len(claims)} claims pass" if claims
                  else "completed")
        widths = record.get("values") or []
        return Entry(folder.name, "scaling", status,
                     f"{len(widths)} widths {record.get('axis')} = {widths[0] if widths else ''}..{widths[-1] if widths else ''}"
                     f" x {len(record.get('seeds') or [])} seeds", "-", "-", _age(now - mtime), mtime)
    if kind is TheoremSweepFolder:
        record = _json(TheoremSweepFolder(folder).record_file)
        mtime = TheoremSweepFolder(folder).record_file.stat().st_mtime
        claims = record.get("claims") or []
        runs = record.get("runs") or []
        values = [run.get("value") for run in runs]
        return Entry(folder.name, "theorem", f"{sum(c.get('verdict') == 'pass' for c in claims)}/{len(claims)} claims pass",
                     f"{len(runs)} runs {record.get('axis')} = {_short(values[0]) if values else ''}.."
                     f"{_short(values[-1]) if values else ''}", "-", "-", _age(now - mtime), mtime)
    run = RunFolder(folder)
    if not run.config_file.is_file():
        return None
    config = current_record(_json(run.config_file))
    manifest_path = run.manifest_file
    if not manifest_path.is_file():
        mtime = max(p.stat().st_mtime for p in folder.iterdir())
        status = "in progress" if (folder / ".lock").exists() and _locked(folder) else "interrupted (--resume)"
        what = "study" if kind is StudyFolder else "run"
        return Entry(folder.name, what, status, config_line(config), "-", "-", _age(now - mtime), mtime)
    manifest = _json(manifest_path)
    mtime = manifest_path.stat().st_mtime
    if "study" in manifest:
        return Entry(folder.name, "study", str(manifest.get("status", "completed")), config_line(config), "-", "-", _age(now - mtime), mtime)
    line = config_line(config, manifest.get("listed_keys"))
    final = manifest.get("final") or {}
    t1 = manifest.get("T1")
    if t1 is None and manifest.get("T1_spread"):
        t1 = manifest["T1_spread"].get("median")
    return Entry(folder.name, "run", str(manifest.get("status", "?")), line, _number(t1),
                 _number(final.get("loss")), _age(now - mtime), mtime)


def _locked(folder: Path) -> bool:
    """Whether a process holds the run folder's lock (it is training right now)."""
    try:
        with open(folder / ".lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
    except OSError:
        return True
    return False


def list_folders(root: Path = DEFAULT_ROOT) -> list[Entry]:
    """Every run, sweep, study and comparison directly under `root`, newest first."""
    root = Path(root)
    if not root.is_dir():
        if root.exists():
            raise RunFolderError(f"{root}: a file, not a folder; pass the folder that holds your runs")
        raise RunFolderError(does_not_exist(root) + " (runs are written under runs/ by default)")
    entries = [describe_folder(child) for child in root.iterdir() if child.is_dir() and not child.name.startswith(".")]
    return sorted((e for e in entries if e is not None), key=lambda e: -e.mtime)


def newest_run(root: Path = DEFAULT_ROOT) -> Path:
    """The most recently written run folder under `root` (for `coocflow show` with no argument)."""
    runs = [e for e in list_folders(root) if e.kind == "run"] if Path(root).is_dir() else []
    if not runs:
        raise RunFolderError(f"no runs under {root}/ yet; start with `coocflow run tiny`, or pass a run folder")
    return Path(root) / runs[0].name
