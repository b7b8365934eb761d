"""The Azure Policy aliases the generated definitions use, each with where Microsoft documents it.

An alias names a resource property for policy ("Each alias maps to paths in different API
versions for a given resource type",
https://learn.microsoft.com/azure/governance/policy/concepts/definition-structure-alias). Only
aliases found in Microsoft's own built-in definitions (the Azure/azure-policy repository, which
publishes the built-ins of the service) are used; a rule whose property has no alias found there
is listed as not expressible (`forms.NOT_EXPRESSIBLE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ACCOUNT_TYPE: Final = "Microsoft.Storage/storageAccounts"
BLOB_SERVICE_TYPE: Final = "Microsoft.Storage/storageAccounts/blobServices"

_BUILT_INS = (
    "https://github.com/Azure/azure-policy/blob/master/built-in-policies/policyDefinitions/Storage/"
)


@dataclass(frozen=True)
class Alias:
    name: str
    path: str
    """The property path in the resource's ARM body (the alias's default path)."""
    source: str
    """A Microsoft built-in definition that uses the alias (name and id in the URL's file)."""
    modifiable: bool = False
    """Used by a Microsoft built-in `modify` operation, so a Modify effect can set it."""


def _alias(resource_type: str, leaf: str, source: str, *, modifiable: bool = False) -> Alias:
    return Alias(f"{resource_type}/{leaf}", f"properties.{leaf}", _BUILT_INS + source, modifiable)


ALLOW_BLOB_PUBLIC_ACCESS: Final = _alias(
    ACCOUNT_TYPE,
    "allowBlobPublicAccess",
    "StorageAccountDisablePublicBlobAccess_Modify.json",
    modifiable=True,
)
SUPPORTS_HTTPS_ONLY: Final = _alias(
    ACCOUNT_TYPE,
    "supportsHttpsTrafficOnly",
    "StorageAccountSecureTransfer_Modify.json",
    modifiable=True,
)
MINIMUM_TLS_VERSION: Final = _alias(
    ACCOUNT_TYPE, "minimumTlsVersion", "StorageAccountMinimumTLSVersion_Audit.json"
)
PUBLIC_NETWORK_ACCESS: Final = _alias(
    ACCOUNT_TYPE,
    "publicNetworkAccess",
    "StoragePublicNetworkAccess_Modify.json",
    modifiable=True,
)
NETWORK_DEFAULT_ACTION: Final = _alias(
    ACCOUNT_TYPE, "networkAcls.defaultAction", "Storage_NetworkAcls_Audit.json"
)
NETWORK_BYPASS: Final = _alias(
    ACCOUNT_TYPE, "networkAcls.bypass", "StorageAccess_TrustedMicrosoftServices_Audit.json"
)
CROSS_TENANT_REPLICATION: Final = _alias(
    ACCOUNT_TYPE,
    "allowCrossTenantReplication",
    "StorageAccountAllowCrossTenantReplication_Audit.json",
)
INFRASTRUCTURE_ENCRYPTION: Final = _alias(
    ACCOUNT_TYPE,
    "encryption.requireInfrastructureEncryption",
    "StorageAccountInfrastructureEncryptionEnabled_Audit.json",
)
KEY_SOURCE: Final = _alias(
    ACCOUNT_TYPE, "encryption.keySource", "StorageAccountCustomerManagedKeyEnabled_Audit.json"
)
KEY_EXPIRATION_DAYS: Final = _alias(
    ACCOUNT_TYPE, "keyPolicy.keyExpirationPeriodInDays", "StorageAccountKeysExpired_Restrict.json"
)
BLOB_SOFT_DELETE_ENABLED: Final = _alias(
    BLOB_SERVICE_TYPE,
    "deleteRetentionPolicy.enabled",
    "StorageAccountEnableSoftDelete_DINE.json",
    modifiable=True,
)
BLOB_SOFT_DELETE_DAYS: Final = Alias(
    f"{BLOB_SERVICE_TYPE}/deleteRetentionPolicy.days",
    "properties.deleteRetentionPolicy.days",
    "https://www.azadvertizer.net/azpolicyadvertizer/ea39f60f-9f00-473c-8604-be5eac4bb088.html",
    modifiable=True,
)
"""Listed with its default path and as modifiable by AzAdvertizer from the service's alias data
(Get-AzPolicyAlias), with `deleteRetentionPolicy.enabled`; Microsoft's built-in 9fbd64e3 sets
the same property through its deployment template."""
VERSIONING_ENABLED: Final = _alias(
    BLOB_SERVICE_TYPE,
    "isVersioningEnabled",
    "StorageAccountEnableBlobVersion_Modify.json",
    modifiable=True,
)
"""Microsoft's Modify built-in 978deb5d sets it; its Audit sibling c36a325b "Configure your
Storage account to enable blob versioning" reads it."""
SKU_NAME: Final = Alias(
    f"{ACCOUNT_TYPE}/sku.name", "sku.name", _BUILT_INS + "GeoRedundant_StorageAccounts_Audit.json"
)
"""The account's SKU sits beside `properties`, not in it."""

ALIASES: Final[dict[str, Alias]] = {
    alias.name: alias
    for alias in (
        ALLOW_BLOB_PUBLIC_ACCESS,
        SUPPORTS_HTTPS_ONLY,
        MINIMUM_TLS_VERSION,
        PUBLIC_NETWORK_ACCESS,
        NETWORK_DEFAULT_ACTION,
        NETWORK_BYPASS,
        CROSS_TENANT_REPLICATION,
        INFRASTRUCTURE_ENCRYPTION,
        KEY_SOURCE,
        KEY_EXPIRATION_DAYS,
        BLOB_SOFT_DELETE_ENABLED,
        BLOB_SOFT_DELETE_DAYS,
        VERSIONING_ENABLED,
        SKU_NAME,
    )
}
"""Every alias a generated definition may name, by name."""
