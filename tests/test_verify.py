"""`coocflow verify`: every check passes where the paper says it should, and each one fails on a
run constructed so that its claim does not hold."""

import copy
import json

import numpy as np
import pytest

from coocflow.api import resolve_config, run_and_write
from coocflow.phases.checks import CHECKS, SeedData, run_checks
from coocflow.phases.verify import seed_data, verify_run, write_verification
from coocflow.storage import load_run
from test_checks_phase1 import PHASE1_CHECKS
from test_checks_phase2 import NAMES as PHASE2_CHECKS
from test_series_checks import SERIES_CHECK_FAILURES

EXPECTED_TO_PASS = {
    "thm3.1_alignment", "thm3.1_all_correct", "thm3.1_near_init", "thm3.1_loss_order_one",
    "fig1b_rise_then_fall", "thm3.2_scores", "thm3.2_value_gram", "thm3.3_final_loss",
    "thmF.8_inverse_loss_linear", "lemma4.4_balance", "lemma4.5_bounded_ratios", "lemma4.5_R_settles",
    "lemma4.3_sandwich", "eq5_exact",
}


@pytest.fixture(scope="module")
def phenomena(tmp_path_factory):
    """paper-phenomena followed by the ODE flow to t = 1000."""
    config = resolve_config("paper-phenomena", ["train.method=flow", "train.t_end=1000", "observe.points=120",
                                                "observe.chunks=4"])
    folder, _ = run_and_write(config, tmp_path_factory.mktemp("verify") / "phenomena")
    return load_run(folder)


@pytest.fixture(scope="module")
def passing(phenomena):
    return seed_data(phenomena)[0][1]


def test_checks_pass_where_the_paper_says(phenomena):
    verification = verify_run(phenomena)
    verdicts = {r.name: r.passed for r in verification.per_seed[0]}
    assert set(verdicts) == set(CHECKS)
    failed = sorted(name for name in EXPECTED_TO_PASS if verdicts[name] is not True)
    assert not failed, [r.sentence for r in verification.per_seed[0] if r.name in failed]
    bounds = verification.boundaries[0]
    assert 0 < bounds["T0.5"] < bounds["T1"] < bounds["phase2_start"] < bounds["end"]


def test_outputs_are_written(phenomena):
    verification = verify_run(phenomena)
    write_verification(phenomena, verification)
    report = json.loads((phenomena.path / "verify.json").read_text())
    assert report["pass_rates"]["eq5_exact"]["passed"] == 1
    text = (phenomena.path / "verify.md").read_text()
    assert "Theorem 3.2" in text and "| `lemma4.3_sandwich` |" in text
    assert (phenomena.path / "verify.png").stat().st_size > 10000


def _broken(data: SeedData, edit) -> SeedData:
    series = {k: v.copy() for k, v in data.series.items()}
    edit(series, data)
    return SeedData(series, data.m, A_init=data.A_init, A_final=data.A_final, n=data.n, L=data.L)


def _phase2(data):
    return data.t > data.bounds["T1"]


CONSTRUCTED_FAILURES = {
    "thm3.1_alignment": lambda s, d: s.__setitem__("G_mu3", np.abs(s["G_mu3"])),
    "thm3.1_all_correct": lambda s, d: s.__setitem__("min_margin", np.where(s["t"] < d.t[-1] / 2, -1.0, 1.0)),
    "thm3.1_near_init": lambda s, d: s.__setitem__("A_mu1_mu2", s["A_mu1_mu2"] + np.where(s["t"] > 0, 1.0, 0.0)),
    "thm3.1_loss_order_one": lambda s, d: s.__setitem__("loss", s["loss"] * 1e-3),
    "fig1b_rise_then_fall": lambda s, d: s.__setitem__("loss_I2", np.minimum.accumulate(s["loss_I2"])),
    "thm3.2_scores": lambda s, d: s.__setitem__("d_A_mu1_mu2_dt", -s["d_A_mu1_mu2_dt"]),
    "thm3.2_value_gram": lambda s, d: s.__setitem__("d_V_mu1_mu3_dt", np.abs(s["d_V_mu1_mu3_dt"])),
    "thm3.2_G_sums": lambda s, d: s.__setitem__("G_mu3", s["G_mu3"] * 0.1),
    "thm3.3_final_loss": lambda s, d: s.__setitem__("loss", np.maximum(s["loss"], 0.5)),
    "thmF.8_inverse_loss_linear": lambda s, d: s.__setitem__("loss", np.exp(-np.sqrt(s["t"]))),
    "lemma4.4_balance": lambda s, d: s.__setitem__("bal_S2_S3", s["bal_S2_S3"] + 5.0),
    "lemma4.5_bounded_ratios": lambda s, d: s.__setitem__("bal_sum_neg", -s["bal_sum_neg"]),
    "lemma4.5_R_settles": lambda s, d: s.__setitem__("R", s["R"] + 1.5),
    "lemma4.3_sandwich": lambda s, d: s.__setitem__("d_G_mu3_dt", s["d_G_mu3_dt"] * 0.01),
    "eq5_exact": lambda s, d: s.__setitem__("eq5_rhs", s["eq5_rhs"] * (1 + 1e-6)),
}


def test_every_check_has_a_constructed_failure():
    """Here the series checks of the first release; the others in their own test files, which
    construct a failure for each of theirs."""
    covered = (set(CONSTRUCTED_FAILURES) | {"thm3.3_score_pattern"} | set(SERIES_CHECK_FAILURES)
               | set(PHASE1_CHECKS) | set(PHASE2_CHECKS))
    assert covered == set(CHECKS)


@pytest.mark.parametrize("name", sorted(CONSTRUCTED_FAILURES))
def test_each_check_fails_where_its_claim_does_not_hold(passing, name):
    before = CHECKS[name](passing)
    after = CHECKS[name](_broken(passing, CONSTRUCTED_FAILURES[name]))
    if name in EXPECTED_TO_PASS:
        assert before.passed is True, before.sentence
    assert after.passed is False, after.sentence


def test_score_pattern_fails_when_random_tokens_move_and_passes_when_they_do_not(passing):
    quiet = copy.copy(passing)
    quiet.A_final = passing.A_init.copy()
    quiet.A_final[:3, :3] = passing.A_final[:3, :3]
    assert CHECKS["thm3.3_score_pattern"](quiet).passed is True
    loud = copy.copy(passing)
    loud.A_final = passing.A_final.copy()
    loud.A_final[10, 20] += 1.0
    assert CHECKS["thm3.3_score_pattern"](loud).passed is False


def test_frozen_labels_run_fails_the_classification_claims(tmp_path):
    """A constructed run that never separates the data: a vanishing learning rate."""
    config = resolve_config("tiny", ["train.lr=1e-9"])
    folder, _ = run_and_write(config, tmp_path / "stuck")
    results = {r.name: r for r in run_checks(seed_data(load_run(folder))[0][1])}
    assert results["thm3.1_all_correct"].passed is False or results["thm3.3_final_loss"].passed is False
    assert results["thm3.3_final_loss"].passed is False


def test_appendix_c_closed_forms_match_the_jvp():
    from coocflow.phases.appendix_c import KINDS, random_state_agreement

    config = resolve_config("tiny", ["data.L=5", "data.n=24", "data.d=20"])
    reports = random_state_agreement(config, states=3)
    assert reports[1]["max_abs_p_minus_uniform"] > 0.05, "attention must be far from uniform in the test"
    for report in reports:
        assert set(report["relative_error"]) == set(KINDS)
        assert max(report["relative_error"].values()) <= 1e-8, report


def test_a_wrong_equation_is_caught():
    """Dropping the key-side term of the printed score equation must disagree with the JVP."""
    import jax.numpy as jnp

    from coocflow.phases import appendix_c
    from coocflow.runner import build_model, build_problem

    config = resolve_config("tiny", [])
    model, data = build_model(config), build_problem(config).train
    closed, exact = appendix_c.closed_form_rates(model, data), appendix_c.jvp_rates(model, data)
    kind = appendix_c.KINDS[4]
    half = closed[kind] / 2 + (closed[kind] / 2).T * 0
    assert float(jnp.max(jnp.abs(closed[kind] - exact[kind]))) <= 1e-12
    assert float(jnp.max(jnp.abs(half - exact[kind]))) > 1e-6


def test_verify_json_reports_appendix_c(phenomena):
    verification = verify_run(phenomena)
    report = verification.to_dict()["appendix_c"]
    assert report["passed"] and report["max_relative_error"] < 1e-8 and len(report["states"]) == 3


def test_scaling_flags_are_validated():
    import subprocess
    import sys
    from pathlib import Path

    cli = Path(sys.executable).parent / "coocflow"
    for args, expected in ((["--scaling", "depth"], "--scaling depth: choose one of"),
                           (["--scaling", "m", "--values", "8"], "need at least two positive widths"),
                           (["--scaling", "m", "--values", "a,b"], "expected comma-separated whole numbers")):
        done = subprocess.run([str(cli), "verify", "tiny", *args], capture_output=True, text=True)
        assert done.returncode == 2 and expected in done.stderr, done.stderr


def test_verify_an_ensemble_with_diverged_seeds(tmp_path):
    """A real run where the claims cannot all hold: a learning rate at which most seeds diverge."""
    config = resolve_config("tiny", ["train.lr=1.6", "train.steps=300"], n_seeds=8)
    folder, result = run_and_write(config, tmp_path / "wild")
    assert "diverged" in result.trajectory.status and "completed" in result.trajectory.status
    run = load_run(folder)
    verification = verify_run(run)
    assert verification.seeds == [s for s, _ in seed_data(run)]
    rates = verification.pass_rates()
    per_seed = {name: rate for name, rate in rates.items() if name != "appendix_c_closed_forms"}
    assert all(rate["of"] == len(verification.seeds) for rate in per_seed.values())
    assert any(rate["failed"] + rate["failed_outside_premises"] > 0 for rate in per_seed.values())
    assert rates["appendix_c_closed_forms"]["of"] == 1
    write_verification(run, verification)
    assert "/" in (folder / "verify.md").read_text().split("| `thm3.3_final_loss` |")[1].split("|")[2]


def test_premises_lead_and_identities_stand_apart(phenomena):
    verification = verify_run(phenomena)
    write_verification(phenomena, verification)
    report = json.loads((phenomena.path / "verify.json").read_text())
    ids = [p["id"] for p in report["premises"]]
    assert ids == [f"P{k}" for k in range(1, 10)] and "premises met" in report["premises_summary"]
    kaiming = {p["id"]: p["met"] for p in report["premises"]}
    assert kaiming["P2"] is False and kaiming["P4"] is True and kaiming["P8"] is True
    assert report["identities"] == ["eqE.18_exact", "eq5_exact", "lemmaF.11_exact", "appendix_c_closed_forms"]
    states = [s["state"] for s in report["appendix_c"]["states"]]
    assert states == ["initial", "T1", "final"] and report["appendix_c"]["passed"] is True
    text = (phenomena.path / "verify.md").read_text()
    premises_at, claims_at, identities_at = (text.index(h) for h in
                                             ("## Premises", "## Claims", "## Implementation identities"))
    assert premises_at < claims_at < identities_at
    assert "| `eq5_exact` |" in text[identities_at:] and "| `eq5_exact` |" not in text[claims_at:identities_at]


def test_strict_exit_codes_and_the_summary_line(tmp_path):
    """A Kaiming tiny run breaks premises, so its failures are outside them and --strict passes;
    the same failures with every premise met are findings, and --strict would stop on them."""
    import dataclasses
    import subprocess
    import sys
    from pathlib import Path

    from conftest import TINY

    cli = Path(sys.executable).parent / "coocflow"
    folder, _ = run_and_write(resolve_config("paper", [f"{k}={v}" for k, v in TINY.items()]), tmp_path / "tiny",
                              figures=False)
    import os

    env = {**os.environ, "COLUMNS": "250"}
    relaxed = subprocess.run([str(cli), "verify", str(folder)], capture_output=True, text=True, env=env)
    assert relaxed.returncode == 0, relaxed.stderr
    assert "premises" in relaxed.stdout and "fail outside premises" in relaxed.stdout
    rates = json.loads((folder / "verify.json").read_text())["pass_rates"]
    outside = [name for name, rate in rates.items() if rate["failed_outside_premises"]]
    assert outside and not any(rate["failed"] for rate in rates.values())
    strict = subprocess.run([str(cli), "verify", str(folder), "--strict"], capture_output=True, text=True, env=env)
    assert strict.returncode == 0, strict.stderr
    verification = verify_run(load_run(folder))
    met = dataclasses.replace(verification, premises=[dataclasses.replace(p, met=True) for p in verification.premises])
    assert set(met.findings()) == set(outside) and verification.findings() == []
    assert met.verdict(outside[0], False) == "fail" and verification.verdict(outside[0], False) == "fail outside premises"
    assert verification.verdict("eq5_exact", False) == "fail" and verification.verdict("x", None) == "not applicable"


def test_a_gram_run_verifies_without_weights(tmp_path):
    from conftest import TINY

    config = resolve_config("paper", [f"{k}={v}" for k, v in {**TINY, "model.space": "gram"}.items()])
    folder, _ = run_and_write(config, tmp_path / "gram", figures=False)
    verification = verify_run(load_run(folder))
    assert verification.appendix_c == []
    assert verification.pass_rates()["appendix_c_closed_forms"] == {"passed": 0, "failed": 0, "failed_outside_premises": 0,
                                                                           "unchecked": 1, "of": 1}
    assert {p.id: p.met for p in verification.premises}["P9"] in (None, False)
