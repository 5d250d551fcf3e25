"""`coocflow report`: the page of any folder coocflow writes, by what the folder holds."""

from __future__ import annotations

from pathlib import Path

from coocflow.errors import RunFolderError
from coocflow.report.compare_page import comparison_report
from coocflow.report.html import run_report, scaling_report, sweep_report, system_report
from coocflow.storage import atomic_write_text
from coocflow.storage.run_folder import read_json_object


def write_report(folder: Path, out: Path | None = None) -> Path:
    """Write `report.html` for a run, sweep, width-sweep or comparison folder (atomically) and return its path."""
    folder = Path(folder)
    if (folder / "compare.json").is_file():
        page = comparison_report(folder)
    elif (folder / "sweep.json").is_file():
        page = sweep_report(folder)
    elif (folder / "scaling.json").is_file():
        page = scaling_report(folder)
    elif (folder / "manifest.json").is_file() and (folder / "metrics.parquet").is_file():
        page = system_report(folder) if "system" in read_json_object(folder / "manifest.json") else run_report(folder)
    else:
        raise RunFolderError(f"{folder}: neither a run folder (manifest.json, metrics.parquet), a sweep folder "
                             "(sweep.json), a width sweep (scaling.json) nor a comparison folder (compare.json); pass "
                             "a folder written by `coocflow run`, `coocflow sweep`, `verify --scaling` or `coocflow compare`")
    out = Path(out) if out else folder / "report.html"
    atomic_write_text(out, page)
    return out
