"""What a rule is: metadata plus a pure check over the normalized model."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from policies.model import UNKNOWN, Account, Facet, Thresholds, is_known


class Outcome(enum.StrEnum):
    PASS = "PASS"  # noqa: S105 (an outcome, not a password)
    FAIL = "FAIL"
    UNKNOWN = "UNKNOWN"


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


def passed(detail: str) -> Verdict:
    return Verdict(Outcome.PASS, detail)


def failed(detail: str) -> Verdict:
    return Verdict(Outcome.FAIL, detail)


def unknown(detail: str) -> Verdict:
    return Verdict(Outcome.UNKNOWN, detail)


Check = Callable[[Account, Thresholds], Verdict]


@dataclass(frozen=True)
class Rule:
    """One rule: id, title, severity, rationale, remediation and a pure check."""

    id: str
    title: str
    severity: Severity
    rationale: str
    remediation: str
    facets: frozenset[Facet]
    check: Check
    advisory: bool = False
    """Advisory rules report but never block a deployment (CrossGuard enforcement)."""
    protocol: bool = False
    """Judged only on accounts that hold the protocol's container (see `applies_to`)."""

    def applies_to(self, account: Account, thresholds: Thresholds) -> bool:
        """Protocol rules skip accounts known not to hold the configured container.

        A container whose name is not known yet (a preview) may be that container, so the
        rule applies and `evaluate` answers UNKNOWN rather than skipping in silence.
        """
        if not self.protocol:
            return True
        return holds_container(account, thresholds.container) is not False

    def evaluate(self, account: Account, thresholds: Thresholds) -> Finding:
        """Judge one account; a facet that was not read makes the outcome UNKNOWN."""
        missing = [facet for facet in Facet if facet in self.facets and not _read(account, facet)]
        if missing:
            reasons = [
                account.unknown_reasons.get(facet, f"{facet.value} not known") for facet in missing
            ]
            verdict = unknown("; ".join(reasons))
        elif (
            self.protocol
            and account.containers is not UNKNOWN
            and holds_container(account, thresholds.container) is None
        ):
            verdict = unknown(
                f"a container's name is not known yet (preview), so whether this account "
                f"holds the protocol's container {thresholds.container!r} cannot be told"
            )
        else:
            verdict = self.check(account, thresholds)
        return Finding(
            rule=self,
            account=account.name,
            resource_id=account.resource_id,
            outcome=verdict.outcome,
            message=self.message(verdict),
        )

    def message(self, verdict: Verdict) -> str:
        """The finding's message, built from this rule's own metadata and the verdict's fact."""
        if verdict.outcome is Outcome.PASS:
            return f"{self.title}: {verdict.detail}."
        if verdict.outcome is Outcome.FAIL:
            return f"{self.title}: {verdict.detail}. Fix: {self.remediation}"
        return f"{self.title}: cannot be judged: {verdict.detail}."

    @property
    def enforcement(self) -> str:
        """ "mandatory" for critical, non-advisory rules, otherwise "advisory"."""
        mandatory = self.severity is Severity.CRITICAL and not self.advisory
        return "mandatory" if mandatory else "advisory"


def _read(account: Account, facet: Facet) -> bool:
    return is_known(account.facet(facet))


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

    @property
    def severity(self) -> Severity:
        return self.rule.severity
