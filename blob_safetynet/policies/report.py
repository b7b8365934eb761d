"""Renderers of an audit report and of a verification run: table, json, sarif (2.1.0) and junit
(csv, markdown and html are in `report_text` and `report_html`).

Every value that came from outside goes through the format's rule in `blob_safetynet.policies.escaping`.

Each audit format is a generator of text (`iter_*`), which reads the report's results account
by account and holds none of them: a fleet's results spooled to disk are written with flat
memory (`report_stream`), and `render_*` is the same text joined, byte for byte.

Over 500 lines: four renderers (table, json, sarif, junit) that share one escaping rule per
format and the report's shape; csv, markdown and html were already cut out.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final
from urllib.parse import urlsplit

from blob_safetynet import package_version
from blob_safetynet.policies import escaping
from blob_safetynet.policies.audit import AccountResult, ReadError
from blob_safetynet.policies.probes import Probe, ProbeOutcome, ProbeResult, VerificationRun
from blob_safetynet.policies.report_text import (
    iter_csv,
    iter_markdown,
    render_csv,
    render_markdown,
    render_verify_csv,
    render_verify_markdown,
)
from blob_safetynet.policies.report_view import (
    Judged,
    ReportContext,
    all_errors,
    behaviour_by_rule,
    could_not_act,
    counts_line,
    error_line,
    findings_of,
    leftover_lines,
    settings_by_rule,
    state,
    summary,
    verify_counts_line,
    verify_summary,
)
from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule, Severity
from blob_safetynet.policies.suppressions import Suppression

TOOL_NAME: Final = "safetynet"
TOOL_URI: Final = "https://github.com/blob-safetynet/blob-safetynet"

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


def _error_dict(error: ReadError) -> dict[str, Any]:
    return {
        "account": error.account,
        "operation": error.operation,
        "kind": error.kind.value,
        "message": error.message,
    }


def _finding_dict(finding: Finding, context: ReportContext) -> dict[str, Any]:
    suppression = context.applied.of(finding)
    return {
        "rule": finding.rule.id,
        "account": finding.account,
        "resource_id": finding.resource_id,
        "outcome": finding.outcome.value,
        "state": state(finding, context),
        "severity": finding.severity.value,
        "title": finding.rule.title,
        "message": finding.message,
        **({"suppression": suppression.as_dict()} if suppression else {}),
    }


class _Arrays:
    """Lists written item by item into a JSON document: `mark` stands for one in the document,
    `chunks` is `json.dumps(document, indent=2) + "\n"` with each mark's items in its place."""

    def __init__(self) -> None:
        self._token = secrets.token_hex(8)
        self._items: dict[str, Iterable[Any]] = {}

    def mark(self, items: Iterable[Any]) -> str:
        name = f"\x00{self._token}:{len(self._items)}"
        self._items[name] = items
        return name

    def chunks(self, document: dict[str, Any]) -> Iterator[str]:
        text = json.dumps(document, indent=2) + "\n"
        spots = sorted((text.index(json.dumps(name)), name) for name in self._items)
        start = 0
        for at, name in spots:
            pad = " " * _leading(text, text.rfind("\n", 0, at) + 1)
            yield text[start:at]
            yield from _array(self._items[name], pad)
            start = at + len(json.dumps(name))
        yield text[start:]


def _leading(text: str, start: int) -> int:
    """How many spaces the line starting at `start` is indented by."""
    end = start
    while end < len(text) and text[end] == " ":
        end += 1
    return end - start


def _array(items: Iterable[Any], pad: str) -> Iterator[str]:
    """A JSON list as `json.dumps(..., indent=2)` writes it on a line indented by `pad`."""
    inner = pad + "  "
    empty = True
    for item in items:
        text = json.dumps(item, indent=2).replace("\n", "\n" + inner)
        yield ("[\n" if empty else ",\n") + inner + text
        empty = False
    yield "[]" if empty else "\n" + pad + "]"


def render_json(report: Judged, context: ReportContext) -> str:
    """One object: scope, thresholds, summary, findings, errors, suppressions."""
    return "".join(iter_json(report, context))


def iter_json(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_json`, finding by finding."""
    arrays = _Arrays()
    document = {
        "tool": TOOL_NAME,
        "version": package_version(),
        "scope": report.scope.label,
        "thresholds": {
            "minBlobSoftDeleteDays": report.thresholds.min_blob_soft_delete_days,
            "maxPendingDays": report.thresholds.max_pending_days,
            "containerName": report.thresholds.container,
        },
        "summary": summary(report, context),
        "findings": arrays.mark(_finding_dict(f, context) for f in findings_of(report)),
        "errors": [_error_dict(e) for e in all_errors(report)],
        "suppressions": {
            "expired": [s.as_dict() for s in context.applied.expired],
            "unused": [s.as_dict() for s in context.applied.unused],
            "baseline_no_longer_failing": [
                {"rule": rule, "account": account, "resource_id": resource_id}
                for rule, account, resource_id in context.applied.no_longer_failing
            ],
        },
    }
    yield from arrays.chunks(document)


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
    """A plain text table for people, then the read errors and suppression notes."""
    return "".join(iter_table(report, context))


def iter_table(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_table`, a line at a time: one pass for the column widths, one for the rows."""
    widths = [0] * 4
    for row in _table_rows(report, context):
        widths = [max(width, len(cell)) for width, cell in zip(widths, row, strict=False)]
    if report.scope.files:
        yield escaping.terminal(report.scope.label) + "\n"
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
) -> dict[str, Any]:
    """One SARIF 2.1.0 run of this tool, the document both audit and verify print (the lists
    may be `_Arrays` marks)."""
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
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
        "justification": escaping.terminal(f"{suppression.justification} ({suppression.term})"),
    }


def _sarif_result(
    finding: Finding, index: dict[str, int], context: ReportContext
) -> dict[str, Any]:
    failed = finding.outcome is Outcome.FAIL
    fingerprint = hashlib.sha256(
        f"{finding.rule.id}|{finding.resource_id or finding.account}".encode()
    ).hexdigest()
    suppression = context.applied.of(finding)
    return {
        "ruleId": finding.rule.id,
        "ruleIndex": index[finding.rule.id],
        "kind": "fail" if failed else "review",
        "level": SARIF_LEVEL[finding.severity] if failed else "none",
        "message": sarif_message(f"{finding.account}: {finding.message}"),
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
        **({"suppressions": [_sarif_suppression(suppression)]} if suppression else {}),
        "properties": {"outcome": finding.outcome.value},
    }


UNKNOWN_DESCRIPTOR: Final = "unknown"
"""The notification descriptor of a verdict that could not be reached (UNKNOWN, NOT_VERIFIABLE)."""


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
    verdict one warning notification (descriptor `unknown`, its rule associated), read errors
    and suppression notes notifications too; PASS omitted."""
    return "".join(iter_sarif(report, context, category))


def _audit_notifications(
    report: Judged, context: ReportContext, index: dict[str, int], errors: list[ReadError]
) -> Iterator[dict[str, Any]]:
    for error in errors:
        yield _notification(error_line(error, report.scope.label), error.kind.value)
    for f in findings_of(report):
        if f.outcome is Outcome.UNKNOWN:
            yield _unknown(f.rule.id, index, f"{f.account}: {f.message}")
    for note in context.applied.notes():
        yield _notification(note, "suppression", "warning")


def iter_sarif(
    report: Judged, context: ReportContext, category: str | None = None
) -> Iterator[str]:
    """`render_sarif`, result by result and notification by notification."""
    rules = list(report.rules)
    index = {rule.id: number for number, rule in enumerate(rules)}
    errors = all_errors(report)
    arrays = _Arrays()
    results = (
        _sarif_result(finding, index, context)
        for finding in findings_of(report)
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
    )
    yield from arrays.chunks(document)


Counts = dict[str, int]


def _new_counts() -> Counts:
    return {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}


def _suite(parent: ET.Element | None, name: str, properties: dict[str, str]) -> ET.Element:
    """A testsuite with its `properties` block (what was judged, with which thresholds), a
    child of `parent` or (None) on its own."""
    attributes = {"name": escaping.xml(name)}
    suite = (
        ET.Element("testsuite", attributes)
        if parent is None
        else ET.SubElement(parent, "testsuite", attributes)
    )
    block = ET.SubElement(suite, "properties")
    for key, value in properties.items():
        ET.SubElement(block, "property", name=key, value=escaping.xml(value))
    return suite


def _audit_properties(report: Judged) -> dict[str, str]:
    limits = report.thresholds
    return {
        "scope": report.scope.label,
        "minBlobSoftDeleteDays": str(limits.min_blob_soft_delete_days),
        "maxPendingDays": str(limits.max_pending_days),
        "containerName": limits.container,
    }


def render_junit(report: Judged, context: ReportContext) -> str:
    """JUnit XML valid against junit-10.xsd: a testsuite per account, a testcase per rule; FAIL
    is a failure, any other outcome but PASS (UNKNOWN, not applicable) and suppressed FAILs are
    skipped with the reason, a read error is an error testcase. `time` on <testsuites> is the
    audit's wall clock (reading ARM); judging a rule is a pure function, so testcases take 0."""
    return "".join(iter_junit(report, context))


def _account_suite(
    result: AccountResult, properties: dict[str, str], context: ReportContext
) -> ET.Element:
    suite = _suite(None, result.account.name, properties)
    counts = _new_counts()
    for finding in result.findings:
        _finding_case(suite, finding, result.account.name, counts, context)
    for error in result.errors:
        _error_case(suite, error, result.account.name, counts)
    _set_counts(suite, counts, _new_counts())
    return suite


def _audit_suites(report: Judged, context: ReportContext) -> Iterator[ET.Element]:
    properties = _audit_properties(report)
    for result in report.results:
        yield _account_suite(result, properties, context)
    if report.errors:
        suite = _suite(None, report.scope.label, properties)
        counts = _new_counts()
        for error in report.errors:
            _error_case(suite, error, "scope", counts)
        _set_counts(suite, counts, _new_counts())
        yield suite


def _audit_totals(report: Judged, context: ReportContext) -> Counts:
    """What the suites will count, counted first: <testsuites> opens with the totals."""
    totals = _new_counts()
    for finding in findings_of(report):
        totals["tests"] += 1
        if finding.outcome is Outcome.FAIL and context.applied.of(finding) is None:
            totals["failures"] += 1
    errors = len(all_errors(report))
    totals["tests"] += errors
    totals["errors"] = errors
    return totals


def iter_junit(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_junit`, suite by suite: the totals are counted in a first pass over the
    results, each suite is written when its account is read in the second."""
    suites = ET.Element("testsuites", name="safetynet audit")
    totals = _audit_totals(report, context)
    for key in ("tests", "failures", "errors"):
        suites.set(key, str(totals[key]))
    suites.set("time", _seconds(report.seconds))
    opened = False
    for suite in _audit_suites(report, context):
        if not opened:
            ET.SubElement(suites, "x")
            text = ET.tostring(suites, encoding="unicode", xml_declaration=True)
            yield text[: text.index("<x />")]
            opened = True
        ET.indent(suite, level=1)
        yield "\n  " + ET.tostring(suite, encoding="unicode")
    if opened:
        yield "\n</testsuites>\n"
    else:
        yield ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _junit_text(suites: ET.Element, totals: Counts, seconds: float) -> str:
    """The document, with the totals junit-10.xsd allows on <testsuites> (no `skipped`)."""
    for key in ("tests", "failures", "errors"):
        suites.set(key, str(totals[key]))
    suites.set("time", _seconds(seconds))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _seconds(seconds: float) -> str:
    """A duration as junit-10.xsd's SUREFIRE_TIME wants it: digits, a dot, three decimals."""
    return f"{max(seconds, 0.0):.3f}"


def _case(suite: ET.Element, classname: str, name: str, counts: Counts) -> ET.Element:
    counts["tests"] += 1
    return ET.SubElement(
        suite,
        "testcase",
        classname=escaping.xml(classname),
        name=escaping.xml(name),
        time=_seconds(0),
    )


def _error_case(suite: ET.Element, error: ReadError, where: str, counts: Counts) -> None:
    case = _case(suite, f"safetynet.{where}", f"read {error.operation}", counts)
    _outcome_node(case, "error", error.message, error.kind.value)
    counts["errors"] += 1


def _outcome_node(
    case: ET.Element, tag: str, message: str, kind: str | None = None, *lines: str
) -> None:
    """A failure, error or skipped element whose message (attribute and text) is escaped;
    `lines`, each escaped, follow the message in the text, one a line."""
    shown = escaping.xml(message)
    attributes = {"message": shown, **({"type": kind} if kind else {})}
    node = ET.SubElement(case, tag, attributes)
    if tag != "skipped":
        node.text = "\n".join([shown, *map(escaping.xml, lines)])


def _finding_case(
    suite: ET.Element, finding: Finding, account: str, counts: Counts, context: ReportContext
) -> None:
    """A counted testcase for one rule's finding: FAIL a failure, UNKNOWN and suppressed
    skipped."""
    case = _case(suite, f"safetynet.{account}", f"{finding.rule.id} {finding.rule.title}", counts)
    suppression = context.applied.of(finding)
    if suppression is not None:
        counts["skipped"] += 1
        reason = f"suppressed {suppression.term}: {suppression.justification}"
        _outcome_node(case, "skipped", f"{reason}; {finding.message}")
    elif finding.outcome is Outcome.FAIL:
        counts["failures"] += 1
        resource = f"resource: {finding.resource_id}"
        _outcome_node(case, "failure", finding.message, finding.severity.value, resource)
    elif finding.outcome is not Outcome.PASS:
        counts["skipped"] += 1
        _outcome_node(case, "skipped", finding.message)


def _set_counts(suite: ET.Element, counts: Counts, totals: Counts) -> None:
    for key, value in counts.items():
        suite.set(key, str(value))
        totals[key] += value
    suite.set("time", _seconds(0))


AuditRenderer = Callable[[Judged, ReportContext], str]
AuditWriter = Callable[[Judged, ReportContext], Iterator[str]]


def render_html(report: Judged, context: ReportContext) -> str:
    """The HTML report; Jinja2 is imported only when one is asked for."""
    return "".join(iter_html(report, context))


def iter_html(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_html` as the template writes it."""
    from blob_safetynet.policies import report_html

    return report_html.iter_html(report, context)


RENDERERS: Final[dict[str, AuditRenderer]] = {
    "table": render_table,
    "json": render_json,
    "sarif": render_sarif,
    "junit": render_junit,
    "csv": render_csv,
    "markdown": render_markdown,
    "html": render_html,
}

WRITERS: Final[dict[str, AuditWriter]] = {
    "table": iter_table,
    "json": iter_json,
    "sarif": iter_sarif,
    "junit": iter_junit,
    "csv": iter_csv,
    "markdown": iter_markdown,
    "html": iter_html,
}
"""`RENDERERS`, as generators of text that hold one account's result at a time."""


# --- `safetynet verify`: the behaviour probes, with the settings verdict beside them ---------


def _proves(result: ProbeResult) -> str:
    return ",".join(result.probe.proves) or "(protocol)"


def render_verify_json(run: VerificationRun) -> str:
    """One object: target, run id, summary, `checks` (check, proves, outcome, detail), and with
    settings read, `rules` (settings and behaviour verdict per rule)."""
    settings = settings_by_rule(run)
    behaviour = behaviour_by_rule(run)
    document: dict[str, Any] = {
        "tool": TOOL_NAME,
        "version": package_version(),
        "target": run.target,
        "run_id": run.run_id,
        "summary": {
            **verify_summary(run),
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


def render_verify_junit(run: VerificationRun) -> str:
    """JUnit XML valid against junit-10.xsd: one testcase per probe (FAIL a failure,
    NOT_VERIFIABLE skipped with the reason), and a second suite for the settings rules when
    they were read. `time` on <testsuites> is the run's wall clock."""
    suites = ET.Element("testsuites", name="safetynet verify")
    totals = _new_counts()
    properties = {"target": run.target, "run": run.run_id}
    suite = _suite(suites, f"behaviour {run.target}", properties)
    counts = _new_counts()
    for r in run.results:
        case = _case(suite, "safetynet.verify", f"{r.probe.id} {r.probe.title}", counts)
        if r.outcome is ProbeOutcome.FAIL:
            counts["failures"] += 1
            _outcome_node(case, "failure", r.detail, "FAIL")
        elif r.outcome is ProbeOutcome.NOT_VERIFIABLE:
            counts["skipped"] += 1
            _outcome_node(case, "skipped", r.detail)
    for reason in [*run.incomplete, *leftover_lines(run)]:
        case = _case(suite, "safetynet.verify", "could not act", counts)
        _outcome_node(case, "error", reason, "incomplete")
        counts["errors"] += 1
    _set_counts(suite, counts, totals)
    if run.settings is not None:
        suite = _suite(suites, "settings", properties)
        counts = _new_counts()
        for finding in run.settings:
            _finding_case(suite, finding, finding.account, counts, ReportContext())
        for error in run.settings_errors:
            case = _case(suite, "safetynet.settings", "read", counts)
            _outcome_node(case, "error", error, "incomplete")
            counts["errors"] += 1
        _set_counts(suite, counts, totals)
    return _junit_text(suites, totals, run.seconds)


def render_verify_html(run: VerificationRun) -> str:
    """The verification run as HTML; Jinja2 is imported only when one is asked for."""
    from blob_safetynet.policies import report_html

    return report_html.render_verify_html(run)


VERIFY_RENDERERS: Final[dict[str, Callable[[VerificationRun], str]]] = {
    "table": render_verify_table,
    "json": render_verify_json,
    "sarif": render_verify_sarif,
    "junit": render_verify_junit,
    "csv": render_verify_csv,
    "markdown": render_verify_markdown,
    "html": render_verify_html,
}
