"""The plain text table of an audit and of a verification run, for people at a terminal.

Every value that came from outside is escaped for a terminal (`escaping.terminal`): none can
clear the screen or forge a row."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from blob_safetynet.policies.probes import ProbeResult, VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.view import (
    Judged,
    ReportContext,
    all_errors,
    behaviour_by_rule,
    counts_line,
    error_line,
    findings_of,
    input_line,
    settings_by_rule,
    state,
    verify_counts_line,
)
from blob_safetynet.policies.rules import RULES


def _proves(result: ProbeResult) -> str:
    return ",".join(result.probe.proves) or "(protocol)"


TABLE_HEADER: Final = ("ACCOUNT", "RULE", "SEVERITY", "OUTCOME", "MESSAGE")


def _table_rows(report: Judged, context: ReportContext) -> Iterator[tuple[str, ...]]:
    yield TABLE_HEADER
    for f in findings_of(report):
        yield (
            escaping.terminal(f.account),
            f.rule.id,
            f.severity.value,
            state(f, context),
            escaping.terminal(f.message),
        )


def render_table(report: Judged, context: ReportContext) -> str:
    """A plain text table for people (under the scope and each input file's digest, for an
    audit of files), then the read errors and suppression notes."""
    return "".join(iter_table(report, context))


def iter_table(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_table`, a line at a time: one pass for the column widths, one for the rows."""
    widths = [0] * 4
    for row in _table_rows(report, context):
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=False)]
    if report.scope.files:
        yield escaping.terminal(report.scope.label) + "\n"
    for file in context.inputs:
        yield "input " + escaping.terminal(input_line(file)) + "\n"
    for row in _table_rows(report, context):
        cells = "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4]))
        yield cells + "  " + row[4] + "\n"
    errors = all_errors(report)
    if next(findings_of(report), None) is None and not errors:
        yield f"no storage account in {escaping.terminal(report.scope.label)}\n"
    for error in errors:
        yield "ERROR " + escaping.terminal(error_line(error, report.scope.label)) + "\n"
    for note in context.applied.notes():
        yield escaping.terminal(note) + "\n"
    yield counts_line(report, context) + "\n"


def render_verify_table(run: VerificationRun) -> str:
    """A plain text table for people: one row per probe, then per rule when settings were read.
    Details quote the service and the heartbeat, so they are escaped: none can forge a row."""
    settings = settings_by_rule(run)
    with_settings = run.settings is not None
    header = ("CHECK", "PROVES", "OUTCOME", *(("SETTINGS",) if with_settings else ()), "DETAIL")
    rows = [header]
    for r in run.results:
        verdicts = " ".join(settings.get(rule, "-") for rule in r.probe.proves) or "-"
        rows.append(
            (
                r.probe.id,
                _proves(r),
                r.outcome.value,
                *((verdicts,) if with_settings else ()),
                escaping.terminal(r.detail),
            )
        )
    columns = len(header) - 1
    widths = [max(len(row[i]) for row in rows) for i in range(columns)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:columns])) + "  " + row[-1]
        for row in rows
    ]
    if with_settings:
        behaviour = behaviour_by_rule(run)
        lines.append("")
        lines.append(f"{'RULE':<26}  {'SETTINGS':<8}  BEHAVIOUR")
        for rule in RULES:
            outcome, checks = behaviour.get(rule.id, ("-", []))
            by = f" ({', '.join(checks)})" if checks else ""
            lines.append(f"{rule.id:<26}  {settings.get(rule.id, '-'):<8}  {outcome}{by}")
        lines.extend(f"ERROR settings: {escaping.terminal(e)}" for e in run.settings_errors)
    lines.extend(f"INCOMPLETE {escaping.terminal(reason)}" for reason in run.incomplete)
    lines.extend(f"LEFTOVER {escaping.terminal(name)}" for name in run.leftovers)
    lines.append(
        f"{verify_counts_line(run)}; "
        f"run {escaping.terminal(run.run_id)} on {escaping.terminal(run.target)}"
    )
    return "\n".join(lines) + "\n"
