"""`coocflow verify`'s way into the verifier, for every System: the theorem its System declares judged on
its run folders (`judge`), its files written, and what the command shows returned (`render.Report`).
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any

from coocflow.errors import CoocflowError, ConfigError
from coocflow.storage.folders import RunFolder
from coocflow.systems.registry import system_class, system_of
from coocflow.verify.declare import Theorem
from coocflow.verify.judge import judge_readings, theorem_of, verify_theorem, write_theorem_verdict
from coocflow.verify.render import DeclaredReport, Report


def declared_theorem(system_spec: str, target: str) -> Theorem:
    """`theorem_of`, or one line naming the System and how to declare one (exit 2, no traceback); one
    line too for a rate along a setting the System does not declare (`Theorem.setting_problems`)."""
    theorem = theorem_of(system_spec)
    if theorem is None:
        raise CoocflowError(f"verify {target}: system {system_spec} declares no theorem; declare one with "
                            "coocflow.verify.Theorem and return it from the System's theorem() (docs/theorems.md); "
                            "run, resume, sweep, compare, report and run --check-reproduce serve every System")
    problems = theorem.setting_problems(system_class(system_spec).Settings)
    if problems:
        raise ConfigError(f"theorem {theorem.name!r}: {problems[0]} (fix the declaration)")
    return theorem


def check_reads(theorem: Theorem, config: Any) -> None:
    """Before training: every observable the theorem reads by name (`Theorem.observables`) is one the
    System's runs of `config` record, read off the shapes of its `observe` (nothing is computed; a vector
    observable `w` is recorded as `w_1`, `w_2`, ...), else one line naming it; so a typo does not cost
    a training, or a sweep's. A lean run (`observe.only`) is left to its own refusal."""
    reads = theorem.observables()
    if not reads or config.observe.only:
        return
    import jax  # lazy: the shapes of what the System observes

    system = system_of(config)
    params = jax.eval_shape(system.init, jax.random.PRNGKey(0))
    train, test = system.data(0)
    shapes = jax.eval_shape(lambda p: system.observe(p, p, train, test), params)
    recorded = set(shapes) | {f"{name}_{k}" for name, shape in shapes.items() if getattr(shape, "shape", ())
                              for k in range(1, math.prod(shape.shape) + 1)}
    for observable, reader in reads.items():
        if observable not in recorded:
            close = difflib.get_close_matches(observable, sorted(recorded), n=1, cutoff=0.6)
            raise ConfigError(f"theorem {theorem.name!r}: {reader} reads observable {observable!r}, which the runs of "
                              f"{config.system} do not record" + (f"; did you mean {close[0]!r}?" if close else
                                                                  f" (they record: {', '.join(sorted(shapes))})")
                              + " (fix the declaration)")


def verify_folders(folders: list[Path], axis: str | None = None, values: list[float] | None = None,
                   target: str = "", out: Path | None = None, theorem: Theorem | None = None) -> Report:
    """`coocflow verify` on complete run folders of one System: its theorem judged on them (one run, or a
    sweep along `axis` taking `values`), its files written into `out` (default: the one folder) and what
    the command shows returned: the theorem's own report of one run where it declares one
    (`Theorem.report`), else `DeclaredReport`. `theorem`: the one to judge (default: the one the runs'
    System declares)."""
    folders = [Path(folder) for folder in folders]
    if theorem is None:
        theorem = declared_theorem(RunFolder.open(folders[0]).system(), target or str(folders[0]))
    if theorem.report is not None and len(folders) == 1 and axis is None:
        return theorem.report(folders[0], *judge_readings(theorem, folders, target=target))
    verdict = verify_theorem(theorem, folders, axis, values, target)
    written = write_theorem_verdict(verdict, out if out is not None else folders[0])
    return DeclaredReport(verdict, tuple(written), target, len(folders), values, stopped_seeds(folders))


def stopped_seeds(folders: list[Path]) -> tuple[str, ...]:
    """For each run folder some of whose seeds did not complete, one sentence: how many, the first one's
    reason (from its manifest), and that its claims are judged on what it observed before."""
    sentences = []
    for folder in folders:
        manifest = RunFolder(folder).manifest()
        seeds = manifest.get("seeds") or []
        stopped = [entry for entry in manifest.get("per_seed") or [] if entry.get("status", "completed") != "completed"]
        if not stopped:
            continue
        first = stopped[0]
        divergence = first.get("divergence") or {}
        why = (divergence.get("reason") or (f"{divergence['quantity']} non-finite at t={divergence['t']:g}"
                                             if divergence.get("quantity") else first["status"]))
        sentences.append(f"{folder}: {len(stopped)} of {len(seeds) or len(stopped)} seeds {first['status']} (seed "
                         f"{first.get('seed')}: {why}); their claims are judged on what they observed before")
    return tuple(sentences)
