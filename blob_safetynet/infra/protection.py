"""The data account's remaining nets: Azure Backup of its blobs, and Microsoft Defender for Storage.

Backup ("Overview of Azure Blob backup", https://learn.microsoft.com/azure/backup/blob-backup-overview):
the operational tier keeps restorable state in the account itself (point-in-time restore over
versioning, change feed and soft delete); the vaulted tier copies the protocol's container to a
Backup vault on a schedule, off the account, where a deleted account or a rogue administrator
cannot reach it. One policy holds both tiers. The vault acts as its system-assigned identity,
which needs Storage Account Backup Contributor on the account ("Configure and manage backup for
Azure Blobs using Azure Backup", https://learn.microsoft.com/azure/backup/blob-backup-configure-manage).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypedDict

import pulumi
from pulumi_azure_native import authorization, dataprotection, security

from blob_safetynet.infra.config import BackupConfig

ACCOUNT_TYPE: Final = "Microsoft.Storage/storageAccounts"
BLOB_DATASOURCE: Final = "Microsoft.Storage/storageAccounts/blobServices"
"""The datasource type of blob backup, in its policy and its backup instance."""
STORAGE_ACCOUNT_BACKUP_CONTRIBUTOR: Final = "e5e2a7ff-d759-4cd2-bb51-3152d37e2eb1"
"""Built-in role "Storage Account Backup Contributor": "Lets you perform backup and restore
operations using Azure Backup on the storage account"
(https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage)."""
OPERATIONAL_RULE: Final = "Default_OperationalStore"
VAULTED_RULE: Final = "Default"
"""The default retention rules' names per data store, as Azure's own blob policies name them."""
BACKUP_RULE: Final = "BackupDaily"
VAULTED_SCHEDULE: Final = "R/2024-01-01T02:00:00+00:00/P1D"
"""The vaulted tier's recovery point: daily at 02:00 UTC (ISO 8601 repeating interval). The
tier takes daily or weekly schedules; daily loses at most a day of documents."""
VAULT_REDUNDANCY: Final = "GeoRedundant"
"""The vault's copy in the paired region too: the vaulted tier is the off-account net, and a
regional outage should not take it with the account. Chosen when the vault is created ("Before
creating a Backup vault, choose the storage redundancy of the data within the vault",
https://learn.microsoft.com/azure/backup/backup-blobs-storage-account-cli)."""


def _store(kind: str) -> dataprotection.DataStoreInfoBaseArgs:
    return dataprotection.DataStoreInfoBaseArgs(
        data_store_type=kind, object_type="DataStoreInfoBase"
    )


def _retention(name: str, store: str, days: int) -> dataprotection.AzureRetentionRuleArgs:
    return dataprotection.AzureRetentionRuleArgs(
        name=name,
        object_type="AzureRetentionRule",
        is_default=True,
        lifecycles=[
            dataprotection.SourceLifeCycleArgs(
                delete_after=dataprotection.AbsoluteDeleteOptionArgs(
                    duration=f"P{days}D", object_type="AbsoluteDeleteOption"
                ),
                source_data_store=_store(store),
                target_data_store_copy_settings=[],
            )
        ],
    )


def policy_rules(
    backup: BackupConfig,
) -> list[dataprotection.AzureBackupRuleArgs | dataprotection.AzureRetentionRuleArgs]:
    """The operational tier's retention; with the vaulted tier, its daily schedule and retention.

    The operational tier is continuous and needs no schedule, only how long to keep ("Create
    Azure Data Protection backup policies for blobs using REST API",
    https://learn.microsoft.com/azure/backup/backup-azure-dataprotection-use-rest-api-create-update-blob-policy).
    """
    rules: list[dataprotection.AzureBackupRuleArgs | dataprotection.AzureRetentionRuleArgs] = [
        _retention(OPERATIONAL_RULE, "OperationalStore", backup.operational_days)
    ]
    if backup.vaulted:
        rules.append(_retention(VAULTED_RULE, "VaultStore", backup.vaulted_days))
        rules.append(
            dataprotection.AzureBackupRuleArgs(
                name=BACKUP_RULE,
                object_type="AzureBackupRule",
                backup_parameters=dataprotection.AzureBackupParamsArgs(
                    backup_type="Discrete", object_type="AzureBackupParams"
                ),
                data_store=_store("VaultStore"),
                trigger=dataprotection.ScheduleBasedTriggerContextArgs(
                    object_type="ScheduleBasedTriggerContext",
                    schedule=dataprotection.BackupScheduleArgs(
                        repeating_time_intervals=[VAULTED_SCHEDULE], time_zone="UTC"
                    ),
                    tagging_criteria=[
                        dataprotection.TaggingCriteriaArgs(
                            is_default=True,
                            tag_info=dataprotection.RetentionTagArgs(tag_name=VAULTED_RULE),
                            tagging_priority=99,
                        )
                    ],
                ),
            )
        )
    return rules


class _Datasource(TypedDict):
    """What a backup instance's data source and data source set both say of the account."""

    resource_id: pulumi.Input[str]
    resource_uri: pulumi.Input[str]
    resource_name: pulumi.Input[str]
    resource_type: str
    resource_location: str
    datasource_type: str


def subscription_of(resource_id: str) -> str:
    """`/subscriptions/<id>/resourceGroups/...` -> `/subscriptions/<id>`."""
    return "/".join(resource_id.split("/")[:3])


class BlobBackup(pulumi.ComponentResource):
    """A Backup vault, its blob policy, the vault's role on the account, and the backup
    instance that protects the account (and, in the vaulted tier, the protocol's container)."""

    def __init__(
        self,
        name: str,
        backup: BackupConfig,
        *,
        location: str,
        resource_group_name: pulumi.Input[str],
        account_id: pulumi.Output[str],
        account_name: pulumi.Input[str],
        container_name: str,
        depends_on: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:protection:BlobBackup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.vault = dataprotection.BackupVault(
            f"{name}-vault",
            resource_group_name=resource_group_name,
            location=location,
            identity=dataprotection.DppIdentityDetailsArgs(type="SystemAssigned"),
            properties=dataprotection.BackupVaultArgs(
                storage_settings=[
                    dataprotection.StorageSettingArgs(
                        datastore_type="VaultStore", type=VAULT_REDUNDANCY
                    )
                ]
            ),
            # Deleting the vault would delete the recovery points it holds.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        self.policy = dataprotection.BackupPolicy(
            f"{name}-policy",
            resource_group_name=resource_group_name,
            vault_name=self.vault.name,
            properties=dataprotection.BackupPolicyArgs(
                datasource_types=[BLOB_DATASOURCE],
                object_type="BackupPolicy",
                policy_rules=policy_rules(backup),
            ),
            opts=child,
        )
        principal = self.vault.identity.apply(
            lambda identity: identity.principal_id if identity else ""
        )
        self.role = authorization.RoleAssignment(
            f"{name}-vault-role",
            principal_id=principal,
            principal_type="ServicePrincipal",
            role_definition_id=account_id.apply(
                lambda account: (
                    f"{subscription_of(account)}/providers/Microsoft.Authorization/"
                    f"roleDefinitions/{STORAGE_ACCOUNT_BACKUP_CONTRIBUTOR}"
                )
            ),
            scope=account_id,
            opts=child,
        )
        containers = (
            [
                dataprotection.BlobBackupDatasourceParametersArgs(
                    containers_list=[container_name],
                    object_type="BlobBackupDatasourceParameters",
                )
            ]
            if backup.vaulted
            else None
        )
        # For blobs the data source and its set are both the account: the two say the same.
        datasource: _Datasource = {
            "resource_id": account_id,
            "resource_uri": account_id,
            "resource_name": account_name,
            "resource_type": ACCOUNT_TYPE,
            "resource_location": location,
            "datasource_type": BLOB_DATASOURCE,
        }
        self.instance = dataprotection.BackupInstance(
            f"{name}-instance",
            resource_group_name=resource_group_name,
            vault_name=self.vault.name,
            properties=dataprotection.BackupInstanceArgs(
                object_type="BackupInstance",
                data_source_info=dataprotection.DatasourceArgs(
                    object_type="Datasource", **datasource
                ),
                data_source_set_info=dataprotection.DatasourceSetArgs(
                    object_type="DatasourceSet", **datasource
                ),
                policy_info=dataprotection.PolicyInfoArgs(
                    policy_id=self.policy.id,
                    policy_parameters=dataprotection.PolicyParametersArgs(
                        backup_datasource_parameters_list=containers
                    )
                    if containers
                    else None,
                ),
            ),
            # Protection is refused until the vault holds its role on the account; the blob
            # service's settings come first so the backup finds them rather than fights them.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.role, *depends_on]),
        )
        self.register_outputs({"vaultId": self.vault.id, "instanceId": self.instance.id})


def defender_for_storage(
    name: str, *, account_id: pulumi.Input[str], opts: pulumi.ResourceOptions
) -> security.DefenderForStorage:
    """Microsoft Defender for Storage on this one account (`defenderForStorageSettings/current`).

    Malware scanning stays off: it "is priced per GB scanned", on top of the per-account plan
    ("Overview of Microsoft Defender for Storage",
    https://learn.microsoft.com/azure/defender-for-cloud/defender-for-storage-introduction); the
    protocol's uploads are the application's own documents, and a team that takes untrusted
    files turns it on with a monthly cap. Sensitive data threat detection is on: the same page
    has it "with no other cost", and it ranks alerts by what the blobs hold. The subscription's
    settings are not overridden, so a plan a security team runs for the whole subscription keeps
    its own choices for this account.
    """
    return security.DefenderForStorage(
        name,
        resource_id=account_id,
        setting_name="current",
        properties=security.DefenderForStorageSettingPropertiesArgs(
            is_enabled=True,
            override_subscription_level_settings=False,
            malware_scanning=security.MalwareScanningPropertiesArgs(
                on_upload=security.OnUploadPropertiesArgs(is_enabled=False)
            ),
            sensitive_data_discovery=security.SensitiveDataDiscoveryPropertiesArgs(is_enabled=True),
        ),
        opts=opts,
    )
