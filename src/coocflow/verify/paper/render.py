"""eq. (1)'s own report of its theorem's verdicts (`Theorem.report`): on one run, verify.json/.md/.png
(`verify.write_verification`) and, printed, the premises once, one line per claim of docs/claims.md with
its main sentence, a legend of the markers shown and the counts; `--full`: the premises, claims and
implementation-identity tables. The width sweep (`verify --scaling`) prints the same pieces over its runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Column, Table

from coocflow.storage import load_run
from coocflow.storage.folders import RunFolder
from coocflow.verify.judge import TheoremVerdict
from coocflow.verify.paper.checks import CHECKS
from coocflow.verify.paper.claims import claims_table, shared_evidence, summary_line
from coocflow.verify.paper.verify import (
    APPENDIX_C_CHECK,
    IDENTITIES,
    IDENTITY_TOLERANCE,
    Verification,
    verdict_text,
    width_summary,
    write_verification,
)
from coocflow.verify.render import SHORT_VERDICTS, VERDICT_COLOURS, Line, Report

FINDINGS_EXPLAINED = "docs/findings.md, 'What verify finds', and docs/claims.md section 4"
"""Where a verdict against the paper is explained (printed under the summary when a claim fails)."""

LEGEND = {
    "pass": "every check and rate of the claim passes, its premises met",
    "pass*": "passes, but a premise of the claim is not met (outside the theory's regime)",
    "FAIL": "a check or rate fails with every premise met: a finding against the claim",
    "fail*": "fails, but a premise of the claim is not met: outside the theory's regime, not a finding",
    "incon.": "inconclusive: an interval too wide, or a crossover the widths do not settle",
    "vac.": "vacuous: every bound beaten by far (1e3x, or m^1): neither pass nor fail",
    "unstat.": "fails only where a condition the paper does not state is missing",
    "n/a": "not applicable: nothing of the claim could be judged here (its rates need a width sweep, its "
           "checks are diagnostics, or the run lacks what they read)",
    "-": "a diagnostic: reported, never judged",
    "[P7r: ...]": "the verdict with P7 relaxed to L. D.8's own bound",
    "[shares ...]": "the same check or quantity as the claim named, judged against this claim's bound",
}
"""The summary's legend: each marker it shows, defined under the table (docs/verify.md has the rules)."""


def main_number(row: dict) -> str:
    """A claim's main evidence in a few words: the first clause of its first failing (else first
    judged) piece of evidence, without the verdict or seed counts that open a check's text."""
    evidence = row["evidence"]
    judged = [e for e in evidence if e["verdict"] in ("fail", "fail outside premises")] or \
        [e for e in evidence if e["verdict"] in ("pass", "inconclusive")] or evidence
    if not judged:
        return ""
    text = judged[0]["text"]
    head, _, rest = text.partition(". ")
    if rest and re.match(r"(pass|fail|not applicable|inconclusive|\d+/\d+ )", head):
        text = rest
    return text.split("; ")[0].rstrip(".")


def summary_of_claims(title: str, premises, table: list[dict], summary: str, details: list[Path],
                      widths_line: str | None = None, premises_where: str = "") -> list[Line]:
    """What verify prints by default: the premises once, one line per claim (its verdict, '*' where the
    claim's premises are not all met, and its main sentence, whole), a legend of every marker shown, the
    counts, and where the details and the explanations of failures are; `--full` prints every table."""
    def get(p, key):
        return p[key] if isinstance(p, dict) else getattr(p, key)

    lines = [Line(title)]
    unmet = [get(p, "id") for p in premises if get(p, "met") is False]
    if premises:
        met = sum(get(p, "met") is True for p in premises)
        unknown = len(premises) - met - len(unmet)
        lines.append(Line(f"premises{premises_where}: {met} met" + (f", {len(unmet)} not met ({', '.join(unmet)})"
                                                                   if unmet else "")
                          + (f", {unknown} not evaluated" if unknown else "")))
    if widths_line:
        lines.append(Line(widths_line))
    shown = set()
    for row in table:
        outside = any(part.endswith("not met") for part in row["premises"].split(", "))
        label = SHORT_VERDICTS[row["verdict"]]
        if outside and row["verdict"] == "pass":
            label = "pass*"
        shown.add(label)
        relaxed = row.get("verdict_relaxed")
        beside = f"[P7r: {SHORT_VERDICTS[relaxed]}] " if relaxed is not None and relaxed != row["verdict"] else ""
        shared = shared_evidence(row["id"])
        if beside:
            shown.add("[P7r: ...]")
        if shared:
            beside += f"[shares {', '.join(shared)}'s evidence, own bound] "
            shown.add("[shares ...]")
        lines.append(Line(f"{label:<7}{row['id']:<7}{beside}{main_number(row)}", VERDICT_COLOURS[row["verdict"]],
                          indent=14))
    lines += [Line(f"{marker} = {meaning}", indent=4) for marker, meaning in LEGEND.items() if marker in shown]
    lines.append(Line(summary))
    if any(row["verdict"] == "fail" for row in table):
        lines.append(Line(f"failures explained: {FINDINGS_EXPLAINED}"))
    lines.append(Line(f"details: {', '.join(map(str, details))}; every table: add --full"))
    return lines


def premises_table(premises, title: str) -> list[Table]:
    """The premises measured, one row each (none: nothing to print)."""
    if not premises:
        return []
    table = Table("premise", "statement", "measured", "needs", "met", title=title)
    for p in premises:
        get = (lambda k: p[k]) if isinstance(p, dict) else (lambda k: getattr(p, k))
        met = {True: "[green]met[/]", False: "[red]not met[/]", None: "[yellow]n/a[/]"}[get("met")]
        table.add_row(get("id"), get("statement"), get("value"), get("threshold"), met)
    return [table]


def claims_rich_table(table: list[dict], title: str) -> Table:
    """The claims table, compact: one row per claim, its premises, each piece of evidence on its
    own line (a check's seed counts, or its numbers when it did not pass; a rate's exponent)."""
    claims = Table(Column("claim", max_width=16), Column("premises", max_width=14),
                   Column("evidence", ratio=1, overflow="fold"), Column("verdict", max_width=10),
                   title=title, show_lines=True, expand=True)
    for row in table:
        lines = []
        for e in row["evidence"]:
            text = e["text"] if e["kind"] == "rate" or e["verdict"] != "pass" else e["text"].split(". ", 1)[0]
            lines.append(f"[{VERDICT_COLOURS[e['verdict']]}]{escape(e['name'])}[/]: {escape(text)}")
        unmet = [part.split()[0] for part in row["premises"].split(", ") if part.endswith("not met")]
        premises = ("none (identity)" if row["premises"].startswith("none") else
                    f"not met: {', '.join(unmet)}" if unmet else "met")
        colour = VERDICT_COLOURS[row["verdict"]]
        claims.add_row(f"{row['id']}\n{escape(row['where'])}", premises, "\n".join(lines), f"[{colour}]{row['verdict']}[/]")
    return claims


def coloured_verdict(rate: dict) -> str:
    """A check's verdict over its seeds in colour: green pass, red fail (a finding against the paper),
    yellow the rest."""
    colour = ("red" if rate["failed"] else "green" if rate["passed"] == rate["of"] else "yellow")
    return f"[{colour}]{verdict_text(rate)}[/]"


def verification_printed(folder: Path, verification: Verification) -> list[Any]:
    """`verify RUN --full`: premises first, then one row per claim, then the implementation identities,
    then one line of counts (claims, and checks x seeds)."""
    rates = verification.pass_rates()
    table = claims_table(width_summary(verification))
    printed: list[Any] = [*premises_table(verification.premises, "premises of the theorems"),
                          claims_rich_table(table, f"verify {folder}: claims (rates in m: add --scaling both)")]
    identities = Table("identity", "verdict", "threshold", "measured", title="implementation identities")
    for i, name in enumerate(CHECKS):
        if name in IDENTITIES:
            first = verification.per_seed[0][i]
            identities.add_row(name, coloured_verdict(rates[name]), first.threshold, first.sentence)
    appendix = rates[APPENDIX_C_CHECK]
    states = ", ".join(r["state"] for r in verification.appendix_c)
    identities.add_row(APPENDIX_C_CHECK,
                       coloured_verdict(appendix),
                       f"relative error <= {IDENTITY_TOLERANCE:g}",
                       f"The closed-form rates of all six kinds of variables match the JVP to "
                       f"{verification.appendix_c_error:.1e} at the run's {states} states (first seed)."
                       if verification.appendix_c else "not evaluated: no weights saved (Gram space)")
    printed.append(identities)
    counts = {key: sum(rate.get(key, 0) for rate in rates.values())
              for key in ("passed", "failed", "failed_outside_premises", "inconclusive", "unchecked", "no_verdict")}
    premise_line = ""
    if verification.premises:
        met = sum(p.met is True for p in verification.premises)
        premise_line = f"premises {met}/{len(verification.premises)} met; "
    printed.append(Line(f"{premise_line}{summary_line(table)}; checks x seeds: {counts['passed']} pass, "
                        f"{counts['failed']} fail, {counts['failed_outside_premises']} fail outside premises, "
                        + (f"{counts['inconclusive']} inconclusive, " if counts["inconclusive"] else "")
                        + f"{counts['unchecked']} not applicable, {counts['no_verdict']} diagnostic (no verdict)",
                        markup=True))
    return printed


@dataclass(frozen=True)
class PaperReport(Report):
    """eq. (1)'s theorem judged on one run, as its report shows it (`verify.Verification`)."""

    folder: Path
    verification: Verification
    runs_seeds: int
    findings_of = "checks"

    @property
    def result(self) -> Verification:
        return self.verification

    def printed(self, full: bool = False) -> list[Any]:
        folder = RunFolder(self.folder)
        if full:
            printed = verification_printed(self.folder, self.verification)
        else:
            table = claims_table(width_summary(self.verification))
            premises = [{"id": p.id, "met": p.met} for p in self.verification.premises]
            printed = summary_of_claims(f"verify {self.folder}: {len(table)} claims, {self.runs_seeds} seed(s)",
                                        premises, table, summary_line(table),
                                        [folder.verify_file("md"), folder.verify_file("json")])
        return printed + [Line("written: " + ", ".join(str(folder.verify_file(kind)) for kind in ("json", "md", "png")))]

    def findings(self) -> list[str]:
        return self.verification.findings()


def paper_report(folder: Path, stated: TheoremVerdict, relaxed: TheoremVerdict | None) -> PaperReport:
    """`THEOREM.report`: the verdicts on the run in `folder` as the paper's report (verify.json/.md/.png
    written there)."""
    run = load_run(folder)
    verification = Verification.of(run, stated, relaxed)
    write_verification(run, verification)
    return PaperReport(Path(folder), verification, len(run.manifest.get("seeds") or [1]))
