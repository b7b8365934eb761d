"""What the field checks on a blob storage account, each peer check beside the rule here that
covers it, or the reason none does: the data behind docs/coverage.md.

One row per check as the peer names it: a feature of Microsoft's data protection overview, a CIS
Microsoft Azure Foundations v4.0.0 control, a Microsoft cloud security benchmark v1 control, a
parameter of the Azure Verified Module for storage accounts, a Prowler or Checkov check id, a
PSRule for Azure rule, or a built-in Azure Policy definition id. Only blob data protection and
storage-account hardening are in scope: Azure Files, queue and table checks are left out.

Over 500 lines on purpose: data only, one row per peer check, kept in one module so a source's
rows sit together and a reviewer reads the whole mapping top to bottom.

Ids were read from the peers' own sources: Prowler `3e000fa` (`prowler/providers/azure/services/
storage/`, `prowler/compliance/azure/cis_4.0_azure.json` for the CIS numbers), Checkov `03d5fda`
(`checkov/terraform/checks/resource/azure/`, `checkov/terraform/checks/graph_checks/azure/`),
PSRule.Rules.Azure (`src/PSRule.Rules.Azure/rules/Azure.Storage.Rule.{ps1,yaml}`,
`docs/en/rules/Azure.Storage.*.md`), Azure/bicep-registry-modules
(`avm/res/storage/storage-account/main.bicep`, `…/blob-service/main.bicep`) and Azure/azure-policy
`f4a50ba` (`built-in-policies/policyDefinitions/{Storage,Backup,Security Center}/`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from blob_safetynet.policies.rules.model import Thresholds


class Source(enum.StrEnum):
    """Where a peer check comes from; the value is how the table names the source."""

    MICROSOFT = "Microsoft data protection"
    CIS = "CIS Azure 4.0.0"
    MCSB = "MCSB v1"
    AVM = "AVM storage-account"
    PROWLER = "Prowler"
    CHECKOV = "Checkov"
    PSRULE = "PSRule for Azure"
    AZURE_POLICY = "Azure Policy built-in"

    @property
    def reference(self) -> str:
        """The page that lists the source's checks."""
        return _REFERENCES[self]


_REFERENCES: Final = {
    Source.MICROSOFT: "https://learn.microsoft.com/azure/storage/blobs/data-protection-overview",
    Source.CIS: "https://www.cisecurity.org/benchmark/azure",
    Source.MCSB: "https://learn.microsoft.com/security/benchmark/azure/baselines/storage-security-baseline",
    Source.AVM: "https://github.com/Azure/bicep-registry-modules/tree/main/avm/res/storage/storage-account",
    Source.PROWLER: "https://github.com/prowler-cloud/prowler/tree/master/prowler/providers/azure/services/storage",
    Source.CHECKOV: "https://www.checkov.io/5.Policy%20Index/azure.html",
    Source.PSRULE: "https://azure.github.io/PSRule.Rules.Azure/en/rules/resource/#storage-account",
    Source.AZURE_POLICY: "https://learn.microsoft.com/azure/storage/common/policy-reference",
}


@dataclass(frozen=True)
class PeerCheck:
    """One check of a peer: `rules` are the rule ids here that cover it; `reason` says why none
    does (required then), or how far the rules go when they cover it only in part."""

    source: Source
    check: str
    title: str
    rules: tuple[str, ...] = ()
    reason: str = ""


VERSIONING: Final = (
    "Advisory: blob soft delete already keeps what an overwrite replaced, as a soft-deleted "
    "snapshot `safetynet recover` restores, and the protocol never overwrites (create-only "
    "uploads). Versioning keeps every version until a rule deletes it, so when it is on "
    "`SN-VERSION-EXPIRY` asks for that rule"
)
ENTRA_DEFAULT: Final = (
    "Not checked: `defaultToOAuthAuthentication` only picks how the portal authorizes; with "
    "shared key off (`SN-SHARED-KEY-OFF`) no client can use the key at all. The infra program "
    "sets it on"
)
SNAPSHOTS: Final = (
    "Not an account setting: a snapshot is taken by a client, blob by blob. With blob soft "
    "delete on, an overwrite or delete leaves a soft-deleted snapshot, which `safetynet "
    "recover` restores"
)
OBJECT_REPLICATION: Final = (
    "Not checked: a copy in a second account is an architecture choice, not a setting of this "
    "one; `SN-CROSS-TENANT-REPLICATION` keeps such copies inside the tenant"
)
READONLY_LOCK: Final = (
    "Not asked: a ReadOnly lock also refuses the infra program's own updates of the account and "
    "the listing of keys, and it does not stop data-plane deletes "
    "(https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources); "
    "the CanNotDelete lock (`SN-DELETE-LOCK`) is what keeps the account"
)
WORM: Final = (
    "The opposite, on purpose: a time-based retention or legal hold on the protocol container "
    "would refuse the sweeper's and the lifecycle rule's deletes of pending blobs "
    "(https://learn.microsoft.com/azure/storage/blobs/immutable-storage-overview), so the rule "
    "fails one. Keep WORM copies in another container or account"
)
PROWLER_SOFT_DELETE: Final = (
    "Despite its name the check reads only container soft delete "
    "(`container_delete_retention_policy`); blob soft delete is `SN-BLOB-SOFT-DELETE`"
)

MICROSOFT_ROWS: Final = (
    PeerCheck(
        Source.MICROSOFT,
        "Azure Resource Manager lock",
        "CanNotDelete lock on the account",
        ("SN-DELETE-LOCK",),
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Immutability policies on a container",
        "WORM: time-based retention or legal hold",
        ("SN-PROTOCOL-CONTAINER-MUTABLE",),
        WORM,
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Container soft delete",
        "A deleted container can be restored",
        ("SN-CONTAINER-SOFT-DELETE",),
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Blob soft delete",
        "A deleted or overwritten blob can be restored",
        ("SN-BLOB-SOFT-DELETE", "SN-NO-PERMANENT-DELETE"),
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Blob versioning",
        "Every write keeps the previous version",
        ("SN-BLOB-VERSIONING",),
        VERSIONING,
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Point-in-time restore for block blobs",
        "Restore block blobs to an earlier time",
        ("SN-POINT-IN-TIME-RESTORE",),
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Azure Backup for blobs (operational, vaulted)",
        "A backup vault protects the account",
        ("SN-BACKUP-PROTECTED",),
    ),
    PeerCheck(
        Source.MICROSOFT, "Blob snapshot", "A read-only copy of a blob taken by hand", (), SNAPSHOTS
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Object replication",
        "Copy blobs to a second account",
        (),
        OBJECT_REPLICATION,
    ),
    PeerCheck(
        Source.MICROSOFT,
        "Geo-redundant storage",
        "A copy in the paired region",
        ("SN-GEO-REDUNDANCY",),
    ),
)

CIS_ROWS: Final = (
    PeerCheck(
        Source.CIS, "9.1.5.1", "Microsoft Defender for Storage is On", ("SN-DEFENDER-FOR-STORAGE",)
    ),
    PeerCheck(Source.CIS, "10.2.1", "Soft delete for blobs is Enabled", ("SN-BLOB-SOFT-DELETE",)),
    PeerCheck(Source.CIS, "10.2.2", "Versioning is Enabled", ("SN-BLOB-VERSIONING",), VERSIONING),
    PeerCheck(
        Source.CIS, "10.3.1.1", "Key rotation reminders are enabled", ("SN-KEY-EXPIRATION-POLICY",)
    ),
    PeerCheck(
        Source.CIS,
        "10.3.1.2",
        "Access keys are periodically regenerated",
        ("SN-SHARED-KEY-OFF", "SN-KEY-EXPIRATION-POLICY"),
        "In part: with shared key off the keys authorize nothing, and the key expiration policy is the reminder; when a key was last regenerated is not read",
    ),
    PeerCheck(
        Source.CIS,
        "10.3.1.3",
        "Allow storage account key access is Disabled",
        ("SN-SHARED-KEY-OFF",),
    ),
    PeerCheck(Source.CIS, "10.3.2.1", "Private endpoints are used", ("SN-PRIVATE-ENDPOINT",)),
    PeerCheck(
        Source.CIS, "10.3.2.2", "Public network access is Disabled", ("SN-PUBLIC-NETWORK-ACCESS",)
    ),
    PeerCheck(
        Source.CIS, "10.3.2.3", "Default network access rule is deny", ("SN-NETWORK-DEFAULT-DENY",)
    ),
    PeerCheck(
        Source.CIS,
        "10.3.3.1",
        "Default to Microsoft Entra authorization in the portal",
        (),
        ENTRA_DEFAULT,
    ),
    PeerCheck(Source.CIS, "10.3.4", "Secure transfer required", ("SN-HTTPS-TLS",)),
    PeerCheck(
        Source.CIS,
        "10.3.5",
        "Trusted Azure services may access the account",
        ("SN-TRUSTED-SERVICES",),
    ),
    PeerCheck(
        Source.CIS,
        "10.3.6",
        "Soft delete for containers and blobs",
        ("SN-CONTAINER-SOFT-DELETE", "SN-BLOB-SOFT-DELETE"),
    ),
    PeerCheck(Source.CIS, "10.3.7", "Minimum TLS version is 1.2", ("SN-HTTPS-TLS",)),
    PeerCheck(
        Source.CIS,
        "10.3.8",
        "Cross tenant replication is not enabled",
        ("SN-CROSS-TENANT-REPLICATION",),
    ),
    PeerCheck(
        Source.CIS, "10.3.9", "Allow blob anonymous access is Disabled", ("SN-NO-PUBLIC-ACCESS",)
    ),
    PeerCheck(
        Source.CIS, "10.3.10", "Delete locks are applied to storage accounts", ("SN-DELETE-LOCK",)
    ),
    PeerCheck(Source.CIS, "10.3.11", "ReadOnly locks are considered", (), READONLY_LOCK),
    PeerCheck(
        Source.CIS,
        "10.3.12",
        "Redundancy is geo-redundant (GRS) on critical accounts",
        ("SN-GEO-REDUNDANCY",),
    ),
)

MCSB_ROWS: Final = (
    PeerCheck(
        Source.MCSB,
        "NS-2",
        "Secure cloud services with network controls",
        ("SN-PUBLIC-NETWORK-ACCESS", "SN-NETWORK-DEFAULT-DENY", "SN-PRIVATE-ENDPOINT"),
    ),
    PeerCheck(
        Source.MCSB,
        "IM-1",
        "Use a centralized identity and authentication system",
        ("SN-SHARED-KEY-OFF", "SN-NO-LOCAL-USERS"),
    ),
    PeerCheck(
        Source.MCSB,
        "PA-7",
        "Just enough administration (least privilege)",
        ("SN-NO-BROAD-APP-ROLES", "SN-NEVER-GRANTED"),
    ),
    PeerCheck(Source.MCSB, "DP-3", "Encrypt sensitive data in transit", ("SN-HTTPS-TLS",)),
    PeerCheck(
        Source.MCSB,
        "DP-4",
        "Enable data at rest encryption by default",
        ("SN-INFRA-ENCRYPTION",),
        "Encryption at rest is always on; the rule asks for the second, infrastructure layer",
    ),
    PeerCheck(
        Source.MCSB, "DP-5", "Use a customer-managed key when required", ("SN-CMK-ENCRYPTION",)
    ),
    PeerCheck(
        Source.MCSB, "LT-1", "Enable threat detection capabilities", ("SN-DEFENDER-FOR-STORAGE",)
    ),
    PeerCheck(
        Source.MCSB, "LT-3", "Enable logging for security investigation", ("SN-BLOB-LOGGING",)
    ),
    PeerCheck(
        Source.MCSB,
        "BR-1",
        "Ensure regular automated backups",
        ("SN-BACKUP-PROTECTED", "SN-POINT-IN-TIME-RESTORE"),
    ),
    PeerCheck(
        Source.MCSB,
        "BR-2",
        "Protect backup and recovery data",
        ("SN-NO-PERMANENT-DELETE", "SN-DELETE-LOCK"),
        "In part: the kept copies cannot be purged early and the account cannot be deleted; a backup vault's own immutability is not read",
    ),
)

AVM_ROWS: Final = (
    PeerCheck(
        Source.AVM,
        "blobServices.deleteRetentionPolicyEnabled",
        "Blob soft delete (module default on, 6 days)",
        ("SN-BLOB-SOFT-DELETE",),
        f"The rule asks for {Thresholds().min_blob_soft_delete_days} days by default "
        "(`minBlobSoftDeleteDays`): AVM's 6 fail it",
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.containerDeleteRetentionPolicyEnabled",
        "Container soft delete (module default on, 7 days)",
        ("SN-CONTAINER-SOFT-DELETE",),
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.deleteRetentionPolicyAllowPermanentDelete",
        "Permanent delete of soft-deleted blobs (default off)",
        ("SN-NO-PERMANENT-DELETE",),
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.versionDeletePolicyDays",
        "A lifecycle rule deleting previous versions",
        ("SN-VERSION-EXPIRY",),
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.restorePolicyEnabled",
        "Point-in-time restore",
        ("SN-POINT-IN-TIME-RESTORE",),
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.diagnosticSettings",
        "Diagnostic settings of the blob service",
        ("SN-BLOB-LOGGING",),
    ),
    PeerCheck(
        Source.AVM,
        "blobServices.containers[].publicAccess",
        "A container's anonymous access level",
        ("SN-CONTAINERS-PRIVATE",),
    ),
    PeerCheck(
        Source.AVM,
        "immutableStorageWithVersioning",
        "Version-level WORM for every new container",
        ("SN-PROTOCOL-CONTAINER-MUTABLE",),
        WORM,
    ),
    PeerCheck(
        Source.AVM,
        "managementPolicyRules",
        "Lifecycle management rules",
        ("SN-PENDING-LIFECYCLE",),
        "AVM takes any rules; here one must delete blobs still tagged pending",
    ),
    PeerCheck(Source.AVM, "kind", "Account kind (default StorageV2)", ("SN-ACCOUNT-KIND",)),
    PeerCheck(
        Source.AVM,
        "enableHierarchicalNamespace",
        "Hierarchical namespace",
        ("SN-FLAT-NAMESPACE",),
        "Blob index tags, the protocol's guard, need a flat namespace",
    ),
    PeerCheck(Source.AVM, "skuName", "Redundancy (default Standard_GRS)", ("SN-GEO-REDUNDANCY",)),
    PeerCheck(Source.AVM, "lock", "A resource lock on the account", ("SN-DELETE-LOCK",)),
    PeerCheck(
        Source.AVM,
        "roleAssignments",
        "Role assignments, with optional ABAC conditions",
        ("SN-TAG-WRITE-ROLE", "SN-NO-BROAD-APP-ROLES", "SN-NEVER-GRANTED"),
    ),
    PeerCheck(
        Source.AVM,
        "allowSharedKeyAccess",
        "Shared key authorization (module default on)",
        ("SN-SHARED-KEY-OFF",),
        "AVM's default leaves shared key on; the rule flags it",
    ),
    PeerCheck(
        Source.AVM,
        "allowBlobPublicAccess",
        "Anonymous blob access (default off)",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.AVM, "minimumTlsVersion", "Minimum TLS version (TLS1_2 only)", ("SN-HTTPS-TLS",)
    ),
    PeerCheck(Source.AVM, "supportsHttpsTrafficOnly", "HTTPS only (default on)", ("SN-HTTPS-TLS",)),
    PeerCheck(
        Source.AVM,
        "requireInfrastructureEncryption",
        "Infrastructure encryption (default on)",
        ("SN-INFRA-ENCRYPTION",),
    ),
    PeerCheck(
        Source.AVM,
        "customerManagedKey",
        "Encryption with a customer-managed key",
        ("SN-CMK-ENCRYPTION",),
    ),
    PeerCheck(
        Source.AVM,
        "allowCrossTenantReplication",
        "Cross-tenant object replication (default off)",
        ("SN-CROSS-TENANT-REPLICATION",),
    ),
    PeerCheck(
        Source.AVM, "publicNetworkAccess", "Public network access", ("SN-PUBLIC-NETWORK-ACCESS",)
    ),
    PeerCheck(
        Source.AVM,
        "networkAcls",
        "Firewall default action and bypass",
        ("SN-NETWORK-DEFAULT-DENY", "SN-TRUSTED-SERVICES"),
    ),
    PeerCheck(Source.AVM, "privateEndpoints", "Private endpoints", ("SN-PRIVATE-ENDPOINT",)),
    PeerCheck(
        Source.AVM, "sasExpirationPeriod", "SAS expiration policy", ("SN-SAS-EXPIRATION-POLICY",)
    ),
    PeerCheck(
        Source.AVM, "isLocalUserEnabled", "Local users (default off)", ("SN-NO-LOCAL-USERS",)
    ),
    PeerCheck(Source.AVM, "enableSftp", "SFTP (default off)", ("SN-NO-LOCAL-USERS",)),
)

PROWLER_ROWS: Final = (
    PeerCheck(
        Source.PROWLER,
        "storage_ensure_soft_delete_is_enabled",
        "Soft delete is enabled",
        ("SN-CONTAINER-SOFT-DELETE",),
        PROWLER_SOFT_DELETE,
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_blob_versioning_is_enabled",
        "Blob versioning is enabled",
        ("SN-BLOB-VERSIONING",),
        VERSIONING,
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_geo_redundant_enabled",
        "Geo-redundant storage is enabled",
        ("SN-GEO-REDUNDANCY",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_account_key_access_disabled",
        "Storage account key access is disabled",
        ("SN-SHARED-KEY-OFF",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_default_to_entra_authorization_enabled",
        "Default to Entra authorization",
        (),
        ENTRA_DEFAULT,
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_blob_public_access_level_is_disabled",
        "Blob anonymous access is disabled",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_secure_transfer_required_is_enabled",
        "Secure transfer required",
        ("SN-HTTPS-TLS",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_ensure_minimum_tls_version_12",
        "Minimum TLS 1.2",
        ("SN-HTTPS-TLS",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_account_public_network_access_disabled",
        "Public network access is disabled",
        ("SN-PUBLIC-NETWORK-ACCESS",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_default_network_access_rule_is_denied",
        "Default network access rule is deny",
        ("SN-NETWORK-DEFAULT-DENY",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_ensure_azure_services_are_trusted_to_access_is_enabled",
        "Trusted Azure services may access",
        ("SN-TRUSTED-SERVICES",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_ensure_private_endpoints_in_storage_accounts",
        "Private endpoints are used",
        ("SN-PRIVATE-ENDPOINT",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_cross_tenant_replication_disabled",
        "Cross-tenant replication is disabled",
        ("SN-CROSS-TENANT-REPLICATION",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_infrastructure_encryption_is_enabled",
        "Infrastructure encryption is enabled",
        ("SN-INFRA-ENCRYPTION",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_ensure_encryption_with_customer_managed_keys",
        "Encryption with customer-managed keys",
        ("SN-CMK-ENCRYPTION",),
    ),
    PeerCheck(
        Source.PROWLER,
        "storage_key_rotation_90_days",
        "Key expiration period of at most 90 days",
        ("SN-KEY-EXPIRATION-POLICY",),
    ),
    PeerCheck(
        Source.PROWLER,
        "defender_ensure_defender_for_storage_is_on",
        "Defender for Storage is on",
        ("SN-DEFENDER-FOR-STORAGE",),
    ),
)

CHECKOV_ROWS: Final = (
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_38",
        "Soft delete is enabled on the storage account",
        ("SN-BLOB-SOFT-DELETE",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_206",
        "Storage accounts use replication (GRS, RAGRS, GZRS, RAGZRS)",
        ("SN-GEO-REDUNDANCY",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_40",
        "Not configured with Shared Key authorization",
        ("SN-SHARED-KEY-OFF",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_190",
        "Storage blobs restrict public access",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_47",
        "Configured without blob anonymous access",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_34",
        "Public access level is Private for blob containers",
        ("SN-CONTAINERS-PRIVATE",),
    ),
    PeerCheck(
        Source.CHECKOV, "CKV_AZURE_3", "enable_https_traffic_only is enabled", ("SN-HTTPS-TLS",)
    ),
    PeerCheck(Source.CHECKOV, "CKV_AZURE_44", "The latest version of TLS", ("SN-HTTPS-TLS",)),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_59",
        "Storage accounts disallow public access",
        ("SN-PUBLIC-NETWORK-ACCESS",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_35",
        "Default network access rule is deny",
        ("SN-NETWORK-DEFAULT-DENY",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_36",
        "Trusted Microsoft Services is enabled",
        ("SN-TRUSTED-SERVICES",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_33",
        "Configured with a private endpoint",
        ("SN-PRIVATE-ENDPOINT",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_1",
        "Critical data encrypted with a customer-managed key",
        ("SN-CMK-ENCRYPTION",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_41",
        "Configured with a SAS expiration policy",
        ("SN-SAS-EXPIRATION-POLICY",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_244",
        "Avoid local users unless necessary",
        ("SN-NO-LOCAL-USERS",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV2_AZURE_21",
        "Storage logging is enabled for the blob service (read)",
        ("SN-BLOB-LOGGING",),
    ),
    PeerCheck(
        Source.CHECKOV,
        "CKV_AZURE_84",
        "Azure Defender is On for Storage",
        ("SN-DEFENDER-FOR-STORAGE",),
    ),
)

PSRULE_ROWS: Final = (
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.SoftDelete",
        "Blob soft delete is enabled",
        ("SN-BLOB-SOFT-DELETE",),
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.ContainerSoftDelete",
        "Container soft delete is enabled",
        ("SN-CONTAINER-SOFT-DELETE",),
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.UseReplication",
        "Geo-replicated storage (GRS, RAGRS, GZRS, RAGZRS)",
        ("SN-GEO-REDUNDANCY",),
    ),
    PeerCheck(
        Source.PSRULE, "Azure.Storage.LocalAuth", "Access keys are disabled", ("SN-SHARED-KEY-OFF",)
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.BlobPublicAccess",
        "Blob public access is disallowed",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.BlobAccessType",
        "Containers use a private access type",
        ("SN-CONTAINERS-PRIVATE",),
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.SecureTransfer",
        "Only encrypted connections",
        ("SN-HTTPS-TLS",),
    ),
    PeerCheck(
        Source.PSRULE, "Azure.Storage.MinTLS", "TLS older than 1.2 is rejected", ("SN-HTTPS-TLS",)
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.Firewall",
        "Only explicitly allowed traffic",
        ("SN-NETWORK-DEFAULT-DENY",),
    ),
    PeerCheck(
        Source.PSRULE,
        "Azure.Storage.DefenderCloud",
        "Defender for Storage is enabled",
        ("SN-DEFENDER-FOR-STORAGE",),
    ),
)

AZURE_POLICY_ROWS: Final = (
    PeerCheck(
        Source.AZURE_POLICY,
        "9fbd64e3-67b8-489b-98e5-fa0007d17e76",
        "Configure soft delete for blobs and containers on Storage Accounts",
        ("SN-BLOB-SOFT-DELETE", "SN-CONTAINER-SOFT-DELETE"),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "c36a325b-ae04-4863-ad4f-19c6678f8e08",
        "Configure your Storage account to enable blob versioning",
        ("SN-BLOB-VERSIONING",),
        VERSIONING,
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "bf045164-79ba-4215-8f95-f8048dc1780b",
        "Geo-redundant storage should be enabled for Storage Accounts",
        ("SN-GEO-REDUNDANCY",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "4510daf9-5abc-4d7d-a11d-d84416b814f6",
        "[Preview]: Azure Backup should be enabled for Blobs in Storage Accounts",
        ("SN-BACKUP-PROTECTED",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "b4fe1a3b-0715-4c6c-a5ea-ffc33cf823cb",
        "Configure diagnostic settings for Blob Services to Log Analytics workspace",
        ("SN-BLOB-LOGGING",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "8c6a50c6-9ffd-4ae7-986f-5fa6111f9a54",
        "Storage accounts should prevent shared key access",
        ("SN-SHARED-KEY-OFF",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "4fa4b6c0-31ca-4c0d-b10d-24b96f62a751",
        "Storage account public access should be disallowed",
        ("SN-NO-PUBLIC-ACCESS",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "404c3081-a854-4457-ae30-26a93ef643f9",
        "Secure transfer to storage accounts should be enabled",
        ("SN-HTTPS-TLS",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "fe83a0eb-a853-422d-aac2-1bffd182c5d0",
        "Storage accounts should have the specified minimum TLS version",
        ("SN-HTTPS-TLS",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "b2982f36-99f2-4db5-8eff-283140c09693",
        "Storage accounts should disable public network access",
        ("SN-PUBLIC-NETWORK-ACCESS",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "34c877ad-507e-4c82-993e-3452a6e0ad3c",
        "Storage accounts should restrict network access",
        ("SN-NETWORK-DEFAULT-DENY",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "c9d007d0-c057-4772-b18c-01e546713bcd",
        "Storage accounts should allow access from trusted Microsoft services",
        ("SN-TRUSTED-SERVICES",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "6edd7eda-6dd8-40f7-810d-67160c639cd9",
        "Storage accounts should use private link",
        ("SN-PRIVATE-ENDPOINT",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "92a89a79-6c52-4a7e-a03f-61306fc49312",
        "Storage accounts should prevent cross tenant object replication",
        ("SN-CROSS-TENANT-REPLICATION",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "4733ea7b-a883-42fe-8cac-97454c2a9e4a",
        "Storage accounts should have infrastructure encryption",
        ("SN-INFRA-ENCRYPTION",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "6fac406b-40ca-413b-bf8e-0bf964659c25",
        "Storage accounts should use customer-managed key for encryption",
        ("SN-CMK-ENCRYPTION",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "044985bb-afe1-42cd-8a36-9d5d42424537",
        "Storage account keys should not be expired",
        ("SN-KEY-EXPIRATION-POLICY",),
        "In part: the rule asks for the expiration policy; whether a key is past it is not read",
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "bc1b984e-ddae-40cc-801a-050a030e4fbe",
        "Storage accounts should have shared access signature (SAS) policies configured",
        ("SN-SAS-EXPIRATION-POLICY",),
    ),
    PeerCheck(
        Source.AZURE_POLICY,
        "640d2586-54d2-465f-877f-9ffc1d2109f4",
        "Microsoft Defender for Storage should be enabled",
        ("SN-DEFENDER-FOR-STORAGE",),
    ),
)

PEER_CHECKS: Final[tuple[PeerCheck, ...]] = (
    *MICROSOFT_ROWS,
    *CIS_ROWS,
    *MCSB_ROWS,
    *AVM_ROWS,
    *PROWLER_ROWS,
    *CHECKOV_ROWS,
    *PSRULE_ROWS,
    *AZURE_POLICY_ROWS,
)
"""Every peer check, grouped by source in the order of `Source`."""
