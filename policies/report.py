"""Renderers of an audit report: table, json, sarif (2.1.0) and junit."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Any, Final

from policies.audit import AuditReport, ReadError
from policies.rules import Finding, Outcome, Rule, Severity

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
    rows += [
        (f.account, f.rule.id, f.severity.value, f.outcome.value, f.message)
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
        where = error.account or report.scope.label
        lines.append(f"ERROR {where} {error.operation}: {error.kind.value}: {error.message}")
    findings = report.findings
    counts = ", ".join(f"{sum(f.outcome is o for f in findings)} {o.value}" for o in Outcome)
    lines.append(f"{len(report.results)} account(s): {counts}, {len(report.all_errors)} error(s)")
    return "\n".join(lines) + "\n"


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
        if finding.outcome is Outcome.PASS:
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
                        "rules": [_sarif_rule(rule) for rule in rules],
                    }
                },
                "automationDetails": {"id": f"safetynet-audit/{report.scope.label}"},
                "invocations": [
                    {
                        "executionSuccessful": not report.all_errors,
                        "toolExecutionNotifications": notifications,
                    }
                ],
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def render_junit(report: AuditReport) -> str:
    """JUnit XML: a testsuite per account, a testcase per rule; FAIL is a failure, UNKNOWN is
    skipped, a read error is an error testcase."""
    suites = ET.Element("testsuites", name="safetynet audit")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for result in report.results:
        suite = ET.SubElement(suites, "testsuite", name=result.account.name)
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        for finding in result.findings:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"safetynet.{result.account.name}",
                name=f"{finding.rule.id} {finding.rule.title}",
            )
            counts["tests"] += 1
            if finding.outcome is Outcome.FAIL:
                counts["failures"] += 1
                failure = ET.SubElement(
                    case, "failure", message=finding.message, type=finding.severity.value
                )
                failure.text = f"{finding.message}\nresource: {finding.resource_id}"
            elif finding.outcome is Outcome.UNKNOWN:
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=finding.message)
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
