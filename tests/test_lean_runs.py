"""`observe.only`: a run that records the observables it names and what the run itself reads (the loss,
the divergence watch, what the events read), so that a table of event times compiles only those."""

import json

import numpy as np
import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.errors import ConfigError
from coocflow.storage import load_run

REQUIRED = {"loss", "u_norm2", "A_mu1_mu2", "V_mu1_mu1", "min_margin", "min_margin_I2_I3",
            "d_G_mu1_dt", "d_G_mu2_dt", "d_G_mu3_dt"}
"""What a run of eq. (1) reads of itself: the loss and the divergence watch (`WATCHED`) and what its four
events read (all_correct, T', T0.5, T*)."""

OBSERVED_ALIKE = 1e-13
"""Relative agreement of a recorded column of GD with the same column of the full run: the steps are the
same computation, and each observable a reduction over at most a dozen samples, which a differently fused
program may sum in another order (a few ulps). Measured: bit-identical. The flow's two programs may round
its error estimates differently, so its step sizes and values agree to the solver's tolerance (rtol, atol)
instead: measured bit-identical under XLA's default flags, 3.8e-8 relative under the suite's (level 0)."""


@pytest.mark.parametrize("method", [["train.method=gd"], ["train.method=flow", "train.t_end=5"]])
def test_a_lean_run_records_what_it_names_and_what_it_reads_with_the_full_runs_numbers(method, tmp_path):
    full, _ = run_and_write(resolve_config("tiny", method, n_seeds=2), tmp_path / "full", figures=False)
    lean_config = resolve_config("tiny", method + ['observe.only=["G_mu1", "loss_I2"]'], n_seeds=2)
    lean, _ = run_and_write(lean_config, tmp_path / "lean")  # figures asked for: a lean run draws none
    a, b = load_run(full), load_run(lean)
    rtol, atol = ((lean_config.solver.rtol, lean_config.solver.atol) if lean_config.is_flow else (OBSERVED_ALIKE, 0.0))
    assert set(b.metrics) - {"seed", "t", "step"} == REQUIRED | {"G_mu1", "loss_I2"} and len(a.metrics) > 80
    for name in b.metrics:
        assert np.allclose(b.metrics[name], a.metrics[name], rtol=rtol, atol=atol, equal_nan=True), name
    for full_seed, lean_seed in zip(a.manifest["per_seed"], b.manifest["per_seed"]):
        assert lean_seed["T1"] == full_seed["T1"]  # the first all-correct observation
        for event, when in (full_seed.get("events") or {}).items():
            found = lean_seed["events"][event]
            assert (found is None and when is None) or np.isclose(found, when, rtol=rtol, atol=0), event
    assert b.manifest["figures"] == [] and not list(lean.glob("*.png"))
    assert json.loads((lean / "config.json").read_text())["observe"]["only"] == ["G_mu1", "loss_I2"]
    assert "only" not in json.loads((full / "config.json").read_text())["observe"]  # old runs keep their identity


def test_observe_only_names_the_systems_observables_at_the_door():
    with pytest.raises(ConfigError, match=r"^observe.only: 'G_mu' is not an observable of the eq1 system; did you "
                                          r"mean G_mu\d\?$"):
        resolve_config("tiny", ['observe.only=["G_mu"]'])
    with pytest.raises(ConfigError, match=r"^observe.only: 'margin' is not an observable of the saxe system; "
                                          r"it records .*\bloss\b"):  # any System: its names off `observe`'s shapes
        resolve_config("examples/saxe.toml", ['observe.only=["margin"]'])


def test_verify_and_a_checked_sweep_refuse_a_lean_run_in_one_line(tmp_path):
    from conftest import coocflow_here

    from coocflow.sweep.spec import load_spec

    folder, _ = run_and_write(resolve_config("tiny", ['observe.only=["loss"]']), tmp_path / "lean", figures=False)
    done = coocflow_here("verify", str(folder))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "which the run did not record (observe.only)" in lines[0]
    spec = tmp_path / "spec.toml"
    spec.write_text('name = "t"\nbase = "tiny"\n[set]\n"observe.only" = ["loss"]\n[grid]\n"model.m" = [8, 16]\n')
    with pytest.raises(ConfigError, match=r"observe.only: the paper's checks in the summary read every observable; "
                                          r"add `checks = false`"):
        load_spec(spec)
    spec.write_text("checks = false\n" + spec.read_text())
    assert len(load_spec(spec).jobs) == 2


def test_verify_refuses_a_lean_sweep_after_reading_one_folder(tmp_path, monkeypatch):
    """A sweep of lean runs is refused in one line once its first job is read: a claim is measured on that
    job's first seed before the other jobs are read (a 10-job sweep of 1000 seeds a job had read them all,
    45 s and 1.8 GB, before the same line)."""
    from conftest import coocflow_here

    from coocflow.verify import judge

    spec = tmp_path / "spec.toml"
    spec.write_text('name = "t"\nbase = "tiny"\nchecks = false\n[set]\n"observe.only" = ["loss"]\n'
                    '"train.steps" = 40\n"observe.points" = 8\n[grid]\n"model.m" = [8, 16, 32]\n')
    assert coocflow_here("sweep", spec, "--out", tmp_path / "sweep", "--workers", 1).returncode == 0
    read = []
    seed_runs = judge.seed_runs
    monkeypatch.setattr(judge, "seed_runs", lambda folder, *args: read.append(folder) or seed_runs(folder, *args))
    monkeypatch.delenv("COLUMNS", raising=False)
    done = coocflow_here("verify", tmp_path / "sweep")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "which the run did not record (observe.only)" in lines[0]
    assert len(read) == 1, read
