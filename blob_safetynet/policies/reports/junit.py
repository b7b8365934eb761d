"""JUnit XML of an audit (a suite per account) and of a verification run, for test-report
viewers in CI."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator

from blob_safetynet.policies.probes import ProbeOutcome, VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.view import (
    Judged,
    ReportContext,
    all_errors,
    findings_of,
    input_line,
    leftover_lines,
    run_time,
)
from blob_safetynet.policies.rules import Finding, Outcome
from blob_safetynet.policies.sources.results import AccountResult, ReadError

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


def _audit_properties(report: Judged, context: ReportContext) -> dict[str, str]:
    """What every suite was judged as: when, of what (each input file's digest), against which
    gate and thresholds."""
    limits = report.thresholds
    return {
        "generated": run_time(context.generated),
        "scope": report.scope.label,
        **{f"input.{n}": input_line(file) for n, file in enumerate(context.inputs, start=1)},
        **({"failOn": context.fail_on} if context.fail_on else {}),
        "minBlobSoftDeleteDays": str(limits.min_blob_soft_delete_days),
        "minContainerSoftDeleteDays": str(limits.min_container_soft_delete_days),
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
    properties = _audit_properties(report, context)
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
    """A counted testcase for one rule's finding: FAIL a failure; UNKNOWN, suppressed and
    baselined skipped, each saying which."""
    case = _case(suite, f"safetynet.{account}", f"{finding.rule.id} {finding.rule.title}", counts)
    suppression = context.applied.of(finding)
    if suppression is not None:
        counts["skipped"] += 1
        if suppression.baseline is not None:
            reason = f"baselined: failing already in the baseline {suppression.baseline}"
        else:
            reason = f"suppressed {suppression.terms}: {suppression.justification}"
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
