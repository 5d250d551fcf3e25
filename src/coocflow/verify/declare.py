"""Declare a theorem about a System: its events, quantities, premises and claims (docs/theorems.md).

A `Theorem` is data: what the statement names (event times, quantities measured per seed),
what it assumes (`Premise`s on the System and the config) and what it claims (`Sign`, `Ordering`,
`Bound`, `Limit`, `Identity`, `Check`, `Rate`, and `Statement`, a claim as its source states it,
tested by several of those), each claim with the evidence class its verdict carries. A System returns its theorem from `AbstractSystem.theorem()`; `coocflow verify` judges it
on a run, a config or a sweep along any config key (`coocflow.verify.judge`). Nothing here
computes: every callable receives the System (built from the run's config) or one seed of the run
(`SeedRun`, or what the theorem's `reads` makes of it).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Union

import numpy as np

from coocflow.config import Config, current_key, is_known_key, suggest_key
from coocflow.errors import ConfigError
from coocflow.verify.rate_judge import KINDS, ORDER_TOLERANCE, RateTest

EVIDENCE_CLASSES = ("statement", "refinement", "identity", "diagnostic")
"""What a claim's verdict is evidence of: `statement`, the theorem as stated (a fail is a finding
against it); `refinement`, a sharper statement derived from it (shown, never fails the theorem);
`identity`, an equation that holds for any state (it tests the code); `diagnostic`, a number shown
with no verdict."""

PROBABILITY_LEVEL = 0.05
"""The level of the one-sided binomial test of a `Check` stated with probability 1 - delta: k failures
in N seed runs refute "each fails with probability at most delta" when P(Binomial(N, delta) >= k) is
below this (`within_probability`)."""


def within_probability(failed: int, runs: int, delta: float) -> float:
    """P(Binomial(runs, delta) >= failed): how often runs that each fail with probability delta give
    at least `failed` failures (1 for none)."""
    return sum(math.comb(runs, k) * delta**k * (1 - delta) ** (runs - k) for k in range(failed, runs + 1))


VACUOUS_FACTOR = 1e3
"""A `Bound` or a `Check` passed with every bound beaten by more than this factor says nothing about
the data: `vacuous`, counted neither as a pass nor as a fail."""

Number = Union[float, Callable[[Any], float]]
"""A level, a time or a bound: a number, or a function of the System (its settings)."""


@dataclass(frozen=True)
class SeedRun:
    """One seed of a run, as a theorem reads it: the observation times, every observable's series
    over them (NaN after the seed stopped), the System and its config, the parameters at t = 0 and
    at the end (the System's own type), the declared events' times (None: not reached), the run folder
    it was read from and `view`, what the theorem's `reads` makes of it (made once per seed when the
    judge reads the folder; None: made when asked for, or the SeedRun itself when there is no `reads`)."""

    seed: int
    t: np.ndarray
    series: dict[str, np.ndarray]
    system: Any
    config: Config
    initial: Any
    final: Any
    events: dict[str, float | None] = field(default_factory=dict)
    folder: Path | None = None
    view: Any = None

    def value_at(self, observable: str, t: float) -> float:
        """The observable at time t, linear between observations (NaN outside the observed range)."""
        values, times = np.asarray(self.series[observable], float), np.asarray(self.t, float)
        keep = np.isfinite(values)
        if not keep.any() or not times[keep][0] <= t <= times[keep][-1]:
            return math.nan
        return float(np.interp(t, times[keep], values[keep]))


def number(value: Number, system: Any) -> float:
    """A declared number: itself, or the function of the System evaluated."""
    return float(value(system) if callable(value) else value)


# Events: named times in a run, one per seed.

@dataclass(frozen=True)
class Crossing:
    """The first time `observable` reaches `level` from below (`rising`) or from above: located between
    the two observations that bracket it, on the cubic through the four around them (a straight line
    where fewer than four are finite; `judge._crossing`), None when it never does."""

    observable: str
    level: Number
    rising: bool = True


@dataclass(frozen=True)
class FirstTime:
    """The first observed time at which `predicate(series)` holds: `predicate` maps the dict of
    observable series (each over the observation times) to one bool per observation."""

    predicate: Callable[[dict[str, np.ndarray]], np.ndarray]
    text: str = ""


@dataclass(frozen=True)
class At:
    """A fixed time (a number, or a function of the System)."""

    t: Number


Event = Union[Crossing, FirstTime, At]


# Quantities: one number per seed.

@dataclass(frozen=True)
class EventTime:
    """The time of a declared event."""

    event: str


@dataclass(frozen=True)
class ValueAt:
    """An observable's value at `at`: "start", "end" (the seed's last finite observation) or a
    declared event's time."""

    observable: str
    at: str = "end"


@dataclass(frozen=True)
class Computed:
    """Any number computed from one seed: `fn` receives what the theorem's `reads` makes of the seed, or
    the `SeedRun` itself (its parameters, series, events, System) when it declares no `reads`."""

    fn: Callable[[SeedRun], float]
    text: str = ""


Quantity = Union[EventTime, ValueAt, Computed]


@dataclass(frozen=True)
class PremiseOutcome:
    """What a premise finds on one seed, or on the config: whether it is met (None: this run cannot tell),
    what was measured (in words), why it is not met or cannot be told (`failures`, one phrase each), how
    far off it is (`badness`, larger is worse: the seed a run's verdict shows) and, where it depends on
    the run, what "met" needs (`threshold`, else the premise's own)."""

    met: bool | None
    value: str = ""
    failures: tuple[str, ...] = ()
    badness: float = 0.0
    threshold: str = ""


PREMISE_KINDS = ("assumed", "relaxed", "unstated", "reported")
"""What a premise is to the theorem: `assumed`, what its statements assume (a claim failing where one it
needs is not met is `fail outside premises`); `relaxed`, a weaker form of the assumed premise it
`relaxes`, under which every verdict is also given (the stated one decides); `unstated`, a condition a
proof needs that the source does not state (a `Statement` names it in `unstated`: never a premise, but a
failure confined to the runs that do not meet it is `holds under an unstated condition`); `reported`,
measured and shown but assumed by no claim (events the source says hold with probability 1 - delta)."""


@dataclass(frozen=True)
class Premise:
    """What the theorem assumes, measured on each run: `holds(system, config)` on the config, or
    `on_seed(view)` on every seed (the view is what the theorem's `reads` makes of the seed's `SeedRun`),
    where a run meets it only if every seed does. Either returns a bool or a `PremiseOutcome` (the
    measured value, the failures). `threshold` says in words what "met" needs; `kind` is one of
    `PREMISE_KINDS` (`relaxes` names the premise a relaxed one weakens). A claim that fails where one
    of its premises is not met is `fail outside premises`, not a finding."""

    id: str
    statement: str
    holds: Callable[[Any, Config], "bool | PremiseOutcome"] | None = None
    on_seed: Callable[[Any], "bool | PremiseOutcome"] | None = None
    threshold: str = ""
    kind: str = "assumed"
    relaxes: str = ""


# Claims.

@dataclass
class Outcome:
    """What a `Check` finds on one seed: what it measured, the threshold it holds that to (in words),
    whether it holds (None: the seed cannot tell), one sentence with the numbers, and for explicit
    bounds each part's headroom (`bound_parts`: bound / |value|), so that a pass far inside every
    bound is reported `vacuous` rather than as evidence."""

    measured: Any
    passed: bool | None
    sentence: str
    threshold: str = ""
    headroom: dict[str, float] = field(default_factory=dict)
    applies: bool = True
    """With `passed` None: whether the claim arises on this seed at all. True: it does, but the seed
    cannot tell (the seed's verdict is `inconclusive`); False: it does not (the window it speaks of is
    never reached, what it is about is absent), and the seed is `not applicable`, which counts neither
    way: a claim passes on the seeds where it applies."""

    @property
    def vacuous_parts(self) -> list[str]:
        return [part for part, room in self.headroom.items() if room > VACUOUS_FACTOR]

    @property
    def vacuous(self) -> bool:
        """A pass every one of whose bounds is beaten by more than `VACUOUS_FACTOR`."""
        return bool(self.passed) and bool(self.headroom) and len(self.vacuous_parts) == len(self.headroom)


def bound_parts(**parts: tuple[float, float]) -> dict[str, float]:
    """`part=(value, bound)` -> {part: bound / |value|} (inf for a value of 0): an `Outcome`'s headroom."""
    return {part: (abs(bound) / abs(value) if value else float("inf")) for part, (value, bound) in parts.items()}


@dataclass(frozen=True, kw_only=True)
class Claim:
    """What every claim has: an id, the statement in words, its evidence class, the premises
    (ids) its proof needs."""

    id: str
    statement: str
    evidence: str = "statement"
    premises: tuple[str, ...] = ()

    def quantity_names(self) -> tuple[str, ...]:
        return ()


@dataclass(frozen=True, kw_only=True)
class Sign(Claim):
    """`quantity` > 0 (or < 0 when not `positive`) on every seed."""

    quantity: str
    positive: bool = True

    def quantity_names(self) -> tuple[str, ...]:
        return (self.quantity,)


@dataclass(frozen=True, kw_only=True)
class Ordering(Claim):
    """quantities[0] < quantities[1] < ... on every seed (strictly)."""

    quantities: tuple[str, ...]

    def quantity_names(self) -> tuple[str, ...]:
        return tuple(self.quantities)


@dataclass(frozen=True, kw_only=True)
class Bound(Claim):
    """lower <= quantity <= upper on every seed, with explicit constants (numbers or functions of
    the System). A pass whose every bound is beaten by more than `VACUOUS_FACTOR` is vacuous (the
    bound says nothing about the data), except for an `identity`, which holds to rounding by design;
    a limit is a `Limit`, not a bound."""

    quantity: str
    upper: Number | None = None
    lower: Number | None = None

    def quantity_names(self) -> tuple[str, ...]:
        return (self.quantity,)


@dataclass(frozen=True, kw_only=True)
class Limit(Claim):
    """`observable` converges to `to` (a number or a function of the System): at the seed's last
    observation it is within `tol` of it (relative to |to|, absolute when `to` is 0), and at t = 0
    it was not (a run that starts at its limit is vacuous: it shows no convergence)."""

    observable: str
    to: Number = 0.0
    tol: float = 1e-6


@dataclass(frozen=True, kw_only=True)
class Identity(Claim):
    """Two computed quantities agree to `rtol` relative on every seed."""

    left: str
    right: str
    rtol: float = 1e-8

    def quantity_names(self) -> tuple[str, ...]:
        return (self.left, self.right)


@dataclass(frozen=True, kw_only=True)
class Check(Claim):
    """A claim judged on each seed by a function, for what the other claims cannot say (a curve's
    shape over a phase, a sandwich of three rates, a fitted constant): `judge(view)` returns the
    seed's `Outcome`, where `view` is what the theorem's `reads` makes of the seed's `SeedRun` (the
    SeedRun itself when it declares none). A diagnostic says in `no_verdict` why it carries none.
    Calling the check on a view judges it: `check(view)`."""

    judge: Callable[[Any], Outcome]
    no_verdict: str = ""
    at_probability: float = 0.0
    """The delta of an event its source states "with probability at least 1 - delta" (over the
    initialization, say): a seed outside the event is one the statement allows, so its failures over N
    seed runs are judged together, by a one-sided binomial test at `PROBABILITY_LEVEL`
    (`within_probability`), not one by one. 0: it must hold on every seed."""

    def __call__(self, view: Any) -> Outcome:
        return self.judge(view)


@dataclass(frozen=True, kw_only=True)
class Rate(Claim):
    """quantity ~ axis^exponent along the config key `axis` (any key: `model.m`, `data.n`,
    `optimizer.lr`, a System's `settings.KEY`), as `kind` (order: Theta, upper bound: O, lower
    bound: Omega, decays: 1/poly) within `tol`, allowing `log_power` factors of log(axis) where
    the statement carries them; `divide_by` (a function of the System) divides the quantity by a
    factor the statement gives exactly (a known log factor) before the fit. A rate in several keys,
    quantity ~ axis^exponent * key^p * ..., names the others in `also` ({key: p}): it is judged along
    any of them, and along a sweep that moves several at once (eq. (1)'s m and m1 together) by the sum
    of each exponent times how fast its key moves (`test_along`). Judged by the pre-registered rate
    test over a sweep (`coocflow verify TARGET --scaling AXIS`); `design` is the sweep the theorem is
    verified at (axis values), whose power `verify` prints."""

    quantity: str
    axis: str
    exponent: float
    kind: str = "order"
    tol: float = ORDER_TOLERANCE
    log_power: int = 0
    divide_by: Callable[[Any], float] | None = None
    design: tuple[float, ...] = ()
    also: Mapping[str, float] = field(default_factory=dict)

    def quantity_names(self) -> tuple[str, ...]:
        return (self.quantity,)

    def exponents(self) -> dict[str, float]:
        """The exponent along each key the rate names: `axis` first, then `also`."""
        return {self.axis: self.exponent, **self.also}

    def test_along(self, slopes: Mapping[str, float]) -> RateTest:
        """The pre-registered `RateTest` along a sweep's axis x in which log(key) moves by slopes[key]
        per unit of log x (a key it does not name: fixed): the predicted exponent is the sum of each
        named key's exponent times its slope."""
        predicted = sum(power * slopes.get(key, 0.0) for key, power in self.exponents().items())
        return RateTest(predicted, self.kind, self.tol, self.log_power)



@dataclass(frozen=True, kw_only=True)
class Statement(Claim):
    """A statement of the theorem as its source states it, tested by several pieces of evidence: the
    theorem's checks it names (`checks`, claim ids) and rates of its own (`rates`). Its verdict is
    the first of `STATEMENT_ORDER` among the verdicts of its deciding evidence (statements and
    identities: a refinement is shown with its own verdict, a diagnostic has none). `where` cites the
    source (a lemma, an equation); `identities` are the checks among `checks` that no premise limits;
    `borrowed` those that test another statement's sharper bound (shown here, judged there);
    `unstated` names premises the proof needs that the source does not state: a failure confined to
    runs that do not meet them is `holds under an unstated condition` (eq. (1)'s L. E.7)."""

    where: str = ""
    checks: tuple[str, ...] = ()
    rates: tuple[Rate, ...] = ()
    identities: tuple[str, ...] = ()
    borrowed: tuple[str, ...] = ()
    unstated: tuple[str, ...] = ()

    def quantity_names(self) -> tuple[str, ...]:
        return tuple(rate.quantity for rate in self.rates)


STATEMENT_ORDER = ("fail", "fail outside premises", "holds under an unstated condition", "inconclusive", "pass",
                   "vacuous", "not applicable")
"""A `Statement`'s verdict is the first of these that any of its deciding pieces of evidence has:
`vacuous` evidence counts neither way, so a statement is vacuous only when nothing else decides it."""


def _rate_problems(claim: "Rate"):
    """A rate's keys and design, checked where it is declared: every key it names is one a sweep can set,
    and its design's values are positive and finite (the rate is fit on log axis values)."""
    for key in claim.exponents():
        if not is_known_key(current_key(key)):
            close = suggest_key(key)
            yield (f"claim {claim.id} is a rate along {key}, which is not a config key"
                   + (f"; did you mean {close}?" if close else "; see `coocflow keys` (a System's own: settings.KEY)"))
    bad = [value for value in claim.design
           if isinstance(value, bool) or not (isinstance(value, numbers.Real) and math.isfinite(value) and value > 0)]
    if bad:
        yield (f"claim {claim.id}: its design's values are where the rate is fit in log scale, so each must be positive "
               f"and finite (got {bad[0]!r})")


@dataclass(frozen=True)
class Theorem:
    """A theorem about a System: named events and quantities, premises and claims."""

    name: str
    claims: tuple[Claim, ...]
    events: dict[str, Event] = field(default_factory=dict)
    quantities: dict[str, Quantity] = field(default_factory=dict)
    premises: tuple[Premise, ...] = ()
    source: str = ""
    reads: Callable[[SeedRun], Any] | None = None
    """What each `Check`, seed `Premise` and `Computed` quantity receives of one seed: `reads(seed_run)`,
    made once per seed (eq. (1)'s reads its phase boundaries and saved states), or the `SeedRun` itself
    when None."""
    report: Callable[[Path, Any, Any], Any] | None = None
    """The theorem's own report of one run: called with the run folder and the judge's verdicts on it
    under the premises as stated and relaxed (`judge.judge_readings`: two `TheoremVerdict`s, the second
    None where no premise is relaxed), it writes its files into the folder and returns a `render.Report`
    (eq. (1)'s: the paper's claims table and Appendix C, `verify.paper.render`). None: verify.json/.md
    of `judge.write_theorem_verdict`, printed by `render.DeclaredReport`. Several runs (a sweep along a
    key, a `coocflow sweep` folder) are always reported the second way."""
    scaling: Any = None
    """The theorem's own sweep for `coocflow verify --scaling` along the axes it names: a
    `verify.scaling.ScalingDesign`, which plans the runs and judges them (eq. (1)'s width sweep over m,
    m1 or both, with strata in c0: `verify.paper.width_sweep.WidthSweep`). None, and along any other
    axis: `verify.scaling.KeySweep`, one run per value of a config key."""

    def __post_init__(self):
        problems = list(self.problems())
        if problems:
            raise ConfigError(f"theorem {self.name!r}: {problems[0]}")

    def problems(self):
        """Every inconsistency of the declaration, one sentence each (the first is raised)."""
        ids = [claim.id for claim in self.claims]
        for claim in self.claims:
            if not isinstance(claim, Claim):
                yield f"{claim!r} is not a claim (Sign, Ordering, Bound, Limit, Identity, Check, Rate or Statement)"
                continue
            if ids.count(claim.id) > 1:
                yield f"claim id {claim.id!r} is declared twice"
            if claim.evidence not in EVIDENCE_CLASSES:
                yield f"claim {claim.id}: evidence {claim.evidence!r} is not one of {', '.join(EVIDENCE_CLASSES)}"
            for name in claim.quantity_names():
                if name not in self.quantities:
                    yield (f"claim {claim.id} names quantity {name!r}, which the theorem does not declare "
                           f"(quantities: {', '.join(self.quantities) or 'none'})")
            for premise in claim.premises:
                if premise not in {p.id for p in self.premises}:
                    yield f"claim {claim.id} needs premise {premise!r}, which the theorem does not declare"
            if isinstance(claim, Rate) and claim.kind not in KINDS:
                yield f"claim {claim.id}: kind {claim.kind!r} is not one of {', '.join(KINDS)}"
            if isinstance(claim, Rate):
                yield from _rate_problems(claim)
            if isinstance(claim, Ordering) and len(claim.quantities) < 2:
                yield f"claim {claim.id}: an ordering needs at least two quantities"
            if isinstance(claim, Bound) and claim.upper is None and claim.lower is None:
                yield f"claim {claim.id}: a bound needs an upper or a lower constant"
            if isinstance(claim, Check) and (claim.evidence == "diagnostic") != bool(claim.no_verdict):
                yield f"claim {claim.id}: a diagnostic check, and only a diagnostic, says in no_verdict why it has no verdict"
            if isinstance(claim, Check) and not 0 <= claim.at_probability < 1:
                yield f"claim {claim.id}: at_probability is a failure probability delta in [0, 1)"
            if isinstance(claim, Limit) and not claim.tol > 0:
                yield f"claim {claim.id}: a limit needs a tolerance tol > 0"
            if isinstance(claim, Statement):
                yield from self._statement_problems(claim)
        yield from self._premise_problems()
        for name, quantity in self.quantities.items():
            event = (quantity.event if isinstance(quantity, EventTime)
                     else quantity.at if isinstance(quantity, ValueAt) and quantity.at not in ("start", "end") else None)
            if event is not None and event not in self.events:
                yield f"quantity {name} reads event {event!r}, which the theorem does not declare"

    def setting_problems(self, settings: Any) -> list[str]:
        """The rates along a System setting (`settings.X`) that the System's `Settings` (a dataclass, or None)
        does not declare, one sentence each: known only once the System is, so `coocflow verify` asks before
        it trains (`verify.folders.declared_theorem`)."""
        names = [f.name for f in dataclasses.fields(settings)] if settings is not None else []
        problems = []
        for claim in self.claims:
            for key in claim.exponents() if isinstance(claim, Rate) else ():
                key = current_key(key)
                name = key[len("settings."):] if key.startswith("settings.") else None
                if name is not None and name not in names:
                    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                    problems.append(f"claim {claim.id} is a rate along {key}, which the System does not declare as a "
                                    "setting" + (f"; did you mean settings.{close[0]}?" if close else
                                                 f" (its settings: {', '.join(names) or 'none'})"))
        return problems

    def _premise_problems(self):
        ids = [premise.id for premise in self.premises]
        for premise in self.premises:
            if ids.count(premise.id) > 1:
                yield f"premise id {premise.id!r} is declared twice"
            if (premise.holds is None) == (premise.on_seed is None):
                yield f"premise {premise.id}: give exactly one of holds(system, config) and on_seed(view)"
            if premise.kind not in PREMISE_KINDS:
                yield f"premise {premise.id}: kind {premise.kind!r} is not one of {', '.join(PREMISE_KINDS)}"
            if (premise.kind == "relaxed") != bool(premise.relaxes):
                yield f"premise {premise.id}: a relaxed premise, and only a relaxed one, names the premise it relaxes"
            elif premise.relaxes and premise.relaxes not in ids:
                yield f"premise {premise.id} relaxes {premise.relaxes!r}, which the theorem does not declare"

    def _statement_problems(self, claim: Statement):
        evidence = {c.id: c for c in self.claims if not isinstance(c, Statement)}
        for name in claim.checks:
            if name not in evidence:
                yield (f"statement {claim.id} names check {name!r}, which is not a claim of the theorem "
                       "(a statement's evidence is its other claims, or its own rates)")
        for name in (*claim.identities, *claim.borrowed):
            if name not in claim.checks:
                yield f"statement {claim.id}: {name!r} is listed as an identity or borrowed but not among its checks"
        for premise in claim.unstated:
            if premise not in {p.id for p in self.premises}:
                yield f"statement {claim.id}: unstated condition {premise!r} is not a declared premise"
        for rate in claim.rates:
            if rate.kind not in KINDS:
                yield f"statement {claim.id}, rate {rate.id}: kind {rate.kind!r} is not one of {', '.join(KINDS)}"

    def observables(self) -> dict[str, str]:
        """Every observable the declaration reads by name, with what reads it (an event, a quantity or
        a limit), so a run that lacks one is refused in one line before anything is judged."""
        reads = {}
        for name, event in self.events.items():
            if isinstance(event, Crossing):
                reads.setdefault(event.observable, f"event {name}")
        for name, quantity in self.quantities.items():
            if isinstance(quantity, ValueAt):
                reads.setdefault(quantity.observable, f"quantity {name}")
        for claim in self.claims:
            if isinstance(claim, Limit):
                reads.setdefault(claim.observable, f"claim {claim.id}")
        return reads

    def rate_axes(self) -> tuple[str, ...]:
        """The config keys the rate claims are along, each once, in order."""
        return tuple(dict.fromkeys(key for claim in self.claims if isinstance(claim, Rate) for key in claim.exponents()))
