"""The nets beside a StorageAccount in a Pulumi program: its management locks, the blob
service's diagnostic settings and the Azure Backup instances of its blobs (azure-native inputs).

A net the stack does not declare may still exist: a lock on the group or subscription set by
hand or by another stack, a diagnostic setting deployed by an Azure Policy assignment, a backup
instance configured from the vault. So, as with a Defender plan outside the stack
(`pulumi_props._with_attachments`), a net the stack lacks is UNKNOWN with that reason, never a
FAIL; a net the stack declares for the account is judged (a setting short of a category fails).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from blob_safetynet.policies.adapters import nets
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    BackupInstance,
    DiagnosticSetting,
    Facet,
    Lock,
    Locks,
    LockScope,
    arm_fold,
)
from blob_safetynet.policies.rules.roles import normalize_scope

if TYPE_CHECKING:
    from blob_safetynet.policies.adapters.pulumi_props import StackResource

LOCK_BY_SCOPE: Final = "azure-native:authorization:ManagementLockByScope"
LOCK_AT_RESOURCE: Final = "azure-native:authorization:ManagementLockAtResourceLevel"
LOCK_AT_GROUP: Final = "azure-native:authorization:ManagementLockAtResourceGroupLevel"
LOCK_AT_SUBSCRIPTION: Final = "azure-native:authorization:ManagementLockAtSubscriptionLevel"
"""The four lock resources of azure-native (REST 2020-05-01,
https://www.pulumi.com/registry/packages/azure-native/api-docs/authorization/)."""
DIAGNOSTIC_SETTINGS: Final = (
    "azure-native:monitor:DiagnosticSetting",
    "azure-native:insights:DiagnosticSetting",
)
"""azure-native 3's module for diagnostic settings (`monitor`), and 2's (`insights`)."""
BACKUP_INSTANCE: Final = "azure-native:dataprotection:BackupInstance"
OUTSIDE: Final = {
    Facet.LOCKS: "no lock in the stack protects the account; one outside it (at its resource "
    "group or subscription) may: a live audit judges it",
    Facet.DIAGNOSTICS: "no diagnostic setting in the stack targets the account's blob service; "
    "one outside it (an Azure Policy assignment's) may: a live audit judges it",
    Facet.BACKUP: "no backup instance in the stack protects the account's blobs; one outside "
    "it (configured from a Backup vault) may: a live audit judges it",
}

Resolve = Callable[[Mapping[str, Any]], Mapping[str, Any]]


def attachments(
    account: StackResource,
    name: str,
    resources: Sequence[StackResource],
    resolve: Resolve,
) -> dict[str, Any]:
    """The Account fields (`locks`, `blob_diagnostics`, `backup_instances`, `unknown_reasons`)
    the stack's nets give the account."""
    props = resolve(account.props)
    group = props.get("resourceGroupName")
    ids = {normalize_scope(account.id)} if account.id is not None else set()
    found: list[Lock] = []
    settings: list[DiagnosticSetting] = []
    backups: list[BackupInstance] = []
    unsure: set[Facet] = set()
    for resource in resources:
        values = resolve(resource.props)
        if resource.type.startswith("azure-native:authorization:ManagementLock"):
            where = _lock_scope(resource.type, values, name, ids, group)
            if where is None:
                unsure.add(Facet.LOCKS)
            elif isinstance(where, LockScope):
                found.append(nets.lock(values, where))
        elif resource.type in DIAGNOSTIC_SETTINGS:
            target = _names(values.get("resourceUri"), name, ids, "/blobservices/default")
            if target is None:
                unsure.add(Facet.DIAGNOSTICS)
            elif target:
                settings.append(nets.diagnostic_setting(values, values.get("name", resource.name)))
        elif resource.type == BACKUP_INSTANCE:
            inner = values.get("properties")
            inner = inner if isinstance(inner, Mapping) else {}
            protects = nets.backs_up(inner, account.id, name)
            if protects is None:
                unsure.add(Facet.BACKUP)
            elif protects:
                backups.append(
                    nets.backup_instance(inner, values.get("backupInstanceName", resource.name))
                )
    reasons: dict[Facet, str] = {}
    fields: dict[str, Any] = {
        "locks": Locks(tuple(found)) if found else UNKNOWN,
        "blob_diagnostics": tuple(settings) if settings else UNKNOWN,
        "backup_instances": tuple(backups) if backups else UNKNOWN,
    }
    for facet, key in (
        (Facet.LOCKS, "locks"),
        (Facet.DIAGNOSTICS, "blob_diagnostics"),
        (Facet.BACKUP, "backup_instances"),
    ):
        if fields[key] is UNKNOWN:
            reasons[facet] = (
                f"{facet.value}: a resource's target is not known yet (preview)"
                if facet in unsure
                else OUTSIDE[facet]
            )
    fields["unknown_reasons"] = reasons
    return fields


def _lock_scope(
    kind: str, values: Mapping[str, Any], name: str, ids: set[str], group: object
) -> LockScope | bool | None:
    """Where a lock resource of the stack sits for the account; False: not over it; None:
    not known yet."""
    if kind == LOCK_AT_SUBSCRIPTION:
        return LockScope.SUBSCRIPTION
    if kind == LOCK_AT_GROUP:
        return _same(values.get("resourceGroupName"), group, LockScope.RESOURCE_GROUP)
    if kind == LOCK_AT_RESOURCE:
        namespace, kind_name = values.get("resourceProviderNamespace"), values.get("resourceType")
        if UNKNOWN in (namespace, kind_name, values.get("resourceName")):
            return None
        is_account = (
            isinstance(namespace, str)
            and isinstance(kind_name, str)
            and arm_fold(f"{namespace}/{kind_name}") == "microsoft.storage/storageaccounts"
        )
        if not is_account:
            return False
        return _same(values.get("resourceName"), name, LockScope.ACCOUNT)
    scope = values.get("scope")
    if scope is UNKNOWN:
        return None
    if not isinstance(scope, str):
        return False
    if _names(scope, name, ids, "") is True:
        return LockScope.ACCOUNT
    parts = normalize_scope(scope).strip("/").split("/")
    if len(parts) == 2 and parts[0] == "subscriptions":
        return LockScope.SUBSCRIPTION
    if len(parts) == 4 and parts[2] == "resourcegroups":
        return _same(parts[3], group, LockScope.RESOURCE_GROUP)
    return False


def _same(value: object, expected: object, where: LockScope) -> LockScope | bool | None:
    if value is UNKNOWN or expected is UNKNOWN:
        return None
    if isinstance(value, str) and isinstance(expected, str):
        return where if arm_fold(value) == arm_fold(expected) else False
    return False


def _names(value: object, name: str, ids: set[str], suffix: str) -> bool | None:
    """Whether a resource id input is the account's (with `suffix`, folded); None while it is
    not known."""
    if value is UNKNOWN:
        return None
    if not isinstance(value, str):
        return False
    target = normalize_scope(value).rstrip("/")
    if ids:
        return any(target == known + suffix for known in ids)
    return target.endswith(f"/providers/microsoft.storage/storageaccounts/{arm_fold(name)}{suffix}")
