"""What a rule is: metadata plus a pure check over the normalized model."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    AccountSettings,
    Facet,
    Fact,
    Thresholds,
    is_known,
)

NO_BLOB_KINDS = ("FileStorage",)
"""Account kinds without a blob service: premium file shares only ("FileStorage accounts ...
support Azure Files only", https://learn.microsoft.com/azure/storage/common/storage-account-overview);
ARM answers their blob service reads with 400."""

BLOB_FACETS = frozenset({Facet.BLOB_SERVICE, Facet.CONTAINERS, Facet.LIFECYCLE, Facet.LOCAL_USERS})


class Outcome(enum.StrEnum):
    PASS = "PASS"  # noqa: S105 (an outcome, not a password)
    FAIL = "FAIL"
    UNKNOWN = "UNKNOWN"
    NOT_APPLICABLE = "NOT_APPLICABLE"
    """The account has no part the rule judges (a blob rule on a FileStorage account)."""
    NOT_IN_FILES = "NOT_IN_FILES"
    """The rule needs a fact the saved files cannot hold (`Account.not_held`: role assignments,
    Defender for Storage, ...): not judged, never a pass, and not "could not look" either; a
    live audit judges it (docs/policies.md, Offline: judging saved files)."""


class RuleScope(enum.StrEnum):
    """Which accounts a rule judges."""

    BASELINE = "baseline"
    """Every account of the audit: the storage hygiene every peer checks."""
    PROTOCOL = "protocol"
    """Accounts that hold, or are configured for, the protocol's container."""


class Framework(enum.StrEnum):
    CIS_AZURE_3_0 = "CIS Microsoft Azure Foundations Benchmark v3.0.0"
    CIS_AZURE_4_0 = "CIS Microsoft Azure Foundations Benchmark v4.0.0"
    MCSB_V1 = "Microsoft cloud security benchmark v1"

    @property
    def short(self) -> str:
        return {"CIS_AZURE_3_0": "CIS 3.0.0", "CIS_AZURE_4_0": "CIS 4.0.0", "MCSB_V1": "MCSB v1"}[
            self.name
        ]


@dataclass(frozen=True)
class Control:
    """One control of a compliance framework that a rule checks (as the framework numbers it)."""

    framework: Framework
    id: str


def cis(*ids: str) -> tuple[Control, ...]:
    return tuple(Control(Framework.CIS_AZURE_3_0, i) for i in ids)


def cis4(*ids: str) -> tuple[Control, ...]:
    """Controls of CIS v4.0.0, for what v3.0.0 has no control of (storage is its section 10)."""
    return tuple(Control(Framework.CIS_AZURE_4_0, i) for i in ids)


def mcsb(*ids: str) -> tuple[Control, ...]:
    return tuple(Control(Framework.MCSB_V1, i) for i in ids)


class Severity(enum.StrEnum):
    """Ordered from least to most severe (`rank`)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


@dataclass(frozen=True)
class Verdict:
    """What a check found: an outcome and the fact behind it (no rule wording)."""

    outcome: Outcome
    detail: str
    lacks: frozenset[Fact] = frozenset()
    """For UNKNOWN: the facts it was short of, when they can be named."""


def passed(detail: str) -> Verdict:
    return Verdict(Outcome.PASS, detail)


def failed(detail: str) -> Verdict:
    return Verdict(Outcome.FAIL, detail)


def unknown(detail: str, *lacks: Fact) -> Verdict:
    return Verdict(Outcome.UNKNOWN, detail, frozenset(lacks))


def not_applicable(detail: str) -> Verdict:
    return Verdict(Outcome.NOT_APPLICABLE, detail)


Check = Callable[[Account, Thresholds], Verdict]


class FixTarget(enum.StrEnum):
    """What is being judged, and so in whose terms a remediation is written."""

    ACCOUNT = "account"
    """A live account read through ARM, or a saved one (`audit --from-file`): the Azure
    setting, its value, and the `az` command or ARM property that sets it."""
    PULUMI = "pulumi"
    """A Pulumi program judged by the CrossGuard pack: the stack config key or the resource
    property of the program."""


@dataclass(frozen=True)
class Remediation:
    """How to fix a failing rule, once per kind of target (Prowler's Remediation.Code, PSRule's
    examples per syntax)."""

    account: str
    pulumi: str

    def text(self, target: FixTarget) -> str:
        return {FixTarget.ACCOUNT: self.account, FixTarget.PULUMI: self.pulumi}[target]


@dataclass(frozen=True)
class Rule:
    """One rule: id, title, severity, rationale, remediation and a pure check."""

    id: str
    title: str
    severity: Severity
    rationale: str
    remediation: Remediation
    facets: frozenset[Facet]
    check: Check
    advisory: bool = False
    """Advisory rules report but never block a deployment (CrossGuard enforcement)."""
    scope: RuleScope = RuleScope.BASELINE
    settles_without: frozenset[Facet] = frozenset()
    """Facets of `facets` the check can do without when the others settle it: the precondition
    does not require them, and the check answers UNKNOWN, lacking them, when it needs one."""
    blob_only: bool = False
    """Judges a blob service setting kept on the account itself (not applicable without one);
    rules reading a blob facet (`BLOB_FACETS`) or of protocol scope are blob-only anyway."""
    controls: tuple[Control, ...] = ()
    """The framework controls this rule checks (only ones verified against the framework)."""
    references: tuple[str, ...] = ()
    """The Microsoft pages the rule's facts come from."""

    @property
    def protocol(self) -> bool:
        return self.scope is RuleScope.PROTOCOL

    @property
    def needs_blob(self) -> bool:
        return self.blob_only or self.protocol or bool(self.facets & BLOB_FACETS)

    def applies_to(self, account: Account, thresholds: Thresholds) -> bool:
        """Protocol rules skip accounts known neither to hold nor to be configured for the
        protocol's container.

        A container whose name is not known yet (a preview), or a container list that could
        not be read, may hide that container, so the rule applies and `evaluate` answers
        UNKNOWN rather than skipping in silence.
        """
        if not self.protocol:
            return True
        return is_protocol_account(account, thresholds.container) is not False

    def evaluate(
        self, account: Account, thresholds: Thresholds, target: FixTarget = FixTarget.ACCOUNT
    ) -> Finding:
        """Judge one account; a facet that was not read makes the outcome UNKNOWN. A FAIL's
        message gives the fix in `target`'s terms."""
        verdict = self._precondition(account, thresholds) or self.check(account, thresholds)
        if (
            verdict.outcome is Outcome.UNKNOWN
            and verdict.lacks
            and verdict.lacks <= account.not_held
        ):
            verdict = Verdict(Outcome.NOT_IN_FILES, verdict.detail)
        return Finding(
            rule=self,
            account=account.name,
            resource_id=account.resource_id,
            outcome=verdict.outcome,
            message=self.message(verdict, target),
            detail=verdict.detail,
            target=target,
        )

    def _precondition(self, account: Account, thresholds: Thresholds) -> Verdict | None:
        """The verdict given before the check runs: not applicable, or UNKNOWN for a part
        not read; None when the check may judge."""
        kind = _kind(account)
        if self.needs_blob and kind in NO_BLOB_KINDS:
            return not_applicable(f"a {kind} account has no blob service")
        required = self.facets - self.settles_without
        missing = [facet for facet in Facet if facet in required and not _read(account, facet)]
        if missing:
            return unknown("; ".join(reason_unknown(account, facet) for facet in missing), *missing)
        if self.protocol and is_protocol_account(account, thresholds.container) is None:
            return unknown(_why_unsure(account, thresholds.container))
        return None

    def message(self, verdict: Verdict, target: FixTarget = FixTarget.ACCOUNT) -> str:
        """The finding's message, built from this rule's own metadata and the verdict's fact."""
        if verdict.outcome is Outcome.PASS:
            return f"{self.title}: {verdict.detail}."
        if verdict.outcome is Outcome.FAIL:
            return f"{self.title}: {verdict.detail}. Fix: {self.remediation.text(target)}"
        if verdict.outcome is Outcome.NOT_APPLICABLE:
            return f"{self.title}: not applicable: {verdict.detail}."
        if verdict.outcome is Outcome.NOT_IN_FILES:
            return f"{self.title}: not in the files: {verdict.detail}."
        return f"{self.title}: cannot be judged: {verdict.detail}."

    @property
    def enforcement(self) -> str:
        """ "mandatory" for critical, non-advisory rules, otherwise "advisory"."""
        mandatory = self.severity is Severity.CRITICAL and not self.advisory
        return "mandatory" if mandatory else "advisory"


def settings_of(account: Account) -> AccountSettings:
    """The account's settings, for a check of a rule that reads Facet.SETTINGS (known then)."""
    assert account.settings is not UNKNOWN
    return account.settings


def reason_unknown(account: Account, facet: Facet) -> str:
    """Why `facet` of the account is not known, in the source's words when it gave them."""
    return account.unknown_reasons.get(facet, f"{facet.value} not known")


def _read(account: Account, facet: Facet) -> bool:
    return is_known(account.facet(facet))


def _kind(account: Account) -> object:
    return UNKNOWN if account.settings is UNKNOWN else account.settings.kind


def configured_for(account: Account, container: str) -> bool:
    """A lifecycle rule of the account is scoped to `container` (its prefix names it)."""
    if account.lifecycle_rules is UNKNOWN:
        return False
    return any(
        prefix == container or prefix.startswith(container + "/")
        for rule in account.lifecycle_rules
        if rule.prefixes is not UNKNOWN
        for prefix in rule.prefixes
    )


def is_protocol_account(account: Account, container: str) -> bool | None:
    """Whether the account holds, or is configured for, `container`; None when that cannot be
    told (the container list not read, or a container's name not known yet)."""
    if configured_for(account, container):
        return True
    return holds_container(account, container)


def _why_unsure(account: Account, container: str) -> str:
    if account.containers is UNKNOWN:
        reason = account.unknown_reasons.get(Facet.CONTAINERS, "the container list is not known")
        return (
            f"{reason}, so whether this account holds the protocol's container "
            f"{container!r} cannot be told"
        )
    return (
        f"a container's name is not known yet (preview), so whether this account "
        f"holds the protocol's container {container!r} cannot be told"
    )


def holds_container(account: Account, container: str) -> bool | None:
    """Whether the account holds `container`; None when the containers or a name are not known."""
    if account.containers is UNKNOWN:
        return None
    names = [c.name for c in account.containers]
    if container in names:
        return True
    return None if UNKNOWN in names else False


@dataclass(frozen=True)
class Finding:
    """One rule judged on one account."""

    rule: Rule
    account: str
    resource_id: str | None
    outcome: Outcome
    message: str
    detail: str = ""
    """The verdict's fact alone, without the title and the fix the message wraps it in."""
    target: FixTarget = FixTarget.ACCOUNT

    @property
    def severity(self) -> Severity:
        return self.rule.severity

    @property
    def fix(self) -> str:
        """The rule's remediation in the terms of what was judged."""
        return self.rule.remediation.text(self.target)
