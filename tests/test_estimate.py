"""Before a long run, an estimate of its time and memory, and the Gram space where it follows the
run exactly (`run paper --set model.m=1e6` used to sit at its header for a minute)."""

from typer.testing import CliRunner

from coocflow import estimate as cost
from coocflow.api import resolve_config
from coocflow.cli import app

from conftest import TINY


def test_a_hopeless_width_is_estimated_long_and_pointed_to_the_gram_space():
    wide = cost.estimate(resolve_config("paper", {"model.m": 10**6}))
    assert wide.long and wide.seconds > 3600 and wide.bytes > 2**30
    assert wide.gram_seconds is not None and wide.gram_seconds < 60
    assert "--set model.space=gram" in wide.sentence() and " h and " in wide.sentence()
    paper = cost.estimate(resolve_config("paper"))
    assert not paper.long and paper.seconds < cost.LONG_RUN_SECONDS
    adam = cost.estimate(resolve_config("paper", {"model.m": 10**6, "train.method": "adam"}))
    assert adam.long and adam.gram_seconds is None and "model.space=gram" not in adam.sentence()
    gram = cost.estimate(resolve_config("paper", {"model.m": 10**6, "model.space": "gram"}))
    assert not gram.long and gram.gram_seconds is None


def test_the_estimate_grows_with_the_work():
    base = cost.estimate(resolve_config("paper", {"model.m": 4096, "model.m1": 4096}))
    longer = cost.estimate(resolve_config("paper", {"model.m": 4096, "model.m1": 4096, "train.steps": 60000}))
    denser = cost.estimate(resolve_config("paper", {"model.m": 4096, "model.m1": 4096, "observe.points": 400}))
    assert longer.seconds > base.seconds and denser.seconds > base.seconds and longer.bytes == base.bytes


def test_run_prints_the_estimate_before_training_when_it_is_long(tmp_path, monkeypatch):
    monkeypatch.setattr(cost, "LONG_RUN_SECONDS", 0.0)
    sets = [x for key, value in TINY.items() for x in ("--set", f"{key}={value}")]
    done = CliRunner().invoke(app, ["run", "paper", *sets, "--out", str(tmp_path / "run"), "--no-figures"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    where = next(i for i, line in enumerate(lines) if line.startswith("estimated "))
    assert where < next(i for i, line in enumerate(lines) if "100.0%" in line)


def test_the_python_api_says_a_long_estimate_before_training(tmp_path, monkeypatch, capsys):
    """`coocflow.run(...)` used to say nothing before a 438 s run; it now prints the estimate."""
    import coocflow

    monkeypatch.setattr(cost, "LONG_RUN_SECONDS", 0.0)
    run = coocflow.run("paper", overrides={**TINY, "train.steps": 20}, out=tmp_path / "run", figures=False)
    assert run.manifest["status"] == "completed"
    assert "paper: estimated " in capsys.readouterr().err


def test_resolved_neurons_cost_what_the_m1_sweep_measured():
    """theory at m = 2^24 with m1 = 1024 resolved neurons took 9 min for 8 seeds on 2 cores; the
    estimate says minutes, not seconds, and grows about as m1^2."""
    big = cost.estimate(resolve_config("theory", {"model.m": 2**24, "model.m1": 1024}, n_seeds=8))
    small = cost.estimate(resolve_config("theory", {"model.m": 2**24, "model.m1": 64}, n_seeds=8))
    assert 240 < big.seconds < 1200 and small.seconds < 60
