"""Markdown of an audit and of a verification run: a GitHub job summary or a pull-request
comment, cut to fit the size GitHub accepts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from blob_safetynet.policies.probes import ProbeOutcome, VerificationRun
from blob_safetynet.policies.reports import escaping
from blob_safetynet.policies.reports.view import (
    ATTENTION,
    BASELINED,
    SUPPRESSED,
    Judged,
    ReportContext,
    all_errors,
    behaviour_by_rule,
    could_not_act,
    counts_line,
    error_line,
    findings_of,
    input_line,
    run_time,
    settings_by_rule,
    state,
    verify_counts_line,
)
from blob_safetynet.policies.rules import RULES, Finding, Outcome, Severity

MARKDOWN_BUDGET: Final = 65_000


"""Characters the Markdown may take: a pull request comment holds at most 65,536 (GitHub's API
refuses a longer body), and a job summary ($GITHUB_STEP_SUMMARY) at most 1 MiB per step
(https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands#adding-a-job-summary),
so one budget fits both."""


def render_verify_markdown(run: VerificationRun) -> str:
    """A heading, the counts, every probe that did not pass (FAIL first), the settings and
    behaviour verdict per rule when the settings were read, and why the run could not act;
    cut to `MARKDOWN_BUDGET` like the audit's."""
    head = [
        f"## safetynet verify: {escaping.markdown(run.target)}",
        "",
        f"{verify_counts_line(run)}; run {escaping.markdown(run.run_id) or '-'}",
        "",
    ]
    order = (ProbeOutcome.FAIL, ProbeOutcome.NOT_VERIFIABLE)
    shown = sorted(
        (r for r in run.results if r.outcome in order), key=lambda r: order.index(r.outcome)
    )
    rows = [
        f"| `{r.probe.id}` | {escaping.markdown(', '.join(r.probe.proves) or '(protocol)')} "
        f"| **{r.outcome.value}** | {escaping.markdown(r.detail)} |"
        for r in shown
    ]
    if rows:
        head += ["| Check | Proves | Outcome | Detail |", "|---|---|---|---|"]
    elif run.results:
        head.append("Every check passed.")
    tail: list[str] = []
    if run.settings is not None:
        settings, behaviour = settings_by_rule(run), behaviour_by_rule(run)
        tail += ["", "| Rule | Settings | Behaviour |", "|---|---|---|"]
        tail += [
            f"| `{rule.id}` | {settings.get(rule.id, '-')} "
            f"| {behaviour.get(rule.id, ('-', []))[0]} |"
            for rule in RULES
        ]
    errors = [f"- error: {escaping.markdown(reason)}" for reason in could_not_act(run)]
    return _fit(head, rows, tail + ([""] if errors else []) + errors, len(rows))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def finding_text(finding: Finding, context: ReportContext) -> str:
    """What was found first (the verdict's fact, escaped: it quotes values from outside), then
    the rule's ideal and its fix in the rule's own words with their code spans kept, then the
    suppression or baseline that accepts it."""
    if not finding.detail:
        return escaping.markdown(finding.message)
    lead = {
        Outcome.UNKNOWN: "cannot be judged: ",
        Outcome.NOT_IN_FILES: "not in the files: ",
    }.get(finding.outcome, "")
    parts = [escaping.markdown(_sentence(lead + finding.detail).rstrip(".")) + "."]
    parts.append(f"Expected: {escaping.markdown_keeping_code(finding.rule.title)}.")
    if finding.outcome is Outcome.FAIL:
        parts.append(f"Fix: {escaping.markdown_keeping_code(finding.fix)}")
    covered = context.applied.of(finding)
    shown = state(finding, context)
    if covered is not None and shown == SUPPRESSED:
        why = f"Suppressed {covered.terms}: {covered.justification}"
        parts.append(f"**{escaping.markdown(why)}**")
    elif covered is not None and shown == BASELINED:
        parts.append(f"**{escaping.markdown(f'Accepted by the baseline {covered.baseline}')}**")
    return " ".join(parts)


def _finding_row(finding: Finding, context: ReportContext) -> str:
    cells = [
        escaping.markdown(finding.account),
        f"`{finding.rule.id}`",
        finding.severity.value,
        f"**{state(finding, context)}**",
        finding_text(finding, context),
    ]
    return "| " + " | ".join(cells) + " |"


def attention(report: Judged, context: ReportContext) -> Iterator[tuple[str, Finding]]:
    """(state, finding) of every finding in an `ATTENTION` state, in that order, most severe
    first, in the report's order otherwise (as a stable sort would give them): one pass over
    the results per state and severity, none held."""
    rank_of = {severity: severity.rank for severity in Severity}
    for name in ATTENTION:
        for rank in sorted(set(rank_of.values()), reverse=True):
            for finding in findings_of(report):
                if rank_of[finding.severity] == rank and state(finding, context) == name:
                    yield name, finding


def render_markdown(report: Judged, context: ReportContext) -> str:
    """A heading, when the report was made (and the gate), the counts, then every finding in an
    `ATTENTION` state (FAIL, BASELINED, SUPPRESSED, UNKNOWN, NOT_IN_FILES, most severe first),
    each led by what was found; the read errors, suppression notes and the input files' digests;
    cut to `MARKDOWN_BUDGET` with a note saying how many lines were left out."""
    gate = f", failing at {context.fail_on} or above" if context.fail_on else ""
    head = [
        f"## safetynet audit: {escaping.markdown(report.scope.label)}",
        "",
        f"Generated {run_time(context.generated)}{gate}.",
        "",
        counts_line(report, context),
        "",
    ]
    listed = sum(state(f, context) in ATTENTION for f in findings_of(report))
    rows = (_finding_row(f, context) for _, f in attention(report, context))
    if listed:
        head += ["| Account | Rule | Severity | State | Finding |", "|---|---|---|---|---|"]
    else:
        head.append("Every rule passed on every account.")
    tail = (
        [
            f"- error: {escaping.markdown(error_line(e, report.scope.label))}"
            for e in all_errors(report)
        ]
        + [f"- {escaping.markdown(note)}" for note in context.applied.notes()]
        + [f"- input {escaping.markdown(input_line(file))}" for file in context.inputs]
    )
    return _fit(head, rows, ([""] if tail else []) + tail, listed)


def iter_markdown(report: Judged, context: ReportContext) -> Iterator[str]:
    """`render_markdown`: at most `MARKDOWN_BUDGET` characters, so written in one piece."""
    yield render_markdown(report, context)


def _take(lines: Iterable[str], budget: int) -> list[str]:
    """The leading lines that fit in `budget` characters (each with its newline)."""
    kept: list[str] = []
    for line in lines:
        budget -= len(line) + 1
        if budget < 0:
            break
        kept.append(line)
    return kept


def _fit(head: list[str], rows: Iterable[str], tail: list[str], count: int) -> str:
    """head + as many of the `count` rows, then tail lines, as the budget allows; a note when
    any were left out (the note's own length is reserved). `rows` is read only as far as the
    budget goes."""
    budget = MARKDOWN_BUDGET - sum(len(line) + 1 for line in head) - 200
    kept_rows = _take(rows, budget)
    budget -= sum(len(line) + 1 for line in kept_rows)
    kept_tail = _take(tail, budget)
    left = count - len(kept_rows) + len(tail) - len(kept_tail)
    note = []
    if left:
        note = [
            "",
            f"_{left} more line(s) left out to fit a comment; see the JSON or HTML report._",
        ]
    return "\n".join([*head, *kept_rows, *kept_tail, *note]) + "\n"
