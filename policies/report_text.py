"""CSV (one row per finding) and Markdown (a GitHub job summary or PR comment) of an audit."""

from __future__ import annotations

import csv
import io
from typing import Final

from policies import escaping
from policies.audit import AuditReport
from policies.report_view import ATTENTION, ReportContext, counts_line, error_line, state
from policies.rules import Finding

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
            suppression.expires.isoformat() if suppression else "",
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


def _fit(head: list[str], rows: list[str], tail: list[str]) -> str:
    """head + as many rows as the budget allows + tail; a note when rows were left out."""
    budget = MARKDOWN_BUDGET - sum(len(line) + 1 for line in [*head, *tail]) - 200
    kept: list[str] = []
    for row in rows:
        if budget - len(row) - 1 < 0:
            break
        budget -= len(row) + 1
        kept.append(row)
    note = []
    if len(kept) < len(rows):
        left = len(rows) - len(kept)
        note = ["", f"_{left} more row(s) left out to fit a comment; see the JSON or HTML report._"]
    return "\n".join([*head, *kept, *note, *tail]) + "\n"
