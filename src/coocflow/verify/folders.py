"""`coocflow verify`'s way into the verifier, for every System: the theorem its System declares judged on
its run folders (`judge`), its files written, and what the command shows returned (`render.Report`).
"""

from __future__ import annotations

from pathlib import Path

from coocflow.errors import CoocflowError, ConfigError
from coocflow.storage.folders import RunFolder
from coocflow.systems.registry import system_class
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
    return DeclaredReport(verdict, tuple(written), target, len(folders), values)
