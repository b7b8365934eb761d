"""The live reads of resources that sit beside an account rather than in it: management locks
at the account, its resource group and its subscription; the blob service's diagnostic
settings; the Azure Backup instances that name the account as their data source.

Each is a plain ARM list sent through the storage client's pipeline (its retry, throttle and
transport: azure-mgmt-resource, -monitor and -dataprotection are not dependencies), and a
failure is a read error of its facet like any other read (`live.ArmReader.read`'s `attempt`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

from azure.core.exceptions import DeserializationError
from azure.core.rest import HttpRequest

from blob_safetynet.policies.adapters import nets
from blob_safetynet.policies.rules.model import Facet, LockScope, arm_fold
from blob_safetynet.policies.rules.nets import PROTECTING_LEVELS
from blob_safetynet.policies.sources.connection import READ_ERRORS
from blob_safetynet.policies.sources.reads import FetchedOnce, Prefetched

if TYPE_CHECKING:
    from azure.mgmt.storage import StorageManagementClient

    from blob_safetynet.policies.adapters.arm import ArmReads

T = TypeVar("T")
Attempt = Callable[[Facet, str, Callable[[], Any]], Any]

LOCKS_API_VERSION: Final = "2020-05-01"
"""Management Locks (https://learn.microsoft.com/rest/api/resources/management-locks). The
subscription's list (List At Subscription Level) holds every lock in the subscription, those of
its resource groups and resources included: without `$filter=atScope()` a lock list answers the
locks at the scope and below it, with it those at and above it (Get-AzResourceLock `-AtScope`,
https://learn.microsoft.com/powershell/module/az.resources/get-azresourcelock). Each lock's id
names its scope (`{scope}/providers/Microsoft.Authorization/locks/{name}`), which is how a lock
is matched to an account (`nets.locks_at`)."""
DIAGNOSTICS_API_VERSION: Final = "2021-05-01-preview"
"""Diagnostic Settings - List (https://learn.microsoft.com/rest/api/monitor/diagnostic-settings/list),
the version that knows category groups; the blob service's settings are at
`{account}/blobServices/default/providers/Microsoft.Insights/diagnosticSettings`
(https://learn.microsoft.com/azure/storage/blobs/monitor-blob-storage)."""
BACKUP_API_VERSION: Final = "2024-04-01"
"""Backup Instances Extension Routing - List: the backup instances associated with a tracked
resource, `GET {resourceId}/providers/Microsoft.DataProtection/backupInstances`
(https://learn.microsoft.com/rest/api/dataprotection/backup-instances-extension-routing/list)."""


class ExtensionReader:
    """The lists one ArmReader sends for the nets beside its accounts; the resource group's and
    the subscription's lock lists are read once per run (failed reads are not kept)."""

    def __init__(self, storage: StorageManagementClient, *, subscription_reads: bool) -> None:
        self.storage = storage
        self.subscription_reads = subscription_reads
        self._lock_lists: FetchedOnce[list[dict[str, Any]]] = FetchedOnce()
        self._subscription_reads: FetchedOnce[str | None] = FetchedOnce()
        """A fleet's first read of each subscription's lock list: None when it was read (the
        list is then in `_lock_lists`), else why not, so that the accounts after the first read
        their own and their group's lists without asking it again."""
        self._backups: FetchedOnce[dict[str, list[dict[str, Any]]] | None] = FetchedOnce()

    def read(
        self,
        reads: ArmReads,
        resource_id: str,
        attempt: Attempt,
        known: Prefetched,
        *,
        blob: bool,
    ) -> None:
        """Locks (any kind); the blob service's diagnostic settings and the backup instances
        only where there is a blob service."""
        self._read_locks(reads, resource_id, attempt, known)
        if not blob:
            return
        settings = attempt(
            Facet.DIAGNOSTICS,
            "diagnosticSettings/list",
            lambda: self.list(
                f"{resource_id}/blobServices/default/providers/Microsoft.Insights/"
                "diagnosticSettings",
                DIAGNOSTICS_API_VERSION,
            ),
        )
        if settings is not None:
            reads.diagnostic_settings = settings
        if known.backups_from_subscription:
            # A vault of another subscription may protect the account (cross-subscription
            # backup), so only a found instance is taken from the subscription's vaults.
            by_account = self.subscription_backups(resource_id) or {}
            if by_account.get(arm_fold(resource_id)):
                reads.backup_instances = by_account[arm_fold(resource_id)]
                return
        instances = attempt(
            Facet.BACKUP,
            "backupInstances/list",
            lambda: self.list(
                f"{resource_id}/providers/Microsoft.DataProtection/backupInstances",
                BACKUP_API_VERSION,
            ),
        )
        if instances is not None:
            reads.backup_instances = instances

    def subscription_backups(self, resource_id: str) -> dict[str, list[dict[str, Any]]] | None:
        """The backup instances of every Backup vault of the account's subscription, by the
        folded id of their data source, read once per subscription and run (Backup Vaults -
        Get In Subscription, then Backup Instances - List of each vault:
        https://learn.microsoft.com/rest/api/dataprotection/backup-vaults/get-in-subscription,
        https://learn.microsoft.com/rest/api/dataprotection/backup-instances/list); None when
        a list fails. An account none of them names has its own list read (a vault of another
        subscription may hold it: https://learn.microsoft.com/azure/backup/blob-backup-overview)."""
        subscription = "/" + "/".join(resource_id.strip("/").split("/")[:2])

        def fetch() -> dict[str, list[dict[str, Any]]] | None:
            found: dict[str, list[dict[str, Any]]] = {}
            try:
                path = f"{subscription}/providers/Microsoft.DataProtection/backupVaults"
                for vault in self.list(path, BACKUP_API_VERSION):
                    vault_id = vault.get("id")
                    if not isinstance(vault_id, str):
                        return None
                    for item in self.list(f"{vault_id}/backupInstances", BACKUP_API_VERSION):
                        props = item.get("properties")
                        info = props.get("dataSourceInfo") if isinstance(props, dict) else None
                        source = info.get("resourceID") if isinstance(info, dict) else None
                        if isinstance(source, str):
                            found.setdefault(arm_fold(source.rstrip("/")), []).append(item)
            except (*READ_ERRORS, DeserializationError, ValueError):
                return None
            return found

        return self._backups.get(arm_fold(subscription), fetch)

    def _read_locks(
        self, reads: ArmReads, resource_id: str, attempt: Attempt, known: Prefetched
    ) -> None:
        """The locks at the account, its resource group and its subscription, nearest first,
        stopping at the first scope that holds a delete lock. A fleet reads the subscription's
        list first (`Prefetched.locks_from_subscription`): it holds the other two scopes'."""
        parts = resource_id.strip("/").split("/")
        paths = {
            LockScope.ACCOUNT: resource_id,
            LockScope.RESOURCE_GROUP: "/" + "/".join(parts[:4]),
            LockScope.SUBSCRIPTION: "/" + "/".join(parts[:2]),
        }
        order = list(LockScope)
        reads.locks = []
        if known.locks_from_subscription and self.subscription_reads:
            order.remove(LockScope.SUBSCRIPTION)
            first: list[bool] = []

            def read_first() -> str | None:
                first.append(True)
                if self._lock_scope(reads, LockScope.SUBSCRIPTION, paths, attempt):
                    return None
                return reads.lock_gaps[LockScope.SUBSCRIPTION]

            key = arm_fold(paths[LockScope.SUBSCRIPTION])
            refused = self._subscription_reads.get(key, read_first)
            if refused is None and (
                first or self._lock_scope(reads, LockScope.SUBSCRIPTION, paths, attempt)
            ):
                return
            reads.lock_gaps[LockScope.SUBSCRIPTION] = (
                refused or reads.lock_gaps[LockScope.SUBSCRIPTION]
            )
        for scope in order:
            if scope is LockScope.SUBSCRIPTION and not self.subscription_reads:
                reads.lock_gaps[scope] = (
                    "a subscription-scope read outside this identity's roles (`safetynet "
                    "audit` as a subscription Reader reads it)"
                )
                continue
            if self._lock_scope(reads, scope, paths, attempt) and self._protected(
                reads, resource_id
            ):
                return

    def _lock_scope(
        self, reads: ArmReads, scope: LockScope, paths: dict[LockScope, str], attempt: Attempt
    ) -> bool:
        """Reads one scope's lock list into `reads`; False (the gap recorded) when it failed."""
        path = paths[scope]
        operation = f"locks/list at {scope.value}"

        def fetch() -> list[dict[str, Any]]:
            if scope is LockScope.ACCOUNT:
                return self.list(
                    f"{path}/providers/Microsoft.Authorization/locks", LOCKS_API_VERSION
                )
            return self._lock_lists.get(
                arm_fold(path),
                lambda: self.list(
                    f"{path}/providers/Microsoft.Authorization/locks", LOCKS_API_VERSION
                ),
            )

        listed = attempt(Facet.LOCKS, operation, fetch)
        if listed is None:
            reads.lock_gaps[scope] = reads.reasons.pop(Facet.LOCKS, "not read")
            return False
        if isinstance(reads.locks, list):
            reads.locks.extend(listed)
        return True

    @staticmethod
    def _protected(reads: ArmReads, resource_id: str) -> bool:
        levels = {arm_fold(level) for level in PROTECTING_LEVELS}
        locks = reads.locks if isinstance(reads.locks, list) else []
        return any(
            isinstance(lock.level, str) and arm_fold(lock.level) in levels
            for lock in nets.locks_at(locks, resource_id)
        )

    def list(self, path: str, api_version: str) -> list[dict[str, Any]]:
        """The `value` items of an ARM list, following `nextLink` (each followed once)."""
        request: HttpRequest | None = HttpRequest("GET", path, params={"api-version": api_version})
        items: list[dict[str, Any]] = []
        followed: set[str] = set()
        while request is not None:
            response = self.storage.send_request(request)
            response.raise_for_status()
            body = response.json()
            values = body.get("value") if isinstance(body, dict) else None
            if not isinstance(values, list):
                raise ValueError(f"the answer to {path} is not a JSON object with a value list")
            items.extend(item for item in values if isinstance(item, dict))
            link = body.get("nextLink")
            if not (isinstance(link, str) and link):
                return items
            if link in followed:
                raise ValueError(f"the answer to {path} repeated a nextLink")
            followed.add(link)
            request = HttpRequest("GET", link)
        return items
