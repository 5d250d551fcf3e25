"""`coocflow.run(NAME)` and `coocflow run NAME` write the same folder for every experiment: the
same files and equal tables (`coocflow.run("deep")` used to train eq. (1) on the deep
preset while the command ran the study)."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import TINY
from test_deep import TINY_DEEP
from test_markov import SMOKE as MARKOV_SMOKE
from typer.testing import CliRunner

import coocflow
from coocflow.cli import app
from coocflow.experiments import EXPERIMENTS
from coocflow.notebook import Run, Study

SMALL = {**TINY, "train.steps": 40, "observe.points": 12, "seeds": [0]}
"""Every experiment at a size that takes a second or two."""
OVERRIDES = {
    "theory": {**SMALL, "data.d": 23},
    "generalization": {**SMALL, "train.method": "gd"},
    "unseen-tokens": {**SMALL, "data.d": 32, "train.method": "gd", "train.t_end": 0},
    "deep": {**TINY_DEEP, "train.steps": 40, "observe.points": 12, "seeds": [0]},
    "markov": {**MARKOV_SMOKE, "train.steps": 40, "observe.points": 12, "seeds": [0]},
}


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_the_api_and_the_command_write_the_same_folder(name, tmp_path):
    overrides = OVERRIDES.get(name, SMALL)
    sets = [x for key, value in overrides.items() for x in ("--set", f"{key}={value}")]
    done = CliRunner().invoke(app, ["run", name, *sets, "--out", str(tmp_path / "cli")])
    assert done.exit_code == 0, done.output
    loaded = coocflow.run(name, overrides=overrides, out=tmp_path / "api")
    assert isinstance(loaded, Study if EXPERIMENTS[name].study else Run)
    cli, api = tmp_path / "cli", tmp_path / "api"
    assert _files(cli) == _files(api)
    tables = sorted(path for path in _files(cli) if path.endswith(".parquet"))
    assert tables, "every experiment writes a table"
    for path in tables:
        assert pq.read_table(cli / path).equals(pq.read_table(api / path)), path
    assert (cli / "config.json").read_text() == (api / "config.json").read_text()
    assert coocflow.load(cli).manifest.keys() == loaded.manifest.keys()


def test_a_study_asked_for_no_figures_is_refused_as_the_command_refuses_it(tmp_path):
    """A study draws its own figures: `coocflow.run("deep", figures=False)` used to draw them anyway,
    where `coocflow run deep --no-figures` refuses; both now say so in one line, before training."""
    from coocflow.errors import ConfigError

    with pytest.raises(ConfigError, match="figures=False: deep is a study, which writes its own figures"):
        coocflow.run("deep", overrides=OVERRIDES["deep"], out=tmp_path / "api", figures=False)
    assert not (tmp_path / "api").exists()
    done = CliRunner().invoke(app, ["run", "deep", "--no-figures", "--out", str(tmp_path / "cli")])
    assert done.exit_code != 0 and "a study writes its own figures" in str(done.exception) + done.output


def test_the_package_shows_its_api_and_an_unknown_command_gets_a_suggestion():
    """Two small things: dir(coocflow) lists the API, not Any, Path or Mapping; a mistyped
    command is answered with the nearest one."""
    assert dir(coocflow) == ["__version__", "load", "run", "verify"]
    done = CliRunner().invoke(app, ["verfy", "runs/paper"])
    assert done.exit_code == 2 and "Did you mean 'verify'?" in done.output


def test_ensure_run_reuses_resumes_or_trains(tmp_path):
    """The one resume-or-run decision of the jobs (a sweep's job, a width of a width sweep)."""
    import json

    import numpy as np

    from coocflow.api import ensure_run, resolve_config
    from coocflow.run import begin_run_folder

    config = resolve_config("tiny", {"train.steps": 30, "observe.points": 8})
    first = ensure_run(config, tmp_path / "run")
    assert first.how == "trained" and (tmp_path / "run" / "manifest.json").is_file()
    again = ensure_run(config, tmp_path / "run")
    assert again.how == "reused" and all(np.array_equal(again.metrics[k], first.metrics[k]) for k in first.metrics)
    declared = config.replace({"verify.loss_exponent": 3.0})
    assert ensure_run(declared, tmp_path / "run").how == "reused"
    assert json.loads((tmp_path / "run" / "config.json").read_text())["verify"]["loss_exponent"] == 3.0
    assert ensure_run(config.replace({"optimizer.lr": 0.05}), tmp_path / "run").how == "trained"
    begin_run_folder(tmp_path / "begun", config)
    resumed = ensure_run(config, tmp_path / "begun")
    assert resumed.how == "resumed"
    assert all(np.array_equal(resumed.metrics[k], first.metrics[k]) for k in first.metrics)
