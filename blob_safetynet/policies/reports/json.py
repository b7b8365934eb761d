"""The JSON report of an audit (one object, findings written one at a time) and of a verification run."""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Iterable, Iterator
from typing import Any

from blob_safetynet import package_version
from blob_safetynet.policies.probes import VerificationRun
from blob_safetynet.policies.reports.view import (
    BASELINED,
    SUPPRESSED,
    TOOL_NAME,
    Judged,
    ReportContext,
    all_errors,
    behaviour_by_rule,
    input_dict,
    reads_summary,
    settings_by_rule,
    state,
    summary,
    verify_summary,
)
from blob_safetynet.policies.rules import RULES, Finding
from blob_safetynet.policies.sources.results import ReadError, SourceLine


def _error_dict(error: ReadError) -> dict[str, Any]:
    return {
        "account": error.account,
        "operation": error.operation,
        "kind": error.kind.value,
        "message": error.message,
    }


def _finding_dict(
    finding: Finding, context: ReportContext, source: SourceLine | None
) -> dict[str, Any]:
    suppression = context.applied.of(finding)
    shown = state(finding, context)
    return {
        "rule": finding.rule.id,
        "account": finding.account,
        "resource_id": finding.resource_id,
        "outcome": finding.outcome.value,
        "state": shown,
        "severity": finding.severity.value,
        "title": finding.rule.title,
        "message": finding.message,
        "detail": finding.detail,
        **({"source": {"file": source.path, "line": source.line}} if source else {}),
        **({"suppression": suppression.as_dict()} if suppression and shown == SUPPRESSED else {}),
        **({"baseline": suppression.baseline} if suppression and shown == BASELINED else {}),
    }


class Arrays:
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
    """One object: when, scope, the inputs, the gate, thresholds, summary, findings, errors,
    suppressions."""
    return "".join(iter_json(report, context))


def iter_json(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_json`, finding by finding."""
    arrays = Arrays()
    document = {
        "tool": TOOL_NAME,
        "version": package_version(),
        "generated": context.generated.astimezone(dt.UTC).isoformat(timespec="seconds"),
        "scope": report.scope.label,
        "inputs": [input_dict(file) for file in context.inputs],
        "fail_on": context.fail_on,
        "thresholds": {
            "minBlobSoftDeleteDays": report.thresholds.min_blob_soft_delete_days,
            "minContainerSoftDeleteDays": report.thresholds.min_container_soft_delete_days,
            "maxPendingDays": report.thresholds.max_pending_days,
            "containerName": report.thresholds.container,
        },
        "summary": {**summary(report, context), **reads_summary(report)},
        "findings": arrays.mark(
            _finding_dict(f, context, result.source)
            for result in report.results
            for f in result.findings
        ),
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


def render_verify_json(run: VerificationRun) -> str:
    """One object: target, run id, summary, `checks` (check, proves, outcome, detail, and the
    seconds a probe timed: the recovery drill's time to recover), and with settings read,
    `rules` (settings and behaviour verdict per rule)."""
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
                **({} if r.seconds is None else {"seconds": round(r.seconds, 3)}),
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
