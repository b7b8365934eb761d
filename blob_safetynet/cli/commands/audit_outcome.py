"""How `safetynet audit` ends: the lines on stderr (read errors, deleted accounts, UNKNOWN
rules, an empty scope, stale suppressions) and the exit code of the contract in
blob_safetynet/cli/exitcodes.py."""

from __future__ import annotations

import sys

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.policies.reports.view import Judged, ReportContext, all_errors, findings_of
from blob_safetynet.policies.rules import Outcome, Severity
from blob_safetynet.policies.sources.results import Scope
from blob_safetynet.settings.redaction import printable

NO_FAIL = "none"


def exit_code(report: Judged, context: ReportContext, fail_on: str) -> int:
    """1 when an unsuppressed FAIL is at or above --fail-on; else 3 when anything could not be
    judged or read (or no account was found); else 0."""
    if fail_on != NO_FAIL:
        least = Severity(fail_on).rank
        if any(
            f.outcome is Outcome.FAIL and f.severity.rank >= least and context.applied.of(f) is None
            for f in findings_of(report)
        ):
            return ExitCode.FINDINGS
    unknown = any(f.outcome is Outcome.UNKNOWN for f in findings_of(report))
    if all_errors(report) or unknown or not report.results:
        return ExitCode.INCOMPLETE
    return ExitCode.OK


def warn(report: Judged, context: ReportContext, scope: Scope) -> None:
    """The read errors, UNKNOWN count, empty scope and stale suppressions, on stderr."""
    errors = all_errors(report)
    for problem in errors:
        where = printable(problem.account or scope.label)
        print(
            f"safetynet audit: {where}: {problem.operation}: {problem.kind.value}: "
            f"{printable(problem.message, backslashes=False)}",
            file=sys.stderr,
        )
    deleted = sum(1 for result in report.results if result.deleted)
    if deleted:
        print(
            f"safetynet audit: {deleted} account(s) deleted after they were listed: their rules "
            "are NOT_APPLICABLE",
            file=sys.stderr,
        )
    unknown = sum(f.outcome is Outcome.UNKNOWN for f in findings_of(report))
    if unknown and not errors:
        print(f"safetynet audit: {unknown} rule(s) could not be judged (UNKNOWN)", file=sys.stderr)
    unseen = sum(f.outcome is Outcome.NOT_IN_FILES for f in findings_of(report))
    if unseen:
        print(
            f"safetynet audit: {unseen} verdict(s) NOT_IN_FILES: their facts are not in saved "
            "files (role assignments, Defender for Storage, ...); a live audit judges them",
            file=sys.stderr,
        )
    if not report.results and not errors:
        print(
            f"safetynet audit: no storage account found in {printable(scope.label)}; "
            "check the scope and the identity's read permission",
            file=sys.stderr,
        )
    for note in context.applied.notes():
        print(f"safetynet audit: {printable(note)}", file=sys.stderr)
