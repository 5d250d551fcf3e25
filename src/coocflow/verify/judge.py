"""Judge a declared `Theorem` (coocflow.verify.declare) on run folders of its System.

One run: every claim but the rates, on every seed. A sweep along a config key (`verify TARGET
--scaling KEY`): those claims on every run of it (a claim passes only where it holds on every run
and seed, and one run that breaks it fails it), and each rate claim along that key by the
pre-registered rate test (`verify.rate_judge.judge_rate`, seeds paired across the sweep), with the
power of the test at that design: how often a claim whose exponent is 0.2 off fails, on sweeps
simulated with the seed-to-seed noise the data show (`verify.power.power_cell`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coocflow.config import config_from_dict, flatten_dotted
from coocflow.errors import ConfigError, CoocflowError, RunFolderError
from coocflow.storage import atomic_write_json, atomic_write_text
from coocflow.storage.folders import RunFolder, SweepFolder
from coocflow.storage.run_folder import pivot_metrics, read_metrics, read_state
from coocflow.systems.registry import system_class, system_of
from coocflow.verify.exponents import json_safe
from coocflow.verify.power import power_cell
from coocflow.verify.rate_judge import RateTest, judge_rate
from coocflow.verify.declare import (
    VACUOUS_FACTOR,
    At,
    Bound,
    Check,
    Claim,
    Computed,
    Crossing,
    EventTime,
    FirstTime,
    Identity,
    Limit,
    Ordering,
    Outcome,
    PROBABILITY_LEVEL,
    Premise,
    PremiseOutcome,
    Rate,
    SeedRun,
    Sign,
    STATEMENT_ORDER,
    Statement,
    Theorem,
    ValueAt,
    number,
    within_probability,
)

VERDICTS = ("pass", "fail", "fail outside premises", "holds under an unstated condition", "inconclusive", "vacuous",
            "not applicable", "diagnostic")
"""A claim's verdict. `fail outside premises`: it fails only where a premise it needs is not met (the
theorem does not promise it there); `holds under an unstated condition`: a `Statement` whose every
failure is on runs that do not meet a condition its proof needs and its source does not state, and
which holds on the runs that meet it; `inconclusive`: the data cannot decide (an event a quantity
reads never happened; a rate's interval straddles its band); `vacuous`: passed by so much that it
says nothing; `not applicable`: a rate on a single run, or along another key than the sweep's, or a
check on runs none of whose seeds it applies to (`Outcome.applies`)."""
POWER_ERROR = 0.2
"""The exponent error at which `verify` reports the rate test's power (a claim this far off should fail)."""
POWER_TRIALS = 200


def theorem_of(system_spec: str) -> Theorem | None:
    """The theorem the System `system_spec` declares (`AbstractSystem.theorem`), or None."""
    return system_class(system_spec).theorem()


def event_times(theorem: Theorem, t: np.ndarray, series: dict[str, np.ndarray], system: Any) -> dict[str, float | None]:
    """Each declared event's time on one seed's series (None where it does not happen)."""
    times: dict[str, float | None] = {}
    for name, event in theorem.events.items():
        if isinstance(event, At):
            when = number(event.t, system)
            times[name] = when if when <= np.nanmax(t) else None
        elif isinstance(event, Crossing):
            times[name] = _crossing(t, np.asarray(series[event.observable], float), number(event.level, system),
                                    event.rising)
        elif isinstance(event, FirstTime):
            holds = np.asarray(event.predicate(series), dtype=bool)
            hits = np.flatnonzero(holds)
            times[name] = float(t[hits[0]]) if hits.size else None
    return times


def _crossing(t: np.ndarray, values: np.ndarray, level: float, rising: bool) -> float | None:
    """The first time `values` reaches `level`: between the two observations that bracket it, the root
    of the cubic through the four observations around them (error O(h^4) in the grid's spacing h, where
    a straight line errs by O(h^2): 1.3e-3 relative against 1e-6 for exp(-2t) on 120 log-linear points);
    the straight line where fewer than four finite observations surround it."""
    gap = values - level if rising else level - values
    with np.errstate(invalid="ignore"):
        hits = np.flatnonzero(gap >= 0)
    if not hits.size:
        return None
    k = int(hits[0])
    if k == 0 or not np.isfinite(gap[k - 1]):
        return float(t[k])
    lo, hi = float(t[k - 1]), float(t[k])
    linear = lo + (hi - lo) * (-gap[k - 1]) / (gap[k] - gap[k - 1])
    around = np.arange(max(0, k - 2), min(len(t), k + 2))
    if len(around) < 4 or not np.all(np.isfinite(gap[around])):
        return float(linear)
    u = (np.asarray(t[around], float) - lo) / (hi - lo)
    roots = np.roots(np.polyfit(u, gap[around], 3))
    inside = [r.real for r in roots if abs(r.imag) < 1e-9 and -1e-12 <= r.real <= 1 + 1e-12]
    return float(lo + (hi - lo) * min(inside)) if inside else float(linear)


def seed_runs(folder: Path, theorem: Theorem, verify: dict | None = None) -> list[SeedRun]:
    """Every seed of a complete run folder with at least one observation (a seed that diverged at t = 0
    has none, and no run to judge), with the theorem's events; read with the `[verify]` settings
    `verify` where given (how a run is judged, not how it trained: a sweep judges the same runs at
    several of them), else the folder's own."""
    run = RunFolder.open(folder)
    config = run.config()
    if verify is not None:
        config = config_from_dict({**config.to_dict(), "verify": verify})
    system = system_of(config)
    metrics = read_metrics(run.metrics_file)
    t, series = pivot_metrics(metrics)
    initial, final = (system.from_arrays(read_state(run.state_file(which), system=config.system))
                      for which in ("init", "final"))
    present = set(series) | {name.rpartition("_")[0] for name in series if name.rpartition("_")[2].isdigit()}
    for observable, reader in theorem.observables().items():
        if observable not in present:
            raise ConfigError(f"theorem {theorem.name!r}: {reader} reads observable {observable!r}, which the runs of "
                              f"{config.system} do not have (they have: {', '.join(sorted(series))}); fix the declaration")
    manifest = run.manifest()
    seeds = list(manifest.get("seeds") or [config.seed])
    per_seed = manifest.get("per_seed") or [{} for _ in seeds]
    observed = ([int(s) for s in np.unique(metrics["seed"])] if "seed" in metrics else seeds[:1])  # pivot's rows
    import jax  # lazy: the shapes of the System's own parameters

    template = jax.eval_shape(system.init, jax.random.PRNGKey(0))
    runs = []
    for index, seed in enumerate(seeds):
        if seed not in observed:
            continue
        row = observed.index(seed)
        mine = {name: values[row] for name, values in series.items()}
        _group_vectors(mine)
        events = event_times(theorem, t, mine, system)
        located = set(per_seed[index].get("events_located") or ())
        events.update({name: when for name, when in (per_seed[index].get("events") or {}).items()
                       if name in events and name in located})  # the solver located it: to its tolerance
        run_of_seed = SeedRun(seed=seed, t=t, series=mine, system=system, config=config,
                              initial=_take(initial, index, template), final=_take(final, index, template), events=events, folder=Path(folder))
        if theorem.reads is not None:
            try:
                run_of_seed = dataclasses.replace(run_of_seed, view=theorem.reads(run_of_seed))
            except ConfigError:
                raise
            except Exception as err:  # the user's function: one line naming it, not a traceback
                _refuse_unrecorded(err, config, f"theorem {theorem.name!r}")
                raise ConfigError(f"theorem {theorem.name!r}: its reads failed on seed {seed} "
                                  f"({type(err).__name__}: {err}); fix the function") from None
        runs.append(run_of_seed)
    if not runs:  # every seed diverged at t = 0: a verdict would be vacuous
        divergence = manifest.get("divergence") or {}
        why = f" ({divergence['quantity']} not finite)" if divergence.get("quantity") else ""
        raise RunFolderError(f"{folder}: no seed was observed even once{why}, so there is nothing to judge; "
                             "start from finite parameters (`coocflow show` says where each seed stopped)")
    return runs


def _refuse_unrecorded(err: Exception, config: Any, what: str) -> None:
    """Where a theorem's function asked a lean run (`observe.only`) for an observable it did not record
    (a KeyError), one line saying so instead of blaming the function."""
    if isinstance(err, KeyError) and getattr(getattr(config, "observe", None), "only", ()):
        raise ConfigError(f"{what} reads observable {err.args[0]!r}, which the run did not record (observe.only); "
                          "verify a run that records every observable") from None


def _probe_lean(theorem: Theorem, run: SeedRun) -> None:
    """On a lean run (`observe.only`), each per-seed claim measured once on its first seed before any
    other folder is read: a claim reading an observable the runs did not record is refused in one line
    (`_refuse_unrecorded`) after one folder, not after reading every folder of a sweep (a 10-job sweep
    of 1000 seeds a job took 45 s and 1.8 GB to say so)."""
    if not getattr(getattr(run.config, "observe", None), "only", ()):
        return
    for claim in theorem.claims:
        if not isinstance(claim, (Rate, Statement)):
            _measure_on_seed(claim, theorem, run)


def _view(theorem: Theorem, run: SeedRun) -> Any:
    """What a check, a seed premise or a computed quantity receives of one seed: its `view` (made once
    when the folder was read), else the theorem's `reads` of it, else the SeedRun itself."""
    if run.view is not None:
        return run.view
    return theorem.reads(run) if theorem.reads is not None else run


def _group_vectors(series: dict[str, np.ndarray]) -> None:
    """Add each vector observable (columns NAME_1, NAME_2, ...) as one (times, entries) array NAME."""
    stems: dict[str, list[int]] = {}
    for name in series:
        stem, _, index = name.rpartition("_")
        if stem and index.isdigit():
            stems.setdefault(stem, []).append(int(index))
    for stem, indices in stems.items():
        if stem not in series and sorted(indices) == list(range(1, len(indices) + 1)):
            series[stem] = np.stack([series[f"{stem}_{i}"] for i in range(1, len(indices) + 1)], axis=-1)


def _take(tree: Any, index: int, template: Any) -> Any:
    """Seed `index` of a stacked parameter pytree: each leaf with one more axis than the System's own
    (`template`, its `init` traced without computing) is indexed on it; a leaf the seeds share (a Gram
    state's widths) is kept. Sliced in NumPy, then put back as a JAX array: indexing a JAX array dispatches
    an operation compiled for each leaf's shape (2.0 of the 36 s a `verify theory --scaling both` spent
    re-judging its 48 runs)."""
    import jax  # lazy: the seed axis of the System's parameter pytree
    import jax.numpy as jnp  # lazy: as above

    return jax.tree.map(lambda leaf, own: jnp.asarray(np.asarray(leaf)[index]) if np.ndim(leaf) == len(own.shape) + 1
                        else leaf, tree, template)


def quantity(theorem: Theorem, name: str, run: SeedRun) -> float:
    """A declared quantity on one seed (NaN where it cannot be measured: an event that did not happen)."""
    declared = theorem.quantities[name]
    if isinstance(declared, EventTime):
        when = run.events.get(declared.event)
        return math.nan if when is None else float(when)
    if isinstance(declared, ValueAt):
        values = np.asarray(run.series[declared.observable], float)
        keep = np.flatnonzero(np.isfinite(values))
        if not keep.size:
            return math.nan
        if declared.at == "start":
            return float(values[keep[0]])
        if declared.at == "end":
            return float(values[keep[-1]])
        when = run.events.get(declared.at)
        return math.nan if when is None else run.value_at(declared.observable, when)
    if isinstance(declared, Computed):
        try:
            found = declared.fn(_view(theorem, run))
            return math.nan if found is None else float(found)
        except Exception as err:  # the user's function: one line naming it, not a traceback
            _refuse_unrecorded(err, run.config, f"theorem {theorem.name!r}: quantity {name}")
            raise ConfigError(f"theorem {theorem.name!r}: quantity {name} failed on seed {run.seed} "
                              f"({type(err).__name__}: {err}); fix its function") from None
    raise TypeError(f"quantity {name}: {declared!r} is not a quantity")


@dataclass
class ClaimVerdict:
    """One claim's verdict with everything it rests on."""

    id: str
    statement: str
    kind: str
    evidence: str
    verdict: str
    sentence: str
    values: dict[str, Any] = field(default_factory=dict)
    power: dict | None = None
    rate: dict | None = None
    failed_runs: list[int] = field(default_factory=list)
    """The runs (indices) on which it fails where its premises are met: what a `Statement` with
    unstated conditions compares with the runs that meet them."""
    tally: dict[str, int] = field(default_factory=dict)
    """A claim judged seed by seed: on how many seed runs each verdict (`seed_verdict`), e.g.
    {"pass": 7, "not applicable": 1}; empty for rates and statements."""
    unstated: dict[str, int] = field(default_factory=dict)
    """For a check that a `Statement` with unstated conditions names: its failures on runs that do not
    meet every such condition (`failed_unstated`) and its passes on runs that do (`passed_unstated_met`),
    what "holds under an unstated condition" weighs; empty otherwise."""
    outcomes: list[Outcome] = field(default_factory=list, repr=False, compare=False)
    """A `Check`'s `Outcome` on each seed run, runs then seeds in order (what a theorem's own report
    shows seed by seed); not written to verify.json, whose `values` hold what each measured."""

    def to_dict(self) -> dict:
        """Every field but `outcomes` (a check's own objects; `values` has their numbers)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "outcomes"}


@dataclass
class TheoremVerdict:
    """A theorem judged on a run or a sweep."""

    theorem: str
    source: str
    target: str
    axis: str | None
    runs: list[dict]
    premises: list[dict]
    claims: list[ClaimVerdict]

    def to_dict(self) -> dict:
        return {"theorem": self.theorem, "source": self.source, "target": self.target, "axis": self.axis,
                "runs": self.runs, "premises": self.premises, "claims": [c.to_dict() for c in self.claims],
                "counts": self.counts()}

    def counts(self) -> dict[str, int]:
        return {verdict: sum(c.verdict == verdict for c in self.claims) for verdict in VERDICTS
                if any(c.verdict == verdict for c in self.claims)}

    def pass_rates(self) -> dict[str, dict]:
        """For every claim judged seed by seed: on how many seed runs it got each verdict (its `tally`), of
        how many, and its evidence class (what eq. (1)'s `pass_rates` gives for its checks)."""
        return {c.id: {**c.tally, "of": sum(c.tally.values()), "evidence": c.evidence} for c in self.claims if c.tally}

    def table(self):
        """One row per claim (pyarrow Table: `.to_pandas()`, Polars, DuckDB): its id, statement, evidence,
        verdict and sentence, and on how many seed runs each verdict (`seed_verdict`'s; 0 for rates and
        statements)."""
        import pyarrow as pa  # lazy: defers pyarrow, 0.3 s

        seed_verdicts = ("pass", "fail", "fail outside premises", "vacuous", "inconclusive", "not applicable", "no verdict")
        return pa.Table.from_pylist([{"claim": c.id, "statement": c.statement, "evidence": c.evidence, "verdict": c.verdict,
                                      "sentence": c.sentence, **{f"seed runs: {verdict}": c.tally.get(verdict, 0)
                                                                 for verdict in seed_verdicts}}
                                     for c in self.claims])

    def findings(self) -> list[str]:
        """Claims the data refute where their premises hold (statements and identities)."""
        return [c.id for c in self.claims if c.verdict == "fail" and c.evidence in ("statement", "identity")]

    def markdown(self) -> str:
        lines = [f"# {self.theorem}: verified on {self.target}", ""]
        if self.source:
            lines += [self.source, ""]
        lines += [f"{len(self.runs)} run(s)" + (f" along {self.axis}" if self.axis else "") + ": "
                  + ", ".join(f"{run['value'] if self.axis else run['folder']}" for run in self.runs), ""]
        if self.premises:
            lines += ["| premise | statement | measured (first run) | needs | met |", "| --- | --- | --- | --- | --- |"]
            lines += [f"| {p['id']} | {p['statement']} | {p.get('value', '')} | {p.get('threshold', '')} | "
                      f"{p['met']}{' (' + p['note'] + ')' if p.get('note') else ''} |" for p in self.premises]
            lines.append("")
        lines += ["| claim | statement | evidence | verdict | measured |", "| --- | --- | --- | --- | --- |"]
        for c in self.claims:
            power = f" Power: {c.power['sentence']}" if c.power else ""
            lines.append(f"| {c.id} | {c.statement} | {c.evidence} | {c.verdict} | {c.sentence}{power} |")
        lines += ["", "Verdicts: " + "; ".join(f"{k} {v}" for k, v in self.counts().items())]
        return "\n".join(lines) + "\n"


@dataclass
class PremiseVerdict:
    """A declared `Premise` measured on one run: what was measured (the worst seed's value for a premise
    on the seeds), what "met" needs, whether it is met (None: the run cannot tell) and why not."""

    id: str
    statement: str
    value: str
    threshold: str
    met: bool | None
    note: str = ""
    kind: str = "assumed"

    def to_dict(self) -> dict:
        return asdict(self)


def _premise_outcome(found: Any) -> PremiseOutcome:
    if isinstance(found, PremiseOutcome):
        return found
    if found is None:
        return PremiseOutcome(None)
    return PremiseOutcome(bool(found), "met" if found else "not met")


def _kleene_and(verdicts: list[bool | None]) -> bool | None:
    """False if any is False, else None if any is None, else True."""
    return False if any(v is False for v in verdicts) else (None if any(v is None for v in verdicts) else True)


def premise_verdict(premise: Premise, system: Any, config: Any, views: list[Any], seeds: list[int]) -> PremiseVerdict:
    """`premise` on one run: on the config (`holds`), or on every seed's view (`on_seed`), met only if
    every seed meets it, its value and note then the worst seed's (the one with the largest badness among
    those with the run's verdict), named."""
    def outcome(fn, *args) -> PremiseOutcome:
        try:
            return _premise_outcome(fn(*args))
        except Exception as err:  # the user's function: one line naming it, not a traceback
            _refuse_unrecorded(err, config, f"premise {premise.id}")
            raise ConfigError(f"premise {premise.id} failed ({type(err).__name__}: {err}); fix its function") from None

    outcomes = ([outcome(premise.holds, system, config)] if premise.holds is not None
                else [outcome(premise.on_seed, view) for view in views])
    met = _kleene_and([o.met for o in outcomes])
    candidates = [i for i, o in enumerate(outcomes) if o.met is met] or list(range(len(outcomes)))
    worst = max(candidates, key=lambda i: outcomes[i].badness)
    chosen = outcomes[worst]
    value = chosen.value if len(outcomes) == 1 else f"worst seed {seeds[worst]} of {len(outcomes)}: {chosen.value}"
    return PremiseVerdict(premise.id, premise.statement, value, chosen.threshold or premise.threshold, met,
                          "; ".join(chosen.failures), premise.kind)


def _premises(theorem: Theorem, runs: list[list[SeedRun]]) -> tuple[dict[str, list[bool | None]], list[list[PremiseVerdict]]]:
    """Each premise's verdict on each run: whether it is met (by id), and the verdicts themselves."""
    verdicts = []
    for seeds in runs:
        per_seed = any(p.on_seed is not None for p in theorem.premises)  # else no view is needed
        views = [_view(theorem, run) for run in seeds] if per_seed else []
        verdicts.append([premise_verdict(p, seeds[0].system, seeds[0].config, views, [run.seed for run in seeds])
                         for p in theorem.premises])
    met = {p.id: [run_verdicts[i].met for run_verdicts in verdicts] for i, p in enumerate(theorem.premises)}
    return met, verdicts


def _measure_on_seed(claim: Claim, theorem: Theorem, run: SeedRun) -> tuple[bool | None, dict, Outcome | None]:
    """Whether a non-rate claim holds on one seed (None: cannot tell), what was measured, and a
    `Check`'s own `Outcome` (None for the other claims)."""
    if isinstance(claim, Check):
        return _check_on_seed(claim, theorem, run)
    return (*_holds_on_seed(claim, theorem, run), None)


def _holds_on_seed(claim: Claim, theorem: Theorem, run: SeedRun) -> tuple[bool | None, dict]:
    """Whether a non-rate claim other than a `Check` holds on one seed (None: cannot tell), and what
    was measured."""
    if isinstance(claim, Limit):
        return _limit_on_seed(claim, run)
    values = {name: quantity(theorem, name, run) for name in claim.quantity_names()}
    if not all(math.isfinite(v) for v in values.values()):
        return None, values
    if isinstance(claim, Sign):
        v = values[claim.quantity]
        return (v > 0) if claim.positive else (v < 0), values
    if isinstance(claim, Ordering):
        ordered = [values[name] for name in claim.quantities]
        return all(a < b for a, b in zip(ordered, ordered[1:])), values
    if isinstance(claim, Bound):
        v, system = values[claim.quantity], run.system
        upper = None if claim.upper is None else number(claim.upper, system)
        lower = None if claim.lower is None else number(claim.lower, system)
        if upper is not None:
            values["upper"] = upper
        if lower is not None:
            values["lower"] = lower
        values["headroom"] = _headroom(v, upper, lower)
        return (upper is None or v <= upper) and (lower is None or v >= lower), values
    if isinstance(claim, Identity):
        left, right = values[claim.left], values[claim.right]
        scale = max(abs(left), abs(right), np.finfo(float).tiny)
        values["relative_difference"] = abs(left - right) / scale
        return values["relative_difference"] <= claim.rtol, values
    raise TypeError(f"claim {claim.id}: {type(claim).__name__} is not judged per seed")


def _check_on_seed(claim: Check, theorem: Theorem, run: SeedRun) -> tuple[bool | None, dict, Outcome]:
    """A `Check` on one seed: its outcome's verdict, what it measured, its threshold, its sentence
    and its smallest headroom (absent when it bounds nothing explicitly), and the outcome itself."""
    try:
        outcome = claim(_view(theorem, run))
    except Exception as err:  # the user's function: one line naming it, not a traceback
        _refuse_unrecorded(err, run.config, f"theorem {theorem.name!r}: check {claim.id}")
        raise ConfigError(f"theorem {theorem.name!r}: check {claim.id} failed on seed {run.seed} "
                          f"({type(err).__name__}: {err}); fix its function") from None
    values = {"measured": outcome.measured, "threshold": outcome.threshold, "sentence": outcome.sentence}
    if outcome.passed is None and not outcome.applies:
        values["applies"] = False
    if outcome.headroom:
        values["headroom"] = min(outcome.headroom.values())
    return (None if outcome.passed is None else bool(outcome.passed)), values, outcome


def _limit_on_seed(claim: Limit, run: SeedRun) -> tuple[bool | None, dict]:
    series = np.asarray(run.series[claim.observable], float)
    keep = np.flatnonzero(np.isfinite(series))
    if not keep.size:
        return None, {}
    target = number(claim.to, run.system)
    scale = abs(target) if target else 1.0
    start, end = series[keep[0]], series[keep[-1]]
    values = {"start": float(start), "end": float(end), "limit": target,
              "end_distance": float(abs(end - target) / scale), "tol": claim.tol,
              "started_at_limit": bool(abs(start - target) / scale <= claim.tol)}
    return bool(values["end_distance"] <= claim.tol), values


def _headroom(value: float, upper: float | None, lower: float | None) -> float:
    """How far inside its bounds a value sits, as the smallest factor (bound / |value| for an upper
    bound, value / bound for a lower one); a pass with more than `VACUOUS_FACTOR` is vacuous."""
    factors = []
    if upper is not None and upper > 0:
        factors.append(upper / abs(value) if value else math.inf)
    if lower is not None and lower > 0:
        factors.append(value / lower)
    return min(factors) if factors else 1.0


def seed_verdict(claim: Claim, holds: bool | None, unmet: list[str], values: dict) -> str:
    """One seed run's verdict on a non-rate claim: fail (fail outside premises where a premise it
    needs is not met), pass, vacuous (every explicit bound beaten by more than `VACUOUS_FACTOR`, or
    a limit it started at), inconclusive (the seed cannot tell) or not applicable (`Outcome.applies`
    false); a diagnostic has no verdict."""
    if claim.evidence == "diagnostic":
        return "no verdict"
    if holds is None:
        return "inconclusive" if values.get("applies", True) else "not applicable"
    if not holds:
        return "fail outside premises" if unmet else "fail"
    room = values.get("headroom")
    if ((isinstance(claim, (Bound, Check)) and claim.evidence != "identity" and room is not None
         and room > VACUOUS_FACTOR) or (isinstance(claim, Limit) and values.get("started_at_limit"))):
        return "vacuous"
    return "pass"


def allowed_by_probability(failed: int, runs: int, at_probability: float) -> bool:
    """Whether `failed` failures (premises met) over `runs` seed runs are ones a claim stated with
    probability 1 - `at_probability` allows: some failed, and `runs` runs that each fail with that
    probability give as many or more with probability at least `PROBABILITY_LEVEL`."""
    return (at_probability > 0 and failed > 0
            and within_probability(failed, runs, at_probability) >= PROBABILITY_LEVEL)


def tally_verdict(tally: dict[str, int], at_probability: float = 0.0) -> str:
    """A non-diagnostic claim's verdict over seed runs from how many gave each seed verdict
    (`seed_verdict`; `ClaimVerdict.tally`): pass when its failures are ones its probability allows
    (`allowed_by_probability`), else fail (any failure with its premises met), fail outside premises,
    inconclusive (a seed run that cannot tell), not applicable (on none), vacuous (vacuous on every seed
    run it applies to), else pass. The one rule: `judge_on_runs` applies it to its seed runs, and a
    theorem's own report to counts it summed over several judgings (eq. (1)'s width sweep)."""
    runs = sum(tally.values())
    failed = tally.get("fail", 0)
    applying = runs - tally.get("not applicable", 0)
    if allowed_by_probability(failed, runs, at_probability):
        return "pass"
    if failed:
        return "fail"
    if tally.get("fail outside premises", 0):
        return "fail outside premises"
    if tally.get("inconclusive", 0):
        return "inconclusive"
    if applying == 0:
        return "not applicable"
    return "vacuous" if tally.get("vacuous", 0) == applying else "pass"


def _tally(claim: Claim, outcomes: list) -> dict[str, int]:
    verdicts = [seed_verdict(claim, holds, unmet, values) for holds, unmet, values, _, _ in outcomes]
    return {verdict: verdicts.count(verdict) for verdict in dict.fromkeys(verdicts)}


def _unstated_counts(claim: Claim, theorem: Theorem, outcomes: list, runs_of: list[int],
                     met: dict[str, list[bool | None]]) -> dict[str, int]:
    """`ClaimVerdict.unstated` of a check: the unstated conditions of the statements naming it, and on
    each seed run (run index `runs_of[k]`) whether the run meets them all (one not measured does not count
    against it)."""
    conditions = sorted({c for other in theorem.claims if isinstance(other, Statement) and claim.id in other.checks
                         for c in other.unstated})
    if not isinstance(claim, Check) or not conditions:
        return {}
    counts = {"failed_unstated": 0, "passed_unstated_met": 0}
    for (holds, unmet, values, _, _), r in zip(outcomes, runs_of):
        verdict = seed_verdict(claim, holds, unmet, values)
        conditions_met = all(met[c][r] is not False for c in conditions if c in met)
        counts["failed_unstated"] += verdict == "fail" and not conditions_met
        counts["passed_unstated_met"] += verdict == "pass" and conditions_met
    return counts


def judge_on_runs(claim: Claim, theorem: Theorem, runs: list[list[SeedRun]], met: dict[str, list[bool]],
                  labels: list[str], measured_before: dict | None = None) -> ClaimVerdict:
    """A non-rate claim over every seed of every run: it passes only where it holds on each.
    `measured_before`: what each seed measured when the claim was judged before under other premises
    (`judge_readings`), filled here, so a claim is measured once whatever it is judged under."""
    outcomes, measured, failed_runs, runs_of, found = [], {}, set(), [], []
    memo = {} if measured_before is None else measured_before
    for r, seeds in enumerate(runs):
        unmet = [p for p in claim.premises if met[p][r] is False]
        for run in seeds:
            key = (claim.id, r, run.seed)
            if key not in memo:
                memo[key] = _measure_on_seed(claim, theorem, run)
            holds, values, outcome = memo[key]
            if outcome is not None:
                found.append(outcome)
            measured[f"{labels[r]} seed {run.seed}"] = values
            outcomes.append((holds, unmet, values, labels[r], run.seed))
            runs_of.append(r)
            if holds is False and not unmet:
                failed_runs.add(r)
    kind = type(claim).__name__
    if claim.evidence == "diagnostic":
        return ClaimVerdict(claim.id, claim.statement, kind, claim.evidence, "diagnostic",
                            _values_text(claim, measured), measured, tally=_tally(claim, outcomes), outcomes=found)
    failed = [o for o in outcomes if o[0] is False]
    inside = [o for o in failed if not o[1]]
    tally = _tally(claim, outcomes)
    verdict = tally_verdict(tally, claim.at_probability if isinstance(claim, Check) else 0.0)
    allowed = verdict == "pass" and bool(inside)
    if allowed:
        where = [o for o in outcomes if o[0]] or outcomes
    elif verdict in ("fail", "fail outside premises", "not applicable"):
        where = {"fail": inside, "fail outside premises": failed, "not applicable": outcomes}[verdict]
    elif verdict == "inconclusive":
        where = [o for o in outcomes if o[0] is None and o[2].get("applies", True)]
    else:  # pass or vacuous: the seed runs it applies to
        where = [o for o in outcomes if o[0] is not None or o[2].get("applies", True)]
    sentence = _claim_sentence(claim, verdict, where, len(outcomes))
    if allowed:
        _, _, values, label, seed = inside[0]
        sentence = (f"fails on {len(inside)} of {len(outcomes)} seed runs, which its source allows: it holds with "
                    f"probability 1 - {claim.at_probability:g}, and P(Binomial({len(outcomes)}, {claim.at_probability:g})"
                    f" >= {len(inside)}) = {within_probability(len(inside), len(outcomes), claim.at_probability):.2g} "
                    f">= {PROBABILITY_LEVEL:g}; e.g. {label} seed {seed}: {_numbers_text(claim, values)}")
    return ClaimVerdict(claim.id, claim.statement, kind, claim.evidence, verdict, sentence, measured,
                        failed_runs=sorted(failed_runs), tally=tally,
                        unstated=_unstated_counts(claim, theorem, outcomes, runs_of, met), outcomes=found)


def _fmt(value: float) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _values_text(claim: Claim, measured: dict) -> str:
    """A diagnostic's line: the first seed's numbers (and, for a check, why it has no verdict)."""
    first = next(iter(measured.items()), None)
    if first is None:
        return "nothing measured"
    where, values = first
    reason = f" No verdict: {claim.no_verdict}" if isinstance(claim, Check) else ""
    return f"{where}: " + _numbers_text(claim, values) + (
        f" (and {len(measured) - 1} more)" if len(measured) > 1 else "") + reason


def _claim_sentence(claim: Claim, verdict: str, where: list, total: int) -> str:
    """One line: on how many seeds and runs it held, and the worst case's numbers."""
    holds, unmet, values, label, seed = where[0]
    bounded = isinstance(claim, Bound) or (isinstance(claim, Check) and "headroom" in values)
    numbers = _numbers_text(claim, values)
    if verdict in ("pass", "vacuous"):
        if bounded:
            worst = min(where, key=lambda o: o[2].get("headroom", math.inf))
            numbers = _numbers_text(claim, worst[2])
            label, seed = worst[3], worst[4]
        on = f"all {total}" if len(where) == total else f"the {len(where)} of {total} it applies to"
        text = f"holds on {on} seed runs; {'closest' if bounded else 'e.g.'} {label} seed {seed}: {numbers}"
        if verdict == "vacuous":
            text += (f"; every bound beaten by more than {VACUOUS_FACTOR:g}x, so it says nothing about the data"
                     if bounded else "; it starts at its limit, so it shows no convergence")
        return text
    if verdict == "not applicable":
        return f"does not arise on any of the {total} seed runs, e.g. {label} seed {seed}: {numbers}"
    if verdict == "inconclusive":
        why = "it cannot tell there" if isinstance(claim, Check) else _why_unmeasured(values)
        return f"cannot be measured on {len(where)} of {total} seed runs ({why}), e.g. {label} seed {seed}: {numbers}"
    outside = f" where premise(s) {', '.join(unmet)} are not met" if unmet else ""
    return f"fails on {len(where)} of {total} seed runs{outside}, e.g. {label} seed {seed}: {numbers}"


def _why_unmeasured(values: dict) -> str:
    """Why a declared claim has no verdict on a seed: the quantities it reads that are not finite there,
    NaN where an event it reads did not happen (or a function gave none), inf where a value is infinite."""
    nan = [k for k, v in values.items() if isinstance(v, float) and math.isnan(v)]
    inf = [k for k, v in values.items() if isinstance(v, float) and math.isinf(v)]
    parts = ([f"{', '.join(nan)}: no value, an event it reads did not happen or its function gave none"] if nan else []) + (
        [f"{', '.join(inf)}: infinite"] if inf else [])
    return "; ".join(parts) or "an event it reads did not happen"


def _numbers_text(claim: Claim, values: dict) -> str:
    """What one seed measured: a check's own sentence, else `name value` pairs."""
    if isinstance(claim, Check):
        return values.get("sentence", "")
    return pairs_text(values)


def pairs_text(values: dict) -> str:
    """Measured values as a claim's line prints them: `name value` pairs, numbers to 4 digits."""
    return ", ".join(f"{k} {_fmt(v)}" for k, v in values.items())


def judge_rate_claim(claim: Rate, theorem: Theorem, axis: str | None, values: list[float],
                     runs: list[list[SeedRun]], met: dict[str, list[bool]]) -> ClaimVerdict:
    """A rate claim over the sweep along `axis`, one of the keys it names (not applicable on one run
    or along another key)."""
    kind = type(claim).__name__
    if axis not in claim.exponents() or len(runs) < 2:
        how = " or ".join(f"`coocflow verify TARGET --scaling {key}`" for key in claim.exponents())
        return ClaimVerdict(claim.id, claim.statement, kind, claim.evidence, "not applicable",
                            f"a rate along {', '.join(claim.exponents())}: judged over a sweep of it ({how})")
    seeds = [len(seeds) for seeds in runs]
    if len(set(seeds)) != 1:
        return ClaimVerdict(claim.id, claim.statement, kind, claim.evidence, "inconclusive",
                            f"the runs have different seed counts ({seeds}); seeds must be paired across the sweep")
    matrix = np.array([[quantity(theorem, claim.quantity, run) / (claim.divide_by(run.system) if claim.divide_by else 1.0)
                        for run in seeds_of] for seeds_of in runs])
    test = claim.test_along({axis: 1.0})
    judgement = judge_rate(test, values, matrix, paired=True, name=claim.quantity)
    verdict = judgement.verdict
    unmet = sorted({p for p in claim.premises for r in range(len(runs)) if met[p][r] is False})
    if verdict == "fail" and unmet:
        verdict = "fail outside premises"
    noise = _noise(values, matrix)
    power = _power(test, values, matrix.shape[1], noise)
    sentence = judgement.sentence() + (f"; premise(s) {', '.join(unmet)} not met on some runs" if unmet else "")
    ylabel = claim.quantity + (" / its declared factor" if claim.divide_by else "")
    return ClaimVerdict(claim.id, claim.statement, kind, claim.evidence, verdict, sentence,
                        {"axis": list(values), "values": matrix.tolist(), "ylabel": ylabel}, power, judgement.to_dict())


def judge_statement(claim: Statement, theorem: Theorem, judged: dict[str, ClaimVerdict], axis: str | None,
                    values: list[float], runs: list[list[SeedRun]], met: dict[str, list[bool]]) -> ClaimVerdict:
    """A `Statement` from its evidence: the verdicts of the checks it names and of its own rates
    (each judged with the statement's premises), combined by `STATEMENT_ORDER` over the deciding ones
    (statements and identities); the line lists every piece with its verdict."""
    pieces = [judged[name] for name in claim.checks]
    pieces += [judge_rate_claim(rate if rate.premises else dataclasses.replace(rate, premises=claim.premises),
                                theorem, axis, values, runs, met) for rate in claim.rates]
    deciding = [p.verdict for p in pieces if p.evidence in ("statement", "identity")]
    verdict = next((v for v in STATEMENT_ORDER if v in deciding), "not applicable")
    sentence = "; ".join(f"{p.id}: {p.verdict}" + ("" if p.evidence == "statement" else f" ({p.evidence})")
                         for p in pieces) or "no evidence declared"
    meeting = [r for r in range(len(runs)) if all(met[c][r] is not False for c in claim.unstated)]
    if verdict == "fail" and claim.unstated and 0 < len(meeting) < len(runs) and _holds_where_met(
            claim, theorem, pieces, meeting, axis, values, runs, met):
        verdict = STATEMENT_ORDER[2]
        sentence += (f"; every failure is where {', '.join(claim.unstated)} is not met, and it holds on the "
                     f"{len(meeting)} run(s) that meet it")
    return ClaimVerdict(claim.id, claim.statement, "Statement", claim.evidence, verdict,
                        (f"{claim.where}: " if claim.where else "") + sentence,
                        {"evidence": {p.id: p.verdict for p in pieces},
                         "rates": [p.to_dict() for p in pieces if p.kind == "Rate"]})


def _holds_where_met(claim: Statement, theorem: Theorem, pieces: list[ClaimVerdict], meeting: list[int],
                     axis: str | None, values: list[float], runs: list[list[SeedRun]], met: dict[str, list[bool]]) -> bool:
    """Whether each failing piece of a statement holds on the runs that meet its unstated conditions:
    a check fails on none of them; a rate (its own, or a rate claim it names), fitted again over them
    alone, passes."""
    named = {c.id: c for c in theorem.claims if isinstance(c, Rate) and c.id in claim.checks}
    rates = {**named, **{rate.id: rate for rate in claim.rates}}
    for piece in pieces:
        if piece.verdict != "fail" or piece.evidence not in ("statement", "identity"):
            continue
        if piece.id in rates:
            rate = rates[piece.id] if rates[piece.id].premises else dataclasses.replace(rates[piece.id], premises=claim.premises)
            subset = judge_rate_claim(rate, theorem, axis, [values[r] for r in meeting], [runs[r] for r in meeting],
                                      {k: [v[r] for r in meeting] for k, v in met.items()})
            if subset.verdict != "pass":
                return False
        elif set(piece.failed_runs) & set(meeting):
            return False
    return True


def _noise(axis_values: list[float], matrix: np.ndarray) -> float:
    """The seed-to-seed spread of log|value| about a line in log(axis) with one offset per seed (what
    the paired fit sees): the noise at which the power is simulated."""
    logs = np.log(np.abs(matrix))
    if not np.all(np.isfinite(logs)) or matrix.shape[0] < 3:
        return math.nan
    x = np.log(np.asarray(axis_values, float))[:, None] * np.ones_like(logs)
    xc, yc = x - x.mean(axis=0), logs - logs.mean(axis=0)
    slope = float((xc * yc).sum() / (xc * xc).sum())
    residual = yc - slope * xc
    dof = max(1, logs.size - logs.shape[1] - 1)
    return float(np.sqrt((residual**2).sum() / dof))


def _power(test: RateTest, axis_values: list[float], seeds: int, noise: float) -> dict | None:
    """How often the test fails a claim POWER_ERROR off (either side) at this design and noise."""
    if not math.isfinite(noise):
        return None
    floor = max(noise, 1e-6)
    rates = {}
    for error in (-POWER_ERROR, POWER_ERROR):
        cell = power_cell(test, axis_values, seeds, error, floor, POWER_TRIALS, resamples=400)
        rates[error] = cell.failed / cell.trials
    wrong = min(rates.values()) if test.kind == "order" else rates[POWER_ERROR if test.kind != "lower bound" else -POWER_ERROR]
    true = power_cell(test, axis_values, seeds, 0.0, floor, POWER_TRIALS, resamples=400)
    sentence = (f"at this design ({len(axis_values)} values x {seeds} seeds, noise {noise:.2g} in log units) a claim "
                f"{POWER_ERROR:g} off in the exponent fails in {wrong:.0%} of {POWER_TRIALS} simulated sweeps, the "
                f"true one passes in {true.pass_rate:.0%}")
    return {"error": POWER_ERROR, "fails_wrong": wrong, "passes_true": true.pass_rate, "noise": noise,
            "trials": POWER_TRIALS, "sentence": sentence}


def relaxed_met(theorem: Theorem, met: dict[str, list[bool | None]]) -> dict[str, list[bool | None]]:
    """`met` with each premise that a `relaxed` premise relaxes read as that relaxed form (where the
    relaxed one was measured): what the verdicts would be if the source had stated the weaker premise."""
    out = dict(met)
    for premise in theorem.premises:
        if premise.kind == "relaxed" and premise.relaxes and premise.id in met:
            out[premise.relaxes] = met[premise.id]
    return out


def verify_theorem(theorem: Theorem, folders: list[Path], axis: str | None = None,
                   values: list[float] | None = None, target: str = "", relaxed: bool = False) -> TheoremVerdict:
    """Judge `theorem` on complete run folders: one run, or a sweep whose runs differ in `axis`
    (taking `values`), every run with the same seeds. `relaxed`: every claim judged with each premise
    that a `relaxed` premise relaxes read as its relaxed form (`relaxed_met`); the premises
    themselves are reported as measured."""
    judging = _Judging.of(theorem, folders, axis, values, target)
    return judging.verdict(relaxed_met(theorem, judging.met) if relaxed else judging.met)


def judge_readings(theorem: Theorem, folders: list[Path], axis: str | None = None, values: list[float] | None = None,
                   target: str = "", verify: dict | None = None) -> tuple[TheoremVerdict, TheoremVerdict | None]:
    """`verify_theorem` under the premises as stated and, where the theorem declares a `relaxed`
    premise, under their relaxed reading (else None): each claim measured once on each seed for both;
    the runs read with the `[verify]` settings `verify` where given (`seed_runs`)."""
    judging = _Judging.of(theorem, folders, axis, values, target, verify)
    relaxes = any(p.kind == "relaxed" and p.relaxes for p in theorem.premises)
    return judging.verdict(judging.met), (judging.verdict(relaxed_met(theorem, judging.met)) if relaxes else None)


@dataclass
class _Judging:
    """What every reading of a theorem's premises shares on a set of run folders: the seeds read, each
    premise measured, and each claim's measurement on each seed (filled by the first reading)."""

    theorem: Theorem
    folders: list[Path]
    axis: str | None
    values: list[float] | None
    target: str
    runs: list[list[SeedRun]]
    met: dict[str, list[bool | None]]
    measured: list[list[PremiseVerdict]]
    memo: dict = field(default_factory=dict)

    @classmethod
    def of(cls, theorem: Theorem, folders: list[Path], axis: str | None, values: list[float] | None,
           target: str, verify: dict | None = None) -> "_Judging":
        first = seed_runs(folders[0], theorem, verify)
        _probe_lean(theorem, first[0])
        runs = [first] + [seed_runs(folder, theorem, verify) for folder in folders[1:]]
        met, measured = _premises(theorem, runs)
        return cls(theorem, folders, axis, values, target, runs, met, measured)

    def verdict(self, judging: dict[str, list[bool | None]]) -> TheoremVerdict:
        """Every claim judged with the premises met as `judging` says (rates, then the other claims,
        then the statements from their evidence)."""
        theorem, folders, axis, runs = self.theorem, self.folders, self.axis, self.runs
        values = self.values or []
        labels = [f"{axis}={value:g}" if axis else str(folder)
                  for folder, value in zip(folders, self.values or [None] * len(folders))]
        claims = []
        for claim in theorem.claims:
            if isinstance(claim, Rate):
                claims.append(judge_rate_claim(claim, theorem, axis, values, runs, judging))
            elif not isinstance(claim, Statement):
                claims.append(judge_on_runs(claim, theorem, runs, judging, labels, self.memo))
        judged = {verdict.id: verdict for verdict in claims}
        claims += [judge_statement(claim, theorem, judged, axis, values, runs, judging)
                   for claim in theorem.claims if isinstance(claim, Statement)]
        met = self.met
        premises = [{**self.measured[0][i].to_dict(), "met": _kleene_and(met[p.id]) if met[p.id] else None,
                     "per_run": met[p.id]} for i, p in enumerate(theorem.premises)]
        listed = [{"folder": str(folder), "value": value, "seeds": [r.seed for r in seeds]}
                  for folder, value, seeds in zip(folders, self.values or [None] * len(folders), runs)]
        return TheoremVerdict(theorem.name, theorem.source, self.target or str(folders[0]), axis, listed, premises,
                              claims)


@dataclass(frozen=True)
class SweepRuns:
    """The complete jobs of a `coocflow sweep` folder as a theorem's sweep: their run folders (in
    the order of `values`), the one numeric config key they differ in and its values (None when they
    differ in none or in several: `varying` names them), and their System."""

    folders: list[Path]
    axis: str | None
    values: list[float] | None
    varying: list[str]
    system: str


def sweep_runs(folder: Path) -> SweepRuns:
    """`verify SWEEP`'s reading of a sweep folder; one line when it has no complete job, or trains more
    than one System (a sweep folder is judged for one System's declared theorem)."""
    jobs = sorted(path for path in SweepFolder(folder).jobs.glob("*") if RunFolder(path).complete)
    if not jobs:
        raise RunFolderError(f"verify {folder}: the sweep has no complete job yet; run `coocflow sweep` to finish it")
    configs = [RunFolder(job).config() for job in jobs]
    systems = sorted({config.system for config in configs})
    if len(systems) > 1:
        raise CoocflowError(f"verify {folder}: a sweep folder is judged for one System's declared theorem "
                            f"(docs/theorems.md); this one trains {', '.join(systems)}: verify its jobs one by one")
    flat = [{key: value for key, value in flatten_dotted(config.to_dict()).items()
             if key not in ("name", "seed", "seeds", "format")} for config in configs]
    varying = sorted({key for row in flat for key in row if any(other.get(key) != row[key] for other in flat)})
    if len(varying) == 1 and all(isinstance(row[varying[0]], (int, float)) for row in flat):
        order = sorted(range(len(jobs)), key=lambda i: flat[i][varying[0]])
        return SweepRuns([jobs[i] for i in order], varying[0], [float(flat[i][varying[0]]) for i in order], varying,
                         systems[0])
    return SweepRuns(jobs, None, None, varying, systems[0])


def write_theorem_verdict(verdict: TheoremVerdict, folder: Path) -> tuple[Path, ...]:
    """verify.json (every number) and verify.md (the table) into `folder`, atomically, and on a
    sweep verify.png: each rate's quantity against its axis with the fitted and claimed slopes."""
    folder = Path(folder)
    paths = folder / RunFolder.VERIFY_JSON, folder / RunFolder.VERIFY_MD
    atomic_write_json(paths[0], json_safe(verdict.to_dict()))
    atomic_write_text(paths[1], verdict.markdown())
    rates = [{"id": c.id, "statement": c.statement, "axis_name": verdict.axis, "axis": c.values.get("axis"),
              "values": c.values.get("values"), "exponent": c.rate.get("exponent"), "ci": c.rate.get("ci"),
              "predicted": c.rate["test"]["predicted"], "ylabel": c.values.get("ylabel", "quantity")}
             for c in verdict.claims if c.rate]
    from coocflow.plots.rates import rates_figure  # lazy: defers Matplotlib, 1 s of a refusal

    drawn = rates_figure(rates, f"{verdict.theorem}: rates along {verdict.axis}", folder / RunFolder.VERIFY_PNG)
    return paths + ((drawn,) if drawn else ())
