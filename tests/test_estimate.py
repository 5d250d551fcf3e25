"""Before a long run, an estimate of its time and memory, and the Gram space where it follows the
run exactly (`run paper --set model.m=1e6` used to sit at its header for a minute)."""

import pytest
from typer.testing import CliRunner

from coocflow import estimate as cost
from coocflow.api import resolve_config
from coocflow.cli import app
from coocflow.errors import ConfigError

from conftest import TINY


def test_a_hopeless_width_is_estimated_long_and_pointed_to_the_gram_space():
    wide = cost.estimate(resolve_config("paper", {"model.m": 10**6}))
    assert wide.long and wide.seconds > 3600 and wide.bytes > 2**30
    assert wide.faster_seconds is not None and wide.faster_seconds < 60
    assert "--set model.space=gram" in wide.sentence() and " h and " in wide.sentence()
    paper = cost.estimate(resolve_config("paper"))
    assert not paper.long and paper.seconds < cost.LONG_RUN_SECONDS
    adam = cost.estimate(resolve_config("paper", {"model.m": 10**6, "train.method": "adam"}))
    assert adam.long and adam.faster_seconds is None and "model.space=gram" not in adam.sentence()
    gram = cost.estimate(resolve_config("paper", {"model.m": 10**6, "model.space": "gram"}))
    assert not gram.long and gram.faster_seconds is None


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


def test_a_system_without_a_cost_model_is_not_estimated_by_another_ones(tmp_path, monkeypatch):
    """eq. (1)'s constants applied to any System were 1000x off (20 M steps of a two-parameter regression
    estimated at 57 minutes took 4 s, and a terminal asked before starting it). A System without a cost
    model of its own gets no estimate and no question; one with a `cost` gets its own."""
    from pathlib import Path

    from coocflow.systems.cost import RunCost
    from coocflow.systems.registry import system_class

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    monkeypatch.setattr(cost, "LONG_RUN_SECONDS", 0.0)
    long_saxe = resolve_config("examples/saxe.toml", {"train.t_end": 1e6, "observe.points": 10**5})
    assert cost.estimate(long_saxe) is None
    paper = resolve_config("paper")
    assert cost.total_seconds([long_saxe, paper]) == cost.estimate(paper).seconds
    args = ["run", "examples/saxe.toml", "--set", "train.t_end=0.5", "--set", "observe.points=5", "--seeds", "1",
            "--out", str(tmp_path / "saxe"), "--no-figures"]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    assert "estimated" not in done.output
    own = RunCost(7200.0, 2.0**30)
    monkeypatch.setattr(system_class(long_saxe.system), "cost", classmethod(lambda cls, config: own))
    assert cost.estimate(long_saxe) == cost.Estimate(7200.0, 2.0**30)
    done = CliRunner().invoke(app, [*args[:-3], "--out", str(tmp_path / "again"), "--no-figures"])
    assert done.exit_code == 0, done.output
    assert "estimated 2.0 h and 1 GiB" in done.output and "no terminal to ask, so it starts" in done.output
    monkeypatch.setattr(system_class(long_saxe.system), "cost", classmethod(lambda cls, config: 1 / 0))
    done = CliRunner().invoke(app, [*args[:-3], "--out", str(tmp_path / "third"), "--no-figures"])
    assert done.exit_code != 0 and "SaxeNetwork.cost raised ZeroDivisionError" in str(done.exception)
    monkeypatch.setattr(system_class(long_saxe.system), "cost", classmethod(lambda cls, config: 3600.0))
    with pytest.raises(ConfigError, match="SaxeNetwork.cost returned float; return a coocflow.systems.cost.RunCost"):
        cost.estimate(long_saxe)


def test_the_built_in_systems_are_estimated_without_importing_them_as_their_cost_says():
    """`coocflow sweep`'s parent estimates eq. (1)'s jobs from `BUILT_IN_COSTS` without importing JAX; each
    entry is what that System's `cost` answers."""
    from coocflow.systems.cost import BUILT_IN_COSTS
    from coocflow.systems.registry import BUILT_IN

    assert set(BUILT_IN_COSTS) == set(BUILT_IN)
    for name, config in (("eq1", resolve_config("paper", {"model.m": 4096})), ("deep", resolve_config("deep")),
                         ("markov", resolve_config("markov"))):
        assert config.system == name
        assert BUILT_IN_COSTS[name](config) == BUILT_IN[name].cost(config)
