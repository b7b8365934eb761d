"""Three fixed audit reports (hostile text, duplicate names, read errors, suppressions with and
without an approver, a baseline, history by run date, input files' digests, a gate) and the text every format had for them when the writers held every result
in memory, as SHA-256 digests in data/streamed.json, written by that writer: the generators
must keep producing it byte for byte (the package version aside).
`python -m tests.policies.stream_golden` writes the digests again with whichever
`blob_safetynet` is first on the path."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
from pathlib import Path

from blob_safetynet import package_version
from blob_safetynet.policies.reports.formats import RENDERERS
from blob_safetynet.policies.reports.view import STATES, HistoryRun, ReportContext
from blob_safetynet.policies.rules import RULES, Finding, Outcome, suppressions
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.policies.sources.results import (
    AccountResult,
    AuditReport,
    ErrorKind,
    ReadError,
    Scope,
)
from blob_safetynet.settings.untrusted import InputFile

GOLDEN = Path(__file__).parent / "data" / "streamed.json"
TODAY = dt.date(2026, 12, 2)
GENERATED = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.UTC)
WORDS = ["a", "ß", "<b>", "x\ny", "=cmd", "|p|", "`c`", "\x1b[31m", "&", "'q'", '"d"', " "]
SCOPES = (
    Scope("", management_groups=("mg-all",)),
    Scope("00000000-0000-0000-0000-000000000000", "rg"),
    Scope("", files=("a.json",)),
)
SIZES = (12, 0, 3)
KINDS = (
    ErrorKind.AUTH,
    ErrorKind.PERMISSION,
    ErrorKind.NOT_FOUND,
    ErrorKind.MALFORMED,
    ErrorKind.HTTP,
)
"""The error kinds when the digests were taken (a kind added since would change the draws)."""


def _results(rng: random.Random, count: int) -> list[AccountResult]:
    results = []
    for _ in range(count):
        name = f"acct{rng.randrange(count * 2 + 1)}"
        where = (
            None
            if rng.random() < 0.2
            else f"/subscriptions/s/resourceGroups/g/providers/Microsoft.Storage/storageAccounts/{name}"
        )
        findings = [
            Finding(
                rule,
                name,
                where,
                rng.choice(list(Outcome)),
                " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5))),
                rng.choice(["", "detail `x: 1`"]),
            )
            for rule in rng.sample(list(RULES), rng.randrange(len(RULES) + 1))
        ]
        errors = [
            ReadError(name, "op", rng.choice(KINDS), rng.choice(WORDS))
            for _ in range(rng.choice([0, 0, 1]))
        ]
        results.append(AccountResult(Account(name=name, resource_id=where), findings, errors))
    return results


def report(number: int) -> tuple[AuditReport, ReportContext]:
    """The fixed report `number` (0-2) and its context."""
    rng = random.Random(number)
    errors = [ReadError(None, "list", ErrorKind.PERMISSION, "no <way>")] if number == 0 else []
    audit = AuditReport(
        SCOPES[number], Thresholds(), _results(rng, SIZES[number]), errors, seconds=1.5
    )
    accepted = [
        suppressions.Suppression(rule.id, pattern, "accepted for the test run", expires, approver)
        for rule, pattern, expires, approver in (
            (RULES[0], "acct1*", TODAY + dt.timedelta(days=5), "J. <Doe> & `co`"),
            (RULES[1], "*", TODAY - dt.timedelta(days=1), None),
            (RULES[2], "nomatch", TODAY, None),
        )
    ]
    fails = sorted(
        (suppressions.key(f) for f in audit.findings if f.outcome is Outcome.FAIL), key=str
    )
    baseline = suppressions.Baseline("base.json", frozenset([*fails[::2], ("SN-X", "gone", None)]))
    counts = {RULES[0].id: {**dict.fromkeys(STATES, 0), "PASS": 2, "FAIL": 1}}
    earlier = GENERATED - dt.timedelta(days=7)
    history = [HistoryRun("old.json", counts, earlier), HistoryRun("older.json", counts)]
    inputs = [
        InputFile.of("--from-file", "arm/a <b>.json", b"{}"),
        InputFile.of("--baseline", "base.json", b"[]", earlier),
    ]
    applied = suppressions.apply(audit.findings, accepted, TODAY, baseline)
    if number != 0:
        return audit, ReportContext(applied, [], GENERATED)
    return audit, ReportContext(applied, history, GENERATED, inputs=inputs, fail_on="medium")


def digest(text: str) -> str:
    """The SHA-256 of `text` with the package version taken out."""
    return hashlib.sha256(text.replace(package_version(), "VERSION").encode()).hexdigest()


def digests() -> dict[str, str]:
    """`<report>.<format>`: the digest of each format's text of each fixed report."""
    found = {}
    for number in range(len(SIZES)):
        audit, context = report(number)
        for name, render in RENDERERS.items():
            found[f"{number}.{name}"] = digest(render(audit, context))
    return found


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(digests(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
