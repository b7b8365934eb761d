"""The HTML report: one self-contained file (inline CSS and JavaScript, nothing fetched).

Accounts x rules with each finding's state (SUPPRESSED and BASELINED apart), severity and
framework filters, each finding's evidence and remediation, the input files' digests, and a
per-rule history, by run date, when earlier JSON results are given.
Jinja2 autoescapes every value; control characters are shown escaped too; a Content Security
Policy allows only this file's own script and style (by hash), so even a value that escaped the
escaping could neither run nor load anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import jinja2
import markupsafe

from blob_safetynet import package_version
from blob_safetynet.policies.probes import ProbeOutcome, VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.markdown import attention
from blob_safetynet.policies.reports.view import (
    ATTENTION,
    BASELINED,
    STATES,
    SUPPRESSED,
    Judged,
    ReportContext,
    all_errors,
    behaviour_by_rule,
    could_not_act,
    counts_by_rule,
    error_line,
    findings_of,
    run_time,
    settings_by_rule,
    state,
    summary,
    verify_summary,
)
from blob_safetynet.policies.rules import RULES, Finding, Rule, Severity, ruleset_version
from blob_safetynet.settings.untrusted import InputFile

TEMPLATES: Final = Path(__file__).parent / "templates"
TEMPLATE: Final = "report.html.j2"
VERIFY_TEMPLATE: Final = "verify.html.j2"
CODE_SPAN: Final = re.compile(r"`([^`]+)`")
ASSETS: Final = ("report.css", "report.js")


def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    environment.filters["printable"] = escaping.terminal
    environment.filters["code_spans"] = code_spans
    return environment


def code_spans(text: str) -> markupsafe.Markup:
    """`text` escaped, its Markdown code spans (the rules' `property: value`) as <code>."""
    escaped = str(markupsafe.escape(escaping.terminal(text)))
    return markupsafe.Markup(CODE_SPAN.sub(r"<code>\1</code>", escaped))  # noqa: S704 (escaped above)


def _about(
    scope: str,
    generated: dt.datetime,
    inputs: Sequence[InputFile] = (),
    fail_on: str | None = None,
) -> dict[str, Any]:
    """What the page's header says the report is: when (UTC), by which tool and rule set, of
    what (each input file with its SHA-256, and when it was captured where the file says),
    and at which severity it fails."""
    return {
        "generated": generated.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "generated_iso": generated.astimezone(dt.UTC).isoformat(timespec="seconds"),
        "tool": f"safetynet {package_version()}",
        "ruleset": ruleset_version(),
        "scope": scope,
        "fail_on": fail_on,
        "inputs": [
            {
                "option": file.option,
                "name": file.name,
                "sha256": file.sha256,
                "size": file.size,
                "captured": None if file.captured is None else run_time(file.captured),
            }
            for file in inputs
        ],
    }


def frameworks(rule: Rule) -> dict[str, tuple[str, ...]]:
    """The control ids a rule checks, by framework short name; empty for a rule that maps to
    none."""
    grouped: dict[str, list[str]] = {}
    for control in rule.controls:
        grouped.setdefault(control.framework.short, []).append(control.id)
    return {name: tuple(ids) for name, ids in grouped.items()}


def _framework_list(rule: Rule) -> str:
    """`|A|B|`: the rule's frameworks for the page's filter (names may hold spaces)."""
    return "|" + "|".join(frameworks(rule)) + "|"


def _csp_hash(text: str) -> str:
    digest = hashlib.sha256(text.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


def _finding(finding: Finding, context: ReportContext) -> dict[str, Any]:
    covered = context.applied.of(finding)
    shown = state(finding, context)
    return {
        "account": finding.account,
        "rule": finding.rule,
        "severity": finding.severity.value,
        "rank": finding.severity.rank,
        "state": shown,
        "message": finding.message,
        "heading": _heading(finding),
        "fix": finding.fix,
        "resource_id": finding.resource_id or "",
        "suppression": covered if shown == SUPPRESSED else None,
        "baseline": covered.baseline if covered is not None and shown == BASELINED else None,
        "frameworks": _framework_list(finding.rule),
        "controls": frameworks(finding.rule),
    }


def _heading(finding: Finding) -> str:
    """The card's heading and its evidence: what was found (`blob soft delete is off`), not the
    rule's ideal, which above a FAIL would read as the opposite."""
    detail = finding.detail or finding.rule.title
    return detail[:1].upper() + detail[1:]


def _history(report: Judged, context: ReportContext) -> list[dict[str, Any]]:
    """Per rule, the state counts of each earlier run and of this one (oldest first)."""
    if not context.history:
        return []
    now = counts_by_rule((f.rule.id, state(f, context)) for f in findings_of(report))
    this_run = f"{run_time(context.generated)} (this run)"
    runs = [*((run.label, run.counts) for run in context.history), (this_run, now)]
    empty = dict.fromkeys(STATES, 0)
    return [
        {"rule": rule, "runs": [(label, counts.get(rule.id, empty)) for label, counts in runs]}
        for rule in report.rules
    ]


class _Cards:
    """The finding cards in `attention` order, computed each time the page iterates them."""

    def __init__(self, report: Judged, context: ReportContext) -> None:
        self._report, self._context = report, context

    def __bool__(self) -> bool:
        return any(state(f, self._context) in ATTENTION for f in findings_of(self._report))

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (_finding(f, self._context) for _, f in attention(self._report, self._context))


class _Matrix:
    """The matrix rows, computed afresh each time the page iterates them: on screen (accounts x
    rules) and again in print (rules x accounts), holding one account's cells at a time."""

    def __init__(self, report: Judged, context: ReportContext) -> None:
        self._report, self._context = report, context

    def __iter__(self) -> Iterator[tuple[str, dict[str, Any]]]:
        return _matrix(self._report, self._context)


def _matrix(report: Judged, context: ReportContext) -> Iterator[tuple[str, dict[str, Any]]]:
    """(account, its cells by rule id), accounts in the order their findings first come. Two
    results of one name (saved files may hold that; live names are unique in Azure) make one
    row whose later verdicts win, as a dict of all cells would: only names are counted up
    front, never the findings."""
    results_of: Counter[str] = Counter()
    for result in report.results:
        results_of.update({f.account for f in result.findings})
    done: set[str] = set()
    for result in report.results:
        for name in dict.fromkeys(f.account for f in result.findings):
            if name in done:
                continue
            chosen = [result] if results_of[name] == 1 else report.results
            if results_of[name] > 1:
                done.add(name)
            cells = {
                f.rule.id: _finding(f, context)
                for chosen_result in chosen
                for f in chosen_result.findings
                if f.account == name
            }
            yield name, cells


def render_html(report: Judged, context: ReportContext) -> str:
    return "".join(iter_html(report, context))


def iter_html(report: Judged, context: ReportContext) -> Iterator[str]:
    """The page as the template writes it, the matrix a row and the cards one at a time."""
    environment = _environment()
    assets = {name: (TEMPLATES / name).read_text(encoding="utf-8") for name in ASSETS}
    names = sorted({name for rule in report.rules for name in frameworks(rule)})
    return environment.get_template(TEMPLATE).generate(
        about=_about(report.scope.label, context.generated, context.inputs, context.fail_on),
        scope=report.scope.label,
        rules=report.rules,
        rows=_Matrix(report, context),
        findings=_Cards(report, context),
        summary=summary(report, context),
        states=STATES,
        severities=[s.value for s in reversed(Severity)],
        frameworks=names,
        rule_frameworks={rule.id: _framework_list(rule) for rule in report.rules},
        errors=[error_line(e, report.scope.label) for e in all_errors(report)],
        notes=context.applied.notes(),
        history=_history(report, context),
        css=assets["report.css"],
        js=assets["report.js"],
        csp=(
            "default-src 'none'; img-src data:; "
            f"style-src {_csp_hash(assets['report.css'])}; "
            f"script-src {_csp_hash(assets['report.js'])}"
        ),
    )


def render_verify_html(run: VerificationRun, generated: dt.datetime | None = None) -> str:
    """The verification run as one self-contained page: the header as the audit's, a card per
    probe that did not pass, the settings and behaviour verdict per rule when the settings were
    read, and why the run could not act."""
    environment = _environment()
    css = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    order = (ProbeOutcome.FAIL, ProbeOutcome.NOT_VERIFIABLE, ProbeOutcome.PASS)
    behaviour = behaviour_by_rule(run)
    return environment.get_template(VERIFY_TEMPLATE).render(
        about=_about(run.target, generated or dt.datetime.now(dt.UTC)),
        run=run,
        results=sorted(run.results, key=lambda r: order.index(r.outcome)),
        counts=verify_summary(run),
        settings=settings_by_rule(run),
        behaviour={rule: outcome for rule, (outcome, _) in behaviour.items()},
        rules=RULES if run.settings is not None else (),
        errors=could_not_act(run),
        css=css,
        csp=f"default-src 'none'; img-src data:; style-src {_csp_hash(css)}",
    )
