"""What the reads of one account share, whichever audit makes them: what a fleet read for it
beforehand (`Prefetched`), values fetched once per run (`FetchedOnce`), what a read of an
account came to (`AccountRead`, a deleted account included), and the pieces of a resource id.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, TypeVar

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.rules import RULES, Finding, Outcome, Rule, evaluate
from blob_safetynet.policies.rules.base import not_applicable
from blob_safetynet.policies.rules.model import Thresholds, arm_fold
from blob_safetynet.policies.sources.results import AccountResult, ReadError

T = TypeVar("T")
DELETED = (
    "the account was deleted after it was listed (Resource Manager answers 404 for it), so "
    "there is nothing left to judge"
)


@dataclass(frozen=True)
class Prefetched:
    """What a fleet audit read for one account from Resource Graph and per-subscription lists
    (blob_safetynet/policies/sources/fleet.py), so that `ArmReader.read` does not read it again,
    and the reads it may leave out because their answer cannot change a verdict."""

    role_assignments: Sequence[Mapping[str, Any]] | None = None
    """Every assignment that applies to the account; None: read per account."""
    role_definitions: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Role definition bodies by lower-case GUID; one not here is read (cached per run)."""
    connections_in_body: bool = False
    """Take `properties.privateEndpointConnections` from the account's body when it is there."""
    local_users_from_settings: bool = False
    """Leave the local users unread when the account's body settles SN-NO-LOCAL-USERS alone:
    `isLocalUserEnabled` false and `isSftpEnabled` not true (the rule passes whatever the list
    holds); any other value, absent included, has them read."""
    defender_from_plan: bool = False
    """Take the Defender for Storage state from the subscription's plan when it reports every
    account covered or none (`common.plan_coverage`), read once per subscription; the
    account's own setting is read only where the plan reports a mix or nothing."""
    locks_from_subscription: bool = False
    """Read the subscription's lock list first, once per subscription and run: it holds the
    locks of every resource group and account in it (`extensions.LOCKS_API_VERSION`); the
    account's and its group's lists are read only when it cannot be."""
    backups_from_subscription: bool = False
    """Take the backup instances from the subscription's Backup vaults, listed once per
    subscription (`ExtensionReader.subscription_backups`); an account they do not name, or all
    when they cannot be read, has its own list read."""


def local_users_settled(body: Mapping[str, Any]) -> bool:
    """The account's settings decide SN-NO-LOCAL-USERS without its list of local users."""
    props = body.get("properties")
    if not isinstance(props, Mapping):
        return False
    return props.get("isLocalUserEnabled") is False and props.get("isSftpEnabled") is not True


class AccountRead(NamedTuple):
    reads: arm.ArmReads
    errors: list[ReadError]
    deleted: bool = False


@dataclass
class Presence:
    """What the reads of one account tell of its existence: a 404 where every live account has
    something (its blob service, its lists) means it is gone; a 404 where a live account may
    have nothing (no management policy, no Defender setting) means so only if nothing read
    after it proves the account still there."""

    gone: bool = False
    proven: bool = False
    maybe_gone: bool = False


def judge(read: AccountRead, limits: Thresholds, *, every_rule: bool = False) -> AccountResult:
    """One account's result from its reads: judged, or deleted."""
    if read.deleted:
        return deleted_result(read.reads.account)
    account = arm.account(read.reads)
    findings = evaluate(account, limits, every_rule=every_rule)
    return AccountResult(account=account, findings=findings, errors=read.errors)


def deleted_result(body: Mapping[str, Any], rules: tuple[Rule, ...] = RULES) -> AccountResult:
    """An account ARM no longer has: every rule NOT_APPLICABLE with the reason, never a PASS."""
    account = arm.account(arm.ArmReads(account=body))
    verdict = not_applicable(DELETED)
    findings = [
        Finding(
            rule=rule,
            account=account.name,
            resource_id=account.resource_id,
            outcome=Outcome.NOT_APPLICABLE,
            message=rule.message(verdict),
            detail=verdict.detail,
        )
        for rule in rules
    ]
    return AccountResult(account=account, findings=findings, deleted=True)


def as_dict(model: Any) -> dict[str, Any]:
    """An SDK model as its REST JSON shape (camelCase keys, `properties` nested)."""
    if hasattr(model, "as_dict") and not hasattr(model, "serialize"):
        body: dict[str, Any] = model.as_dict()
        return body
    serialized: dict[str, Any] = model.serialize(keep_readonly=True)
    return serialized


class FetchedOnce(Generic[T]):
    """Values by key, each fetched by the first worker that asks while the others wait for it:
    a check, then a fetch outside any lock, would let two workers read the same thing twice."""

    def __init__(self) -> None:
        self._values: dict[str, T] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: str, fetch: Callable[[], T]) -> T:
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._values:
                self._values[key] = fetch()
            return self._values[key]


def definition_id(assignment: Mapping[str, Any]) -> str:
    props = assignment.get("properties")
    value = props.get("roleDefinitionId") if isinstance(props, Mapping) else None
    return value if isinstance(value, str) else ""


def subscription_of(resource_id: str) -> str:
    """The subscription id an ARM resource id names, '' when it names none."""
    parts = resource_id.strip("/").split("/")
    return parts[1] if len(parts) > 1 and arm_fold(parts[0]) == "subscriptions" else ""


def resource_group(resource_id: str) -> str:
    parts = resource_id.strip("/").split("/")
    lowered = [arm_fold(part) for part in parts]
    if "resourcegroups" in lowered:
        index = lowered.index("resourcegroups")
        if index + 1 < len(parts):
            return parts[index + 1]
    return ""


def is_account_id(value: object) -> bool:
    """A storage account's resource id: /subscriptions/S/resourceGroups/G/providers/
    Microsoft.Storage/storageAccounts/N, any case."""
    if not isinstance(value, str):
        return False
    parts = value.strip("/").split("/")
    return (
        len(parts) == 8
        and arm_fold(parts[0]) == "subscriptions"
        and arm_fold(parts[2]) == "resourcegroups"
        and [arm_fold(p) for p in parts[4:7]]
        == ["providers", "microsoft.storage", "storageaccounts"]
        and all(parts)
    )
