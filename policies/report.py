"""Renderers of an audit report and of a verification run: table, json, sarif (2.1.0) and junit."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any, Final

from policies.audit import AuditReport, ReadError
from policies.probes import Probe, ProbeOutcome, ProbeResult, VerificationRun
from policies.rules import RULES, Finding, Outcome, Rule, Severity
from sweeper.redaction import printable

TOOL_NAME: Final = "safetynet"
TOOL_URI: Final = "https://github.com/blob-safetynet/blob-safetynet"
VERSION: Final = "0.1.0"
SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"

SARIF_LEVEL: Final = {
    Severity.CRITICAL: "error",
    Severity.HIGH: "error",
    Severity.MEDIUM: "warning",
    Severity.LOW: "note",
}
SECURITY_SEVERITY: Final = {
    Severity.CRITICAL: "9.5",
    Severity.HIGH: "8.0",
    Severity.MEDIUM: "5.5",
    Severity.LOW: "3.0",
}
"""The `security-severity` code scanning sorts alerts by (critical >= 9.0, high >= 7.0, ...)."""


def _error_dict(error: ReadError) -> dict[str, Any]:
    return {
        "account": error.account,
        "operation": error.operation,
        "kind": error.kind.value,
        "message": error.message,
    }


def _finding_dict(finding: Finding) -> dict[str, Any]:
    return {
        "rule": finding.rule.id,
        "account": finding.account,
        "resource_id": finding.resource_id,
        "outcome": finding.outcome.value,
        "severity": finding.severity.value,
        "title": finding.rule.title,
        "message": finding.message,
    }


def render_json(report: AuditReport) -> str:
    """One object: scope, thresholds, summary, findings, errors."""
    findings = report.findings
    document = {
        "tool": TOOL_NAME,
        "version": VERSION,
        "scope": report.scope.label,
        "thresholds": {
            "minBlobSoftDeleteDays": report.thresholds.min_blob_soft_delete_days,
            "maxPendingDays": report.thresholds.max_pending_days,
            "containerName": report.thresholds.container,
        },
        "summary": {
            "accounts": len(report.results),
            **{o.value: sum(f.outcome is o for f in findings) for o in Outcome},
            "errors": len(report.all_errors),
        },
        "findings": [_finding_dict(f) for f in findings],
        "errors": [_error_dict(e) for e in report.all_errors],
    }
    return json.dumps(document, indent=2) + "\n"


def render_table(report: AuditReport) -> str:
    """A plain text table for people, then the read errors."""
    rows = [("ACCOUNT", "RULE", "SEVERITY", "OUTCOME", "MESSAGE")]
    # Names and messages quote what ARM returned: escaped, so none can forge a row.
    rows += [
        (printable(f.account), f.rule.id, f.severity.value, f.outcome.value, printable(f.message))
        for f in report.findings
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:4])) + "  " + row[4]
        for row in rows
    ]
    if not report.findings and not report.all_errors:
        lines.append(f"no storage account in {report.scope.label}")
    for error in report.all_errors:
        where = printable(error.account or report.scope.label)
        lines.append(f"ERROR {where} {error.operation}: {error.kind.value}: {error.message}")
    findings = report.findings
    counts = ", ".join(f"{sum(f.outcome is o for f in findings)} {o.value}" for o in Outcome)
    lines.append(f"{len(report.results)} account(s): {counts}, {len(report.all_errors)} error(s)")
    return "\n".join(lines) + "\n"


def _sarif_log(
    *,
    rules: list[dict[str, Any]],
    automation_id: str,
    succeeded: bool,
    notifications: list[dict[str, Any]],
    results: list[dict[str, Any]],
) -> str:
    """One SARIF 2.1.0 run of this tool, as the JSON text both audit and verify print."""
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": TOOL_NAME,
                        "informationUri": TOOL_URI,
                        "version": VERSION,
                        "rules": rules,
                    }
                },
                "automationDetails": {"id": automation_id},
                "invocations": [
                    {
                        "executionSuccessful": succeeded,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(part.capitalize() for part in rule.id.lower().split("-")),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.rationale},
        "help": {
            "text": f"Fix: {rule.remediation}",
            "markdown": f"**Why:** {rule.rationale}\n\n**Fix:** {rule.remediation}",
        },
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {
            "security-severity": SECURITY_SEVERITY[rule.severity],
            "severity": rule.severity.value,
            "tags": ["security", "azure-storage", rule.enforcement],
        },
    }


def _location_uri(finding: Finding) -> str:
    """The account's resource id as a relative URI (code scanning needs a physical location)."""
    resource = finding.resource_id or f"storageAccounts/{finding.account}"
    return "azure" + ("" if resource.startswith("/") else "/") + resource


def render_sarif(report: AuditReport) -> str:
    """SARIF 2.1.0: FAIL results (kind fail) and UNKNOWN results (kind review); PASS omitted."""
    rules = list(report.rules)
    index = {rule.id: number for number, rule in enumerate(rules)}
    results = []
    for finding in report.findings:
        if finding.outcome in (Outcome.PASS, Outcome.NOT_APPLICABLE):
            continue
        failed = finding.outcome is Outcome.FAIL
        fingerprint = hashlib.sha256(
            f"{finding.rule.id}|{finding.resource_id or finding.account}".encode()
        ).hexdigest()
        results.append(
            {
                "ruleId": finding.rule.id,
                "ruleIndex": index[finding.rule.id],
                "kind": "fail" if failed else "review",
                "level": SARIF_LEVEL[finding.severity] if failed else "none",
                "message": {"text": f"{finding.account}: {finding.message}"},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": _location_uri(finding)},
                            "region": {"startLine": 1},
                        },
                        "logicalLocations": [
                            {
                                "name": finding.account,
                                "fullyQualifiedName": finding.resource_id or finding.account,
                                "kind": "resource",
                            }
                        ],
                    }
                ],
                "partialFingerprints": {"safetynetFinding/v1": fingerprint},
                "properties": {"outcome": finding.outcome.value},
            }
        )
    notifications = [
        {
            "level": "error",
            "message": {
                "text": f"{e.account or report.scope.label}: {e.operation}: "
                f"{e.kind.value}: {e.message}"
            },
            "descriptor": {"id": e.kind.value},
        }
        for e in report.all_errors
    ]
    return _sarif_log(
        rules=[_sarif_rule(rule) for rule in rules],
        automation_id=f"safetynet-audit/{report.scope.label}",
        succeeded=not report.all_errors,
        notifications=notifications,
        results=results,
    )


def render_junit(report: AuditReport) -> str:
    """JUnit XML: a testsuite per account, a testcase per rule; FAIL is a failure, UNKNOWN is
    skipped, a read error is an error testcase."""
    suites = ET.Element("testsuites", name="safetynet audit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for result in report.results:
        suite = ET.SubElement(suites, "testsuite", name=result.account.name)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for finding in result.findings:
            failure = _finding_case(suite, finding, result.account.name, counts)
            if failure is not None:
                failure.text = f"{finding.message}\nresource: {finding.resource_id}"
        for error in result.errors:
            _error_case(suite, error, result.account.name)
            counts["tests"] += 1
            counts["errors"] += 1
        _set_counts(suite, counts, totals)
    if report.errors:
        suite = ET.SubElement(suites, "testsuite", name=report.scope.label)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for error in report.errors:
            _error_case(suite, error, "scope")
            counts["tests"] += 1
            counts["errors"] += 1
        _set_counts(suite, counts, totals)
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _error_case(suite: ET.Element, error: ReadError, where: str) -> None:
    case = ET.SubElement(
        suite, "testcase", classname=f"safetynet.{where}", name=f"read {error.operation}"
    )
    node = ET.SubElement(case, "error", message=error.message, type=error.kind.value)
    node.text = error.message


def _finding_case(
    suite: ET.Element, finding: Finding, account: str, counts: dict[str, int]
) -> ET.Element | None:
    """A counted testcase for one rule's finding (FAIL a failure, UNKNOWN skipped); the failure
    element when there is one."""
    case = ET.SubElement(
        suite,
        "testcase",
        classname=f"safetynet.{account}",
        name=f"{finding.rule.id} {finding.rule.title}",
    )
    counts["tests"] += 1
    if finding.outcome is Outcome.FAIL:
        counts["failures"] += 1
        return ET.SubElement(case, "failure", message=finding.message, type=finding.severity.value)
    if finding.outcome in (Outcome.UNKNOWN, Outcome.NOT_APPLICABLE):
        counts["skipped"] += 1
        ET.SubElement(case, "skipped", message=finding.message)
    return None


def _set_counts(suite: ET.Element, counts: dict[str, int], totals: dict[str, int]) -> None:
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value


RENDERERS: Final[dict[str, Callable[[AuditReport], str]]] = {
    "table": render_table,
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
}


# --- `safetynet verify`: the behaviour probes, with the settings verdict beside them ---------


def _proves(result: ProbeResult) -> str:
    return ",".join(result.probe.proves) or "(protocol)"


def behaviour_by_rule(run: VerificationRun) -> dict[str, tuple[str, list[str]]]:
    """Per catalogue rule: the combined probe outcome (any FAIL, else any PASS, else
    NOT_VERIFIABLE) and the probes behind it; rules no probe proves are absent."""
    combined: dict[str, tuple[str, list[str]]] = {}
    for rule in RULES:
        results = [r for r in run.results if rule.id in r.probe.proves]
        if not results:
            continue
        outcomes = {r.outcome for r in results}
        for candidate in (ProbeOutcome.FAIL, ProbeOutcome.PASS, ProbeOutcome.NOT_VERIFIABLE):
            if candidate in outcomes:
                combined[rule.id] = (candidate.value, [r.probe.id for r in results])
                break
    return combined


def _settings_by_rule(run: VerificationRun) -> dict[str, str]:
    return {f.rule.id: f.outcome.value for f in run.settings or []}


def _verify_summary(run: VerificationRun) -> dict[str, int]:
    return {o.value: len(run.outcomes(o)) for o in ProbeOutcome}


def render_verify_json(run: VerificationRun) -> str:
    """One object: target, run id, summary, `checks` (check, proves, outcome, detail), and with
    settings read, `rules` (settings and behaviour verdict per rule)."""
    settings = _settings_by_rule(run)
    behaviour = behaviour_by_rule(run)
    document: dict[str, Any] = {
        "tool": TOOL_NAME,
        "version": VERSION,
        "target": run.target,
        "run_id": run.run_id,
        "summary": {
            **_verify_summary(run),
            "requests": run.requests,
            "seconds": round(run.seconds, 2),
        },
        "checks": [
            {
                "check": r.probe.id,
                "title": r.probe.title,
                "proves": list(r.probe.proves),
                "outcome": r.outcome.value,
                "detail": r.detail,
                "requests": r.requests,
            }
            for r in run.results
        ],
        "incomplete": run.incomplete,
        "leftovers": run.leftovers,
    }
    if run.settings is not None:
        document["rules"] = [
            {
                "rule": rule.id,
                "settings": settings.get(rule.id),
                "behaviour": behaviour.get(rule.id, (None, []))[0],
                "checks": behaviour.get(rule.id, (None, []))[1],
            }
            for rule in RULES
        ]
        document["settings_errors"] = run.settings_errors
    return json.dumps(document, indent=2) + "\n"


def render_verify_table(run: VerificationRun) -> str:
    """A plain text table for people: one row per probe, then per rule when settings were read."""
    settings = _settings_by_rule(run)
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
                r.detail,
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
        lines.extend(f"ERROR settings: {error}" for error in run.settings_errors)
    lines.extend(f"INCOMPLETE {reason}" for reason in run.incomplete)
    lines.extend(f"LEFTOVER {name}" for name in run.leftovers)
    counts = ", ".join(f"{count} {outcome}" for outcome, count in _verify_summary(run).items())
    lines.append(
        f"{len(run.results)} checks: {counts}; {run.requests} requests in {run.seconds:.1f} s; "
        f"run {run.run_id} on {run.target}"
    )
    return "\n".join(lines) + "\n"


def _sarif_probe(probe: Probe) -> dict[str, Any]:
    proves = ", ".join(probe.proves) or "the protocol's own guarantee"
    return {
        "id": probe.id,
        "name": "".join(part.capitalize() for part in probe.id.lower().split("-")),
        "shortDescription": {"text": probe.title},
        "fullDescription": {"text": f"Proves {proves}: {probe.action}."},
        "helpUri": probe.reference if probe.reference.startswith("https://") else TOOL_URI,
        "defaultConfiguration": {"level": "error"},
        "properties": {
            "tags": ["security", "azure-storage", "behaviour"],
            "proves": list(probe.proves),
        },
    }


def render_verify_sarif(run: VerificationRun) -> str:
    """SARIF 2.1.0: FAIL (kind fail) and NOT_VERIFIABLE (kind review) probes, and non-PASS
    settings findings when read; PASS omitted, as in the audit."""
    probes = [r.probe for r in run.results]
    rules = [rule for rule in RULES if run.settings is not None]
    descriptors = [_sarif_probe(p) for p in probes] + [_sarif_rule(rule) for rule in rules]
    index = {d["id"]: number for number, d in enumerate(descriptors)}
    location = {
        "physicalLocation": {
            "artifactLocation": {"uri": "azure/" + run.target.split("://", 1)[-1]},
            "region": {"startLine": 1},
        }
    }
    results = []
    for r in run.results:
        if r.outcome is ProbeOutcome.PASS:
            continue
        failed = r.outcome is ProbeOutcome.FAIL
        results.append(
            {
                "ruleId": r.probe.id,
                "ruleIndex": index[r.probe.id],
                "kind": "fail" if failed else "review",
                "level": "error" if failed else "none",
                "message": {"text": f"{r.probe.title}: {r.detail}"},
                "locations": [location],
                "partialFingerprints": {
                    "safetynetCheck/v1": hashlib.sha256(
                        f"{r.probe.id}|{run.target}".encode()
                    ).hexdigest()
                },
                "properties": {"outcome": r.outcome.value},
            }
        )
    for finding in run.settings or []:
        if finding.outcome in (Outcome.PASS, Outcome.NOT_APPLICABLE):
            continue
        failed = finding.outcome is Outcome.FAIL
        results.append(
            {
                "ruleId": finding.rule.id,
                "ruleIndex": index[finding.rule.id],
                "kind": "fail" if failed else "review",
                "level": SARIF_LEVEL[finding.severity] if failed else "none",
                "message": {"text": f"{finding.account}: {finding.message}"},
                "locations": [location],
                "properties": {"outcome": finding.outcome.value},
            }
        )
    notifications = [
        {"level": "error", "message": {"text": text}, "descriptor": {"id": "incomplete"}}
        for text in [*run.incomplete, *run.settings_errors, *_leftover_lines(run)]
    ]
    return _sarif_log(
        rules=descriptors,
        automation_id=f"safetynet-verify/{run.run_id}",
        succeeded=not (run.incomplete or run.settings_errors or run.leftovers),
        notifications=notifications,
        results=results,
    )


def _leftover_lines(run: VerificationRun) -> list[str]:
    """Probe blobs the clean-up could not delete: they make the run exit 3, so every format a
    pipeline publishes names them."""
    return [f"left behind, delete by hand: {name}" for name in run.leftovers]


def render_verify_junit(run: VerificationRun) -> str:
    """JUnit XML: one testcase per probe (FAIL a failure, NOT_VERIFIABLE skipped with the
    reason), and a second suite for the settings rules when they were read."""
    suites = ET.Element("testsuites", name="safetynet verify")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    suite = ET.SubElement(suites, "testsuite", name=f"behaviour {run.target}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for r in run.results:
        case = ET.SubElement(
            suite, "testcase", classname="safetynet.verify", name=f"{r.probe.id} {r.probe.title}"
        )
        counts["tests"] += 1
        if r.outcome is ProbeOutcome.FAIL:
            counts["failures"] += 1
            ET.SubElement(case, "failure", message=r.detail, type="FAIL").text = r.detail
        elif r.outcome is ProbeOutcome.NOT_VERIFIABLE:
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=r.detail)
    for reason in [*run.incomplete, *_leftover_lines(run)]:
        case = ET.SubElement(suite, "testcase", classname="safetynet.verify", name="could not act")
        ET.SubElement(case, "error", message=reason, type="incomplete").text = reason
        counts["tests"] += 1
        counts["errors"] += 1
    _set_counts(suite, counts, totals)
    if run.settings is not None:
        suite = ET.SubElement(suites, "testsuite", name="settings")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for finding in run.settings:
            _finding_case(suite, finding, finding.account, counts)
        for error in run.settings_errors:
            case = ET.SubElement(suite, "testcase", classname="safetynet.settings", name="read")
            ET.SubElement(case, "error", message=error, type="incomplete").text = error
            counts["tests"] += 1
            counts["errors"] += 1
        _set_counts(suite, counts, totals)
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


VERIFY_RENDERERS: Final[dict[str, Callable[[VerificationRun], str]]] = {
    "table": render_verify_table,
    "json": render_verify_json,
    "sarif": render_verify_sarif,
    "junit": render_verify_junit,
}
