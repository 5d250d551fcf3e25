"""Each study runs at tiny size and writes its figure and summary."""

import numpy as np
import pytest

from coocflow.experiments import EXPERIMENTS
from coocflow.experiments.studies import STUDIES, decay_rate

from conftest import TINY

@pytest.mark.parametrize("name", sorted(STUDIES))
def test_study_smoke(name, tmp_path):
    """Each study in-process at tiny size (compiled programs are shared across the studies)."""
    from coocflow.api import resolve_config

    assert EXPERIMENTS[name].study == name
    config = resolve_config(name, [f"{k}={v}" for k, v in {**TINY, "train.steps": 60, "observe.points": 20}.items()],
                            n_seeds=2)
    out = tmp_path / name
    result = STUDIES[name](config, out)
    assert result.rows and result.summary.startswith(f"# {name}") and "| --- |" in result.summary
    assert all(p.is_file() and p.stat().st_size > 10000 for p in result.figures)
    assert (out / "variants").is_dir() and all((v / "metrics.parquet").is_file() for v in (out / "variants").iterdir())


def test_study_from_the_command_line(tmp_path):
    """The CLI path of a study, in-process so it reuses the programs the smoke tests compiled."""
    from typer.testing import CliRunner

    from coocflow.cli import app

    sets = [x for k, v in {**TINY, "train.steps": 60, "observe.points": 20}.items() for x in ("--set", f"{k}={v}")]
    out = tmp_path / "init-scale"
    done = CliRunner().invoke(app, ["run", "init-scale", *sets, "--seeds", "2", "--out", str(out)])
    assert done.exit_code == 0, done.output
    summary = (out / "summary.md").read_text()
    assert summary.startswith("# init-scale") and "seeds_with_rise" in summary
    assert (out / "init_scale.png").stat().st_size > 10000


def test_decay_rate_recovers_a_power_law():
    t = np.geomspace(1, 1000, 50)
    assert abs(decay_rate(t, 3.0 / t, 10.0) - 1.0) < 1e-12
    assert decay_rate(t, 3.0 / t, 2000.0) is None
