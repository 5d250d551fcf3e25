"""`coocflow verify`: run every check on every seed of a run folder and write the verdicts.

Writes verify.json (every number), verify.md (a table a person reads) and verify.png (the
checks that are about curves) into the run folder, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from coocflow.theorems.paper.appendix_c import KINDS, max_error, saved_state_agreement
from coocflow.theorems.paper.checks import CHECKS, EVIDENCE, IDENTITY_TOLERANCE, CheckResult, SeedData, late_phase2, run_checks
from coocflow.theorems.paper.claims import (
    CLAIMS,
    NO_VERDICT,
    allowed_failures,
    claims_markdown,
    claims_table,
    evidence_counts,
    judge,
    premises_of_check,
    summary_line,
    unstated_of_check,
)
from coocflow.theorems.judge import PremiseVerdict
from coocflow.theorems.paper.premises import ASSUMED, RELAXED, evaluate_premises, premises_markdown, premises_summary
from coocflow.theorems.paper.saved import SavedState, seed_arrays, seed_states
from coocflow.theorems.paper.scales import scales_of
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


@dataclass
class Verification:
    seeds: list[int]
    per_seed: list[list[CheckResult]]
    boundaries: list[dict]
    appendix_c: list[dict]
    premises: list[PremiseVerdict] = field(default_factory=list)

    @property
    def appendix_c_error(self) -> float:
        """Largest relative disagreement of the closed forms; NaN when no weights were saved."""
        return max_error(self.appendix_c) if self.appendix_c else float("nan")

    @property
    def premises_met(self) -> bool:
        """Whether the run meets every premise the theorems assume (`THEOREM_PREMISES`; one
        that cannot be evaluated here does not count against it)."""
        return not any(p.met is False for p in self.premises if p.id in THEOREM_PREMISES)

    def met(self, relaxed: bool = False) -> dict[str, bool | None]:
        """Each premise's met; `relaxed` reads each premise of `premises.RELAXED` as its relaxed form."""
        met = {p.id: p.met for p in self.premises}
        if relaxed:
            met.update({stated: met[loose] for stated, loose in RELAXED.items() if loose in met})
        return met

    def verdict(self, name: str, passed: bool | None, relaxed: bool = False) -> str:
        """One of `VERDICTS` for a check's result: a claim violated where a premise its proof uses
        is not met (`theorems.paper.claims.premises_of_check`) is not a finding against the paper;
        identities hold for any weights, so premises do not matter; a diagnostic has no verdict."""
        if EVIDENCE.get(name) == "diagnostic":
            return NO_VERDICT
        if name in IDENTITIES or name == APPENDIX_C_CHECK:
            return judge(passed, (), {})
        return judge(passed, premises_of_check(name), self.met(relaxed))

    def pass_rates(self, relaxed: bool = False) -> dict[str, dict]:
        """For every check, the per-seed ones and `appendix_c_closed_forms` (one verdict for
        the configuration): how many pass, fail (premises met: a finding against the paper),
        fail outside premises, are vacuous, or could not be checked, of how many, with the check's
        evidence class (a diagnostic counts its seeds under `no_verdict`); `failed_unstated` and
        `passed_unstated_met` count the failures where an unstated condition of the check's claims
        is not met and the passes where all are (`claims.HOLDS_UNSTATED`). `relaxed`: under each
        premise of `premises.RELAXED` in its relaxed form."""
        rates = {}
        results = {name: [(per[i].passed, per[i].vacuous) for per in self.per_seed] for i, name in enumerate(CHECKS)}
        results[APPENDIX_C_CHECK] = [(None if not self.appendix_c else bool(self.appendix_c_error <= IDENTITY_TOLERANCE),
                                      False)]
        met = self.met(relaxed)
        for name, outcomes in results.items():
            verdicts = [self.verdict(name, passed, relaxed) for passed, _ in outcomes]
            verdicts = ["vacuous" if v == "pass" and vacuous else v for v, (_, vacuous) in zip(verdicts, outcomes)]
            conditions = unstated_of_check(name)
            conditions_met = all(met.get(c) is not False for c in conditions)
            rates[name] = {"passed": verdicts.count("pass"), "failed": verdicts.count("fail"),
                           "failed_outside_premises": verdicts.count("fail outside premises"),
                           "vacuous": verdicts.count("vacuous"),
                           "failed_unstated": verdicts.count("fail") if conditions and not conditions_met else 0,
                           "passed_unstated_met": verdicts.count("pass") if conditions and conditions_met else 0,
                           "unchecked": verdicts.count("not applicable"), "no_verdict": verdicts.count(NO_VERDICT),
                           "of": len(verdicts), "evidence": EVIDENCE.get(name, "identity")}
        return rates

    def claims(self) -> list[dict]:
        """One row per claim of docs/claims.md (`theorems.paper.claims.claims_table`): premises, the checks'
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


def declared_t1(config: dict) -> float | None:
    """The paper's T1 = C_T1 / U0 declared by a run folder's config (`Config.paper_t1`), or None
    (older folders and settings that use the first all-correct time)."""
    c_t1 = config.get("verify", {}).get("c_t1", 0.0)
    if not c_t1 or config["init"]["scheme"] != "theory":
        return None
    return c_t1 / (config["init"]["c1"] ** 2 * config["model"]["m"])


def _snapshot_at(snapshots: dict | None, index: int, time: float, initial: dict) -> SavedState | None:
    """One seed's saved state at flow time `time` from state_snapshots.npz, with the data and the
    fixed arrays (tokens, labels, a, widths) of its initial state (None if it was not kept)."""
    if snapshots is None:
        return None
    times = np.ravel(snapshots["t"])
    hits = np.flatnonzero(np.isclose(times, time, rtol=1e-9, atol=0.0))
    if not hits.size:
        return None
    at = int(hits[0])
    ensemble = np.ndim(snapshots["valid"]) == 2 if "valid" in snapshots else False
    pick = (lambda v: v[at, index]) if ensemble else (lambda v: v[at])
    state = {k: np.asarray(pick(np.asarray(v))) for k, v in snapshots.items()
             if k not in ("t", "step", "valid") and np.ndim(v) >= 1 and np.shape(v)[0] == times.size}
    if "valid" in snapshots and not bool(pick(np.asarray(snapshots["valid"]))):
        return None
    return SavedState.of({**initial, **state, "t": np.asarray(times[at])})


def seed_series(run: LoadedRun) -> list[tuple[int, int, dict[str, np.ndarray]]]:
    """(index in the manifest's `seeds`, seed, its metrics in time order) for each seed with at least
    one valid observation: what `seed_data` builds on, and all a sweep's summary needs without checks."""
    metrics = run.metrics
    seeds = [int(s) for s in run.manifest.get("seeds", [run.manifest["seed"]])]
    # One stable sort by (seed, t) and a split, not a mask per seed: that cost rows x seeds (6 s for a
    # job of 1000 seeds); the rows of each seed come out in the order the per-seed sort gave them.
    if not len(metrics["t"]):
        return []
    if "seed" not in metrics:  # a folder written before the column: every row is each seed's
        order = np.argsort(np.asarray(metrics["t"]), kind="stable")
        return [(index, seed, {k: np.asarray(v)[order] for k, v in metrics.items()}) for index, seed in enumerate(seeds)]
    order = np.lexsort((np.asarray(metrics["t"]), np.asarray(metrics["seed"])))
    ordered = {k: np.asarray(v)[order] for k, v in metrics.items()}
    sorted_seeds = ordered["seed"]
    out = []
    for index, seed in enumerate(seeds):
        start, stop = np.searchsorted(sorted_seeds, seed, "left"), np.searchsorted(sorted_seeds, seed, "right")
        if start == stop:
            continue
        out.append((index, seed, {k: v[start:stop] for k, v in ordered.items()}))
    return out


def seed_data(run: LoadedRun) -> list[tuple[int, SeedData]]:
    """Each seed's series, saved states (initial, T1, final) and the configuration's scales.

    Seeds are matched to the stacked states through the manifest's `seeds` list; a seed with
    no valid observation (it diverged at t = 0) is skipped.
    """
    scales = scales_of(run.config)
    paper_t1 = declared_t1(run.config)
    initial_arrays = seed_arrays(run.state_init)
    per_seed = {"init": [SavedState.of(arrays) for arrays in initial_arrays], "final": seed_states(run.state_final),
                "T1": seed_states(run.state_t1) if run.state_t1 is not None else None}
    out = []
    for index, seed, series in seed_series(run):
        states = {name: (None if stack is None else stack[index]) for name, stack in per_seed.items()}
        if states["T1"] is not None and states["T1"].t is not None and not np.isfinite(states["T1"].t):
            states["T1"] = None
        if paper_t1 is not None:
            states["T1"] = _snapshot_at(run.state_snapshots, index, paper_t1, initial_arrays[index])
        entry = next((p for p in run.manifest.get("per_seed", []) if p.get("seed") == seed), {})
        located = {name: entry["events"][name] for name in entry.get("events_located", [])}
        out.append((seed, SeedData(series, scales.m, n=scales.n, L=scales.L, events=located,
                                   event_settings=run.manifest.get("event_settings", {}),
                                   A_init=states["init"].scores, A_final=states["final"].scores,
                                   states=states, scales=scales, t1_declared=paper_t1, config=run.config,
                                   loss_exponent=run.config.get("verify", {}).get("loss_exponent", 1.0),
                                   sandwich_c=run.config.get("verify", {}).get("sandwich_c", 0.0))))
    return out


def verify_run(run: LoadedRun) -> Verification:
    """The premises of the theorems on this run, every check on every seed, and the
    implementation identities (Appendix C's closed forms at the run's own saved states)."""
    seeds, per_seed, bounds = [], [], []
    for seed, data in seed_data(run):
        seeds.append(seed)
        per_seed.append(run_checks(data))
        bounds.append(data.bounds)
    appendix = saved_state_agreement(run)
    return Verification(seeds, per_seed, bounds, appendix, evaluate_premises(run))


def width_summary(v: Verification, m: int | None = None, m1: int | None = None) -> dict:
    """What the claims table reads of one width's verification: its premises, every check's
    verdict counts over seeds, and the first seed's results."""
    return {"m": m, "m1": m1, "premises": [p.to_dict() for p in v.premises], "premises_met": v.premises_met,
            "checks": v.pass_rates(), "checks_relaxed": v.pass_rates(relaxed=True),
            "first_seed": {r.name: r.to_dict() for r in v.per_seed[0]} if v.per_seed else {}}


COUNTED = ("passed", "failed", "failed_outside_premises", "vacuous", "failed_unstated", "passed_unstated_met",
           "unchecked", "no_verdict", "of")
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
              "not applicable": rate["unchecked"],
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
              "statements into numbers (see `coocflow/theorems/paper/checks.py`).", "",
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
              "kinds of variables (coocflow/theorems/paper/appendix_c.py) against forward-mode derivatives along -grad L, "
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
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4), constrained_layout=True)
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
    figure(seed_data(run)[0][1], folder.verify_file("png"))  # atomic: plots.save.save_figure
