"""What every audit format shows beside the report itself: suppressions applied and history."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from blob_safetynet.policies.probes import ProbeOutcome, VerificationRun
from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule
from blob_safetynet.policies.rules.model import Thresholds
from blob_safetynet.policies.rules.suppressions import Applied, Baseline, Key
from blob_safetynet.policies.sources.results import AccountResult, ReadError, Scope
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.untrusted import InputFile

SUPPRESSED: Final = "SUPPRESSED"
"""A FAIL a reviewed suppression covers: justified, with an expiry (and an approver, when
the file names one)."""
BASELINED: Final = "BASELINED"
"""A FAIL accepted only because the baseline (`--baseline`) already held it: not reviewed one
by one, so never shown as SUPPRESSED."""
STATES: Final = (*(outcome.value for outcome in Outcome), SUPPRESSED, BASELINED)
"""Every state a finding can be in: the rule outcomes, SUPPRESSED and BASELINED."""
ATTENTION: Final = (
    Outcome.FAIL.value,
    BASELINED,
    SUPPRESSED,
    Outcome.UNKNOWN.value,
    Outcome.NOT_IN_FILES.value,
)
"""The states the Markdown and HTML list finding by finding, in this order: what was not
judged is listed too, so no summary reads "every rule passed" over it."""
MAX_HISTORY_BYTES: Final = 20_000_000


class Judged(Protocol):
    """What a report writer reads: an `AuditReport`, or a fleet's results spooled to disk
    (`stream.SpooledReport`). `results` may be read more than once, in the same order
    each time; the writers never hold more than one account's result of it at once."""

    @property
    def scope(self) -> Scope: ...
    @property
    def thresholds(self) -> Thresholds: ...
    @property
    def results(self) -> Collection[AccountResult]: ...
    @property
    def errors(self) -> Sequence[ReadError]: ...
    @property
    def rules(self) -> tuple[Rule, ...]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def requests(self) -> int: ...


TOOL_NAME: Final = "safetynet"
TOOL_URI: Final = "https://github.com/blob-safetynet/blob-safetynet"


def findings_of(report: Judged) -> Iterator[Finding]:
    """Every finding, account by account, read lazily."""
    for result in report.results:
        yield from result.findings


def all_errors(report: Judged) -> list[ReadError]:
    """The scope's read errors, then each account's (bounded per account, so kept)."""
    return [*report.errors, *(e for result in report.results for e in result.errors)]


class HistoryError(ValueError):
    """An earlier result file that is not this tool's JSON report (usage error)."""


def run_time(moment: dt.datetime) -> str:
    """A report's generation time as every format shows it: `2026-12-02 05:00 UTC`."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class HistoryRun:
    """One earlier JSON report: its file name, when it was generated (None for a report written
    before reports said so) and each rule's state counts."""

    name: str
    counts: dict[str, dict[str, int]]
    generated: dt.datetime | None = None
    file: InputFile | None = None

    @property
    def label(self) -> str:
        """The run's column heading: its date and time, or the file name when the report
        does not say when it ran."""
        return self.name if self.generated is None else run_time(self.generated)


@dataclass(frozen=True)
class ReportContext:
    applied: Applied = field(default_factory=Applied)
    history: Sequence[HistoryRun] = ()
    generated: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    """When the report was made (UTC): the "as of when" an auditor reads first."""
    inputs: Sequence[InputFile] = ()
    """The files the verdicts rest on (saved ARM JSON, suppressions, baseline, history), each
    with the SHA-256 of the bytes read."""
    fail_on: str | None = None
    """The lowest severity whose FAIL fails the run (`--fail-on`), when a command set it."""


def state(finding: Finding, context: ReportContext) -> str:
    """The finding's outcome; SUPPRESSED for a FAIL a live suppression covers, BASELINED for
    one the baseline accepts."""
    covered = context.applied.of(finding)
    if covered is None:
        return finding.outcome.value
    return BASELINED if covered.baseline is not None else SUPPRESSED


def input_dict(file: InputFile) -> dict[str, object]:
    """An input file as the JSON report and the SARIF properties name it."""
    captured = None if file.captured is None else file.captured.isoformat(timespec="seconds")
    return {
        "option": file.option,
        "file": file.name,
        "sha256": file.sha256,
        "bytes": file.size,
        "captured": captured,
    }


def input_line(file: InputFile) -> str:
    """An input file in one line, unescaped (each format escapes it): `--from-file a.json:
    sha256 <hex>, 1234 bytes`, and when it was captured where the file says."""
    captured = "" if file.captured is None else f", captured {run_time(file.captured)}"
    return f"{file.option} {file.name}: sha256 {file.sha256}, {file.size} bytes{captured}"


def summary(report: Judged, context: ReportContext) -> dict[str, int]:
    """Accounts, findings per state and read errors: the counts every format shows."""
    states = Counter(state(f, context) for f in findings_of(report))
    errors = len(report.errors) + sum(len(result.errors) for result in report.results)
    return {
        "accounts": len(report.results),
        **{name: states[name] for name in STATES},
        "errors": errors,
    }


def reads_summary(report: Judged) -> dict[str, int | float]:
    """What judging cost and what vanished meanwhile: HTTP requests sent (retries included),
    requests per account judged, accounts deleted after they were listed."""
    accounts = len(report.results)
    return {
        "requests": report.requests,
        "requests_per_account": round(report.requests / accounts, 2) if accounts else 0.0,
        "deleted": sum(1 for result in report.results if result.deleted),
    }


def counts_line(report: Judged, context: ReportContext) -> str:
    """`N account(s): a PASS, b FAIL, ...`: the last line of the table and the Markdown."""
    counts = summary(report, context)
    shown = ", ".join(f"{counts[name]} {name}" for name in STATES)
    return f"{counts['accounts']} account(s): {shown}, {counts['errors']} error(s)"


def error_line(error: ReadError, scope: str) -> str:
    """`where operation: kind: message` of a read error, unescaped (each format escapes it)."""
    return f"{error.account or scope} {error.operation}: {error.kind.value}: {error.message}"


def counts_by_rule(findings: Iterable[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """(rule id, state) pairs as per-rule counts of each state."""
    counts: dict[str, dict[str, int]] = {}
    for rule, name in findings:
        per_rule = counts.setdefault(rule, dict.fromkeys(STATES, 0))
        per_rule[name] = per_rule.get(name, 0) + 1
    return counts


@dataclass(frozen=True)
class EarlierReport:
    """An earlier `--format json` report as read: (rule id, state, finding) per finding, and
    the file's record (its digest, and its generation time as captured)."""

    findings: list[tuple[str, str, dict[str, object]]]
    file: InputFile


def _report_findings(path: Path, option: str) -> EarlierReport:
    """Each finding of an earlier `--format json` report; HistoryError says what the file is
    not. A report without a readable `generated` time (written before reports said it) is
    read all the same."""
    try:
        data = untrusted.read_input(path, "the file", max_bytes=MAX_HISTORY_BYTES)
        document = untrusted.load_json(data, "the file", max_bytes=MAX_HISTORY_BYTES)
    except untrusted.UntrustedInputError as error:
        raise HistoryError(str(error)) from None
    findings = document.get("findings") if isinstance(document, dict) else None
    if not isinstance(findings, list):
        raise HistoryError("not a safetynet audit JSON report (no 'findings' list)")
    read = []
    for item in findings:
        if not isinstance(item, dict):
            raise HistoryError("a finding is not an object")
        rule, name = item.get("rule"), item.get("state", item.get("outcome"))
        if not isinstance(rule, str) or name not in STATES:
            raise HistoryError("a finding has no rule id or no known outcome")
        read.append((rule, str(name), item))
    try:
        generated = untrusted.utc_time(document.get("generated"), "generated")
    except untrusted.UntrustedInputError:
        generated = None
    return EarlierReport(read, InputFile.of(option, str(path), data, generated))


def load_history(path: Path) -> HistoryRun:
    """An earlier `--format json` report as a history run, labelled by when it ran."""
    earlier = _report_findings(path, "--history")
    pairs = [(rule, name) for rule, name, _ in earlier.findings]
    return HistoryRun(path.name, counts_by_rule(pairs), earlier.file.captured, earlier.file)


def load_baseline(path: Path) -> Baseline:
    """An earlier `--format json` report as a baseline: the (rule, account, resource id) of each
    finding whose outcome was FAIL, suppressed there or not."""
    failing: set[Key] = set()
    earlier = _report_findings(path, "--baseline")
    for rule, _, item in earlier.findings:
        if item.get("outcome") != Outcome.FAIL.value:
            continue
        account, resource_id = item.get("account"), item.get("resource_id")
        if not isinstance(account, str) or not (
            resource_id is None or isinstance(resource_id, str)
        ):
            raise HistoryError(
                "a FAIL finding has no account name or a resource id that is no text"
            )
        failing.add((rule, account, resource_id))
    return Baseline(path.name, frozenset(failing), earlier.file)


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


def settings_by_rule(run: VerificationRun) -> dict[str, str]:
    """Each settings rule's outcome on the probed account, when the settings were read."""
    return {f.rule.id: f.outcome.value for f in run.settings or []}


def verify_summary(run: VerificationRun) -> dict[str, int]:
    """Probes per outcome: the counts every verify format shows."""
    return {o.value: len(run.outcomes(o)) for o in ProbeOutcome}


def verify_counts_line(run: VerificationRun) -> str:
    """`N checks: a PASS, ...; R requests in S s`: the last line of the table and the Markdown."""
    counts = ", ".join(f"{count} {outcome}" for outcome, count in verify_summary(run).items())
    return f"{len(run.results)} checks: {counts}; {run.requests} requests in {run.seconds:.1f} s"


def leftover_lines(run: VerificationRun) -> list[str]:
    """Probe blobs the clean-up could not delete: they make the run exit 3, so every format a
    pipeline publishes names them."""
    return [f"left behind, delete by hand: {name}" for name in run.leftovers]


def could_not_act(run: VerificationRun) -> list[str]:
    """Every reason the run could not act or finish: each is an error in every format."""
    return [*run.incomplete, *run.settings_errors, *leftover_lines(run)]
