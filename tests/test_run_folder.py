"""Run folder: round trip, exact golden keys, provenance, independent replay, bad folders."""

import json
import shutil

import numpy as np
import pytest
from conftest import TINY, load_golden
from reference_gd import forward_backward, replay
from test_observables import REQUIRED

from coocflow.api import resolve_config, run_and_write
from coocflow.errors import RunFolderError
from coocflow.storage import STATE_KEYS, load_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    config = resolve_config("paper", [f"{k}={v}" for k, v in TINY.items()], seed=2)
    folder, _ = run_and_write(config, tmp_path_factory.mktemp("runs") / "tiny")
    return folder


def test_reference_implementation_matches_golden():
    g = load_golden("small")
    loss, grads = forward_backward(g)
    assert np.isclose(loss, g["expected_loss"], rtol=0, atol=1e-12)
    for key, grad in grads.items():
        np.testing.assert_allclose(grad, g[f"expected_grad_{key}"], rtol=0, atol=1e-12)


def test_round_trip(run_dir):
    run = load_run(run_dir)
    assert run.config["data"]["n"] == 12 and run.manifest["seed"] == 2
    assert set(run.state_init) == set(STATE_KEYS) and set(run.state_final) == set(STATE_KEYS)
    with np.load(run_dir / "state_init.npz", allow_pickle=False) as z:
        assert sorted(z.files) == sorted(STATE_KEYS)
    assert all(c in run.metrics for c in REQUIRED)
    n_obs = len(run.metrics["t"])
    assert n_obs >= 30 and run.manifest["observed_points"] == n_obs
    np.testing.assert_allclose(run.metrics["t"], run.metrics["step"] * run.config["optimizer"]["lr"])
    for key in ("versions", "git", "device", "timings", "T1", "dtype", "status", "init", "format_version"):
        assert key in run.manifest, key
    assert run.manifest["versions"]["jax"] and run.manifest["status"] == "completed"
    for name in ("figure1.png", "overview.png", "test_set.npz"):
        assert (run_dir / name).stat().st_size > 1000, name
    assert not (run_dir / "figure1.pdf").exists(), "figure1.pdf only when asked (formats)"
    assert not list(run_dir.parent.glob(".*partial*")), "no staging folder is left behind"


def test_independent_replay_matches_every_observed_loss(run_dir):
    run = load_run(run_dir)
    replayed = replay(run.state_init, run.config["optimizer"]["lr"], run.metrics["step"])
    np.testing.assert_allclose(replayed, run.metrics["loss"], rtol=1e-8)
    _, final_grads = forward_backward(run.state_final)
    np.testing.assert_allclose(replay(run.state_init, run.config["optimizer"]["lr"], [run.metrics["step"][-1]])[0],
                               run.metrics["loss"][-1], rtol=1e-8)
    assert set(final_grads) == {"W_Q", "W_K", "W_V", "W"}


def test_bad_folders_give_one_line_errors(run_dir, tmp_path):
    with pytest.raises(RunFolderError, match="does not exist"):
        load_run(tmp_path / "missing")
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / "metrics.parquet").write_bytes((broken / "metrics.parquet").read_bytes()[:100])
    with pytest.raises(RunFolderError, match="metrics.parquet: not a readable Parquet file"):
        load_run(broken)
    (broken / "manifest.json").write_text("{not json")
    with pytest.raises(RunFolderError, match="manifest.json: not valid JSON"):
        load_run(broken)
    future = tmp_path / "future"
    shutil.copytree(run_dir, future)
    manifest = json.loads((future / "manifest.json").read_text())
    manifest["format_version"] = 99
    (future / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(RunFolderError, match="format 99 is not the supported format"):
        load_run(future)
    (future / "state_final.npz").unlink()
    with pytest.raises(RunFolderError, match="missing state_final.npz"):
        load_run(future)


def test_ensemble_folder_has_seed_column_and_stacked_states(tmp_path):
    config = resolve_config("paper", [f"{k}={v}" for k, v in TINY.items()], seed=4, n_seeds=3)
    folder, result = run_and_write(config, tmp_path / "ens")
    run = load_run(folder)
    assert run.manifest["seeds"] == [4, 5, 6]
    np.testing.assert_array_equal(np.unique(run.metrics["seed"]), [4, 5, 6])
    assert len(run.metrics["t"]) == 3 * len(result.trajectory.t)
    assert run.state_init["W_Q"].shape[0] == 3 and run.state_init["tokens"].shape[0] == 3
    spread = run.manifest["T1_spread"]
    assert spread["of"] == 3 and spread["q10"] <= spread["median"] <= spread["q90"]
    assert [p["seed"] for p in run.manifest["per_seed"]] == [4, 5, 6]
    seed5 = {k: v[run.metrics["seed"] == 5] for k, v in run.metrics.items()}
    one = {k: v[1] for k, v in run.state_init.items()}
    replayed = replay(one, run.config["optimizer"]["lr"], seed5["step"])
    np.testing.assert_allclose(replayed, seed5["loss"], rtol=1e-8)
