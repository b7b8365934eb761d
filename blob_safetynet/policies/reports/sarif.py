"""SARIF 2.1.0 of an audit and of a verification run, for code scanning: FAILs as results,
UNKNOWN and NOT_VERIFIABLE as notifications, severities mapped to `security-severity`."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, urlsplit

from blob_safetynet import package_version
from blob_safetynet.policies.probes import Probe, ProbeOutcome, VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.json import Arrays
from blob_safetynet.policies.reports.view import (
    TOOL_NAME,
    TOOL_URI,
    Judged,
    ReportContext,
    all_errors,
    could_not_act,
    error_line,
    findings_of,
)
from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule, Severity
from blob_safetynet.policies.rules.suppressions import Suppression
from blob_safetynet.policies.sources.results import ReadError, SourceLine
from blob_safetynet.settings.untrusted import STDIN, InputFile

SARIF_SCHEMA: Final = "https://json.schemastore.org/sarif-2.1.0.json"


FILES_SCOPE: Final = "files"


"""The `automationDetails.id` scope of an audit of saved ARM JSON, whatever the paths or their
order: code scanning keys its alerts by category, so an id that held the paths as typed opened a
new category when a pipeline ran from another folder, and the old alerts never closed."""


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


def sarif_message(text: str) -> dict[str, str]:
    """A SARIF message: `text` plain (control characters escaped, no Markdown backslashes), which
    plain-text viewers show as is; `markdown` escaped for the viewers that render it (SARIF 2.1.0
    section 3.11.3: `markdown` alongside `text`, which stays plain)."""
    return {"text": escaping.terminal(text), "markdown": escaping.markdown(text)}


def _sarif_log(
    *,
    rules: list[dict[str, Any]],
    automation_id: str,
    described: str,
    succeeded: bool,
    notifications: list[dict[str, Any]] | str,
    results: list[dict[str, Any]] | str,
    artifacts: list[dict[str, Any]] | None = None,
    ended: dt.datetime | None = None,
) -> dict[str, Any]:
    """One SARIF 2.1.0 run of this tool, the document both audit and verify print (the lists
    may be `Arrays` marks); the audit adds the files it read as `artifacts` and when it ended."""
    invocation: dict[str, Any] = {
        "executionSuccessful": succeeded,
        **({"endTimeUtc": _utc(ended)} if ended is not None else {}),
        "toolExecutionNotifications": notifications,
    }
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": TOOL_NAME,
                "informationUri": TOOL_URI,
                "version": package_version(),
                "rules": rules,
            }
        },
        "automationDetails": {
            "id": automation_id,
            "description": sarif_message(described),
        },
        **({"artifacts": artifacts} if artifacts else {}),
        "invocations": [invocation],
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _utc(moment: dt.datetime) -> str:
    """A SARIF date-time: UTC, ISO 8601 with a Z (SARIF 2.1.0 section 3.9)."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _sarif_rule(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "name": "".join(part.capitalize() for part in rule.id.lower().split("-")),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.rationale},
        "help": {
            "text": f"Fix: {rule.remediation.account}",
            "markdown": f"**Why:** {rule.rationale}\n\n**Fix:** {rule.remediation.account}",
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


def file_uri(name: str) -> str:
    """A saved file as an artifact URI: relative to the working folder (a pipeline's checkout)
    when it lies in it, with `/` separators and percent-encoding (a URI reference, SARIF 2.1.0
    section 3.10.2); code scanning takes a relative URI as relative to the repository root
    (https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/sarif-support-for-code-scanning#physicallocation-object).
    A file outside the working folder is named by its absolute `file:` URI."""
    path = Path(os.path.abspath(name))
    try:
        relative = path.relative_to(os.getcwd())
    except ValueError:
        return path.as_uri()
    return quote(relative.as_posix(), safe="/")


def _physical(finding: Finding, source: SourceLine | None, index: dict[str, int]) -> dict[str, Any]:
    """Where a finding lies: the saved file and the line of the account's resource when the
    audit read files, else the account's resource id (line 1)."""
    if source is None or source.path == STDIN:
        return {"artifactLocation": {"uri": _location_uri(finding)}, "region": {"startLine": 1}}
    uri = file_uri(source.path)
    return {
        "artifactLocation": {"uri": uri, **({"index": index[uri]} if uri in index else {})},
        "region": {"startLine": source.line or 1},
    }


ARTIFACT_ROLES: Final = {
    "--from-file": "analysisTarget",
    "--suppressions": "userSpecifiedConfiguration",
    "--baseline": "resultFile",
    "--history": "resultFile",
}
"""What each input file is to the run, in SARIF's artifact roles (SARIF 2.1.0 section 3.24.6)."""


def _artifacts(inputs: list[InputFile]) -> list[dict[str, Any]]:
    """The files the audit read, each with its SHA-256 and length (SARIF 2.1.0 section 3.24)
    and, where the file says, when it was captured; what a standard input held has no URI."""
    artifacts = []
    for file in inputs:
        location = {"uri": file_uri(file.name)} if file.name != STDIN else {}
        captured = {"capturedTimeUtc": _utc(file.captured)} if file.captured else {}
        artifacts.append(
            {
                **({"location": location} if location else {}),
                "length": file.size,
                "roles": [ARTIFACT_ROLES.get(file.option, "referencedOnCommandLine")],
                "hashes": {"sha-256": file.sha256},
                "properties": {"option": file.option, **captured},
            }
        )
    return artifacts


def automation_id(kind: str, where: str, category: str | None = None) -> str:
    """`safetynet-<kind>/<where>/`, or `<category>/` when the caller names one. GitHub takes the
    part of `automationDetails.id` before its last `/` as the analysis category
    (https://docs.github.com/en/code-security/code-scanning/integrating-with-code-scanning/
    sarif-support-for-code-scanning#runautomationdetails-object), so the id ends with `/` and
    holds the whole scope: audits of two resource groups are two categories and never replace
    each other's alerts. upload-sarif's `category` input applies only to a run without an id
    (codeql-action src/upload-lib.ts, populateRunAutomationDetails), so a caller's category is
    written into the file itself, with the `/` that action's getAutomationID appends."""
    if category is not None:
        return category if category.endswith("/") else f"{category}/"
    return f"safetynet-{kind}/{where.strip('/')}/"


def _sarif_suppression(suppression: Suppression) -> dict[str, str]:
    return {
        "kind": "external",
        "status": "accepted",
        "justification": escaping.terminal(f"{suppression.justification} ({suppression.terms})"),
    }


def _sarif_result(
    finding: Finding,
    index: dict[str, int],
    context: ReportContext,
    source: SourceLine | None = None,
    artifacts: dict[str, int] | None = None,
) -> dict[str, Any]:
    """One FAIL: at its saved file's line (an audit of files) or its resource id; a reviewed
    suppression or the baseline's acceptance as a `suppressions` entry, and with a baseline,
    `baselineState` new or unchanged (SARIF 2.1.0 section 3.27.24)."""
    failed = finding.outcome is Outcome.FAIL
    fingerprint = hashlib.sha256(
        f"{finding.rule.id}|{finding.resource_id or finding.account}".encode()
    ).hexdigest()
    suppression = context.applied.of(finding)
    baselined = suppression is not None and suppression.baseline is not None
    with_baseline = context.applied.baseline is not None
    return {
        "ruleId": finding.rule.id,
        "ruleIndex": index[finding.rule.id],
        "kind": "fail" if failed else "review",
        "level": SARIF_LEVEL[finding.severity] if failed else "none",
        "message": sarif_message(f"{finding.account}: {finding.message}"),
        **({"baselineState": "unchanged" if baselined else "new"} if with_baseline else {}),
        "locations": [
            {
                "physicalLocation": _physical(finding, source, artifacts or {}),
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
        **({"suppressions": [_sarif_suppression(suppression)]} if suppression else {}),
        "properties": {"outcome": finding.outcome.value},
    }


UNKNOWN_DESCRIPTOR: Final = "unknown"
"""The notification descriptor of a verdict that could not be reached (UNKNOWN, NOT_VERIFIABLE)."""
NOT_IN_FILES_DESCRIPTOR: Final = "not-in-files"
"""The notification descriptor of a rule the saved files cannot show (NOT_IN_FILES)."""


def _notification(
    text: str, descriptor: str, level: str = "error", rule: tuple[str, int] | None = None
) -> dict[str, Any]:
    notification: dict[str, Any] = {
        "level": level,
        "message": sarif_message(text),
        "descriptor": {"id": descriptor},
    }
    if rule is not None:
        notification["associatedRule"] = {"id": rule[0], "index": rule[1]}
    return notification


def _unknown(rule_id: str, index: dict[str, int], text: str) -> dict[str, Any]:
    """A verdict that could not be reached: one warning notification naming its rule, never a
    result. Code scanning shows results as alerts; "could not look" is not an alert per rule
    (an audit without read permission gave 43 of its 67 results as such notes), and the run's
    exit code 3 already says the audit is incomplete."""
    return _notification(text, UNKNOWN_DESCRIPTOR, "warning", (rule_id, index[rule_id]))


def render_sarif(report: Judged, context: ReportContext, category: str | None = None) -> str:
    """SARIF 2.1.0: FAIL results (kind fail, with `suppressions` when suppressed); each UNKNOWN
    verdict one warning notification (descriptor `unknown`, its rule associated), each
    NOT_IN_FILES one note (descriptor `not-in-files`), read errors and suppression notes
    notifications too; PASS omitted."""
    return "".join(iter_sarif(report, context, category))


def _audit_notifications(
    report: Judged, context: ReportContext, index: dict[str, int], errors: list[ReadError]
) -> Iterator[dict[str, Any]]:
    for error in errors:
        yield _notification(error_line(error, report.scope.label), error.kind.value)
    for f in findings_of(report):
        if f.outcome is Outcome.UNKNOWN:
            yield _unknown(f.rule.id, index, f"{f.account}: {f.message}")
        elif f.outcome is Outcome.NOT_IN_FILES:
            rule = (f.rule.id, index[f.rule.id])
            yield _notification(f"{f.account}: {f.message}", NOT_IN_FILES_DESCRIPTOR, "note", rule)
    for note in context.applied.notes():
        yield _notification(note, "suppression", "warning")


def iter_sarif(
    report: Judged, context: ReportContext, category: str | None = None
) -> Iterator[str]:
    """`render_sarif`, result by result and notification by notification."""
    rules = list(report.rules)
    index = {rule.id: number for number, rule in enumerate(rules)}
    errors = all_errors(report)
    arrays = Arrays()
    artifacts = _artifacts(list(context.inputs))
    at = {
        artifact["location"]["uri"]: number
        for number, artifact in enumerate(artifacts)
        if "location" in artifact
    }
    results = (
        _sarif_result(finding, index, context, result.source, at)
        for result in report.results
        for finding in result.findings
        if finding.outcome is Outcome.FAIL
    )
    where = FILES_SCOPE if report.scope.files else report.scope.label
    document = _sarif_log(
        rules=[_sarif_rule(rule) for rule in rules],
        automation_id=automation_id("audit", where, category),
        described=f"safetynet audit: {report.scope.label}",
        succeeded=not errors,
        notifications=arrays.mark(_audit_notifications(report, context, index, errors)),
        results=arrays.mark(results),
        artifacts=artifacts,
        ended=context.generated,
    )
    yield from arrays.chunks(document)


def _probe_severity(probe: Probe) -> Severity:
    """A probe weighs what it proves: the most severe rule it shows in effect, and critical for
    the protocol's own guarantees (no rule covers them; without them the nets do not hold)."""
    by_id = {rule.id: rule.severity for rule in RULES}
    proved = [by_id[rule] for rule in probe.proves if rule in by_id]
    return max(proved, key=lambda s: s.rank) if proved else Severity.CRITICAL


def _sarif_probe(probe: Probe) -> dict[str, Any]:
    proves = ", ".join(probe.proves) or "the protocol's own guarantee"
    severity = _probe_severity(probe)
    reference = probe.reference if probe.reference.startswith("https://") else TOOL_URI
    return {
        "id": probe.id,
        "name": "".join(part.capitalize() for part in probe.id.lower().split("-")),
        "shortDescription": {"text": probe.title},
        "fullDescription": {"text": f"Proves {proves}: {probe.action}."},
        "help": {
            "text": f"{probe.action}. Expected behaviour: {reference}",
            "markdown": f"**Does:** {probe.action}.\n\n**Proves:** {proves}.\n\n"
            f"**Expected behaviour:** <{reference}>",
        },
        "helpUri": reference,
        "defaultConfiguration": {"level": SARIF_LEVEL[severity]},
        "properties": {
            "security-severity": SECURITY_SEVERITY[severity],
            "severity": severity.value,
            "tags": ["security", "azure-storage", "behaviour"],
            "proves": list(probe.proves),
        },
    }


def stable_target(target: str) -> str:
    """The probed container as `host/path`, without scheme or port: the embedded emulator
    listens on a random port, and a location that changes each run would make code scanning
    close every alert and open it again."""
    url = urlsplit(target)
    return f"{url.hostname or ''}{url.path}".rstrip("/") or "target"


def _verify_result(
    rule_id: str, index: dict[str, int], level: str, text: str, where: str
) -> dict[str, Any]:
    return {
        "ruleId": rule_id,
        "ruleIndex": index[rule_id],
        "kind": "fail",
        "level": level,
        "message": sarif_message(text),
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": f"azure/{where}"},
                    "region": {"startLine": 1},
                }
            }
        ],
        "partialFingerprints": {
            "safetynetCheck/v1": hashlib.sha256(f"{rule_id}|{where}".encode()).hexdigest()
        },
    }


def render_verify_sarif(run: VerificationRun, category: str | None = None) -> str:
    """SARIF 2.1.0: FAIL probes and FAIL settings findings (when read) as results (kind fail);
    each NOT_VERIFIABLE probe and UNKNOWN setting one warning notification (descriptor
    `unknown`), as in the audit; PASS omitted. Locations and fingerprints are the same on every
    run against the same container."""
    probes = [r.probe for r in run.results]
    rules = [rule for rule in RULES if run.settings is not None]
    descriptors = [_sarif_probe(p) for p in probes] + [_sarif_rule(rule) for rule in rules]
    index = {d["id"]: number for number, d in enumerate(descriptors)}
    where = stable_target(run.target)
    results, unknown = [], []
    for r in run.results:
        text = f"{r.probe.title}: {r.detail}"
        if r.outcome is ProbeOutcome.FAIL:
            level = SARIF_LEVEL[_probe_severity(r.probe)]
            result = _verify_result(r.probe.id, index, level, text, where)
            results.append({**result, "properties": {"outcome": r.outcome.value}})
        elif r.outcome is ProbeOutcome.NOT_VERIFIABLE:
            unknown.append(_unknown(r.probe.id, index, text))
    for finding in run.settings or []:
        text = f"{finding.account}: {finding.message}"
        if finding.outcome is Outcome.FAIL:
            level = SARIF_LEVEL[finding.severity]
            result = _verify_result(finding.rule.id, index, level, text, where)
            results.append({**result, "properties": {"outcome": finding.outcome.value}})
        elif finding.outcome is Outcome.UNKNOWN:
            unknown.append(_unknown(finding.rule.id, index, text))
    notifications = [_notification(text, "incomplete") for text in could_not_act(run)] + unknown
    document = _sarif_log(
        rules=descriptors,
        automation_id=automation_id("verify", where, category),
        described=f"safetynet verify: {run.target}",
        succeeded=not (run.incomplete or run.settings_errors or run.leftovers),
        notifications=notifications,
        results=results,
    )
    return json.dumps(document, indent=2) + "\n"
