"""Suppressions: a reviewed, expiring exception that turns one rule's FAIL into "suppressed".

The file (YAML or JSON) is read by `safetynet audit --suppressions FILE` and by the CrossGuard
pack (its `suppressionsFile` config):

    suppressions:
      - rule: SN-SHARED-KEY-OFF
        resource: "legacy*"          # fnmatch pattern: account name or resource id
        justification: "migration ticket OPS-12, keys removed by March"
        expires: 2027-03-31

A suppressed FAIL stays in every report and does not count towards the exit code; UNKNOWN is
never suppressed (not knowing is not an accepted risk). A suppression past its expiry no longer
applies, and one that matched no FAIL is reported, so stale exceptions do not pile up.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import yaml

from blob_safetynet.policies.rules import Finding, Outcome

MAX_BYTES: Final = 1_000_000
FIELDS: Final = ("rule", "resource", "justification", "expires")
_RULE_ID: Final = re.compile(r"SNV?-[A-Z0-9-]+", re.ASCII)
MIN_JUSTIFICATION: Final = 10


class SuppressionError(ValueError):
    """The suppressions file is missing, unreadable or breaks the schema (usage error)."""


@dataclass(frozen=True)
class Suppression:
    rule: str
    resource: str
    justification: str
    expires: dt.date

    def matches(self, finding: Finding) -> bool:
        """Same rule, and the pattern matches the account name or its resource id."""
        if finding.rule.id != self.rule:
            return False
        pattern = self.resource.lower()
        names = [finding.account, finding.resource_id or ""]
        return any(name and fnmatch.fnmatchcase(name.lower(), pattern) for name in names)

    def as_dict(self) -> dict[str, str]:
        return {
            "rule": self.rule,
            "resource": self.resource,
            "justification": self.justification,
            "expires": self.expires.isoformat(),
        }

    def describe(self) -> str:
        return f"{self.rule} {self.resource} (until {self.expires.isoformat()})"


def key(finding: Finding) -> tuple[str, str, str | None]:
    return (finding.rule.id, finding.account, finding.resource_id)


@dataclass
class Applied:
    """What the suppressions did to one report's findings."""

    suppressed: dict[tuple[str, str, str | None], Suppression] = field(default_factory=dict)
    """Each suppressed finding's `key`, and the suppression that covers it."""
    expired: list[Suppression] = field(default_factory=list)
    unused: list[Suppression] = field(default_factory=list)

    def of(self, finding: Finding) -> Suppression | None:
        return self.suppressed.get(key(finding))

    def notes(self) -> list[str]:
        """One line per expired or unused suppression, for every format to report."""
        return [f"suppression expired: {s.describe()}" for s in self.expired] + [
            f"suppression matched no FAIL: {s.describe()}" for s in self.unused
        ]


def _entry(number: int, raw: object) -> Suppression:
    where = f"suppressions[{number}]"
    if not isinstance(raw, Mapping):
        raise SuppressionError(f"{where} must be a mapping of {', '.join(FIELDS)}")
    missing = [key for key in FIELDS if key not in raw]
    extra = sorted(str(key) for key in raw if key not in FIELDS)
    if missing or extra:
        problem = f"missing {', '.join(missing)}" if missing else f"unknown key {', '.join(extra)}"
        raise SuppressionError(f"{where}: {problem}")
    rule, resource, justification = raw["rule"], raw["resource"], raw["justification"]
    if not isinstance(rule, str) or not _RULE_ID.fullmatch(rule):
        raise SuppressionError(f"{where}.rule must be a rule id such as SN-SHARED-KEY-OFF")
    if not isinstance(resource, str) or not resource.strip():
        raise SuppressionError(f"{where}.resource must be a non-empty pattern")
    if not isinstance(justification, str) or len(justification.strip()) < MIN_JUSTIFICATION:
        raise SuppressionError(
            f"{where}.justification must say why, in at least {MIN_JUSTIFICATION} characters"
        )
    return Suppression(rule, resource, justification.strip(), _date(where, raw["expires"]))


def _date(where: str, value: object) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise SuppressionError(f"{where}.expires must be a date such as 2027-03-31")


def parse(document: object, known_rules: Iterable[str]) -> list[Suppression]:
    """The suppressions of a loaded document; SuppressionError names the first problem."""
    if not isinstance(document, Mapping) or set(document) != {"suppressions"}:
        raise SuppressionError("the file must hold one key, 'suppressions', with a list")
    entries = document["suppressions"]
    if not isinstance(entries, list):
        raise SuppressionError("'suppressions' must be a list")
    known = set(known_rules)
    parsed = [_entry(number, raw) for number, raw in enumerate(entries)]
    for number, suppression in enumerate(parsed):
        if suppression.rule not in known:
            raise SuppressionError(f"suppressions[{number}].rule {suppression.rule} is no rule")
    return parsed


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of an input file; ValueError (with the reason) when it cannot be read or is
    larger than `limit`."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as error:
        raise ValueError(f"cannot read: {error.strerror or type(error).__name__}") from None
    if len(raw) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return raw


def load(path: Path, known_rules: Iterable[str]) -> list[Suppression]:
    """The suppressions in `path` (YAML, or JSON, which YAML reads too)."""
    try:
        raw = read_capped(path, MAX_BYTES)
    except ValueError as error:
        raise SuppressionError(str(error)) from None
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as error:
        reason = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not YAML or JSON"
        raise SuppressionError(reason) from None
    return parse(document, known_rules)


def apply(
    findings: Sequence[Finding], suppressions: Sequence[Suppression], today: dt.date
) -> Applied:
    """Which FAIL findings each live suppression covers; expired and unused ones listed."""
    applied = Applied()
    for suppression in suppressions:
        if suppression.expires < today:
            applied.expired.append(suppression)
            continue
        covered = [f for f in findings if f.outcome is Outcome.FAIL and suppression.matches(f)]
        if not covered:
            applied.unused.append(suppression)
        for finding in covered:
            applied.suppressed.setdefault(key(finding), suppression)
    return applied
