"""The normalized account model that every rule judges.

Adapters fill it once, from Pulumi inputs (before deploy) or from ARM reads (after deploy), so
the rules cannot drift between the two moments. A value that is not known yet (a Pulumi output
during preview, a read that failed, a field of an unexpected type) is `UNKNOWN`, never a guess:
a rule that needs it answers UNKNOWN, not PASS.

This module imports no SDK.
"""

from __future__ import annotations

import enum
import re
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, TypeAlias, TypeGuard, TypeVar

from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER

T = TypeVar("T")


class Unknown(enum.Enum):
    """The one value that says "not known": compare with `is UNKNOWN`."""

    UNKNOWN = "unknown"

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = Unknown.UNKNOWN

Maybe: TypeAlias = T | Unknown
"""A value of type T, or UNKNOWN."""


_ASCII_LOWER: Final = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)
ARM_IGNORECASE: Final = re.IGNORECASE | re.ASCII
"""The regex flags of a pattern matched against ARM names: A-Z match a-z, nothing else does
(Python's IGNORECASE alone matches the long s, U+017F, to `s` and the Kelvin sign to `k`)."""


def arm_fold(text: str) -> str:
    """`text` as Resource Manager compares names and enum values: A-Z folded to a-z, every
    other character kept as it is.

    ARM and its resource providers are .NET services; their JSON binding and their name and
    enum comparisons are ordinal ignore-case (StringComparer.OrdinalIgnoreCase,
    https://learn.microsoft.com/dotnet/standard/base-types/best-practices-strings), which
    upper-cases each UTF-16 code unit by its simple mapping, never by full case folding: `ß`
    stays `ß` (no `ss`), the Kelvin sign upper-cases to itself (never `K`), and .NET pins the
    only two non-ASCII letters whose simple upper case is ASCII, the dotless i (U+0131) and
    the long s (U+017F), to themselves, so that no non-ASCII character ever equals an ASCII one
    (dotnet/runtime `GlobalizationNative_InitOrdinalCasingPage` in
    src/native/libs/System.Globalization.Native/pal_casing.c; the decision,
    https://github.com/dotnet/runtime/issues/32247). Every name the Microsoft.Storage schema
    has and every value of its enums is ASCII, so against them this fold is exactly .NET's.
    A name spelt with `ß`, the long s or the Kelvin sign is therefore another, unknown property to
    ARM, and to the audit an absent one: its documented default, never the value written."""
    return text.translate(_ASCII_LOWER)


def is_known(value: Maybe[T]) -> TypeGuard[T]:
    """True when `value` is an actual value (None included), not UNKNOWN."""
    return value is not UNKNOWN


class Facet(enum.Enum):
    """The separately read parts of an account; a rule names the facets it reads."""

    SETTINGS = "account settings"
    BLOB_SERVICE = "blob service properties"
    CONTAINERS = "containers"
    LIFECYCLE = "lifecycle management policy"
    ROLES = "role assignments"
    PRIVATE_ENDPOINTS = "private endpoint connections"
    LOCAL_USERS = "local users"
    DEFENDER = "Defender for Storage settings"
    LOCKS = "management locks"
    DIAGNOSTICS = "blob service diagnostic settings"
    BACKUP = "Azure Backup instances"


SHARED_KEY_SWITCH: Final = "allowSharedKeyAccessForServices"
"""The blob service's own shared key switch, a setting an api-version before 2026-09-01 does not
return (`blob_safetynet.policies.adapters.arm.STORAGE_API_VERSION`)."""

LEGAL_HOLD: Final = "hasLegalHold"
"""A container's legal hold flag: read-only, so an ARM template (an export included) never
carries it; a legal hold is set by an action, not by a property
(https://learn.microsoft.com/rest/api/storagerp/blob-containers/set-legal-hold)."""
CONTAINER_WORM_POLICY: Final = "hasImmutabilityPolicy"
"""A container's time-based retention flag: read-only as well; a template declares the policy
as a child resource (`containers/immutabilityPolicies`), which the offline audit does not read."""

Fact: TypeAlias = Facet | str
"""What a verdict may lack: a facet, or a setting named by its ARM property (`SHARED_KEY_SWITCH`,
`LEGAL_HOLD`, `CONTAINER_WORM_POLICY`)."""


@dataclass(frozen=True)
class Thresholds:
    """The numbers a deployment may tune; the pack's config schema and the audit's options."""

    min_blob_soft_delete_days: int = 7
    min_container_soft_delete_days: int = 7
    """Fewest days container soft delete must keep a deleted container (1-365, as Azure takes)."""
    max_pending_days: int = 7
    container: str = DEFAULT_CONTAINER
    deployment_principal_ids: tuple[str, ...] = ()
    """Object ids of the identities that deploy (pipelines, operators): exempt from the
    broad-role and never-granted rules, which judge application identities."""
    max_sas_expiration_seconds: int = 3600
    """Longest SAS validity the account's SAS expiration policy may allow (CIS: one hour)."""
    max_key_expiration_days: int = 90
    """Longest account key validity the key expiration policy may allow (CIS: 90 days)."""


@dataclass(frozen=True)
class AccountSettings:
    """Properties of the storage account resource itself."""

    kind: Maybe[str | None]
    is_hns_enabled: Maybe[bool]
    allow_shared_key_access: Maybe[bool]
    allow_blob_public_access: Maybe[bool]
    https_only: Maybe[bool]
    minimum_tls_version: Maybe[str]
    blob_shared_key_access: Maybe[bool | None] = None
    """`allowSharedKeyAccessForServices.blob.enabled`: None when the blob service has no
    setting of its own (the account-wide `allowSharedKeyAccess` applies)."""
    network: Maybe[Network] = UNKNOWN
    encryption: Maybe[Encryption] = UNKNOWN
    allow_cross_tenant_replication: Maybe[bool] = UNKNOWN
    key_expiration_days: Maybe[int | None] = UNKNOWN
    """`keyPolicy.keyExpirationPeriodInDays`; None: no key expiration policy."""
    sas_expiration_seconds: Maybe[int | None] = UNKNOWN
    """`sasPolicy.sasExpirationPeriod` in seconds; None: no SAS expiration policy."""
    sftp_enabled: Maybe[bool] = UNKNOWN
    local_users_enabled: Maybe[bool | None] = UNKNOWN
    """`isLocalUserEnabled`; None when unset (no documented default)."""
    sku: Maybe[str] = UNKNOWN
    """`sku.name` (Standard_LRS, Standard_GZRS, ...), in the REST spec's spelling when known."""
    immutability: Maybe[AccountImmutability] = UNKNOWN
    """`immutableStorageWithVersioning`: version-level immutability on the whole account."""


@dataclass(frozen=True)
class AccountImmutability:
    """Account-level version immutability (`immutableStorageWithVersioning`)."""

    enabled: Maybe[bool]
    default_policy_state: Maybe[str | None]
    """The default policy's `state` ("Unlocked", "Locked", "Disabled"); None: no default policy."""


@dataclass(frozen=True)
class Network:
    """Who may reach the account's public endpoint."""

    public_network_access: Maybe[str]
    """"Enabled", "Disabled" or "SecuredByPerimeter" (absent means Enabled)."""
    default_action: Maybe[str]
    """`networkAcls.defaultAction`: "Allow" or "Deny"."""
    bypass: Maybe[tuple[str, ...]]
    """`networkAcls.bypass`, split on commas ("AzureServices", "Logging", "Metrics", "None")."""


@dataclass(frozen=True)
class Encryption:
    infrastructure: Maybe[bool]
    """`encryption.requireInfrastructureEncryption` (a second, platform-keyed layer)."""
    key_source: Maybe[str]
    """"Microsoft.Storage" (platform keys) or "Microsoft.Keyvault" (customer-managed)."""


@dataclass(frozen=True)
class Retention:
    """A soft delete (delete retention) policy."""

    enabled: Maybe[bool]
    days: Maybe[int | None]
    allow_permanent_delete: Maybe[bool] = False


@dataclass(frozen=True)
class BlobService:
    """The account's blob service properties (`blobServices/default`)."""

    delete_retention: Retention
    container_delete_retention: Retention
    versioning_enabled: Maybe[bool]
    change_feed_enabled: Maybe[bool] = UNKNOWN
    restore_policy: Retention = Retention(UNKNOWN, UNKNOWN)
    """`restorePolicy` (point-in-time restore): `enabled` and `days`, how far back it restores."""


@dataclass(frozen=True)
class Container:
    name: Maybe[str]
    public_access: Maybe[str | None]
    """None or "None" for private; "Blob" or "Container" for anonymous read access."""
    worm_policy: Maybe[bool] = UNKNOWN
    """A time-based retention policy (`hasImmutabilityPolicy`, or an `immutabilityPolicy`)."""
    legal_hold: Maybe[bool] = UNKNOWN
    """`hasLegalHold`: at least one legal hold tag is set."""
    version_immutability: Maybe[bool] = UNKNOWN
    """`immutableStorageWithVersioning.enabled`: version-level immutability support."""


@dataclass(frozen=True)
class TagFilter:
    name: Maybe[str]
    op: Maybe[str]
    value: Maybe[str]


@dataclass(frozen=True)
class LifecycleRule:
    name: Maybe[str]
    enabled: Maybe[bool]
    blob_types: Maybe[tuple[str, ...]]
    prefixes: Maybe[tuple[str, ...]]
    """Empty means the rule applies to every container."""
    tag_filters: Maybe[tuple[TagFilter, ...]]
    delete_after_days: Maybe[int | None]
    """The base blob delete action's day count (the smallest given); None: no delete action."""
    version_delete_after_days: Maybe[int | None]
    """The previous-versions delete action's day count; None: no such action."""


@dataclass(frozen=True)
class RoleAssignment:
    principal_id: Maybe[str]
    principal_type: Maybe[str | None]
    role: Maybe[str]
    """The role's name when known, else its definition id."""
    scope: Maybe[str]
    actions: Maybe[tuple[str, ...]]
    not_actions: Maybe[tuple[str, ...]]
    data_actions: Maybe[tuple[str, ...]]
    not_data_actions: Maybe[tuple[str, ...]]
    condition: Maybe[str | None] = None
    """The assignment's ABAC condition (None: a plain grant); `blob_safetynet.policies.rules.roles` parses it."""


class LockScope(enum.StrEnum):
    """Where a management lock sits, from the account up: a lock applies to everything below
    its scope (https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources)."""

    ACCOUNT = "the account"
    RESOURCE_GROUP = "the resource group"
    SUBSCRIPTION = "the subscription"


@dataclass(frozen=True)
class Lock:
    """One management lock (`Microsoft.Authorization/locks`) that applies to the account."""

    name: Maybe[str]
    level: Maybe[str]
    """"CanNotDelete" or "ReadOnly" (ARM compares them ignoring case)."""
    scope: LockScope


@dataclass(frozen=True)
class Locks:
    """The locks found at the scopes read, and the scopes that could not be read, with why."""

    found: tuple[Lock, ...]
    unread: Mapping[LockScope, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DiagnosticSetting:
    """One diagnostic setting of the account's blob service."""

    name: Maybe[str]
    categories: Maybe[frozenset[str]]
    """The log categories and category groups it enables, folded by `arm_fold`."""
    has_destination: Maybe[bool]
    """A workspace, storage account, event hub or partner solution receives the logs."""


@dataclass(frozen=True)
class BackupInstance:
    """An Azure Backup (Microsoft.DataProtection) backup instance whose data source is the
    account's blobs."""

    name: Maybe[str]
    state: Maybe[str | None]
    """`properties.currentProtectionState` ("ProtectionConfigured", ...), None when absent."""


@dataclass(frozen=True)
class Account:
    """One storage account and everything the rules judge about it."""

    name: str
    resource_id: str | None = None
    settings: Maybe[AccountSettings] = UNKNOWN
    blob_service_properties: Maybe[BlobService] = UNKNOWN
    containers: Maybe[tuple[Container, ...]] = UNKNOWN
    lifecycle_rules: Maybe[tuple[LifecycleRule, ...]] = UNKNOWN
    """An empty tuple: the account has no lifecycle policy (known)."""
    role_assignments: Maybe[tuple[RoleAssignment, ...]] = UNKNOWN
    private_endpoints: Maybe[tuple[Maybe[str], ...]] = UNKNOWN
    """The status of each private endpoint connection ("Approved", "Pending", ...)."""
    local_users: Maybe[tuple[str, ...]] = UNKNOWN
    """The names of the account's local users (SFTP and NFSv3 identities outside Entra)."""
    defender_enabled: Maybe[bool] = UNKNOWN
    """Whether Microsoft Defender for Storage protects the account."""
    locks: Maybe[Locks] = UNKNOWN
    blob_diagnostics: Maybe[tuple[DiagnosticSetting, ...]] = UNKNOWN
    backup_instances: Maybe[tuple[BackupInstance, ...]] = UNKNOWN
    unknown_reasons: Mapping[Facet, str] = field(default_factory=dict)
    """Why a facet is UNKNOWN, when there is more to say than "not known yet"."""
    not_held: frozenset[Fact] = frozenset()
    """What the source cannot hold at all (saved files: role assignments, Defender for Storage,
    ...): a verdict that lacks only these is NOT_IN_FILES, not UNKNOWN. Empty for live reads."""

    def facet(self, facet: Facet) -> object:
        """The value of one facet (UNKNOWN when it was not read)."""
        values: dict[Facet, object] = {
            Facet.SETTINGS: self.settings,
            Facet.BLOB_SERVICE: self.blob_service_properties,
            Facet.CONTAINERS: self.containers,
            Facet.LIFECYCLE: self.lifecycle_rules,
            Facet.ROLES: self.role_assignments,
            Facet.PRIVATE_ENDPOINTS: self.private_endpoints,
            Facet.LOCAL_USERS: self.local_users,
            Facet.DEFENDER: self.defender_enabled,
            Facet.LOCKS: self.locks,
            Facet.DIAGNOSTICS: self.blob_diagnostics,
            Facet.BACKUP: self.backup_instances,
        }
        return values[facet]
