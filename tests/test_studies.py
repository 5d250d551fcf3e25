"""Each study runs at tiny size and writes its figure and summary."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from coocflow.experiments import EXPERIMENTS
from coocflow.experiments.studies import STUDIES, decay_rate

from conftest import TINY

CLI = Path(sys.executable).parent / "coocflow"


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_study_smoke(name, tmp_path):
    assert EXPERIMENTS[name].study == name
    sets = [x for k, v in {**TINY, "train.steps": 120}.items() for x in ("--set", f"{k}={v}")]
    out = tmp_path / name
    done = subprocess.run([str(CLI), "run", name, *sets, "--seeds", "2", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    summary = (out / "summary.md").read_text()
    assert summary.startswith(f"# {name}") and "| --- |" in summary
    assert list(out.glob("*.png")) and all(p.stat().st_size > 10000 for p in out.glob("*.png"))
    assert (out / "variants").is_dir() and all((v / "metrics.parquet").is_file() for v in (out / "variants").iterdir())


def test_decay_rate_recovers_a_power_law():
    t = np.geomspace(1, 1000, 50)
    assert abs(decay_rate(t, 3.0 / t, 10.0) - 1.0) < 1e-12
    assert decay_rate(t, 3.0 / t, 2000.0) is None
