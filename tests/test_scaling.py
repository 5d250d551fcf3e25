"""Width scaling and the claims table: every row of docs/claims.md has a claim with evidence, the
rate verdicts follow their rules on synthetic fits, and a small sweep runs end to end, reusing its
width folders on a second call."""

import re
from pathlib import Path

import numpy as np
import pytest

from coocflow.api import resolve_config
from coocflow.verify.paper.checks import CHECKS
from coocflow.verify.paper.claims import CLAIMS, claims_table, combine, judge, premises_of_check
from coocflow.verify.paper.scaling import QUANTITIES
from coocflow.verify.paper.width_report import c_t1_sensitivity
from coocflow.verify.paper.width_sweep import width_overrides
from conftest import width_scaling

DOCS = Path(__file__).resolve().parents[1] / "docs" / "claims.md"


def claims_rows() -> list[str]:
    section = DOCS.read_text().split("## 2. Claims", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return [m.group(1) for m in re.finditer(r"^\| ([A-Za-z0-9.\-]+) \|", section, re.M) if m.group(1) != "id"]


def test_every_claims_row_has_a_claim_with_evidence():
    rows = claims_rows()
    assert len(rows) >= 40
    assert [c.id for c in CLAIMS] == rows
    for claim in CLAIMS:
        assert claim.checks or claim.rates, claim.id
        missing = [name for name in claim.checks if name not in CHECKS]
        assert not missing, (claim.id, missing)
        assert all(rate.quantity in QUANTITIES for rate in claim.rates), claim.id
        assert set(claim.identities) <= set(claim.checks)


def test_premises_follow_the_claims():
    assert premises_of_check("lemmaD.1_init_concentration") == ("P1", "P2")
    assert premises_of_check("thm3.2_scores") == ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8")
    assert premises_of_check("eqE.18_exact") == ()
    met = {"P1": True, "P2": True, "P7": False}
    assert judge(False, ("P1", "P2"), met) == "fail"
    assert judge(False, ("P1", "P7"), met) == "fail outside premises"
    assert judge(False, ("P1", "P9"), met) == "fail"  # a premise that was not evaluated does not block
    assert judge(None, ("P1",), met) == "not applicable" and judge(True, ("P7",), met) == "pass"
    assert combine(["pass", "fail outside premises", "not applicable"]) == "fail outside premises"
    assert combine(["pass", "not applicable"]) == "pass" and combine([]) == "not applicable"


def test_width_overrides_keep_p1_and_the_runs_own_time_scale():
    """theory's m1 is the most neurons (up to 64) that keep P1 at each m; its flow observes from
    0.01/U0 to 50 m; without resolved neurons a Gram base runs in weight space where affordable."""
    base = resolve_config("theory")
    assert width_overrides("both", 1024, base) == {"model.m": 1024, "model.m1": 4, "train.t_end": 50.0 * 1024}
    assert width_overrides("both", 65536, base)["model.m1"] == 64
    assert width_overrides("both", 2**24, base)["model.m1"] == 64
    unresolved = resolve_config("theory", ["model.neurons=false"])
    assert width_overrides("both", 1024, unresolved)["model.space"] == "weights"
    assert "model.space" not in width_overrides("both", 65536, unresolved)
    assert width_overrides("m", 64, resolve_config("tiny")) == {"model.m": 64}
    assert width_overrides("both", 64, resolve_config("tiny")) == {"model.m": 64, "model.m1": 64}


def test_the_m1_axis_runs_at_fixed_m_in_the_runs_own_time_scale():
    """Along m1, theory's flow still ends at 50 m (T* inside), m fixed; the
    preset's default design is 9 neuron counts 64..1024 at m = 2^24, each meeting P1."""
    from coocflow.experiments import EXPERIMENTS
    from coocflow.verify.paper.premises import DELTA, MUCH_GREATER

    base = resolve_config("theory", ["model.m=16777216"])
    assert width_overrides("m1", 512, base) == {"model.m1": 512, "train.t_end": 50.0 * 2**24}
    theory = EXPERIMENTS["theory"]
    assert theory.scaling_m1[0] == 64 and theory.scaling_m1[-1] == 1024 and len(theory.scaling_m1) == 9
    m = theory.scaling_m1_at
    assert all(m / (m1 * np.log(m1 / DELTA) ** 2) >= MUCH_GREATER for m1 in theory.scaling_m1)


def test_rates_along_each_axis_predict_from_the_m_and_m1_powers():
    """A rate's exponent along x is (d log m / d log x) predicted + (d log m1 / d log x) m1_power: F9's
    relative change of u2, O~(m1/m), is -2 along m (m1 fixed), -1 along both (m1 = m / 8), +1 along m1;
    a rate stated without m1 is flat along m1 (uniform in m1)."""
    from coocflow.verify.paper.claims import paper_rate
    from coocflow.verify.paper.scaling import axis_slopes

    change = paper_rate("u_norm2_change_after_T1", -2.0, "upper bound", 0.1, 2, m1_power=1.0)
    along = {"m": [{"value": v, "m": v, "m1": 64} for v in (2**15, 2**16, 2**17)],
             "both": [{"value": v, "m": v, "m1": v // 8} for v in (2**15, 2**16, 2**17)],
             "m1": [{"value": v, "m": 2**24, "m1": v} for v in (64, 128, 256)]}
    slopes = {axis: axis_slopes(rows) for axis, rows in along.items()}
    assert slopes == {"m": (1.0, 0.0), "both": (pytest.approx(1.0), pytest.approx(1.0)), "m1": (0.0, 1.0)}
    def along(rate, s_m, s_m1):
        return rate.test_along({"model.m": s_m, "model.m1": s_m1}).predicted

    predicted = {axis: along(change, s_m, s_m1) for axis, (s_m, s_m1) in slopes.items()}
    assert predicted == {"m": -2.0, "both": pytest.approx(-1.0), "m1": 1.0}
    assert along(paper_rate("T_prime", -1.0, "upper bound"), *slopes["m1"]) == 0.0


def test_a_quantity_the_same_at_every_width_is_not_evidence():
    """An init quantity of W_K, W_Q, W_V does not move with m1: each seed's value is the same at
    every width, so a slope of 0 holds by construction and its rate is not applicable."""
    from coocflow.verify.paper.scaling import invariant_along_axis

    seeds = np.array([0.3, 2.0, 0.07])
    assert invariant_along_axis(np.tile(seeds, (4, 1)))
    assert invariant_along_axis(np.vstack([seeds, seeds * (1 + 1e-14), seeds, [np.nan, 2.0, 0.07]]))
    assert not invariant_along_axis(np.vstack([seeds, seeds * (1 + 1e-9)]))
    assert not invariant_along_axis(np.vstack([seeds, seeds[::-1]]))
    assert not invariant_along_axis(seeds[None, :])


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Two widths with the same m1 = 2 (P1 allows no more below m = 768): in the Gram space their flow
    is one compiled program (the width is an input), which halves the fixture's cost; m1 growing with
    m is test_width_overrides_keep_p1_and_the_runs_own_time_scale's."""
    config = resolve_config("theory", ["data.n=24", "data.d=40", "observe.points=60", "observe.chunks=1"], n_seeds=2)
    out = tmp_path_factory.mktemp("scaling")
    return config, out, width_scaling(config, "both", [512, 640], out)


def test_a_small_sweep_measures_fits_and_judges(sweep):
    config, out, report = sweep
    assert len(report["rows"]) == 4 and {r["m"] for r in report["rows"]} == {512, 640}
    assert {w["space"] for w in report["widths"]} == {"gram"} and {(r["m"], r["m1"]) for r in report["rows"]} == {(512, 2), (640, 2)}
    row = report["rows"][0]
    for name in ("all_correct_time", "dG1_at_0", "score_change_at_T1", "neuron_gram_change_at_T1", "T_star",
                 "min_margin_at_T1"):
        assert row[name] is not None and row[name] > 0, name
    t1 = report["rates"][[r["quantity"] for r in report["rates"]].index("all_correct_time")]
    assert t1["predicted"] == -1.0 and t1["fit"]["n_seeds"] == [2, 2] and t1["kind"] == "upper bound"
    assert t1["verdict"] in ("pass", "fail", "fail outside premises", "inconclusive")
    assert t1["judgement"]["band"] == [None, pytest.approx(-0.9 + t1["log_slack"])]
    table = claims_table(report["widths"][-1], report["rates"])
    assert [r["id"] for r in table] == [c.id for c in CLAIMS]
    assert all(r["verdict"] in ("pass", "fail", "fail outside premises", "inconclusive", "vacuous", "not applicable") for r in table)
    assert any(e["kind"] == "rate" for e in table[0]["evidence"])
    constants = [r for r in report["rates"] if r["source"] == "fitted constant"]
    assert any(r["quantity"] == "propE.12_neuron_gram_change:fitted_constant" and r["claim"] == "E12" for r in constants)
    assert all(r["kind"] == "upper bound" and r["predicted"] == 0.0 for r in constants)


def test_a_second_sweep_reuses_its_width_runs(sweep):
    config, out, _ = sweep
    manifest = out / "runs" / "both-640" / "manifest.json"
    before = manifest.stat().st_mtime_ns
    report = width_scaling(config, "both", [512, 640], out)
    assert manifest.stat().st_mtime_ns == before and len(report["rows"]) == 4


def test_kaiming_sweeps_report_exponents_without_verdicts(tmp_path):
    config = resolve_config("tiny", ["train.steps=100"], n_seeds=2)
    report = width_scaling(config, "both", [8, 16], tmp_path)
    assert report["quantities"]["all_correct_time"]["fit"]["exponent"] is not None
    assert all(r["predicted"] is None and r["verdict"] == "not applicable" for r in report["rates"])


def test_claims_side_by_side(sweep):
    from coocflow.verify.paper.claims import side_by_side_markdown

    _, _, report = sweep
    table = claims_table(report["widths"][-1], report["rates"])
    text = side_by_side_markdown({"swept": table, "one width": claims_table(report["widths"][0])})
    lines = text.strip().splitlines()
    assert len(lines) == len(CLAIMS) + 2 and lines[0] == "| claim | `swept` | `one width` |"
    assert lines[2].startswith("| D1 (L. D.1, D.3) | ")
    verdicts = {row["id"]: row["verdict"] for row in table}
    for line, claim in zip(lines[2:], CLAIMS):
        assert verdicts[claim.id] in line.split(" | ")[1]


def test_the_command_reuses_the_sweep_and_prints_the_claims(sweep):
    """`coocflow verify --scaling` over the fixture's folder: its width runs are reused, and the
    claims table, scaling.md and the figure are written; --strict exits 2 exactly when a claim fails.
    The fixture's init scale is set on the command line: without it `theory --scaling both` runs its
    design's three c0 (`scaling_c0`) into folders of their own names, and trained six new runs here
    while the fixture's stood untouched (so the check that they were reused held by construction)."""
    import json
    import subprocess
    import sys

    config, out, _ = sweep
    manifest = out / "runs" / "both-512" / "manifest.json"
    before = manifest.stat().st_mtime_ns
    cli = Path(sys.executable).parent / "coocflow"
    args = [str(cli), "verify", "theory", "--scaling", "both", "--values", "512,640", "--seeds", "2",
            "--set", "data.n=24", "--set", "data.d=40", "--set", "observe.points=60",
            "--set", "observe.chunks=1", "--set", f"init.c0={config.init.c0!r}", "--out", str(out), "--strict"]
    done = subprocess.run(args, capture_output=True, text=True, env={**__import__("os").environ, "COLUMNS": "80"})
    report = json.loads((out / "scaling.json").read_text())
    failed = [row["id"] for row in report["claims"] if row["verdict"] == "fail"]
    assert done.returncode == (2 if failed else 0), done.stderr
    assert "claims:" in done.stdout and "premises at m=640" in done.stdout and "premises over the " in done.stdout
    assert "C_T1 = 10/20/40, same runs re-judged:" in done.stdout
    assert "## C_T1 sensitivity: the same runs judged at C_T1 = 10 / 20 / 40" in (out / "scaling.md").read_text()
    assert report["c_t1_sensitivity"]["c_t1"] == [10.0, 20.0, 40.0] and "c_t1_judged" not in report
    lines = done.stdout.strip().splitlines()
    assert not [line for line in lines if len(line) > 80 and " " in line.strip()] and "…" not in done.stdout, done.stdout
    assert all(any(line[7:].startswith(f"{claim.id} ") for line in lines) for claim in CLAIMS)
    assert "[shares E24's evidence, own bound]" in " ".join(done.stdout.split())
    assert (out / "scaling.md").read_text().count("\n| ") > len(CLAIMS) and (out / "scaling.png").stat().st_size > 20000
    assert report["base_width"] == 640 and len(report["claims"]) == len(CLAIMS)
    assert manifest.stat().st_mtime_ns == before
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["both-512", "both-640"], "no run trained here"
    shown = subprocess.run([str(cli), "show", str(out)], capture_output=True, text=True)
    said = " ".join(shown.stdout.split())  # what the folder is and where its results are, not a refusal
    assert shown.returncode == 0 and f"{out}: a scaling folder, " in said and f"coocflow report {out}" in said
    assert f"its verdicts: {out / 'scaling.md'}" in said and f"--out {out}" in said
    assert (out / "report.html").stat().st_size > 100000
    from coocflow.listing import describe_folder

    entry = describe_folder(out)
    assert entry.kind == "scaling" and entry.status == f"{sum(c['verdict'] == 'pass' for c in report['claims'])}/41 claims pass"


def test_a_refinement_checks_constants_are_refinements():
    """Lemma 4.2's derived error term is the code's refinement: its constant never fails E16; the
    lemma's own bound, measured by the same check, is the paper's statement."""
    from coocflow.verify.paper.scaling import constant_class

    assert constant_class("lemma4.2_common_token_rate", "lemma4.2_common_token_rate:fitted_constant") == "refinement"
    assert constant_class("lemma4.2_common_token_rate", "lemma4.2_common_token_rate:lemma_bound_constant") == "statement"
    assert constant_class("corE.24_attention_change", "corE.24_attention_change:random_constant") == "statement"


def test_borrowed_checks_constants_are_judged_only_where_they_belong():
    """E3 shows E24's sharper check; that check's constants measure E24's bound, not E3's."""
    from coocflow.verify.paper.claims import BY_ID

    assert "corE.24_attention_change" in BY_ID["E3"].checks and BY_ID["E3"].borrowed == ("corE.24_attention_change",)
    assert not BY_ID["E24"].borrowed


def test_a_declared_c_t1_is_judged_at_half_and_twice_it_on_the_same_runs(sweep):
    """The theory preset declares C_T1 = 20; the sweep judges the same runs at 10
    and 40 too. The checks that read the saved state at T1 have it only at 20."""
    config, out, report = sweep
    judged = report["c_t1_judged"]
    assert sorted(judged) == [10.0, 40.0] and config.verify.c_t1 == 20.0
    at_20, at_10 = report["widths"][-1]["checks"], judged[10.0]["widths"][-1]["checks"]
    def decided(check):
        return check["of"] - check["unchecked"] - check["no_verdict"]

    state_checks = [name for name, check in at_20.items() if decided(check) and not decided(at_10[name])]
    assert "lemmaE.7_neuron_value_change" in state_checks, state_checks
    assert decided(at_10["thm3.1_correct_by_T1"]) == decided(at_20["thm3.1_correct_by_T1"]) > 0
    sensitivity = c_t1_sensitivity({**report, "claims": claims_table(report["widths"][-1], report["rates"])},
                                   judged, config)
    assert sensitivity["c_t1"] == [10.0, 20.0, 40.0] and sensitivity["declared"] == 20.0
    assert set(sensitivity["claims"]) == {c.id for c in CLAIMS}
    assert all(len(v["verdicts"]) == 3 for v in sensitivity["claims"].values())
    assert sensitivity["changes"] == [c for c, v in sensitivity["claims"].items()
                                      if len(set(v["verdicts"]) - {"not applicable"}) > 1]
