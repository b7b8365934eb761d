"""CSV (one row per finding) and Markdown (a GitHub job summary or PR comment) of an audit."""

from __future__ import annotations

import csv
import io
from typing import Final

from blob_safetynet.policies import escaping
from blob_safetynet.policies.audit import AuditReport
from blob_safetynet.policies.report_view import (
    ATTENTION,
    ReportContext,
    counts_line,
    error_line,
    state,
)
from blob_safetynet.policies.rules import Finding

CSV_COLUMNS: Final = (
    "account",
    "resource_id",
    "rule",
    "severity",
    "state",
    "outcome",
    "message",
    "justification",
    "expires",
    "scope",
)

MARKDOWN_BUDGET: Final = 65_000
"""Characters the Markdown may take: a pull request comment holds at most 65,536 (GitHub's API
refuses a longer body), and a job summary ($GITHUB_STEP_SUMMARY) at most 1 MiB per step
(https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands#adding-a-job-summary),
so one budget fits both."""


def render_csv(report: AuditReport, context: ReportContext) -> str:
    """One row per finding with the columns of `CSV_COLUMNS`; cells escaped against formula
    injection and control characters."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for finding in report.findings:
        suppression = context.applied.of(finding)
        row = [
            finding.account,
            finding.resource_id or "",
            finding.rule.id,
            finding.severity.value,
            state(finding, context),
            finding.outcome.value,
            finding.message,
            suppression.justification if suppression else "",
            suppression.expires.isoformat() if suppression and suppression.expires else "",
            report.scope.label,
        ]
        writer.writerow([escaping.csv_cell(cell) for cell in row])
    return out.getvalue()


def _finding_row(finding: Finding, context: ReportContext) -> str:
    cells = [
        escaping.markdown(finding.account),
        f"`{finding.rule.id}`",
        finding.severity.value,
        f"**{state(finding, context)}**",
        escaping.markdown(finding.message),
    ]
    return "| " + " | ".join(cells) + " |"


def render_markdown(report: AuditReport, context: ReportContext) -> str:
    """A heading, the counts, then every FAIL, SUPPRESSED and UNKNOWN finding (in that order,
    most severe first), the read
    errors and suppression notes; cut to `MARKDOWN_BUDGET` with a note saying how many rows
    were left out."""
    head = [
        f"## safetynet audit: {escaping.markdown(report.scope.label)}",
        "",
        counts_line(report, context),
        "",
    ]
    listed = [(state(f, context), f) for f in report.findings]
    shown = sorted(
        ((name, f) for name, f in listed if name in ATTENTION),
        key=lambda pair: (ATTENTION.index(pair[0]), -pair[1].severity.rank),
    )
    rows = [_finding_row(f, context) for _, f in shown]
    if rows:
        head += ["| Account | Rule | Severity | State | Message |", "|---|---|---|---|---|"]
    else:
        head.append("Every rule passed on every account.")
    tail = [
        f"- error: {escaping.markdown(error_line(e, report.scope.label))}"
        for e in report.all_errors
    ] + [f"- {escaping.markdown(note)}" for note in context.applied.notes()]
    return _fit(head, rows, ([""] if tail else []) + tail)


def _take(lines: list[str], budget: int) -> list[str]:
    """The leading lines that fit in `budget` characters (each with its newline)."""
    kept: list[str] = []
    for line in lines:
        budget -= len(line) + 1
        if budget < 0:
            break
        kept.append(line)
    return kept


def _fit(head: list[str], rows: list[str], tail: list[str]) -> str:
    """head + as many rows, then tail lines, as the budget allows; a note when any were left
    out (the note's own length is reserved)."""
    budget = MARKDOWN_BUDGET - sum(len(line) + 1 for line in head) - 200
    kept_rows = _take(rows, budget)
    budget -= sum(len(line) + 1 for line in kept_rows)
    kept_tail = _take(tail, budget)
    left = len(rows) - len(kept_rows) + len(tail) - len(kept_tail)
    note = []
    if left:
        note = [
            "",
            f"_{left} more line(s) left out to fit a comment; see the JSON or HTML report._",
        ]
    return "\n".join([*head, *kept_rows, *kept_tail, *note]) + "\n"
