"""Management locks, blob diagnostic settings and backup instances, from their REST bodies (ARM
reads, saved files) or their azure-native inputs (which carry the same property names without
the `properties` nesting). Imports no SDK.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    BackupInstance,
    DiagnosticSetting,
    Lock,
    LockScope,
    Maybe,
    arm_fold,
)

LOCKS_SEGMENT: Final = "/providers/microsoft.authorization/locks/"
"""What a lock's id holds between its scope and its name:
`{scope}/providers/Microsoft.Authorization/locks/{name}`
(https://learn.microsoft.com/rest/api/resources/management-locks/get-by-scope)."""
DESTINATIONS: Final = (
    "workspaceId",
    "storageAccountId",
    "eventHubAuthorizationRuleId",
    "eventHubName",
    "marketplacePartnerId",
)
"""Where a diagnostic setting sends its logs
(https://learn.microsoft.com/rest/api/monitor/diagnostic-settings/create-or-update)."""
BLOB_DATASOURCE: Final = "microsoft.storage/storageaccounts/blobservices"
"""A blob backup instance's `dataSourceInfo.datasourceType`
(https://learn.microsoft.com/azure/backup/blob-backup-configure-manage)."""


def scope_ids(account_id: str) -> dict[LockScope, str]:
    """The account's own id and the ids of its resource group and subscription, folded."""
    parts = account_id.strip("/").split("/")
    return {
        LockScope.ACCOUNT: arm_fold("/" + "/".join(parts)),
        LockScope.RESOURCE_GROUP: arm_fold("/" + "/".join(parts[:4])),
        LockScope.SUBSCRIPTION: arm_fold("/" + "/".join(parts[:2])),
    }


def lock_scope(scope: str, account_id: str) -> LockScope | None:
    """Which of the account's scopes `scope` (an ARM id) is; None for any other."""
    folded = arm_fold(scope.rstrip("/"))
    for where, known in scope_ids(account_id).items():
        if folded == known:
            return where
    return None


def scope_of_lock_id(lock_id: str) -> str | None:
    """The scope a lock's id names, None when it is not a lock id."""
    index = arm_fold(lock_id).rfind(LOCKS_SEGMENT)
    return lock_id[:index] if index > 0 else None


def locks_at(bodies: Iterable[Mapping[str, Any]], account_id: str) -> list[Lock]:
    """The locks of a list (any scope's) that sit at the account, its group or subscription;
    the others (another account's, another group's) are left out."""
    found = []
    for body in bodies:
        lock_id = body.get("id")
        scope = scope_of_lock_id(lock_id) if isinstance(lock_id, str) else None
        where = lock_scope(scope, account_id) if scope is not None else None
        if where is not None:
            found.append(lock(body, where))
    return found


def lock(body: Mapping[str, Any], where: LockScope) -> Lock:
    """A lock from its REST body (`properties.level`) or its azure-native inputs (`level`)."""
    props = body.get("properties")
    level = props.get("level") if isinstance(props, Mapping) else None
    if level is None:
        level = body.get("level")
    name = body.get("lockName", body.get("name"))
    return Lock(
        name=name.rsplit("/", 1)[-1] if isinstance(name, str) else UNKNOWN,
        level=level if isinstance(level, str) else UNKNOWN,
        scope=where,
    )


def diagnostic_setting(props: Mapping[str, Any], name: object) -> DiagnosticSetting:
    """A diagnostic setting from its `properties` (REST) or its inputs (azure-native)."""
    logs = props.get("logs", [])
    categories: Maybe[frozenset[str]] = UNKNOWN
    if isinstance(logs, list):
        enabled: set[str] = set()
        for entry in logs:
            if not isinstance(entry, Mapping) or entry.get("enabled") is UNKNOWN:
                enabled = set()
                categories = UNKNOWN
                break
            for key in ("category", "categoryGroup"):
                value = entry.get(key)
                if isinstance(value, str) and entry.get("enabled") is True:
                    enabled.add(arm_fold(value))
            categories = frozenset(enabled)
        else:
            categories = frozenset(enabled)
    destinations = [props.get(key) for key in DESTINATIONS]
    has_destination: Maybe[bool] = any(isinstance(d, str) and d for d in destinations)
    if not has_destination and any(d is UNKNOWN for d in destinations):
        has_destination = UNKNOWN
    return DiagnosticSetting(
        name=name if isinstance(name, str) else UNKNOWN,
        categories=categories,
        has_destination=has_destination,
    )


def backs_up(props: Mapping[str, Any], account_id: str | None, account_name: str) -> bool | None:
    """Whether a backup instance's `properties` name the account's blobs as their data
    source; None while the data source is not known (a preview)."""
    info = props.get("dataSourceInfo")
    if info is UNKNOWN:
        return None
    if not isinstance(info, Mapping):
        return False
    source = info.get("resourceID")
    if source is UNKNOWN:
        return None
    if not isinstance(source, str):
        return False
    kind = info.get("datasourceType")
    if isinstance(kind, str) and arm_fold(kind) != BLOB_DATASOURCE:
        return False
    if account_id is not None:
        return arm_fold(source.rstrip("/")) == arm_fold(account_id.rstrip("/"))
    marker = f"/providers/microsoft.storage/storageaccounts/{arm_fold(account_name)}"
    return arm_fold(source.rstrip("/")).endswith(marker)


def backup_instance(props: Mapping[str, Any], name: object) -> BackupInstance:
    state = props.get("currentProtectionState")
    return BackupInstance(
        name=name if isinstance(name, str) else UNKNOWN,
        state=state if isinstance(state, str) or state is None else UNKNOWN,
    )
