"""The backstop: a lifecycle rule that deletes blobs still tagged `state=pending`."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    RuleScope,
    Severity,
    Verdict,
    failed,
    passed,
    unknown,
)
from blob_safetynet.policies.rules.model import UNKNOWN, Account, Facet, LifecycleRule, Thresholds
from blob_safetynet.settings.vocabulary import PENDING, STATE_TAG

BLOCK_BLOB = "blockBlob"


def covers_container(prefixes: tuple[str, ...], container: str) -> bool:
    """True when a rule with these prefix filters applies to every blob of `container`.

    A prefix is `container/blob-name-prefix`; an empty list applies to every container.
    """
    if not prefixes:
        return True
    return any(f"{container}/".startswith(prefix) for prefix in prefixes)


def _problems(rule: LifecycleRule, thresholds: Thresholds) -> list[str] | None:
    """Why this rule is not the pending backstop; None when some part is not known yet."""
    values = (rule.enabled, rule.blob_types, rule.prefixes, rule.tag_filters)
    if any(value is UNKNOWN for value in (*values, rule.delete_after_days)):
        return None
    assert rule.blob_types is not UNKNOWN
    assert rule.prefixes is not UNKNOWN
    assert rule.tag_filters is not UNKNOWN
    assert rule.delete_after_days is not UNKNOWN
    problems = []
    if not rule.enabled:
        problems.append("disabled")
    if BLOCK_BLOB not in rule.blob_types:
        problems.append("not for block blobs")
    if not covers_container(rule.prefixes, thresholds.container):
        narrower = [p for p in rule.prefixes if p.startswith(f"{thresholds.container}/")]
        if narrower:
            problems.append(
                f"covers only {', '.join(narrower)} of container {thresholds.container!r} "
                "(a narrower prefix spares pending blobs outside it)"
            )
        else:
            problems.append(f"does not cover container {thresholds.container!r}")
    matches = [(f.name, f.op, f.value) for f in rule.tag_filters]
    if any(UNKNOWN in match for match in matches):
        return None
    pending = (STATE_TAG, "==", PENDING)
    if pending not in matches:
        problems.append(f"no blob index filter {STATE_TAG} == {PENDING}")
    else:
        # A rule's filters are ANDed ("If more than one filter is defined, a logical AND is
        # applied to all filters": https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-structure#filters),
        # so any further tag condition spares every pending blob that lacks it.
        extra = [
            f"{name} {op} {value}" for name, op, value in matches if (name, op, value) != pending
        ]
        if extra:
            problems.append(
                "also requires " + " and ".join(extra) + " (filters are ANDed: pending blobs "
                "without it are never deleted)"
            )
    days = rule.delete_after_days
    if days is None:
        problems.append("no base blob delete action")
    elif days > thresholds.max_pending_days:
        problems.append(f"deletes after {days} days, more than {thresholds.max_pending_days}")
    elif days < 1:
        problems.append(f"deletes after {days} days, which would delete uploads in flight")
    return problems


def _check_pending_lifecycle(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.lifecycle_rules is not UNKNOWN
    if not account.lifecycle_rules:
        return failed("the account has no lifecycle management policy")
    seen: list[str] = []
    undecided = False
    for rule in account.lifecycle_rules:
        problems = _problems(rule, thresholds)
        if problems is None:
            undecided = True
        elif not problems:
            return passed(f"lifecycle rule {rule.name} deletes pending blobs")
        else:
            seen.append(f"{rule.name}: {', '.join(problems)}")
    if undecided:
        return unknown("a lifecycle rule's settings are not known yet")
    return failed("no lifecycle rule deletes pending blobs (" + "; ".join(seen) + ")")


PENDING_LIFECYCLE = Rule(
    id="SN-PENDING-LIFECYCLE",
    title="A lifecycle rule deletes blobs still tagged pending",
    severity=Severity.CRITICAL,
    rationale=(
        "If the sweeper never runs, uploads whose row never became Ready stay forever; an "
        f"enabled block-blob rule filtered on blob index tag {STATE_TAG} == {PENDING} over the "
        "container is the backstop. No other scanner checks a rule keyed on blob index tags."
    ),
    remediation=Remediation(
        account="add a lifecycle management rule that deletes pending uploads: `rules[].definition` with `filters.blobTypes: [blockBlob]`, `filters.prefixMatch: [<container>]`, `filters.blobIndexMatch: [{name: state, op: ==, value: pending}]` and `actions.baseBlob.delete.daysAfterCreationGreaterThan` at most the audit's --max-pending-days (`az storage account management-policy create --account-name <account> -g <group> --policy @policy.json`)",
        pulumi=(
            "set Pulumi config `pendingExpiryDays` (blob_safetynet/infra/storage.py ManagementPolicy rule: "
            "blobTypes [blockBlob], prefixMatch [container], blobIndexMatch state == pending, "
            "baseBlob.delete.daysAfterCreationGreaterThan <= maxPendingDays)"
        ),
    ),
    facets=frozenset({Facet.LIFECYCLE}),
    check=_check_pending_lifecycle,
    scope=RuleScope.PROTOCOL,
    references=(
        "https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-structure",
    ),
)
