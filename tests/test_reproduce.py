"""`coocflow run --check-reproduce`: same config and seed give the same bits; a change is named."""

import numpy as np
import pytest
from conftest import TINY
from typer.testing import CliRunner

from coocflow.api import resolve_config, run_and_write
from coocflow.cli import app
from coocflow.errors import CoocflowError
from coocflow.storage import read_metrics, write_metrics


def test_check_reproduce_passes_then_names_a_tampered_column(tmp_path):
    folder, _ = run_and_write(resolve_config("tiny", [f"{k}={v}" for k, v in TINY.items()]), tmp_path / "run")
    done = CliRunner().invoke(app, ["run", str(folder), "--check-reproduce"])
    assert done.exit_code == 0 and "reproduced bit for bit" in done.output, done.output
    metrics = read_metrics(folder / "metrics.parquet")
    metrics["loss"] = metrics["loss"] * (1 + 1e-12 * (np.arange(len(metrics["loss"])) == 5))
    write_metrics(folder / "metrics.parquet", metrics)
    done = CliRunner().invoke(app, ["run", str(folder), "--check-reproduce"])
    assert isinstance(done.exception, CoocflowError) and "1 quantities differ" in str(done.exception)
    assert "metrics.loss" in done.output


def test_float32_too_coarse_for_the_score_changes_is_warned():
    from coocflow.run.eq1 import health_warnings
    from coocflow.run import train

    overrides = {**TINY, "dtype": "float32", "train.steps": 4, "optimizer.lr": 1e-7, "observe.points": 4}
    result = train(resolve_config("tiny", [f"{k}={v}" for k, v in overrides.items()]))
    assert any(w.startswith("float32: A_mu") for w in health_warnings(result))
    assert not health_warnings(train(resolve_config("tiny", [f"{k}={v}" for k, v in TINY.items()])))


@pytest.mark.parametrize("method", ["gd", "flow"])
def test_a_grid_with_fewer_points_than_asked_is_warned(method):
    """Asking for more observations than the grid has distinct times is said, with the fix."""
    from coocflow.run.eq1 import health_warnings
    from coocflow.run import train

    overrides = {**TINY, "train.steps": 20, "observe.points": 30, "train.method": method, "observe.chunks": 1}
    result = train(resolve_config("tiny", [f"{k}={v}" for k, v in overrides.items()]))
    assert len(result.trajectory.t) == 21
    said = [w for w in health_warnings(result) if w.startswith("observe.points: 30 asked, 21 observed")]
    assert said and ("observe.start=" if method == "flow" else "train.steps=29") in said[0], health_warnings(result)
