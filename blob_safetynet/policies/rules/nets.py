"""The nets Microsoft recommends around blob data beyond the account's own settings: a delete
lock, resource logs of every read, write and delete, and an Azure Backup instance
(https://learn.microsoft.com/azure/storage/blobs/data-protection-overview).

Each reads a resource outside the account (`Microsoft.Authorization/locks`,
`Microsoft.Insights/diagnosticSettings`, `Microsoft.DataProtection/backupVaults/backupInstances`),
so each has a facet of its own (`Facet.LOCKS`, `Facet.DIAGNOSTICS`, `Facet.BACKUP`).
"""

from __future__ import annotations

from typing import Final

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    Severity,
    Verdict,
    failed,
    passed,
    unknown,
)
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    Facet,
    Lock,
    LockScope,
    Thresholds,
    arm_fold,
)

PROTECTING_LEVELS: Final = ("CanNotDelete", "ReadOnly")
"""Lock levels that refuse a delete: CanNotDelete, and ReadOnly, which refuses every change
(https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources)."""
LOGGED_CATEGORIES: Final = ("StorageRead", "StorageWrite", "StorageDelete")
"""The blob service's resource log categories
(https://learn.microsoft.com/azure/azure-monitor/reference/supported-logs/microsoft-storage-storageaccounts-blobservices-logs)."""
ALL_LOGS: Final = "allLogs"
"""The category group that enables every log category of the resource
(https://learn.microsoft.com/azure/azure-monitor/essentials/diagnostic-settings#category-groups);
`audit` is not counted: which blob categories it holds is not documented."""
PROTECTED_STATE: Final = "ProtectionConfigured"
"""A backup instance's `currentProtectionState` while backups run
(https://learn.microsoft.com/rest/api/dataprotection/backup-instances/get)."""


def _protects(lock: Lock) -> bool:
    return lock.level is not UNKNOWN and arm_fold(lock.level) in {
        arm_fold(level) for level in PROTECTING_LEVELS
    }


def _lock_text(lock: Lock) -> str:
    name = "?" if lock.name is UNKNOWN else lock.name
    text = f"{lock.level} lock '{name}' at {lock.scope.value}"
    if lock.scope is LockScope.SUBSCRIPTION:
        text += " (it covers every resource group and account of the subscription)"
    return text


def _check_lock(account: Account, _: Thresholds) -> Verdict:
    locks = account.locks
    assert locks is not UNKNOWN
    protecting = sorted(
        (lock for lock in locks.found if _protects(lock)),
        key=lambda lock: list(LockScope).index(lock.scope),
    )
    if protecting:
        return passed(_lock_text(protecting[0]))
    gaps = [f"{scope.value}: {reason}" for scope, reason in locks.unread.items()]
    unsure = [lock for lock in locks.found if lock.level is UNKNOWN]
    if gaps or unsure:
        parts = (
            [f"no delete lock found at the scopes read; not read: {'; '.join(gaps)}"]
            if gaps
            else []
        )
        parts += [
            f"lock '{lock.name}' at {lock.scope.value} has a level not known yet" for lock in unsure
        ]
        return unknown("; ".join(parts), Facet.LOCKS)
    others = ", ".join(_lock_text(lock) for lock in locks.found)
    return failed(
        "no CanNotDelete or ReadOnly lock at the account, its resource group or its subscription"
        + (f" (only {others})" if others else "")
    )


DELETE_LOCK = Rule(
    id="SN-DELETE-LOCK",
    title="A delete lock protects the account",
    severity=Severity.HIGH,
    rationale=(
        "Deleting the storage account, or its resource group, deletes every blob with it, soft "
        "deleted blobs and versions included: no soft delete or versioning setting survives it. "
        "A CanNotDelete lock at the account, its resource group or its subscription refuses "
        "that delete until someone removes the lock."
    ),
    remediation=Remediation(
        account="add a CanNotDelete lock to the account (`az lock create --name keep-account --lock-type CanNotDelete --resource-group <group> --resource <account> --resource-type Microsoft.Storage/storageAccounts`), or to its resource group",
        pulumi=(
            "add an authorization ManagementLockByScope (level CanNotDelete, scope the account's "
            "id) or a ManagementLockAtResourceGroupLevel on the account's group"
        ),
    ),
    facets=frozenset({Facet.LOCKS}),
    check=_check_lock,
    advisory=True,
    references=(
        "https://learn.microsoft.com/azure/storage/common/lock-account-resource",
        "https://learn.microsoft.com/azure/storage/blobs/data-protection-overview",
        "https://learn.microsoft.com/rest/api/resources/management-locks",
    ),
)


def _check_logging(account: Account, _: Thresholds) -> Verdict:
    settings = account.blob_diagnostics
    assert settings is not UNKNOWN
    enabled: set[str] = set()
    sending: list[str] = []
    unsure = False
    for setting in settings:
        if setting.has_destination is UNKNOWN or setting.categories is UNKNOWN:
            unsure = True
            continue
        if setting.has_destination:
            enabled |= setting.categories
            sending.append("?" if setting.name is UNKNOWN else setting.name)
    every = arm_fold(ALL_LOGS) in enabled
    missing = [c for c in LOGGED_CATEGORIES if not every and arm_fold(c) not in enabled]
    if not missing:
        names = ", ".join(f"'{name}'" for name in sending)
        which = (
            f"diagnostic settings {names} log"
            if len(sending) > 1
            else f"diagnostic setting {names} logs"
        )
        return passed(f"{which} every blob read, write and delete")
    if unsure:
        return unknown(
            "a diagnostic setting's log categories or destination are not known yet",
            Facet.DIAGNOSTICS,
        )
    if not settings:
        return failed("the blob service has no diagnostic setting: no blob request is logged")
    return failed(
        f"no diagnostic setting of the blob service sends {', '.join(missing)} to a destination"
    )


BLOB_LOGGING = Rule(
    id="SN-BLOB-LOGGING",
    title="Blob reads, writes and deletes are logged",
    severity=Severity.MEDIUM,
    rationale=(
        "Without the blob service's resource logs (StorageRead, StorageWrite, StorageDelete) "
        "nobody can tell afterwards who read, changed or deleted which blob, or from where: an "
        "investigation of a leak or a mass delete has nothing to start from."
    ),
    remediation=Remediation(
        account='add a diagnostic setting on the account\'s blob service that sends StorageRead, StorageWrite and StorageDelete to a Log Analytics workspace, storage account or event hub (`az monitor diagnostic-settings create --name blob-logs --resource <account id>/blobServices/default --workspace <workspace id> --logs \'[{"category":"StorageRead","enabled":true},{"category":"StorageWrite","enabled":true},{"category":"StorageDelete","enabled":true}]\'`)',
        pulumi=(
            "add an insights DiagnosticSetting whose resourceUri is the account's "
            "`/blobServices/default` id, with logs StorageRead, StorageWrite and StorageDelete "
            "enabled (or categoryGroup allLogs) and a workspaceId, storageAccountId or "
            "eventHubAuthorizationRuleId"
        ),
    ),
    facets=frozenset({Facet.DIAGNOSTICS}),
    check=_check_logging,
    advisory=True,
    blob_only=True,
    references=(
        "https://learn.microsoft.com/azure/storage/blobs/monitor-blob-storage",
        "https://learn.microsoft.com/azure/azure-monitor/reference/supported-logs/microsoft-storage-storageaccounts-blobservices-logs",
        "https://learn.microsoft.com/rest/api/monitor/diagnostic-settings/list",
    ),
)


def _check_backup(account: Account, _: Thresholds) -> Verdict:
    instances = account.backup_instances
    assert instances is not UNKNOWN
    running = [
        i
        for i in instances
        if i.state is None or i.state is UNKNOWN or arm_fold(i.state) == arm_fold(PROTECTED_STATE)
    ]
    if running:
        name = "?" if running[0].name is UNKNOWN else running[0].name
        return passed(f"Azure Backup instance '{name}' protects the account's blobs")
    if instances:
        states = ", ".join(f"'{i.name}' {i.state}" for i in instances)
        return failed(f"the account's backup instances do not run ({states})")
    return failed("no Azure Backup instance protects the account's blobs")


BACKUP_PROTECTED = Rule(
    id="SN-BACKUP-PROTECTED",
    title="Azure Backup protects the account's blobs",
    severity=Severity.LOW,
    rationale=(
        "Operational backup keeps point-in-time restore of the blobs, and vaulted backup keeps "
        "copies in a Backup vault outside the account, which survive the account's deletion and "
        "a compromised account key."
    ),
    remediation=Remediation(
        account="configure Azure Backup for the account's blobs: a Backup vault, a blob backup policy and a backup instance of the account (`az dataprotection backup-instance create`; https://learn.microsoft.com/azure/backup/blob-backup-configure-manage)",
        pulumi=(
            "add a dataprotection BackupInstance whose dataSourceInfo.resourceID is the "
            "account's id (datasourceType Microsoft.Storage/storageAccounts/blobServices)"
        ),
    ),
    facets=frozenset({Facet.BACKUP}),
    check=_check_backup,
    advisory=True,
    blob_only=True,
    references=(
        "https://learn.microsoft.com/azure/backup/blob-backup-overview",
        "https://learn.microsoft.com/azure/storage/common/policy-reference",
        "https://learn.microsoft.com/rest/api/dataprotection/backup-instances-extension-routing/list",
    ),
)
