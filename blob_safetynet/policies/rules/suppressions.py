"""Suppressions: a reviewed, expiring exception that turns one rule's FAIL into "suppressed".

The file (YAML or JSON) is read by `safetynet audit --suppressions FILE` and by the CrossGuard
pack (its `suppressionsFile` config):

    suppressions:
      - rule: SN-SHARED-KEY-OFF
        resource: "legacy*"          # fnmatch pattern: account name or resource id
        justification: "migration ticket OPS-12, keys removed by March"
        expires: 2027-03-31
        approver: "jane.doe@example.com"   # optional: who accepted the risk

An expiry may lie at most `HORIZON_DAYS` (365) days after today (`--suppression-horizon-days`
on `safetynet audit`, `suppressionHorizonDays` in the pack's config): an exception is reviewed at
least once a year, never granted until 9999.

A suppressed FAIL stays in every report and does not count towards the exit code; UNKNOWN is
never suppressed (not knowing is not an accepted risk). A suppression past its expiry no longer
applies, and one that matched no FAIL is reported, so stale exceptions do not pile up.

A baseline (`safetynet audit --baseline FILE`, an earlier JSON report) accepts the FAILs it
already held, rule and resource alike, the way Checkov's `--baseline` does: they are reported as
BASELINED, a state of their own beside SUPPRESSED (accepted because they were there before, not
reviewed one by one), with the baseline named and no expiry, and only new failures fail the run.
A baseline FAIL that no longer fails is reported, so the baseline is refreshed rather than kept
as a blanket.
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
from blob_safetynet.policies.rules.model import arm_fold
from blob_safetynet.settings import untrusted

MAX_BYTES: Final = 1_000_000
FIELDS: Final = ("rule", "resource", "justification", "expires")
"""The keys every suppression has."""
OPTIONAL: Final = ("approver",)
"""The keys a suppression may have."""
MAX_APPROVER: Final = 200
_RULE_ID: Final = re.compile(r"SNV?-[A-Z0-9-]+", re.ASCII)
MIN_JUSTIFICATION: Final = 10
HORIZON_DAYS: Final = 365
"""How far ahead an expiry may lie, by default: one year from today."""
MAX_HORIZON_DAYS: Final = 3660
"""The horizon itself is at most ten years."""


class SuppressionError(ValueError):
    """The suppressions file is missing, unreadable or breaks the schema (usage error)."""


@dataclass(frozen=True)
class Suppression:
    rule: str
    resource: str
    justification: str
    expires: dt.date | None
    """None for a baseline's: it lasts while the finding stays in the baseline."""
    approver: str | None = None
    """Who accepted the risk (a name or an e-mail address), when the file says."""
    baseline: str | None = None
    """The baseline file's label when the finding is accepted by a baseline, not reviewed."""

    def matches(self, finding: Finding) -> bool:
        """Same rule, and the pattern matches the account name or its resource id."""
        if finding.rule.id != self.rule:
            return False
        pattern = arm_fold(self.resource)
        names = [finding.account, finding.resource_id or ""]
        return any(name and fnmatch.fnmatchcase(arm_fold(name), pattern) for name in names)

    @property
    def term(self) -> str:
        """How long it lasts, in words: `until 2027-03-31`, or while it stays in the baseline."""
        return "while it stays in the baseline" if self.expires is None else f"until {self.expires}"

    @property
    def terms(self) -> str:
        """`term`, and who approved it when the file says: `until 2027-03-31, approved by x`."""
        return self.term + (f", approved by {self.approver}" if self.approver else "")

    def as_dict(self) -> dict[str, str | None]:
        return {
            "rule": self.rule,
            "resource": self.resource,
            "justification": self.justification,
            "expires": None if self.expires is None else self.expires.isoformat(),
            "approver": self.approver,
        }

    def describe(self) -> str:
        return f"{self.rule} {self.resource} ({self.terms})"


def accepted_by(finding: Finding, baseline: Baseline) -> Suppression:
    """What a baseline's acceptance of a FAIL it already held is reported as."""
    return Suppression(
        finding.rule.id,
        finding.resource_id or finding.account,
        f"failing already in the baseline {baseline.label}",
        None,
        baseline=baseline.label,
    )


Key = tuple[str, str, str | None]
"""(rule id, account, resource id): what a finding is about."""


def key(finding: Finding) -> Key:
    return (finding.rule.id, finding.account, finding.resource_id)


@dataclass(frozen=True)
class Baseline:
    """The FAILs of an earlier report, by `key`; `label` names the file."""

    label: str
    failing: frozenset[Key]
    file: untrusted.InputFile | None = None
    """The file as read (its digest and generation time), for the report to name."""


@dataclass
class Applied:
    """What the suppressions did to one report's findings."""

    suppressed: dict[Key, Suppression] = field(default_factory=dict)
    """Each suppressed finding's `key`, and the suppression that covers it."""
    expired: list[Suppression] = field(default_factory=list)
    unused: list[Suppression] = field(default_factory=list)
    no_longer_failing: list[Key] = field(default_factory=list)
    """The baseline's FAILs this run did not find failing."""
    baseline: Baseline | None = None
    """The baseline the run was given, if any."""

    def of(self, finding: Finding) -> Suppression | None:
        return self.suppressed.get(key(finding))

    def notes(self) -> list[str]:
        """One line per expired or unused suppression, for every format to report."""
        return (
            [f"suppression expired: {s.describe()}" for s in self.expired]
            + [f"suppression matched no FAIL: {s.describe()}" for s in self.unused]
            + [
                f"baseline FAIL no longer failing: {rule} {resource_id or account}"
                for rule, account, resource_id in self.no_longer_failing
            ]
        )


def _entry(number: int, raw: object) -> Suppression:
    where = f"suppressions[{number}]"
    if not isinstance(raw, Mapping):
        raise SuppressionError(f"{where} must be a mapping of {', '.join(FIELDS)}")
    missing = [key for key in FIELDS if key not in raw]
    extra = sorted(str(key) for key in raw if key not in (*FIELDS, *OPTIONAL))
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
    expires = _date(where, raw["expires"])
    return Suppression(rule, resource, justification.strip(), expires, _approver(where, raw))


def _approver(where: str, raw: Mapping[object, object]) -> str | None:
    """The optional approver: one line of printable text, at most MAX_APPROVER characters."""
    if "approver" not in raw:
        return None
    value = raw["approver"]
    text = value.strip() if isinstance(value, str) else ""
    if not text or len(text) > MAX_APPROVER or not text.isprintable():
        raise SuppressionError(
            f"{where}.approver must name who accepted the risk: one line of printable text, "
            f"1-{MAX_APPROVER} characters"
        )
    return text


def _date(where: str, value: object) -> dt.date:
    if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    raise SuppressionError(f"{where}.expires must be a date such as 2027-03-31")


@dataclass(frozen=True)
class Horizon:
    """The latest expiry a suppression may have: `days` after `today`."""

    today: dt.date
    days: int = HORIZON_DAYS

    @property
    def latest(self) -> dt.date:
        return self.today + dt.timedelta(days=self.days)


def parse(
    document: object, known_rules: Iterable[str], horizon: Horizon | None = None
) -> list[Suppression]:
    """The suppressions of a loaded document; SuppressionError names the first problem.
    `horizon` (default: a year from the local date today) bounds every expiry."""
    if not isinstance(document, Mapping) or set(document) != {"suppressions"}:
        raise SuppressionError("the file must hold one key, 'suppressions', with a list")
    entries = document["suppressions"]
    if not isinstance(entries, list):
        raise SuppressionError("'suppressions' must be a list")
    known = set(known_rules)
    parsed = [_entry(number, raw) for number, raw in enumerate(entries)]
    limit = horizon or Horizon(dt.date.today())
    for number, suppression in enumerate(parsed):
        if suppression.rule not in known:
            raise SuppressionError(f"suppressions[{number}].rule {suppression.rule} is no rule")
        if suppression.expires is not None and suppression.expires > limit.latest:
            raise SuppressionError(
                f"suppressions[{number}].expires {suppression.expires} is more than "
                f"{limit.days} days ahead (at most {limit.latest}): an accepted risk is "
                "reviewed at least that often; set a nearer date, or raise the horizon "
                "(--suppression-horizon-days)"
            )
    return parsed


def load(
    path: Path, known_rules: Iterable[str], horizon: Horizon | None = None
) -> list[Suppression]:
    """The suppressions in `path` (YAML, or JSON, which YAML reads too; `-`: standard input)."""
    return read(path, known_rules, horizon)[0]


def read(
    path: Path, known_rules: Iterable[str], horizon: Horizon | None = None
) -> tuple[list[Suppression], untrusted.InputFile]:
    """`load`, with the file as read (its digest) for the report to name."""
    try:
        raw = untrusted.read_input(path, "the file", max_bytes=MAX_BYTES)
    except untrusted.UntrustedInputError as error:
        raise SuppressionError(str(error)) from None
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as error:
        reason = "not UTF-8" if isinstance(error, UnicodeDecodeError) else "not YAML or JSON"
        raise SuppressionError(reason) from None
    parsed = parse(document, known_rules, horizon)
    return parsed, untrusted.InputFile.of("--suppressions", str(path), raw)


def apply(
    findings: Sequence[Finding],
    suppressions: Sequence[Suppression],
    today: dt.date,
    baseline: Baseline | None = None,
) -> Applied:
    """Which FAIL findings each live suppression covers, then which the baseline accepts;
    expired and unused suppressions and the baseline's fixed FAILs listed."""
    applied = Applied()
    for suppression in suppressions:
        if suppression.expires is not None and suppression.expires < today:
            applied.expired.append(suppression)
            continue
        covered = [f for f in findings if f.outcome is Outcome.FAIL and suppression.matches(f)]
        if not covered:
            applied.unused.append(suppression)
        for finding in covered:
            applied.suppressed.setdefault(key(finding), suppression)
    if baseline is not None:
        applied.baseline = baseline
        _accept_baseline(applied, findings, baseline)
    return applied


def _accept_baseline(applied: Applied, findings: Sequence[Finding], baseline: Baseline) -> None:
    failing = {key(f): f for f in findings if f.outcome is Outcome.FAIL}
    for finding_key, finding in failing.items():
        if finding_key in baseline.failing and finding_key not in applied.suppressed:
            applied.suppressed[finding_key] = accepted_by(finding, baseline)
    applied.no_longer_failing = sorted(
        baseline.failing - set(failing), key=lambda k: (k[0], k[1], k[2] or "")
    )
