"""What one CI step saw, in a sentence: the annotation and the summary's first line.

The exit-code contract (`exitcodes.MEANINGS`) lists everything a code may mean ("a rule failed,
a row could not be swept, the container and the table disagree"); a step's annotation says which
of it this run met, read from the run's own JSON report: the rules that failed at or above the
gate and where, the verdicts that could not be reached and why, the read errors by kind. For
saved files no credential is used, so exit 3 there says what the files did not let it judge,
never that authentication failed.

The sentence is plain text holding values from outside (account names, ARM's words): each
runner escapes it for where it goes (`agent_output.neutralise`, Markdown for the summary).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from blob_safetynet.cli.exitcodes import MEANINGS, ExitCode

LISTED: Final = 8
"""Items a sentence names before it says how many more there are."""
SEVERITIES: Final = ("low", "medium", "high", "critical")
DEFAULT_FAIL_ON: Final = "high"
"""`safetynet audit`'s --fail-on default, for a report written before reports named the gate."""


def meaning(code: int) -> str:
    """The contract's words for `code` (docs/cli.md), or that it is outside the contract."""
    known = {int(c): text for c, text in MEANINGS.items()}
    return known.get(code, "an exit code outside the contract")


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown + (f", and {len(items) - LISTED} more" if len(items) > LISTED else "")


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def audit_seen(code: int, report: Mapping[str, Any], files: bool) -> str:
    """What an audit's JSON report shows behind its exit code."""
    findings: list[dict[str, Any]] = [f for f in report.get("findings", []) if isinstance(f, dict)]
    gate = report.get("fail_on") or DEFAULT_FAIL_ON
    if code == ExitCode.FINDINGS:
        least = SEVERITIES.index(gate) if gate in SEVERITIES else 0
        failed = [
            f"{f.get('rule')} on {f.get('account')}"
            for f in findings
            if f.get("state") == "FAIL" and f.get("severity") in SEVERITIES[least:]
        ]
        return f"{_plural(len(failed), 'rule')} failed at or above {gate}: {_listed(failed)}"
    if code == ExitCode.INCOMPLETE:
        return _incomplete(findings, report.get("errors", []), report, files)
    if code == ExitCode.OK:
        unseen = sum(f.get("state") == "NOT_IN_FILES" for f in findings)
        accepted = sum(f.get("state") in ("SUPPRESSED", "BASELINED") for f in findings)
        gated = "no rule fails the step" if gate == "none" else f"nothing failed at or above {gate}"
        notes = [
            *([f"{_plural(accepted, 'FAIL')} suppressed or baselined"] if accepted else []),
            *([f"{unseen} NOT_IN_FILES (judged by a live audit)"] if unseen else []),
        ]
        return f"{gated} and every verdict was reached" + (f"; {', '.join(notes)}" if notes else "")
    return meaning(code)


def _incomplete(
    findings: list[dict[str, Any]], errors: object, report: Mapping[str, Any], files: bool
) -> str:
    unknown = [
        f"{f.get('rule')} on {f.get('account')} ({f.get('detail') or f.get('message')})"
        for f in findings
        if f.get("state") == "UNKNOWN"
    ]
    read = [
        f"{e.get('account') or 'the scope'} {e.get('operation')}: {e.get('kind')}: {e.get('message')}"
        for e in (errors if isinstance(errors, list) else [])
        if isinstance(e, dict)
    ]
    parts = []
    if unknown:
        where = "from the files" if files else "from what Azure answered"
        parts.append(
            f"{_plural(len(unknown), 'verdict')} could not be judged {where}: {_listed(unknown)}"
        )
    if read:
        parts.append(f"{_plural(len(read), 'read error')}: {_listed(read)}")
    summary = report.get("summary")
    if isinstance(summary, dict) and summary.get("accounts") == 0 and not read:
        parts.append(
            "no storage account was found in the scope" if not files else "no account in the files"
        )
    if not parts:
        return meaning(ExitCode.INCOMPLETE)
    note = "; no credential is used for saved files" if files else ""
    return "; ".join(parts) + note


def verify_seen(code: int, report: Mapping[str, Any]) -> str:
    """What a verification run's JSON report shows behind its exit code."""
    checks = [c for c in report.get("checks", []) if isinstance(c, dict)]
    if code == ExitCode.FINDINGS:
        failed = [
            f"{c.get('check')} ({c.get('detail')})" for c in checks if c.get("outcome") == "FAIL"
        ]
        rules = [
            str(r.get("rule"))
            for r in report.get("rules", []) or []
            if isinstance(r, dict) and r.get("settings") == "FAIL"
        ]
        parts = [f"{_plural(len(failed), 'check')} failed: {_listed(failed)}"] if failed else []
        parts += [f"{_plural(len(rules), 'setting')} failed: {_listed(rules)}"] if rules else []
        return "; ".join(parts) or meaning(code)
    if code == ExitCode.INCOMPLETE:
        reasons = [
            *[str(r) for r in report.get("incomplete", []) or []],
            *[str(r) for r in report.get("settings_errors", []) or []],
            *[f"left behind, delete by hand: {name}" for name in report.get("leftovers", []) or []],
        ]
        return f"the run could not act: {_listed(reasons)}" if reasons else meaning(code)
    if code == ExitCode.OK:
        shown = sum(c.get("outcome") == "NOT_VERIFIABLE" for c in checks)
        tail = f"; {shown} NOT_VERIFIABLE (not shown by this service)" if shown else ""
        return f"every check that could be shown passed{tail}"
    return meaning(code)


def preview_seen(code: int, text: str) -> str:
    """What `pulumi preview`'s output shows behind the step's exit code."""
    if code == ExitCode.FINDINGS:
        lines = [
            line.strip() for line in text.splitlines() if line.strip().startswith("[mandatory]")
        ]
        return f"{_plural(len(lines), 'mandatory policy violation')}: {_listed(lines)}"
    if code == ExitCode.OK:
        return "pulumi preview passed the policy pack"
    if code == ExitCode.INCOMPLETE:
        last = [line.strip() for line in text.splitlines() if line.strip()][-3:]
        said = f": {' / '.join(last)}" if last else ""
        return f"pulumi preview did not finish, and named no mandatory violation{said}"
    return meaning(code)
