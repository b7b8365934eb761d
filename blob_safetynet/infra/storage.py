"""The data account and its safety nets, as one component whose children are parented to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import pulumi
from pulumi_azure_native import monitor, storage

from blob_safetynet.infra.config import CustomerKey, StackConfig
from blob_safetynet.infra.network import BlobPrivateEndpoint
from blob_safetynet.infra.protection import BlobBackup, defender_for_storage
from blob_safetynet.settings.vocabulary import (
    DEFAULT_INVENTORY_CONTAINER,
    PENDING,
    RETIRED,
    STATE_TAG,
)

PENDING_RULE: Final = "delete-abandoned-uploads"
RETIRED_RULE: Final = "delete-retired-blobs"
VERSIONS_RULE: Final = "expire-old-versions"
INVENTORY_RULE: Final = "expire-inventory-reports"
AUDITED_LOGS: Final = ("StorageRead", "StorageWrite", "StorageDelete")
"""Blob resource logs sent to the workspace: who read, wrote and deleted what, the questions
after a loss or a leak. The three categories of the blob service's diagnostic setting
("Monitor Azure Blob Storage", https://learn.microsoft.com/azure/storage/blobs/monitor-blob-storage;
"Azure Blob Storage monitoring data reference",
https://learn.microsoft.com/azure/storage/blobs/monitor-blob-storage-reference)."""


def _delete_tagged(
    rule_name: str, state: str, prefix: list[str], when: storage.DateAfterModificationArgs
) -> storage.ManagementPolicyRuleArgs:
    """Delete block blobs under `prefix` whose `state` tag equals `state`, `when` says."""
    return storage.ManagementPolicyRuleArgs(
        name=rule_name,
        enabled=True,
        type=storage.RuleType.LIFECYCLE,
        definition=storage.ManagementPolicyDefinitionArgs(
            filters=storage.ManagementPolicyFilterArgs(
                blob_types=["blockBlob"],
                prefix_match=prefix,
                blob_index_match=[storage.TagFilterArgs(name=STATE_TAG, op="==", value=state)],
            ),
            actions=storage.ManagementPolicyActionArgs(
                base_blob=storage.ManagementPolicyBaseBlobArgs(delete=when)
            ),
        ),
    )


def lifecycle_rules(config: StackConfig) -> list[storage.ManagementPolicyRuleArgs]:
    """The backstop of seed 000, version expiry if versioning is on, the retired-blob backstop."""
    prefix = [f"{config.container_name}/"]
    rules = [
        _delete_tagged(
            PENDING_RULE,
            PENDING,
            prefix,
            storage.DateAfterModificationArgs(
                days_after_creation_greater_than=config.pending_expiry_days
            ),
        )
    ]
    if config.versioning:
        # Every overwrite or delete keeps a version; without expiry they are kept (and billed)
        # forever.
        rules.append(
            storage.ManagementPolicyRuleArgs(
                name=VERSIONS_RULE,
                enabled=True,
                type=storage.RuleType.LIFECYCLE,
                definition=storage.ManagementPolicyDefinitionArgs(
                    filters=storage.ManagementPolicyFilterArgs(
                        blob_types=["blockBlob"], prefix_match=prefix
                    ),
                    actions=storage.ManagementPolicyActionArgs(
                        version=storage.ManagementPolicyVersionArgs(
                            delete=storage.DateAfterCreationArgs(
                                days_after_creation_greater_than=config.version_expiry_days
                            )
                        )
                    ),
                ),
            )
        )
    # A replaced or deleted document's old blob is tagged retired and stays readable until the
    # sweeper deletes it after its grace period; if the sweeper never runs, this collects it.
    # Set Blob Tags changes neither Last-Modified nor creation time, so counting from those
    # would delete an old blob at the next lifecycle run, under a reader still downloading it.
    # Counting from the last read (last access time tracking, turned on below) keeps it while
    # it is read. Lifecycle uses the date tracking was enabled when a blob has no access time.
    # https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-configure
    # Blob Inventory writes a report a day and keeps none from piling up by itself; the newest
    # is what `reconcile --inventory` reads ("Enable Azure Storage blob inventory reports",
    # https://learn.microsoft.com/azure/storage/blobs/blob-inventory-how-to).
    rules.append(
        storage.ManagementPolicyRuleArgs(
            name=INVENTORY_RULE,
            enabled=True,
            type=storage.RuleType.LIFECYCLE,
            definition=storage.ManagementPolicyDefinitionArgs(
                filters=storage.ManagementPolicyFilterArgs(
                    blob_types=["blockBlob"], prefix_match=[f"{DEFAULT_INVENTORY_CONTAINER}/"]
                ),
                actions=storage.ManagementPolicyActionArgs(
                    base_blob=storage.ManagementPolicyBaseBlobArgs(
                        delete=storage.DateAfterModificationArgs(
                            days_after_creation_greater_than=config.inventory_report_days
                        )
                    )
                ),
            ),
        )
    )
    rules.append(
        _delete_tagged(
            RETIRED_RULE,
            RETIRED,
            prefix,
            storage.DateAfterModificationArgs(
                days_after_last_access_time_greater_than=config.retired_blob_days
            ),
        )
    )
    return rules


def network_rules(
    default_action: str,
    ip_ranges: Sequence[str],
    subnet_ids: Sequence[str],
    bypass: storage.Bypass = storage.Bypass.AZURE_SERVICES,
) -> storage.NetworkRuleSetArgs:
    """An account firewall: what no rule allows gets `default_action` (Deny unless configured).

    Trusted Azure services keep their documented exception (bypass AzureServices); IP rules
    take public addresses only and subnets need the Microsoft.Storage service endpoint
    ("Azure Storage firewall rules",
    https://learn.microsoft.com/azure/storage/common/storage-network-security).
    """
    return storage.NetworkRuleSetArgs(
        default_action=storage.DefaultAction(default_action),
        bypass=bypass,
        ip_rules=[
            storage.IPRuleArgs(i_p_address_or_range=address, action=storage.Action.ALLOW)
            for address in ip_ranges
        ],
        virtual_network_rules=[
            storage.VirtualNetworkRuleArgs(
                virtual_network_resource_id=subnet, action=storage.Action.ALLOW
            )
            for subnet in subnet_ids
        ],
    )


KEY_EXPIRATION_DAYS: Final = 90
"""Days before an account key counts as due for rotation (CIS 4.4)."""
SAS_EXPIRATION_PERIOD: Final = "0.01:00:00"
"""Longest SAS an account accepts (d.hh:mm:ss): one hour (CIS 4.5); longer ones are refused."""


def blob_soft_delete(config: StackConfig) -> storage.DeleteRetentionPolicyArgs:
    """Blob soft delete, as every account of the stack has it (the baseline rules judge each
    account, not only the data account)."""
    return storage.DeleteRetentionPolicyArgs(
        enabled=True,
        days=config.blob_soft_delete_days,
        # Permanent delete would let a caller skip the retention window: the one undo an
        # account offers.
        allow_permanent_delete=False,
    )


def container_soft_delete(config: StackConfig) -> storage.DeleteRetentionPolicyArgs:
    """Container soft delete, as every account of the stack has it."""
    return storage.DeleteRetentionPolicyArgs(enabled=True, days=config.container_soft_delete_days)


def hardened_account(
    name: str,
    *,
    account_name: pulumi.Input[str],
    resource_group_name: pulumi.Input[str],
    location: str,
    sku: storage.SkuName,
    network: storage.NetworkRuleSetArgs,
    public_network_access: str,
    infrastructure_encryption: bool,
    opts: pulumi.ResourceOptions,
    customer_key: CustomerKey | None = None,
) -> storage.StorageAccount:
    """A StorageV2 account that only Entra identities can use: the settings every account of
    this program shares (the data account and the sweeper's runtime account alike)."""
    return storage.StorageAccount(
        name,
        # Explicit: azure-native's auto-name keeps hyphens of the logical name, which ARM
        # refuses (blob_safetynet/infra/naming.py).
        account_name=account_name,
        resource_group_name=resource_group_name,
        location=location,
        kind=storage.Kind.STORAGE_V2,
        sku=storage.SkuArgs(name=sku),
        # Blob index tags and lifecycle blobIndexMatch need a flat namespace.
        is_hns_enabled=False,
        enable_https_traffic_only=True,
        minimum_tls_version=storage.MinimumTlsVersion.TLS1_2,
        allow_blob_public_access=False,
        allow_shared_key_access=False,
        default_to_o_auth_authentication=True,
        allow_cross_tenant_replication=False,
        # Shared keys are off; these bound what a key or a SAS would be worth if someone turned
        # them back on (https://learn.microsoft.com/azure/storage/common/storage-account-keys-manage#create-a-key-expiration-policy,
        # https://learn.microsoft.com/azure/storage/common/sas-expiration-policy).
        key_policy=storage.KeyPolicyArgs(key_expiration_period_in_days=KEY_EXPIRATION_DAYS),
        sas_policy=storage.SasPolicyArgs(
            sas_expiration_period=SAS_EXPIRATION_PERIOD,
            expiration_action=storage.ExpirationAction.BLOCK,
        ),
        public_network_access=storage.PublicNetworkAccess(public_network_access),
        network_rule_set=network,
        # A second, infrastructure-level AES-256 layer; it can only be chosen when the account
        # is created ("Enable infrastructure encryption for double encryption of data",
        # https://learn.microsoft.com/azure/storage/common/infrastructure-encryption-enable).
        encryption=storage.EncryptionArgs(
            key_source=_key_source(customer_key),
            key_vault_properties=_key_vault_properties(customer_key),
            encryption_identity=_encryption_identity(customer_key),
            require_infrastructure_encryption=infrastructure_encryption,
            services=storage.EncryptionServicesArgs(
                blob=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
                file=storage.EncryptionServiceArgs(enabled=True, key_type=storage.KeyType.ACCOUNT),
            ),
        ),
        identity=_identity(customer_key),
        opts=opts,
    )


def blob_resource_logs(
    name: str,
    account: storage.StorageAccount,
    workspace_id: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> monitor.DiagnosticSetting:
    """A diagnostic setting on the account's blob service sending every blob resource log
    category the audit needs (`AUDITED_LOGS`) to the workspace; the same for every account."""
    return monitor.DiagnosticSetting(
        name,
        resource_uri=account.id.apply(lambda account_id: f"{account_id}/blobServices/default"),
        workspace_id=workspace_id,
        logs=[
            monitor.DiagnosticsLogSettingsArgs(category=category, enabled=True)
            for category in AUDITED_LOGS
        ],
        opts=opts,
    )


def restore_policy(config: StackConfig) -> storage.RestorePolicyPropertiesArgs:
    """Point-in-time restore as configured; off (0 days) by default. `config.parse` has checked
    what ARM requires of it (versioning, change feed, fewer days than blob soft delete)."""
    days = config.point_in_time_restore_days
    return storage.RestorePolicyPropertiesArgs(enabled=days > 0, days=days or None)


def _key_source(key: CustomerKey | None) -> storage.KeySource:
    return (
        storage.KeySource.MICROSOFT_STORAGE if key is None else storage.KeySource.MICROSOFT_KEYVAULT
    )


def _key_vault_properties(key: CustomerKey | None) -> storage.KeyVaultPropertiesArgs | None:
    """The customer-managed key without its version, so Azure Storage checks the vault daily and
    uses the latest ("Automatically update the key version",
    https://learn.microsoft.com/azure/storage/common/customer-managed-keys-overview)."""
    if key is None:
        return None
    return storage.KeyVaultPropertiesArgs(key_name=key.key_name, key_vault_uri=key.key_vault_uri)


def _encryption_identity(key: CustomerKey | None) -> storage.EncryptionIdentityArgs | None:
    """The user-assigned identity the key is read as: unlike a system-assigned one it exists
    before the account, so a new account is created with the key already set ("Configure
    customer-managed keys in the same tenant for a new storage account",
    https://learn.microsoft.com/azure/storage/common/customer-managed-keys-configure-new-account)."""
    if key is None:
        return None
    return storage.EncryptionIdentityArgs(encryption_user_assigned_identity=key.identity_id)


def _identity(key: CustomerKey | None) -> storage.IdentityArgs | None:
    if key is None:
        return None
    return storage.IdentityArgs(
        type=storage.IdentityType.USER_ASSIGNED, user_assigned_identities=[key.identity_id]
    )


class DataAccount(pulumi.ComponentResource):
    """A StorageV2 account hardened for the pending-upload protocol.

    Flat namespace (blob index tags and `blobIndexMatch` need it), HTTPS and TLS 1.2 only, no
    anonymous access, no shared keys (Entra ID only), blob and container soft delete without
    permanent delete, one private container, and the lifecycle backstop for pending blobs.
    """

    account: storage.StorageAccount
    container: storage.BlobContainer
    blob_endpoint: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        config: StackConfig,
        *,
        account_name: pulumi.Input[str],
        resource_group_name: pulumi.Input[str],
        workspace_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("safetynet:storage:DataAccount", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)

        self.account = hardened_account(
            name,
            account_name=account_name,
            resource_group_name=resource_group_name,
            location=config.location,
            sku=storage.SkuName(config.storage_sku),
            network=network_rules(
                config.network.default_action,
                config.network.allowed_ip_ranges,
                config.network.firewall_subnet_ids,
            ),
            public_network_access=config.network.public_network_access,
            infrastructure_encryption=config.infrastructure_encryption,
            customer_key=config.customer_key,
            # The documents live here: a change that would replace the account (a new name,
            # say) fails the update instead of deleting it.
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        account_name = self.account.name

        self.blob_service_properties = storage.BlobServiceProperties(
            f"{name}-blob-service",
            blob_services_name="default",
            account_name=account_name,
            resource_group_name=resource_group_name,
            delete_retention_policy=blob_soft_delete(config),
            container_delete_retention_policy=container_soft_delete(config),
            is_versioning_enabled=config.versioning,
            # Sent even when off, so a portal change shows as drift at the next preview.
            change_feed=storage.ChangeFeedArgs(enabled=config.change_feed),
            restore_policy=restore_policy(config),
            # The retired-blob rule counts days since the last read.
            last_access_time_tracking_policy=storage.LastAccessTimeTrackingPolicyArgs(enable=True),
            opts=child,
        )

        self.container = storage.BlobContainer(
            f"{name}-container",
            container_name=config.container_name,
            account_name=account_name,
            resource_group_name=resource_group_name,
            public_access=storage.PublicAccess.NONE,
            opts=child,
        )

        self.lifecycle = storage.ManagementPolicy(
            f"{name}-lifecycle",
            # ARM knows only this name; any other 404s.
            management_policy_name="default",
            account_name=account_name,
            resource_group_name=resource_group_name,
            policy=storage.ManagementPolicySchemaArgs(rules=lifecycle_rules(config)),
            # ARM refuses a daysAfterLastAccessTimeGreaterThan rule (400
            # MissingLastAccessTimeBasedTrackingPolicy) until the blob service tracks access
            # times ("Optionally enable access time tracking",
            # https://learn.microsoft.com/azure/storage/blobs/lifecycle-management-policy-configure),
            # so the policy waits for the properties that turn tracking on.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[self.container, self.blob_service_properties]
            ),
        )

        self.private_endpoint = (
            None
            if config.network.private_endpoint_subnet_id is None
            else BlobPrivateEndpoint(
                f"{name}-blob",
                config,
                subnet_id=config.network.private_endpoint_subnet_id,
                account_id=self.account.id,
                resource_group_name=resource_group_name,
                opts=child,
            )
        )

        self.audit = blob_resource_logs(
            f"{name}-blob-audit",
            self.account,
            workspace_id,
            pulumi.ResourceOptions(parent=self, depends_on=[self.blob_service_properties]),
        )

        self.defender = (
            defender_for_storage(f"{name}-defender", account_id=self.account.id, opts=child)
            if config.defender_for_storage
            else None
        )
        self.backup = (
            BlobBackup(
                f"{name}-backup",
                config.backup,
                location=config.location,
                resource_group_name=resource_group_name,
                account_id=self.account.id,
                account_name=account_name,
                container_name=config.container_name,
                # The backup turns on versioning and soft delete itself; declared here first, the
                # blob service's settings are what it finds, not what it fights.
                depends_on=[self.container, self.blob_service_properties],
                opts=child,
            )
            if config.backup.enabled
            else None
        )

        self.guarded: list[pulumi.Resource] = [
            self.account,
            self.blob_service_properties,
            self.container,
            self.lifecycle,
            self.audit,
            *([] if self.private_endpoint is None else [self.private_endpoint]),
            *([] if self.defender is None else [self.defender]),
            *([] if self.backup is None else [self.backup]),
        ]
        """The account and every resource declared under it: what a delete lock on the account
        must come after at create and before at destroy (blob_safetynet/infra/lock.py)."""
        self.blob_endpoint = self.account.primary_endpoints.apply(lambda ends: ends.blob)
        self.register_outputs(
            {
                "accountName": account_name,
                "accountId": self.account.id,
                "blobEndpoint": self.blob_endpoint,
                "containerName": self.container.name,
            }
        )
