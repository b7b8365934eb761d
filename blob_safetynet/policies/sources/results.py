"""What an audit produces, whatever the source (live ARM, the fleet, saved files): the
result of each account, the read errors by kind, the scope that was asked for, the report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule, Severity
from blob_safetynet.policies.rules.model import Account, Thresholds
from blob_safetynet.settings.untrusted import InputFile


class ErrorKind(enum.StrEnum):
    AUTH = "authentication"
    PERMISSION = "permission"
    NOT_FOUND = "not-found"
    MALFORMED = "malformed-response"
    HTTP = "http"
    NETWORK = "network"
    """No answer: the connection failed, dropped or stalled past the read timeout."""


@dataclass(frozen=True)
class ReadError:
    """A read that failed: which account, which operation, what kind, ARM's own words."""

    account: str | None
    operation: str
    kind: ErrorKind
    message: str


@dataclass(frozen=True)
class Scope:
    """What to audit: a subscription, one resource group of it, or one account; or files."""

    subscription_id: str
    resource_group: str | None = None
    account: str | None = None
    files: tuple[str, ...] = ()
    """Saved ARM JSON judged offline (`blob_safetynet/policies/sources/files.py`) instead of a live scope."""
    subscriptions: tuple[str, ...] = ()
    management_groups: tuple[str, ...] = ()
    all_subscriptions: bool = False
    """A fleet (`blob_safetynet/policies/sources/fleet.py`): these subscriptions and management groups,
    or every subscription the credential can read, listed through Resource Graph."""

    @property
    def fleet(self) -> bool:
        return bool(self.subscriptions or self.management_groups or self.all_subscriptions)

    @property
    def label(self) -> str:
        """What was judged, in every report format: the ARM scope, or the files."""
        if self.files:
            return f"judged from files, not read from Azure: {', '.join(self.files)}"
        if self.all_subscriptions:
            return "every subscription the credential can read"
        if self.fleet:
            groups = [
                f"/providers/Microsoft.Management/managementGroups/{group}"
                for group in self.management_groups
            ]
            return ", ".join([*groups, *(f"/subscriptions/{s}" for s in self.subscriptions)])
        parts = [f"/subscriptions/{self.subscription_id}"]
        if self.resource_group:
            parts.append(f"/resourceGroups/{self.resource_group}")
        if self.account:
            parts.append(f"/providers/Microsoft.Storage/storageAccounts/{self.account}")
        return "".join(parts)


@dataclass(frozen=True)
class SourceLine:
    """Where a saved file declares an account: the file as it was named on the command line
    and the 1-based line its resource starts on (None when the file does not say)."""

    path: str
    line: int | None = None


@dataclass
class AccountResult:
    account: Account
    findings: list[Finding]
    errors: list[ReadError] = field(default_factory=list)
    deleted: bool = False
    """ARM answered 404 for the account after it was listed: its rules are NOT_APPLICABLE."""
    source: SourceLine | None = None
    """For a saved file (`--from-file`): where the account is declared; None for a live read."""


@dataclass
class AuditReport:
    scope: Scope
    thresholds: Thresholds
    results: list[AccountResult]
    errors: list[ReadError] = field(default_factory=list)
    """Errors not tied to one account (listing the scope)."""
    rules: tuple[Rule, ...] = RULES
    seconds: float = 0.0
    requests: int = 0
    """HTTP requests sent to Resource Manager and Resource Graph, retries included."""
    inputs: list[InputFile] = field(default_factory=list)
    """The saved files judged (`--from-file`), each as read."""

    @property
    def findings(self) -> list[Finding]:
        return [finding for result in self.results for finding in result.findings]

    @property
    def all_errors(self) -> list[ReadError]:
        return [*self.errors, *(e for result in self.results for e in result.errors)]

    def failures(self, at_least: Severity) -> list[Finding]:
        """FAIL findings whose severity is `at_least` or above."""
        return [
            f
            for f in self.findings
            if f.outcome is Outcome.FAIL and f.severity.rank >= at_least.rank
        ]
