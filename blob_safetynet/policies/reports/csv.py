"""CSV of an audit (one row per finding) and of a verification run (one row per check).

A value that came from outside cannot start a formula in a spreadsheet (`escaping.csv_cell`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Final

from blob_safetynet.policies.probes import VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.view import (
    Judged,
    ReportContext,
    could_not_act,
    findings_of,
    state,
)

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
    "approver",
    "scope",
)


def render_csv(report: Judged, context: ReportContext) -> str:
    """One row per finding with the columns of `CSV_COLUMNS`; cells escaped against formula
    injection and control characters."""
    return "".join(iter_csv(report, context))


def iter_csv(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_csv`, the header then a row at a time."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def row_text(cells: Iterable[str]) -> str:
        out.seek(0)
        out.truncate()
        writer.writerow(cells)
        return out.getvalue()

    yield row_text(CSV_COLUMNS)
    for finding in findings_of(report):
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
            (suppression.approver or "") if suppression else "",
            report.scope.label,
        ]
        yield row_text([escaping.csv_cell(cell) for cell in row])


VERIFY_CSV_COLUMNS: Final = ("kind", "id", "proves", "outcome", "detail", "target", "run")


def render_verify_csv(run: VerificationRun) -> str:
    """One row per probe (kind `behaviour`), per settings rule when read (`settings`) and per
    reason the run could not act (`error`), in `VERIFY_CSV_COLUMNS`; cells escaped as the
    audit's."""
    rows = [
        ("behaviour", r.probe.id, " ".join(r.probe.proves), r.outcome.value, r.detail)
        for r in run.results
    ]
    rows += [
        ("settings", f.rule.id, f.rule.id, f.outcome.value, f.message) for f in run.settings or []
    ]
    rows += [("error", "", "", "", reason) for reason in could_not_act(run)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(VERIFY_CSV_COLUMNS)
    for row in rows:
        writer.writerow([escaping.csv_cell(cell) for cell in (*row, run.target, run.run_id)])
    return out.getvalue()
