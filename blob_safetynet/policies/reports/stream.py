"""What lets a fleet audit write every report format with memory flat in the number of accounts.

`Spool` keeps each account's result, as it is judged, in an unnamed temporary file (the
operating system deletes it when it is closed or the process dies) and hands the results back
sorted by account name and resource id, the order of every in-memory report, as often as a
writer asks (it keeps one small index entry an account: the name, the id and where the record
lies, about 150 bytes); the writers of `report.WRITERS` read it account by
account and keep only counts. `apply` is `suppressions.apply` in one pass over the findings,
whose `of` matches a finding again instead of keeping a key per suppressed finding.

Why a spool rather than writing each format while the accounts are judged: every format opens
with facts known only at the end (the JSON summary, the JUnit totals on <testsuites>, the SARIF
invocation, the table's column widths, the HTML counts and its cards sorted by state and
severity), and the reports must stay byte for byte what the end-of-run writers produced. The
JSON Lines of `--stream` is the feed written as judged.
"""

from __future__ import annotations

import datetime as dt
import json
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any

from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule
from blob_safetynet.policies.rules.base import FixTarget
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.rules.suppressions import (
    Applied,
    Baseline,
    Key,
    Suppression,
    accepted_by,
    key,
)
from blob_safetynet.policies.sources.results import AccountResult, ErrorKind, ReadError, Scope


def _record(result: AccountResult) -> bytes:
    findings = [
        [
            f.rule.id,
            f.account,
            f.resource_id,
            f.outcome.value,
            f.message,
            f.detail,
            f.target.value,
        ]
        for f in result.findings
    ]
    errors = [[e.account, e.operation, e.kind.value, e.message] for e in result.errors]
    account = [result.account.name, result.account.resource_id]
    return json.dumps([account, findings, errors, result.deleted], separators=(",", ":")).encode()


class Spool:
    """Account results on disk, handed back sorted by (name, resource id) whatever order they
    were judged in; each keeps its account's name and resource id, its findings, its errors and
    whether it was deleted since the listing (not the settings the rules read)."""

    def __init__(self, rules: Sequence[Rule] = RULES) -> None:
        self._rules = {rule.id: rule for rule in rules}
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close)
        self._lock = threading.Lock()
        self._end = 0
        self._index: list[tuple[str, str, int, int]] = []

    def __enter__(self) -> Spool:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def append(self, result: AccountResult) -> None:
        data = _record(result)
        with self._lock:
            self._file.seek(self._end)
            self._file.write(data)
            account = result.account
            self._index.append((account.name, account.resource_id or "", self._end, len(data)))
            self._end += len(data)

    def __len__(self) -> int:
        return len(self._index)

    def __contains__(self, item: object) -> bool:
        return any(result == item for result in self)

    def __iter__(self) -> Iterator[AccountResult]:
        with self._lock:
            index = sorted(self._index)
        for _, _, offset, size in index:
            with self._lock:
                self._file.seek(offset)
                data = self._file.read(size)
            yield self._result(json.loads(data))

    def _result(self, record: list[Any]) -> AccountResult:
        (name, resource_id), findings, errors, deleted = record
        return AccountResult(
            account=Account(name=name, resource_id=resource_id),
            findings=[
                Finding(
                    self._rules[rule],
                    account,
                    where,
                    Outcome(outcome),
                    message,
                    detail,
                    FixTarget(target),
                )
                for rule, account, where, outcome, message, detail, target in findings
            ],
            errors=[ReadError(a, operation, ErrorKind(k), m) for a, operation, k, m in errors],
            deleted=bool(deleted),
        )


@dataclass
class SpooledReport:
    """An `AuditReport` whose results are a `Spool` (a `view.Judged`)."""

    scope: Scope
    thresholds: Thresholds
    results: Spool
    errors: list[ReadError] = field(default_factory=list)
    rules: tuple[Rule, ...] = RULES
    seconds: float = 0.0
    requests: int = 0


@dataclass
class Matched(Applied):
    """`Applied` whose `of` matches the finding again: the first live suppression in the
    file's order that covers a FAIL, else the baseline when it held that FAIL, as
    `suppressions.apply` decides; nothing is kept per finding."""

    live: list[Suppression] = field(default_factory=list)

    def of(self, finding: Finding) -> Suppression | None:
        if finding.outcome is not Outcome.FAIL:
            return None
        for suppression in self.live:
            if suppression.matches(finding):
                return suppression
        if self.baseline is not None and key(finding) in self.baseline.failing:
            return accepted_by(finding, self.baseline)
        return None


def apply(
    findings: Iterable[Finding],
    accepted: Sequence[Suppression],
    today: dt.date,
    baseline: Baseline | None = None,
) -> Matched:
    """`suppressions.apply` in one pass: the expired suppressions, the live ones that matched
    no FAIL and the baseline's FAILs no longer failing, in the same order; what it keeps grows
    with the suppressions and the baseline, not with the findings."""
    live = [s for s in accepted if s.expires is None or s.expires >= today]
    expired = [s for s in accepted if not (s.expires is None or s.expires >= today)]
    used: set[int] = set()
    still_failing: set[Key] = set()
    for finding in findings:
        if finding.outcome is not Outcome.FAIL:
            continue
        used.update(number for number, s in enumerate(live) if s.matches(finding))
        if baseline is not None and key(finding) in baseline.failing:
            still_failing.add(key(finding))
    return Matched(
        expired=expired,
        unused=[s for number, s in enumerate(live) if number not in used],
        no_longer_failing=sorted(
            baseline.failing - still_failing, key=lambda k: (k[0], k[1], k[2] or "")
        )
        if baseline is not None
        else [],
        live=live,
        baseline=baseline,
    )
