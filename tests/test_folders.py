"""Typed folders: each kind of folder owns its file names, `open_folder` tells the
kinds apart, and `RunFolder.open` says what a folder is when it is not a complete run."""

import json
import re
from pathlib import Path

import pytest

from coocflow.errors import RunFolderError
from coocflow.storage.folders import (ComparisonFolder, RunFolder, ScalingFolder, StudyFolder, SweepFolder, kind_of,
                                      open_folder)

SRC = Path(__file__).resolve().parents[1] / "src" / "coocflow"
OWNED = ("config.json", "manifest.json", "metrics.parquet", "state_init.npz", "state_final.npz", "state_t1.npz",
         "state_snapshots.npz", "test_set.npz", "checkpoint.npz", "verify.json", "verify.md", "verify.png",
         "study.json", "summary.md", "sweep.json", "scaling.json", "scaling.md", "scaling.png", "compare.json",
         "compare.png", "report.html")


def test_no_module_but_the_folders_spells_a_file_name_they_own():
    pattern = re.compile('"(' + "|".join(re.escape(name) for name in OWNED) + ')"')
    found = [f"{path.relative_to(SRC)}:{n}: {line.strip()}"
             for path in sorted(SRC.rglob("*.py")) if path.name != "folders.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert not found, "\n".join(found)


def _write(folder: Path, **files) -> Path:
    folder.mkdir(parents=True)
    for name, record in files.items():
        (folder / name.replace("__", ".")).write_text(json.dumps(record))
    return folder


def test_open_folder_tells_every_kind_apart(tmp_path):
    assert isinstance(open_folder(_write(tmp_path / "c", compare__json={})), ComparisonFolder)
    assert isinstance(open_folder(_write(tmp_path / "s", sweep__json={})), SweepFolder)
    assert isinstance(open_folder(_write(tmp_path / "w", scaling__json={})), ScalingFolder)
    assert isinstance(open_folder(_write(tmp_path / "d", config__json={}, study__json={})), StudyFolder)
    assert isinstance(open_folder(_write(tmp_path / "f", config__json={}, manifest__json={"study": "x"})), StudyFolder)
    assert isinstance(open_folder(_write(tmp_path / "r", config__json={}, manifest__json={})), RunFolder)
    assert kind_of(_write(tmp_path / "p", config__json={})) is RunFolder
    assert kind_of(_write(tmp_path / "e")) is None
    with pytest.raises(RunFolderError, match="neither a run folder"):
        open_folder(tmp_path / "e")


def test_run_folder_open_says_what_the_folder_is_instead(tmp_path):
    running = _write(tmp_path / "running", config__json={})
    with pytest.raises(RunFolderError, match=r"a run in progress or interrupted \(before its first checkpoint\); "
                                             r"continue it with `coocflow run --resume"):
        RunFolder.open(running)
    with pytest.raises(RunFolderError, match="a width sweep, not a run folder"):
        RunFolder.open(_write(tmp_path / "widths", scaling__json={}))
    partial = _write(tmp_path / "partial", config__json={}, manifest__json={})
    with pytest.raises(RunFolderError, match=r"missing metrics.parquet, state_init.npz, state_final.npz"):
        RunFolder.open(partial)
    assert RunFolder(partial).complete and not RunFolder(partial).in_progress and RunFolder(running).in_progress
