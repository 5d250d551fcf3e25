"""The `markov` experiment: the chain and its entropies, the next-token model and its gradient,
the seed ensemble, a tiny end-to-end run, training on the chunked driver (same series as
before, divergence) and a study resumed after a kill, bit for bit."""

import json

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pyarrow.parquet as pq
import pytest
from test_deep import _flags, sigkill_then_resume
from typer.testing import CliRunner

import coocflow.experiments.markov as markov_module
import coocflow.flow.system as system_flow_module
from coocflow.cli import app
from coocflow.config import Config
from coocflow.data.markov import (
    bayes_loss,
    bayes_losses,
    entropy_rate,
    random_chain,
    sample_dataset,
    sample_sequences,
    stationary_entropy,
)
from coocflow.errors import ConfigError, CoocflowError, RunFolderError
from coocflow.experiments.markov import build_markov_ensemble, markov, train_markov_ensemble
from coocflow.experiments.study_folder import begin_study_folder
from coocflow.systems.markov import OBSERVABLES, MarkovSystem, encode, loss, next_token_logits

SMOKE = {
    "data.d": 8, "data.L": 4, "data.n": 24, "data.n_test": 24, "model.m": 8, "model.m1": 8,
    "optimizer.lr": 0.5, "train.steps": 60, "observe.points": 20,
}


def _config(**extra) -> Config:
    return Config(name="markov", system="markov").replace({**SMOKE, "seeds": [0, 1], **extra})


def test_smoke_run_writes_figure_summary_and_metrics(tmp_path):
    messages = []
    result = markov(_config(), tmp_path / "markov", progress=messages.append)
    figure = tmp_path / "markov" / "markov.png"
    assert result.figures == [figure] and figure.stat().st_size > 10_000
    assert result.summary.startswith("# markov\n") and "| --- |" in result.summary
    assert [row["seed"] for row in result.rows] == [0, 1] and messages
    table = pq.read_table(tmp_path / "markov" / "metrics.parquet").to_pydict()
    assert set(table["seed"]) == {0, 1}
    assert {"seed", "step", "t", *OBSERVABLES} <= set(table)
    assert len(table["seed"]) == 2 * len(set(table["step"]))
    assert np.all(np.isfinite(table["train_loss"]))


def test_other_methods_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="train.method"):
        markov(_config(**{"train.method": "sgd"}), tmp_path)


def test_chain_rows_stationary_distribution_and_entropies():
    chain = random_chain(12, seed=4)
    P, pi = np.asarray(chain.transition), np.asarray(chain.stationary)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pi @ P, pi, rtol=0, atol=1e-12)
    assert np.all(pi >= 0) and abs(pi.sum() - 1) < 1e-12
    H, H_pi = float(entropy_rate(chain)), float(stationary_entropy(chain))
    assert 0 < H < H_pi < np.log(12)


def test_empirical_transitions_and_start_approach_the_chain():
    chain = random_chain(6, seed=1)
    P, pi = np.asarray(chain.transition), np.asarray(chain.stationary)
    sequences = sample_sequences(chain, 4000, 40, np.random.default_rng(0))
    counts = np.zeros((6, 6))
    np.add.at(counts, (sequences[:, :-1].ravel(), sequences[:, 1:].ravel()), 1)
    visits = counts.sum(axis=1, keepdims=True)
    tolerance = 5 * np.sqrt(P * (1 - P) / visits) + 1e-3
    assert np.all(np.abs(counts / visits - P) <= tolerance)
    start = np.bincount(sequences[:, 0], minlength=6) / len(sequences)
    assert np.all(np.abs(start - pi) <= 5 * np.sqrt(pi * (1 - pi) / len(sequences)) + 1e-3)


def test_bayes_loss_approaches_the_entropy_rate():
    chain = random_chain(10, seed=2)
    data = sample_dataset(chain, 100_000, 3, np.random.default_rng(5))
    per_sample = np.asarray(bayes_losses(data))
    tolerance = 5 * per_sample.std() / np.sqrt(len(per_sample))
    assert abs(float(bayes_loss(data)) - float(entropy_rate(chain))) < tolerance


def _one_seed(config: Config):
    model, train, _ = build_markov_ensemble(config)
    return jax.tree.map(lambda leaf: leaf[0], (model, train))


def test_logits_match_eq1_with_a_last_position_query():
    """The count-based logits equal eq. (1) written out with one-hot tokens, sample by sample."""
    config = _config(seeds=[3])
    model, data = _one_seed(config)
    W_Q, W_K, W_V, W, B = (np.asarray(getattr(model, name)) for name in ("W_Q", "W_K", "W_V", "W", "B"))
    d, m = W_Q.shape[1], W_Q.shape[0]
    logits = np.asarray(next_token_logits(model, *encode(data.tokens, d, model.W_Q.dtype)))
    for i, tokens in enumerate(np.asarray(data.tokens)):
        X = np.eye(d)[:, tokens]  # (d, L): columns are x_1..x_L
        scores = X.T @ W_K.T @ W_Q @ X[:, -1] / np.sqrt(m)
        p = np.exp(scores - scores.max())
        h = W_V @ X @ (p / p.sum())
        np.testing.assert_allclose(logits[i], B @ W @ h, rtol=1e-12, atol=1e-12)


def test_gradient_matches_central_finite_difference():
    config = _config(seeds=[3], **{"init.c0": 3.0})
    model, data = _one_seed(config)
    trainable, frozen = eqx.partition(model, MarkovSystem.from_config(config).trainable(model))

    @jax.jit
    def objective(params):
        return loss(eqx.combine(params, frozen), data)

    @jax.jit
    def check(params, direction, eps):
        numeric = (objective(jax.tree.map(lambda w, v: w + eps * v, params, direction))
                   - objective(jax.tree.map(lambda w, v: w - eps * v, params, direction))) / (2 * eps)
        grad = jax.grad(objective)(params)
        analytic = sum(jnp.vdot(g, v) for g, v in zip(jax.tree.leaves(grad), jax.tree.leaves(direction)))
        return numeric, analytic, [jnp.abs(g).max() for g in jax.tree.leaves(grad)]

    rng = np.random.default_rng(0)
    direction = jax.tree.map(lambda leaf: jnp.asarray(rng.normal(size=leaf.shape)), trainable)
    numeric, analytic, largest = check(trainable, direction, 1e-5)
    assert abs(float(numeric - analytic)) < 1e-6 * abs(float(analytic))
    assert all(float(g) > 0 for g in largest)


def test_a_seed_does_not_depend_on_the_rest_of_the_ensemble():
    first = train_markov_ensemble(_config(seeds=[0, 1]))
    second = train_markov_ensemble(_config(seeds=[1, 5]))
    assert not np.allclose(first["train_loss"][0], second["train_loss"][1])
    for name in OBSERVABLES:
        np.testing.assert_allclose(first[name][1], second[name][0], rtol=1e-10, atol=1e-14, err_msg=name)


# The series the hand-written loop this experiment had before it moved onto the chunked driver
# produced for `_config()` (gd) and with Adam at lr 0.05 (float64, XLA CPU): per seed, the last
# value and the sum over the 20 observations.
LOOP_BEFORE_DRIVER = {
    "gd": {
        "train_loss": ([0.902516195713585, 0.7258999372196865], [27.40657065095754, 31.29526627408137]),
        "test_loss": ([1.339733358552849, 2.9768782888884235], [30.15648815625726, 45.169276398497864]),
        "score_gap": ([0.04386857753996776, 0.11383995648803572], [0.42237153970050667, 0.17303943496700733]),
        "change_mlp_value": ([1.6783517886674961, 2.2554480114367292], [17.62008759059074, 17.633101849340076]),
        "same_token_attention": ([0.6513247633228509, 0.5496450103461212], [12.928433806331945, 10.16057178190949]),
        "change_W_Q": ([0.195221160203138, 0.6934676826606635], [0.8640380261938188, 2.8160718273658683]),
    },
    "adam": {
        "train_loss": ([0.12470602738111253, 0.06681338064324245], [19.796495850207958, 18.118281194775324]),
        "score_gap": ([2.1563631158165393, 1.306275076668125], [14.33976209819624, 10.189745091039423]),
        "change_W_K": ([4.821870965804441, 5.187421220100301], [45.247391202790425, 46.09544601543482]),
    },
}


@pytest.mark.parametrize("method", ["gd", "adam"])
def test_training_matches_the_loop_it_replaced(method):
    extra = {"train.method": "adam", "optimizer.lr": 0.05} if method == "adam" else {}
    series = train_markov_ensemble(_config(**extra))
    for name, (last, total) in LOOP_BEFORE_DRIVER[method].items():
        np.testing.assert_allclose(series[name][:, -1], last, rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(series[name].sum(axis=1), total, rtol=1e-12, err_msg=name)


def test_a_diverging_study_reports_its_seeds_and_keeps_their_observations(tmp_path):
    """At lr 1e6 every seed's loss overflows: the command writes the whole study, records when
    and why each seed stopped in the manifest and the summary, and ends with one error line."""
    out = tmp_path / "diverged"
    done = CliRunner().invoke(app, ["run", "markov", *_flags({**SMOKE, "optimizer.lr": 1e6}), "--seeds", "2",
                                    "--out", str(out)])
    assert isinstance(done.exception, CoocflowError)
    assert "2 of 2 seeds diverged (markov seed 0: train_loss became non-finite" in str(done.exception)
    manifest = json.loads((out / "manifest.json").read_text())
    record = manifest["variants"]["markov"]
    assert manifest["status"] == "diverged" and record["status"] == ["diverged", "diverged"]
    table = pq.read_table(out / "metrics.parquet").to_pydict()
    summary = (out / "summary.md").read_text()
    for seed, divergence, row in zip((0, 1), record["divergence"], manifest["rows"]):
        loss = np.array(table["train_loss"])[np.array(table["seed"]) == seed]
        kept = divergence["observation"]
        assert divergence["quantity"] == "train_loss" and divergence["t"] == 1e6 * divergence["step"]
        assert np.all(np.isfinite(loss[:kept])) and np.all(np.isnan(loss[kept:]))
        assert row["train_loss"] == loss[kept - 1]
        assert f"seed {seed} diverged: train_loss became non-finite at t = {divergence['t']:.3g}" in summary
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "manifest.json", "markov.png", "metrics.parquet",
                                                     "study.json", "summary.md"]


class Killed(Exception):
    """Stands in for a kill while the study draws its figure."""


def test_a_resumed_study_does_not_train_a_finished_variant_again(tmp_path, monkeypatch):
    config = _config(**{"observe.checkpoint_every_s": 0})
    reference = markov(config, tmp_path / "reference")
    out = begin_study_folder(tmp_path / "study", config, "markov")

    def killed(*args):
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(markov_module, "_markov_figure", killed)
        with pytest.raises(Killed):
            markov(config, out)
    assert (out / "variant-markov.npz").is_file() and not (out / "checkpoint-markov.npz").exists()
    with monkeypatch.context() as patch:
        patch.setattr(system_flow_module, "drive", lambda *args, **kwargs: pytest.fail("trained again"))
        resumed = markov(config, out)
    assert resumed.rows == reference.rows
    x, y = (pq.read_table(folder / "metrics.parquet") for folder in (out, tmp_path / "reference"))
    assert x.equals(y)

    edited = config.replace({"optimizer.lr": 0.25})
    with pytest.raises(RunFolderError, match="another config"):
        markov(edited, out)


def test_resume_refuses_a_study_folder_that_cannot_checkpoint(tmp_path):
    (tmp_path / "init-scale").mkdir()
    done = CliRunner().invoke(app, ["run", "--resume", str(tmp_path / "init-scale")])
    assert isinstance(done.exception, RunFolderError)
    assert "only deep and markov checkpoint" in str(done.exception)


def test_sigkill_then_resume_equals_the_uninterrupted_study(tmp_path):
    settings = {**SMOKE, "seeds": [0, 1], "train.steps": 100000, "observe.points": 40, "observe.chunks": 40}
    sigkill_then_resume(tmp_path, "markov", settings, "markov.png")
