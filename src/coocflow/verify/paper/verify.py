"""`coocflow verify`: run every check on every seed of a run folder and write the verdicts.

Writes verify.json (every number), verify.md (a table a person reads) and verify.png (the
checks that are about curves) into the run folder, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from coocflow.verify.paper.appendix_c import KINDS, max_error, saved_state_agreement
from coocflow.verify.declare import Theorem
from coocflow.verify.judge import ClaimVerdict, PremiseVerdict, TheoremVerdict, judge_readings
from coocflow.verify.paper.checks import CHECKS, IDENTITY_TOLERANCE, CheckResult, SeedData, late_phase2
from coocflow.verify.paper.claims import (
    CLAIMS,
    NO_VERDICT,
    allowed_failures,
    claims_markdown,
    claims_table,
    evidence_counts,
    summary_line,
)
from coocflow.verify.paper.premises import ASSUMED, premises_markdown, premises_summary
from coocflow.verify.paper.reading import seed_views, verify_settings
from coocflow.storage import LoadedRun, atomic_write_json, atomic_write_text
from coocflow.storage.folders import RunFolder

APPENDIX_C_CHECK = "appendix_c_closed_forms"
IDENTITIES = tuple(name for claim in CLAIMS for name in claim.identities)
"""Checks that are identities of the implementation (they hold for any weights), not claims of
the paper: shown apart from the claims, with the Appendix C closed forms."""
THEOREM_PREMISES = ASSUMED
"""What every theorem and lemma of the paper assumes (docs/claims.md section 1, the premises of kind
"assumed" in `premises.PREMISES`): Condition 1's widths, initialization and data size, Assumption 2.3,
Definition 2.1, the small output at initialization of Lemma D.8 and the gradient flow. P9 (the
initialization events) holds with probability 1 - delta and is reported, not required; P7r (L. D.8's own
bound, P7 relaxed) is reported with the verdicts under it beside the stated P7's; P10 is a condition the
paper does not state (`premises.UNSTATED`), never a premise. A claim violated where one of these is not
met is `fail outside premises`: the theorem does not promise it there."""
VERDICTS = ("pass", "fail", "fail outside premises", "vacuous", "not applicable", NO_VERDICT)


TALLIED = {"pass": "passed", "fail": "failed", "fail outside premises": "failed_outside_premises", "vacuous": "vacuous",
           "not applicable": "unchecked", "inconclusive": "inconclusive", "no verdict": "no_verdict"}
"""Where each seed verdict of `verify.judge.seed_verdict` is counted in `Verification.pass_rates`: a
check that does not apply is unchecked, one that applies but cannot tell inconclusive (which the judge
ranks above a pass)."""


def check_counts(claim: ClaimVerdict) -> dict:
    """A check's verdict counts over seeds (`pass_rates`' row) from the judge's `ClaimVerdict`: its
    `tally` of seed verdicts and its `unstated` counts, with its evidence class."""
    counts = {key: 0 for key in ("passed", "failed", "failed_outside_premises", "vacuous", "failed_unstated",
                                 "passed_unstated_met", "inconclusive", "unchecked", "no_verdict")}
    for word, n in claim.tally.items():
        counts[TALLIED[word]] += n
    counts.update({key: claim.unstated.get(key, 0) for key in ("failed_unstated", "passed_unstated_met")})
    return {**counts, "of": sum(claim.tally.values()), "evidence": claim.evidence}


@dataclass
class Verification:
    """eq. (1)'s theorem (`verify.paper.theorem.THEOREM`) judged on one run folder by the judge of every
    declared theorem (`verify.judge.judge_readings`: with its premises as stated, and with P7 read as its
    relaxed form P7r), and what its report shows beside the verdicts: each seed's check outcomes and
    phase boundaries, and Appendix C's closed forms at the run's own saved states."""

    seeds: list[int]
    per_seed: list[list[CheckResult]]
    boundaries: list[dict]
    appendix_c: list[dict]
    premises: list[PremiseVerdict] = field(default_factory=list)
    counts: dict[str, dict] = field(default_factory=dict)
    """Each check's `check_counts` under the premises as stated."""
    counts_relaxed: dict[str, dict] = field(default_factory=dict)
    """The same with P7 relaxed (`premises.RELAXED`)."""

    @classmethod
    def of(cls, run: LoadedRun, stated: TheoremVerdict, relaxed: TheoremVerdict | None) -> "Verification":
        """From the judge's verdicts on `run` (one folder): the checks' counts and outcomes, the premises
        measured, each seed's phase boundaries, and Appendix C at the run's saved states."""
        views = seed_views(run.path, verify_settings(run))
        seeds = [seed for seed in stated.runs[0]["seeds"]]
        checks = [next(c for c in stated.claims if c.id == name) for name in CHECKS]
        per_seed = [[claim.outcomes[i] for claim in checks] for i in range(len(seeds))]
        premises = [PremiseVerdict(**{k: v for k, v in p.items() if k != "per_run"}) for p in stated.premises]
        counts = {claim.id: check_counts(claim) for claim in checks}
        loose = {c.id: check_counts(c) for c in (relaxed or stated).claims if c.id in CHECKS}
        return cls(seeds, per_seed, [views[seed].bounds for seed in seeds], saved_state_agreement(run), premises,
                   counts, loose)

    @property
    def appendix_c_error(self) -> float:
        """Largest relative disagreement of the closed forms; NaN when no weights were saved."""
        return max_error(self.appendix_c) if self.appendix_c else float("nan")

    @property
    def premises_met(self) -> bool:
        """Whether the run meets every premise the theorems assume (`THEOREM_PREMISES`; one
        that cannot be evaluated here does not count against it)."""
        return not any(p.met is False for p in self.premises if p.id in THEOREM_PREMISES)

    def pass_rates(self, relaxed: bool = False) -> dict[str, dict]:
        """For every check, the per-seed ones (`counts`, from the judge) and `appendix_c_closed_forms`
        (one verdict for the configuration): how many pass, fail (premises met: a finding against the
        paper), fail outside premises, are vacuous, or could not be checked, of how many, with the check's
        evidence class (a diagnostic counts its seeds under `no_verdict`); `failed_unstated` and
        `passed_unstated_met` count the failures where an unstated condition of the check's claims is not
        met and the passes where all are (`claims.HOLDS_UNSTATED`). `relaxed`: under each premise of
        `premises.RELAXED` in its relaxed form."""
        rates = dict(self.counts_relaxed if relaxed else self.counts)
        passed = None if not self.appendix_c else bool(self.appendix_c_error <= IDENTITY_TOLERANCE)
        verdict = {None: "unchecked", True: "passed", False: "failed"}[passed]
        rates[APPENDIX_C_CHECK] = {**{key: 0 for key in next(iter(self.counts.values())) if key != "evidence"},
                                   verdict: 1, "of": 1, "evidence": "identity"}
        return rates

    def claims(self) -> list[dict]:
        """One row per claim of docs/claims.md (`verify.paper.claims.claims_table`): premises, the checks'
        verdicts on this run, and the claim's verdict (rates in m need `verify --scaling`)."""
        return claims_table(width_summary(self))

    def findings(self) -> list[str]:
        """The checks that failed on some seed with their premises met: findings against the
        paper (or the implementation, for an identity). `verify --strict` exits on these."""
        return [name for name, rate in self.pass_rates().items() if rate["failed"] and not allowed_failures(name, rate)]

    def table(self):
        """`pass_rates` as a pyarrow Table, one row per check (`.to_pandas()`, Polars, DuckDB)."""
        rates = self.pass_rates()
        rows = [{"check": name, **rate} for name, rate in rates.items()]
        return pa.Table.from_pylist(rows)

    def to_dict(self) -> dict:
        return {
            "seeds": self.seeds,
            "premises": [p.to_dict() for p in self.premises],
            "premises_summary": premises_summary(self.premises) if self.premises else None,
            "pass_rates": self.pass_rates(),
            "claims": self.claims(),
            "evidence_counts": evidence_counts(self.claims()),
            "per_seed": [{"seed": seed, "boundaries": bounds, "checks": [r.to_dict() for r in results]}
                         for seed, bounds, results in zip(self.seeds, self.boundaries, self.per_seed)],
            "identities": list(IDENTITIES) + [APPENDIX_C_CHECK],
            "appendix_c": {"tolerance": IDENTITY_TOLERANCE,
                           "max_relative_error": self.appendix_c_error if self.appendix_c else None,
                           "passed": (self.appendix_c_error <= IDENTITY_TOLERANCE) if self.appendix_c else None,
                           "states": self.appendix_c},
        }


def judged_run(theorem: Theorem, run: LoadedRun) -> Verification:
    """eq. (1)'s theorem (`theorem`: `verify.paper.theorem.THEOREM`) on one run, judged as every declared
    theorem is (`verify.judge.judge_readings`, under the premises as stated and with P7 relaxed), with its
    report's seed-by-seed outcomes and Appendix C's closed forms at the run's own saved states."""
    return Verification.of(run, *judge_readings(theorem, [run.path], verify=verify_settings(run)))


def width_summary(v: Verification, m: int | None = None, m1: int | None = None) -> dict:
    """What the claims table reads of one width's verification: its premises, every check's
    verdict counts over seeds, and the first seed's results."""
    return {"m": m, "m1": m1, "premises": [p.to_dict() for p in v.premises], "premises_met": v.premises_met,
            "checks": v.pass_rates(), "checks_relaxed": v.pass_rates(relaxed=True),
            "first_seed": {r.name: r.to_dict() for r in v.per_seed[0]} if v.per_seed else {}}


COUNTED = ("passed", "failed", "failed_outside_premises", "vacuous", "failed_unstated", "passed_unstated_met",
           "inconclusive", "unchecked", "no_verdict", "of")
"""The verdict counts of `Verification.pass_rates` that add up over runs."""


def every_run_summary(widths: list[dict], first: dict) -> dict:
    """What the claims table reads of a whole sweep: every check's verdict counts summed over every
    run (each width and c0, each counted under its own premises, so a failure where a premise is not
    met stays `fail outside premises`), each premise met where every run meets it, and the sentences
    of `first` (the base width's first seed). A statement check that fails in 39 of 128 runs is
    then seen by the claim's verdict, whatever the base width shows."""
    def summed(key: str) -> dict[str, dict]:
        checks: dict[str, dict] = {}
        for width in widths:
            for name, rate in width.get(key, {}).items():
                total = checks.setdefault(name, {**{k: 0 for k in COUNTED}, "evidence": rate.get("evidence", "statement")})
                for k in COUNTED:
                    total[k] += rate.get(k, 0)
        return checks

    premises = []
    for premise in first["premises"]:
        found = [p["met"] for w in widths for p in w["premises"] if p["id"] == premise["id"]]
        met = False if False in found else (True if found and all(found) else None)
        premises.append({**premise, "met": met, "met_in": f"{sum(v is True for v in found)}/{len(found)} runs"})
    out = {"m": None, "m1": None, "premises": premises, "premises_met": all(p["met"] is not False for p in premises),
           "checks": summed("checks"), "first_seed": first["first_seed"], "unit": "runs x seeds", "runs": len(widths)}
    if all("checks_relaxed" in w for w in widths):
        out["checks_relaxed"] = summed("checks_relaxed")
    return out


def verdict_text(rate: dict) -> str:
    """A check's verdict over its seeds, in words: the single verdict for one seed, else counts."""
    counts = {"pass": rate["passed"], "FAIL": rate["failed"],
              "fail outside premises": rate.get("failed_outside_premises", 0), "vacuous": rate.get("vacuous", 0),
              "inconclusive": rate.get("inconclusive", 0), "not applicable": rate["unchecked"],
              NO_VERDICT: rate.get("no_verdict", 0)}
    if rate["of"] == 1:
        return next(word for word, n in counts.items() if n)
    return ", ".join(f"{n}/{rate['of']} {word}" for word, n in counts.items() if n)


def markdown(v: Verification, title: str) -> str:
    rates = v.pass_rates()
    table = v.claims()
    lines = [f"# Verification: {title}", "", f"Seeds: {', '.join(map(str, v.seeds))}.", ""]
    if v.premises:
        lines += ["## Premises of the theorems", "", premises_summary(v.premises) + ".", "",
                  premises_markdown(v.premises).rstrip(), ""]
    lines += ["## Claims", "", "One row per claim of docs/claims.md: the premises its proof uses, the checks that "
              "test it at this width (verdict counts over seeds, the first seed's numbers) and its verdict. Rates in m "
              "need a width sweep: `coocflow verify TARGET --scaling both`.", "",
              claims_markdown(table).rstrip(), "", summary_line(table) + ".", "",
              "## Checks", "", "Every check on its own, with its class: a statement (the paper's claim as stated) "
              "decides its claim; a refinement (a sharper statement derived here) is judged on its own; a diagnostic "
              "(holds by construction, or a constant the paper hides) is reported without a verdict. Thresholds turn "
              "statements into numbers (see `coocflow/verify/paper/checks.py`).", "",
              "| check | class | claim | threshold | verdict | measured (first seed) |",
              "| --- | --- | --- | --- | --- | --- |"]
    identity_rows = []
    for i, name in enumerate(CHECKS):
        first = v.per_seed[0][i]
        cells = [f"`{name}`", first.evidence, first.claim, first.threshold, verdict_text(rates[name]), first.sentence]
        row = "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
        (identity_rows if name in IDENTITIES else lines).append(row)
    lines += ["", "## Implementation identities", "",
              "Identities that hold for any weights (so they test the implementation, not the paper):", "",
              "| check | class | claim | threshold | verdict | measured (first seed) |",
              "| --- | --- | --- | --- | --- | --- |", *identity_rows, "", "Appendix C, the coupled dynamical system: closed-form right-hand sides of the six "
              "kinds of variables (coocflow/verify/paper/appendix_c.py) against forward-mode derivatives along -grad L, "
              "at this run's own saved states (first seed):", ""]
    if v.appendix_c:
        lines += ["| kind | " + " | ".join(f"{r['state']} (max abs p - 1/L = {r['max_abs_p_minus_uniform']:.2g})"
                                          for r in v.appendix_c) + " |",
                  "| --- |" + " --- |" * len(v.appendix_c)]
        for kind in KINDS:
            lines.append(f"| {kind} | " + " | ".join(f"{r['relative_error'][kind]:.1e}" for r in v.appendix_c) + " |")
        lines += ["", f"Largest relative disagreement: {v.appendix_c_error:.1e} (tolerance {IDENTITY_TOLERANCE:g}). "
                      "The score equation is the one printed in the authors' answer to reviewers."]
    else:
        lines += ["Not evaluated: this run saved no weights (the Gram space keeps the Grams, and the neuron-level "
                  "variables need W)."]
    b = v.boundaries[0]
    fmt = lambda x: "-" if x is None else f"{x:.4g}"  # noqa: E731
    lines += ["", f"Phase boundaries (first seed): T0.5 = {fmt(b['T0.5'])}, T1 = {fmt(b['T1'])}, "
                  f"Phase 2 start (score movement per e-fold of time at half its peak) = {fmt(b['phase2_start'])}, end = {fmt(b['end'])}."]
    return "\n".join(lines) + "\n"


def figure(data: SeedData, path: Path) -> None:
    """The checks about curves: balancing ratios and R(t), 1/loss vs t, the dG/dt sandwich."""
    import matplotlib  # lazy: defers matplotlib, 0.7 s

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: defers matplotlib, 0.7 s

    from coocflow.plots.save import save_figure  # lazy: beside matplotlib

    s, t = data.series, data.t
    t1 = data.bounds["T1"]
    # A fixed layout, as the run's own figures (plots/figures.py): Matplotlib's constrained layout took
    # 1.05 s of this figure's 1.6 s first draw (measuring every label's box, twice).
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    fig.subplots_adjust(left=0.045, right=0.99, bottom=0.12, top=0.92, wspace=0.2)
    positive = t > 0
    ax = axes[0]
    for key, label in (("R", "R(t)"), ("bal_S2_S3", r"$|S_2-S_3|/\min$"), ("bal_sum_neg", r"$\sum g/(S_2+S_3+S_4-S_1)$"),
                       ("bal_sum_S1_S2", r"$\sum g/(S_1-S_2)$")):
        ax.plot(t[positive], s[key][positive], label=label)
    ax.axhspan(1, 2, color="tab:green", alpha=0.1, label="R in (1, 2)")
    ax.set(xscale="log", yscale="symlog", xlabel="flow time t", title="Lemmas 4.4, 4.5: balancing of gradients")
    ax = axes[1]
    late = late_phase2(data)
    ax.plot(t[positive], 1 / s["loss"][positive], label="1/loss")
    if late.sum() >= 2:
        slope, intercept = np.polyfit(t[late], 1 / s["loss"][late], 1)
        ax.plot(t[late], slope * t[late] + intercept, "k--", label=f"fit {slope:.3g} t + {intercept:.3g}")
    ax.set(xlabel="flow time t", title="Theorem F.8: 1/loss linear in t (Phase 2)")
    ax = axes[2]
    if "d_G_mu1_dt" in s and t1 is not None:
        window = positive & (t <= t1)
        g1, g2, g3 = (s[f"d_G_mu{k}_dt"][window] for k in (1, 2, 3))
        ax.plot(t[window], np.maximum(g1, g2), label=r"max($\dot G(\mu_1), \dot G(\mu_2)$)")
        ax.plot(t[window], -g3, label=r"$-\dot G(\mu_3)$")
        ax.plot(t[window], g1 + g2, label=r"$\dot G(\mu_1)+\dot G(\mu_2)$")
        ax.axvspan(t1 / 2, t1, color="0.9", label="late Phase 1")
        ax.set(xscale="log", xlabel="flow time t", title="Lemma 4.3: the dG/dt sandwich (Phase 1)")
    for ax in axes:
        if t1 is not None:
            ax.axvline(t1, color="0.4", ls="--", lw=1)
        if ax.get_legend_handles_labels()[0]:  # a panel with nothing to show (no T1) has no legend
            ax.legend(fontsize=7)
        ax.grid(alpha=0.3, lw=0.4)
    save_figure(fig, path, dpi=120)


def write_verification(run: LoadedRun, v: Verification) -> None:
    folder = RunFolder(run.path)
    atomic_write_json(folder.verify_file("json"), v.to_dict())
    atomic_write_text(folder.verify_file("md"), markdown(v, f"{run.manifest['name']} ({folder.path})"))
    figure(seed_views(run.path, verify_settings(run))[v.seeds[0]], folder.verify_file("png"))  # atomic: plots.save.save_figure
