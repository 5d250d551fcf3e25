"""Each study runs at tiny size and writes its figure and summary."""

import numpy as np
import pytest

from coocflow.experiments import EXPERIMENTS
from coocflow.experiments.catalog import STUDIES
from coocflow.experiments.studies import decay_rate

from conftest import TINY

OWN_SMOKE_TESTS = {"markov": "tests/test_markov.py", "deep": "tests/test_deep.py",
                   "unseen-tokens": "test_unseen_tokens_compares_seen_and_unseen_test_tokens",
                   "noise": "test_noise_study_freezes_attention_in_the_ablation"}
"""Studies smoke-tested by a test of their own (which checks more than the generic one)."""
SMOKE_EXTRA = {
    "generalization": {"train.method": "gd"},
    "unseen-tokens": {"data.d": 32, "train.method": "gd", "train.t_end": 0},
}


def test_every_study_is_an_experiment():
    assert all(EXPERIMENTS[name].study == name for name in STUDIES)
    assert set(OWN_SMOKE_TESTS) <= set(STUDIES)


@pytest.mark.parametrize("name", sorted(set(STUDIES) - set(OWN_SMOKE_TESTS)))
def test_study_smoke(name, tmp_path):
    """Each study in-process at tiny size (compiled programs are shared across the studies)."""
    from coocflow.api import resolve_config

    overrides = {**TINY, "train.steps": 60, "observe.points": 20, **SMOKE_EXTRA.get(name, {})}
    config = resolve_config(name, [f"{k}={v}" for k, v in overrides.items()], n_seeds=2)
    out = tmp_path / name
    result = STUDIES[name](config, out)
    assert result.rows and result.summary.startswith(f"# {name}") and "| --- |" in result.summary
    assert all(p.is_file() and p.stat().st_size > 10000 for p in result.figures)
    assert (out / "variants").is_dir() and all((v / "metrics.parquet").is_file() for v in (out / "variants").iterdir())


def test_unseen_tokens_compares_seen_and_unseen_test_tokens(tmp_path):
    """The two variants share the training run, and their test sets hold the promised tokens."""
    from coocflow.api import resolve_config
    from coocflow.experiments.random_tokens import unseen_tokens
    from coocflow.storage import load_run

    overrides = {**TINY, "train.steps": 60, "observe.points": 20, **SMOKE_EXTRA["unseen-tokens"]}
    result = unseen_tokens(resolve_config("unseen-tokens", [f"{k}={v}" for k, v in overrides.items()], n_seeds=1), tmp_path)
    seen, unseen = (load_run(tmp_path / "variants" / name) for name in ("seen", "unseen"))
    np.testing.assert_array_equal(seen.metrics["loss"], unseen.metrics["loss"])
    train_random = set(np.asarray(seen.state_init["tokens"]).ravel()) - {0, 1, 2}
    for run, inside in ((seen, True), (unseen, False)):
        with np.load(run.path / "test_set.npz", allow_pickle=False) as test_set:
            test_random = set(test_set["tokens"].ravel()) - {0, 1, 2}
        assert test_random and all((token in train_random) == inside for token in test_random)
    assert {r["test_tokens"] for r in result.rows} == {"seen", "unseen"}


def test_noise_study_freezes_attention_in_the_ablation(tmp_path):
    from coocflow.api import resolve_config
    from coocflow.experiments.noise import noise
    from coocflow.storage import load_run

    overrides = {**TINY, "train.steps": 60, "observe.points": 20}
    result = noise(resolve_config("noise", [f"{k}={v}" for k, v in overrides.items()], n_seeds=2), tmp_path)
    assert result.summary.startswith("# noise") and (tmp_path / "noise.png").stat().st_size > 10000
    frozen = load_run(tmp_path / "variants" / "frozen-attention")
    for name, moved in (("W_Q", False), ("W_K", False), ("W_V", True), ("W", True)):
        same = np.array_equal(frozen.state_init[name], frozen.state_final[name])
        assert same != moved, name
    accuracy = [r["acc_sigma=0"] for r in result.rows]
    assert all(0 <= a <= 1 for a in accuracy) and {r["at"] for r in result.rows} == {"T1", "end"}


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
    shown = CliRunner().invoke(app, ["show", str(out)])
    assert shown.exit_code == 0 and "# init-scale" in shown.output and "init_scale.png" in shown.output, shown.output
    long_name = tmp_path / ("a-study-folder-whose-name-is-longer-than-a-terminal-of-eighty-columns-" + "x" * 30)
    out.rename(long_name)
    listed = CliRunner().invoke(app, ["ls", str(tmp_path)], terminal_width=80)
    assert long_name.name in listed.output and "completed" in listed.output, listed.output


def test_decay_rate_recovers_a_power_law():
    t = np.geomspace(1, 1000, 50)
    assert abs(decay_rate(t, 3.0 / t, 10.0) - 1.0) < 1e-12
    assert decay_rate(t, 3.0 / t, 2000.0) is None
