"""Factories for normalized account models: a compliant account, then one thing changed."""

from __future__ import annotations

import dataclasses
from typing import Any

from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    AccountImmutability,
    AccountSettings,
    BackupInstance,
    BlobService,
    Container,
    DiagnosticSetting,
    Encryption,
    LifecycleRule,
    Lock,
    Locks,
    LockScope,
    Network,
    Retention,
    RoleAssignment,
    TagFilter,
)
from blob_safetynet.policies.rules.roles import BUILT_IN_ROLES, RoleDefinition
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER, PENDING, RETIRED, STATE_TAG

ACCOUNT_ID = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/docs"
BLOB_OWNER = BUILT_IN_ROLES["b7e6dc6d-f1e8-4753-8033-0f276bb0955b"]
OWNER = BUILT_IN_ROLES["8e3af657-a8ff-443c-a75c-2fe8c4bcb635"]
CONTRIBUTOR = BUILT_IN_ROLES["b24988ac-6180-42a0-ab88-20f7382dd24c"]
ACCOUNT_CONTRIBUTOR = BUILT_IN_ROLES["17d1049b-9a84-46fb-8f53-869881c3d3ab"]
_BLOBS = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
UPLOADER = RoleDefinition(
    "safetynet uploader",
    data_actions=tuple(
        f"{_BLOBS}/{op}"
        for op in ("read", "add/action", "write", "tags/write", "tags/read", "delete")
    ),
)
"""blob_safetynet/infra/access.py's uploader role: the compliant application grant."""


def settings(**changes: Any) -> AccountSettings:
    base = AccountSettings(
        kind="StorageV2",
        is_hns_enabled=False,
        allow_shared_key_access=False,
        allow_blob_public_access=False,
        https_only=True,
        minimum_tls_version="TLS1_2",
        network=Network("Disabled", "Deny", ("AzureServices",)),
        encryption=Encryption(infrastructure=True, key_source="Microsoft.Keyvault"),
        allow_cross_tenant_replication=False,
        key_expiration_days=90,
        sas_expiration_seconds=3600,
        sftp_enabled=False,
        local_users_enabled=False,
        sku="Standard_GZRS",
        immutability=AccountImmutability(enabled=False, default_policy_state=None),
    )
    return dataclasses.replace(base, **changes)


def blob_service_properties(
    delete: dict[str, Any] | None = None,
    containers: dict[str, Any] | None = None,
    restore: dict[str, Any] | None = None,
    **changes: Any,
) -> BlobService:
    """Soft delete 14 days, versioning, the change feed and point-in-time restore of 7 days."""
    return BlobService(
        delete_retention=Retention(
            **{"enabled": True, "days": 14, "allow_permanent_delete": False, **(delete or {})}
        ),
        container_delete_retention=Retention(**{"enabled": True, "days": 14, **(containers or {})}),
        versioning_enabled=changes.get("versioning_enabled", True),
        change_feed_enabled=changes.get("change_feed_enabled", True),
        restore_policy=Retention(**{"enabled": True, "days": 7, **(restore or {})}),
    )


def container(**changes: Any) -> Container:
    """The protocol's container: private, without immutability."""
    base = Container(
        DEFAULT_CONTAINER,
        None,
        worm_policy=False,
        legal_hold=False,
        version_immutability=False,
    )
    return dataclasses.replace(base, **changes)


def pending_rule(**changes: Any) -> LifecycleRule:
    base = LifecycleRule(
        name="delete-abandoned-uploads",
        enabled=True,
        blob_types=("blockBlob",),
        prefixes=(f"{DEFAULT_CONTAINER}/",),
        tag_filters=(TagFilter(STATE_TAG, "==", PENDING),),
        delete_after_days=1,
        version_delete_after_days=None,
    )
    return dataclasses.replace(base, **changes)


def retired_rule(**changes: Any) -> LifecycleRule:
    """A second tag rule, on retired blobs, beside the pending backstop."""
    return pending_rule(
        name="delete-retired", tag_filters=(TagFilter(STATE_TAG, "==", RETIRED),), **changes
    )


def version_rule(**changes: Any) -> LifecycleRule:
    base = LifecycleRule(
        name="expire-old-versions",
        enabled=True,
        blob_types=("blockBlob",),
        prefixes=(f"{DEFAULT_CONTAINER}/",),
        tag_filters=(),
        delete_after_days=None,
        version_delete_after_days=30,
    )
    return dataclasses.replace(base, **changes)


def assignment(role: Any = UPLOADER, **changes: Any) -> RoleAssignment:
    base = RoleAssignment(
        principal_id="app",
        principal_type="ServicePrincipal",
        role=role.name,
        scope=f"{ACCOUNT_ID}/blobServices/default/containers/{DEFAULT_CONTAINER}",
        actions=role.actions,
        not_actions=role.not_actions,
        data_actions=role.data_actions,
        not_data_actions=role.not_data_actions,
    )
    return dataclasses.replace(base, **changes)


def account(**changes: Any) -> Account:
    """A compliant account; keyword arguments replace whole facets."""
    base = Account(
        name="docs",
        resource_id=ACCOUNT_ID,
        settings=settings(),
        blob_service_properties=blob_service_properties(),
        containers=(container(),),
        lifecycle_rules=(pending_rule(), version_rule()),
        role_assignments=(assignment(),),
        private_endpoints=("Approved",),
        local_users=(),
        defender_enabled=True,
        locks=Locks((Lock("keep", "CanNotDelete", LockScope.ACCOUNT),)),
        blob_diagnostics=(blob_logs(),),
        backup_instances=(BackupInstance("blobs", "ProtectionConfigured"),),
    )
    return dataclasses.replace(base, **changes)


def blob_logs(
    *categories: str, name: str = "blob-logs", destination: bool = True
) -> DiagnosticSetting:
    """A blob service diagnostic setting enabling `categories` (folded), by default the three
    the logging rule asks for."""
    chosen = categories or ("StorageRead", "StorageWrite", "StorageDelete")
    return DiagnosticSetting(name, frozenset(c.lower() for c in chosen), destination)


__all__ = ["UNKNOWN"]
