"""`coocflow report`: the page of any folder coocflow writes, by what the folder holds."""

from __future__ import annotations

from pathlib import Path

from coocflow.errors import RunFolderError
from coocflow.report.compare_page import comparison_report
from coocflow.report.html import run_report, scaling_report, sweep_report, system_report, theorem_sweep_report
from coocflow.storage import atomic_write_text
from coocflow.storage.folders import (ComparisonFolder, RunFolder, ScalingFolder, StudyFolder, SweepFolder,
                                      TheoremSweepFolder, open_folder)
from coocflow.systems.traits import traits_of


def write_report(folder: Path, out: Path | None = None) -> Path:
    """Write `report.html` for a run, sweep, width-sweep, theorem-sweep or comparison folder (atomically) and
    return its path."""
    opened = open_folder(folder)
    if isinstance(opened, ComparisonFolder):
        page = comparison_report(opened.path)
    elif isinstance(opened, SweepFolder):
        page = sweep_report(opened.path)
    elif isinstance(opened, ScalingFolder):
        page = scaling_report(opened.path)
    elif isinstance(opened, TheoremSweepFolder):
        page = theorem_sweep_report(opened.path)
    elif isinstance(opened, RunFolder) and opened.complete:
        page = {"paper": run_report, "observables": system_report}[traits_of(opened.system()).run_page](opened.path)
    else:
        raise RunFolderError(f"{folder}: a {'study' if isinstance(opened, StudyFolder) else 'run in progress'}, "
                             f"which has no report; pass a folder written by `coocflow run`, `coocflow sweep`, "
                             "`verify --scaling` or `coocflow compare`")
    out = Path(out) if out else opened.report_file
    atomic_write_text(out, page)
    return out
