"""The registry every check of `coocflow verify` joins: one seed's data (`SeedData`), a check's
result (`CheckResult`), the `check` decorator with its evidence classes, and the thresholds the
checks share. The modules of checks (`checks`, `checks_phase1`, `checks_phase2`) import it and
not each other, so they form no cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from coocflow.observables.ensemble import first_time_all_correct
from coocflow.observables.registry import neuron_only
from coocflow.verify.paper.boundaries import phase_boundaries, sandwich_start
from coocflow.verify.paper.saved import SavedState
from coocflow.verify.paper.scales import Scales

# The evidence classes and the vacuous factor are the declaration API's (`verify.declare`), the same
# for eq. (1)'s checks as for any declared theorem. For eq. (1): a `statement` check is the paper's claim
# with its quantifiers, as stated (signs, orderings, explicit inequalities); a `refinement` a sharper
# statement derived here (F8's kappa = (2 - R)/(4 + 3R), E16's derived error term, Lemma 4.5's R*); an
# `identity` an equation of the implementation (eq. (5), Def. E.18, L. F.11); a `diagnostic` a number
# with no verdict (`passed` is None), because it holds by construction or measures a constant the paper
# hides (O, Theta), whose m-dependence only a width sweep can judge. A bound check whose every part
# sits below its bound by more than VACUOUS_FACTOR is `vacuous` (a part that far inside is named in
# the sentence when others decide). Each check is a public `verify.declare.Check`.
from coocflow.verify.declare import (  # noqa: E402,F401  (re-exported)
    EVIDENCE_CLASSES,
    VACUOUS_FACTOR,
    Check,
    Outcome,
    bound_parts,
)

MONOTONE_FRACTION = 0.95
"""Theorem 3.2: a quantity 'increases' when its rate has the right sign at >= 95% of Phase-2 times."""
LINEAR_R2 = 0.99
"""Theorem F.8: 1/loss is linear in t when a straight line explains >= 99% of its variance."""
BALANCE_BOUND = 1 / 3
"""Lemma 4.4: |S_2 - S_3| / min(S_2, S_3) <= C, "a small constant": at most 1/3 over Phase 2, the
largest C Lemmas 4.3 and 4.5 can share (docs/claims.md typo 12: C <= r/(2 + r) < 1/3)."""
SANDWICH_FRACTION = 0.9
"""Lemma 4.3: the sandwich holds at >= 90% of the times in [T0.5, T1]."""
HIDDEN_CONSTANT = 10.0
"""The band [1/HIDDEN_CONSTANT, HIDDEN_CONSTANT] that a fitted constant of a Theta(1) would lie in;
no verdict rests on it (a constant the paper hides makes a check a diagnostic), it only says in
the reports whether a fitted constant looks like one."""
IDENTITY_TOLERANCE = 1e-8
"""An exact identity holds when its two sides agree to 1e-8 relative: eq. (5), Def. E.18, Lemma
F.11 and Appendix C's closed forms, each a JVP or autodiff rate against its closed form (float64
rounding is about 1e-15; a wrong factor or term is far above 1e-8)."""


@dataclass
class CheckResult(Outcome):
    """One check's `Outcome` on one seed, with the check's name, claim (in words) and evidence class."""

    name: str = ""
    claim: str = ""
    evidence: str = "statement"
    """One of `EVIDENCE_CLASSES`."""

    def to_dict(self) -> dict:
        return {"name": self.name, "claim": self.claim, "measured": self.measured, "threshold": self.threshold,
                "passed": self.passed, "sentence": self.sentence, "evidence": self.evidence,
                "headroom": dict(self.headroom), "vacuous": self.vacuous}


@dataclass
class SeedData:
    """What the checks read: one seed's series (1-D over observed times), the widths, and the
    full score matrices A = W_K^T W_Q at the start and the end."""

    series: dict[str, np.ndarray]
    m: int
    A_init: np.ndarray | None = None
    A_final: np.ndarray | None = None
    n: int = 60
    L: int = 5
    """Training samples and tokens per sample (Theorem 3.3's bound on the random-token changes)."""
    states: dict[str, SavedState | None] = field(default_factory=dict)
    """This seed's saved states, keyed "init", "T1" and "final", in the system's own type (weights
    or Grams, `verify.paper.saved`); "T1" is None when the seed never had every sample correct."""
    scales: Scales | None = None
    """The configuration's init scales (v0, U0, W0, ...: docs/claims.md shorthand)."""
    loss_exponent: float = 2.0
    """T* is the first time the loss is <= m^-k with this k (`verify.loss_exponent`)."""
    sandwich_c: float = 0.0
    """Lemma 4.3's C when declared (`verify.sandwich_c`): T0.5 is then the lemma's own
    (`boundaries.sandwich_start`); 0 keeps the catch-up time."""
    t1_declared: float | None = None
    """The paper's T1 = C_T1 / U0 when the configuration declares C_T1 (`verify.c_t1`); otherwise
    T1 is the first all-correct time. `bounds["all_correct"]` is always the latter."""
    events: dict[str, float | None] = field(default_factory=dict)
    """The run's event times located between observations (`flow.events`; the manifest's
    `events_located`): all_correct, T0.5 (the catch-up time), T_prime, T_star."""
    config: dict = field(default_factory=dict)
    """The run's configuration (its dict form): what eq. (1)'s premises read beside the states and scales."""
    event_settings: dict[str, dict] = field(default_factory=dict)
    """What each event was located with (`flow.events.event_settings`: its level, T_star's m^-k with
    the k of the run's configuration; a window; Lemma 4.3's C)."""

    def __post_init__(self):
        self.bounds = phase_boundaries(self.series) if "d_G_mu1_dt" in self.series else {
            "T1": _t1(self.series), "T0.5": None, "phase2_start": None, "end": float(self.series["t"][-1])}
        self.bounds["all_correct"] = self.bounds["T1"]
        if self.t1_declared is not None:
            self.bounds["T1"] = self.t1_declared if self.t1_declared <= self.bounds["end"] else None
        if self.sandwich_c > 0 and "d_G_mu1_dt" in self.series:
            self.bounds["T0.5"] = sandwich_start(self.series, self.sandwich_c, self.bounds["T1"])

    @property
    def t(self) -> np.ndarray:
        return self.series["t"]

    def event_time(self, name: str, grid: float | None, **expected) -> float | None:
        """Event `name` located between observations when the run located it with the settings
        `expected` (its level, window, C: what this verification assumes), else `grid`, its first
        observed time. The bounds (`bounds`) stay on the grid: they index the observations."""
        if name not in self.events or grid is None:
            return grid
        settings = self.event_settings.get(name, {})
        for key, want in expected.items():
            got = settings.get(key, "absent")
            same = (got == want if not isinstance(want, float) or not isinstance(got, float)
                    else bool(np.isclose(got, want, rtol=1e-12, atol=0.0)))
            if not same:
                return grid
        return self.events[name]

    def at(self, name: str, time: float) -> float:
        return float(self.series[name][np.searchsorted(self.t, time)])

    def phase2(self) -> np.ndarray:
        """Mask of Phase-2 observations: t > T1."""
        t1 = self.bounds["T1"]
        return np.zeros_like(self.t, dtype=bool) if t1 is None else self.t > t1


def _t1(series):
    return first_time_all_correct(series["t"], series["min_margin"])


CHECKS: dict[str, Check] = {}
"""Every check of eq. (1)'s theorem by name, in registration order; `CHECKS[name](data)` judges one seed."""
EVIDENCE: dict[str, str] = {}
"""Each registered check's evidence class (`EVIDENCE_CLASSES`)."""


def check(name: str, claim: str, evidence: str, needs_t1: bool = False, needs: tuple[str, ...] = (),
          no_verdict: str = "", at_probability: float = 0.0):
    """Register `fn(data) -> (measured, threshold, passed, sentence[, headroom])` as the check `name`
    of the class `evidence`; `headroom` (`bound_parts`) says how far inside each explicit bound the
    data sit, so a pass far inside every one is reported `vacuous`. A diagnostic states in `no_verdict`
    why it carries none; its `passed` is None and its sentence ends with that reason. `at_probability`
    is the delta of an event the paper states with probability 1 - delta (`Check.at_probability`).

    The wrapper answers for the cases every check shares: a run without the columns the check
    reads (not checked), and a run in which Phase 1 never ends when the check needs T1 (fails,
    or for a diagnostic, nothing to report). A check returns no verdict only where the seed lacks what
    it speaks of (a window not reached, a state not saved): `Outcome.applies` is then False, the
    claim is "not applicable" on that seed, by every judge.
    """
    if evidence not in EVIDENCE_CLASSES:
        raise ValueError(f"check {name}: evidence must be one of {EVIDENCE_CLASSES}, not {evidence!r}")
    if (evidence == "diagnostic") != bool(no_verdict):
        raise ValueError(f"check {name}: a diagnostic, and only a diagnostic, says why it has no verdict")

    def register(fn):
        def run(data: SeedData) -> CheckResult:
            missing = [c for c in needs if c not in data.series]
            if missing:
                why = ("it needs the neurons of W, which a Gram-space run does not have; check it in weight space"
                       if missing[0] in neuron_only() else "re-run it with this coocflow version")
                return CheckResult(None, None, f"the run has no column {missing[0]}: {why}", "", name=name, claim=claim,
                                   evidence=evidence, applies=False)
            if needs_t1 and data.bounds["T1"] is None:
                return CheckResult(None, None if no_verdict else False,
                                   "No observed time has every training sample correct, so Phase 1 never ends.",
                                   "T1 observed", name=name, claim=claim, evidence=evidence)
            measured, threshold, passed, sentence, *rest = fn(data)
            headroom = rest[0] if rest else {}
            if no_verdict:
                passed = None
                sentence = f"{sentence} No verdict: {no_verdict}" if measured is not None else sentence
            result = CheckResult(measured, passed, sentence, threshold, headroom, applies=passed is not None, name=name,
                                 claim=claim, evidence=evidence)
            far = result.vacuous_parts
            if passed and far:
                result.sentence += (f" Vacuous: every bound is beaten by more than {VACUOUS_FACTOR:g}x, so this says "
                                    "nothing either way." if result.vacuous else
                                    f" Beaten by more than {VACUOUS_FACTOR:g}x (vacuous): {', '.join(far)}; the "
                                    "other parts decide.")
            return result

        CHECKS[name] = Check(id=name, statement=claim, evidence=evidence, judge=run, no_verdict=no_verdict,
                             at_probability=at_probability)
        EVIDENCE[name] = evidence
        return CHECKS[name]
    return register
