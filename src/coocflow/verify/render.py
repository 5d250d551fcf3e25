"""What `coocflow verify` shows of a theorem's verdicts, as data the command line prints: a `Line` is one
sentence (printed whole, wrapped only at a terminal's width), anything else a Rich renderable (a table,
printed at the width its cells need). `Report` is what a judged set of runs gives the commands, whatever
the theorem: `DeclaredReport` for a theorem without a report of its own, or the one its `Theorem.report`
hook returns (eq. (1)'s claims table and Appendix C: `verify.paper.render`).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coocflow.verify.judge import TheoremVerdict, pairs_text

VERDICT_COLOURS = {"pass": "green", "fail": "red", "fail outside premises": "yellow", "not applicable": "bright_black",
                   "inconclusive": "cyan", "vacuous": "magenta", "holds under an unstated condition": "yellow",
                   "no verdict": "bright_black"}
"""Each verdict's colour wherever a verdict is printed: green holds, red a finding, the rest neither."""

SHORT_VERDICTS = {"pass": "pass", "fail": "FAIL", "fail outside premises": "fail*", "not applicable": "n/a",
                  "inconclusive": "incon.", "vacuous": "vac.", "holds under an unstated condition": "unstat.",
                  "no verdict": "-"}
"""Verdicts in a summary's first column."""


@dataclass(frozen=True)
class Line:
    """One sentence to print whole: in `style` (a Rich colour), continuation lines indented by `indent`
    where a terminal's width wraps it; `markup`: the text carries Rich markup and is printed as it is."""

    text: str
    style: str | None = None
    indent: int = 0
    markup: bool = False


class Report(abc.ABC):
    """A theorem's verdicts on one or more run folders, its files written, as `coocflow verify` and the
    notebook API receive them."""

    findings_of: str = "claims"
    """What `findings` names, for `--strict`'s line ("claims", or "checks" where a report counts checks)."""

    @property
    @abc.abstractmethod
    def result(self) -> Any:
        """The verdicts as the theorem's report types them (`judge.TheoremVerdict` by default)."""

    @abc.abstractmethod
    def printed(self, full: bool = False) -> list[Any]:
        """What the command prints, in order: `Line`s and Rich renderables; `full`: every table."""

    @abc.abstractmethod
    def findings(self) -> list[str]:
        """The ids that failed with their premises met: findings against the claim or the code."""


DECLARED_LEGEND = {
    "pass": "holds on every seed of every run (a rate: its interval inside the band)",
    "FAIL": "fails where its premises are met: a finding against the claim (statement) or the code (identity)",
    "fail*": "fails only where a premise it needs is not met: not a finding",
    "unstat.": "holds under an unstated condition: fails only on runs outside a condition its proof needs and "
               "its source does not state, holds on those that meet it",
    "incon.": "inconclusive: a quantity it reads has no finite value (an event that did not happen), or a rate's "
              "interval straddles its band",
    "vac.": "vacuous: a bound beaten by over 1e3x, or a limit the run starts at: neither pass nor fail",
    "n/a": "not applicable: a rate, judged over a sweep along its key (--scaling KEY)",
    "-": "a diagnostic: shown, never judged",
}
"""The legend under a declared theorem's verdicts: each marker shown, defined."""


@dataclass(frozen=True)
class DeclaredReport(Report):
    """A declared theorem's verdicts as `judge.write_theorem_verdict` wrote them: one line per claim
    (whole), the power of each rate test, with `full` what each claim measured on every seed run
    (`measured_lines`), a legend of the markers shown, the counts and the files."""

    verdict: TheoremVerdict
    written: tuple[Path, ...]
    target: str
    runs: int
    values: list[float] | None = None
    """The values of the axis the runs were judged along (`verdict.axis`), in the runs' order."""
    stopped: tuple[str, ...] = ()
    """One sentence per run some of whose seeds did not complete (diverged or stopped): said before the
    verdicts, which judge those seeds on what they observed before."""

    @property
    def result(self) -> TheoremVerdict:
        return self.verdict

    def printed(self, full: bool = False) -> list[Any]:
        verdict = self.verdict
        along = f" along {verdict.axis} = {', '.join(f'{v:g}' for v in self.values)}" if verdict.axis else ""
        lines = [Line(f"verify {self.target}: {verdict.theorem}; {len(verdict.claims)} claims on {self.runs} "
                      f"run(s){along}")]
        if verdict.premises:
            unmet = [p["id"] for p in verdict.premises if p["met"] is False]
            lines.append(Line(f"premises: {len(verdict.premises) - len(unmet)} of {len(verdict.premises)} met on every "
                              "run" + (f"; not met: {', '.join(unmet)}" if unmet else "")))
        lines += [Line(sentence, "yellow", indent=4) for sentence in self.stopped]
        shown = set()
        for claim in verdict.claims:
            label = SHORT_VERDICTS.get(claim.verdict, "-" if claim.verdict == "diagnostic" else claim.verdict)
            shown.add(label)
            lines.append(Line(f"{label:<7}{claim.id:<7}{claim.statement} [{claim.evidence}]: {claim.sentence}",
                              VERDICT_COLOURS.get(claim.verdict, "bright_black"), indent=14))
            if claim.power:
                lines.append(Line(f"{'':<14}power: {claim.power['sentence']}", indent=14))
            if full:
                lines += measured_lines(claim.values)
        lines += [Line(f"{marker} = {meaning}", indent=4) for marker, meaning in DECLARED_LEGEND.items()
                  if marker in shown]
        lines.append(Line("verdicts: " + ", ".join(f"{count} {name}" for name, count in verdict.counts().items())))
        lines.append(Line("written: " + ", ".join(map(str, self.written))))
        return lines

    def findings(self) -> list[str]:
        return self.verdict.findings()


def measured_lines(values: dict) -> list[Line]:
    """`--full`: what a claim measured on each seed run (`ClaimVerdict.values`: run label -> name ->
    value), one sentence per seed run in the claim line's own form (a check's sentence, else `label:
    name value, ...`), each printed whole at any width; none where the claim measured nothing seed by
    seed (a rate, judged over the runs together, keeps its fit in its line)."""
    return [Line(f"{'':<14}{label}: " + (measured["sentence"] if "sentence" in measured else pairs_text(measured)),
                 indent=16)
            for label, measured in values.items() if isinstance(measured, dict) and measured]
