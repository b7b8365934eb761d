"""Parsers shared by both adapters: ARM bodies and azure-native inputs use the same camelCase
shapes for retention policies, lifecycle rules and role definitions.

Every getter is total: a missing key gives the documented Azure default, UNKNOWN stays UNKNOWN,
and a value of an unexpected type becomes UNKNOWN (an audit must judge odd documents, not crash).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from blob_safetynet.policies.adapters.arm_json import enum
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    AccountImmutability,
    AccountSettings,
    BlobService,
    Container,
    Encryption,
    LifecycleRule,
    Maybe,
    Network,
    Retention,
    TagFilter,
    arm_fold,
)

KINDS = ("Storage", "StorageV2", "BlobStorage", "FileStorage", "BlockBlobStorage")
TLS_VERSIONS = ("TLS1_0", "TLS1_1", "TLS1_2", "TLS1_3")
NETWORK_ACCESS = ("Enabled", "Disabled", "SecuredByPerimeter")
ACTIONS = ("Allow", "Deny")
BYPASS = ("None", "Logging", "Metrics", "AzureServices")
KEY_SOURCES = ("Microsoft.Storage", "Microsoft.Keyvault")
PUBLIC_ACCESS = ("None", "Blob", "Container")
BLOB_TYPES = ("blockBlob", "appendBlob")
CONNECTION_STATES = ("Pending", "Approved", "Rejected")
SKUS = (
    "Standard_LRS",
    "Standard_GRS",
    "Standard_RAGRS",
    "Standard_ZRS",
    "Premium_LRS",
    "Premium_ZRS",
    "Standard_GZRS",
    "Standard_RAGZRS",
    "StandardV2_LRS",
    "StandardV2_GRS",
    "StandardV2_ZRS",
    "StandardV2_GZRS",
    "PremiumV2_LRS",
    "PremiumV2_ZRS",
)
POLICY_STATES = ("Unlocked", "Locked", "Disabled")
"""The values of the Microsoft.Storage REST spec's enums the rules compare (`Kind`,
`MinimumTlsVersion`, `PublicNetworkAccess`, `DefaultAction`, `Bypass`, `KeySource`,
`PublicAccess`, the lifecycle filter's `blobTypes`, `PrivateEndpointServiceConnectionStatus`,
`SkuName`, `AccountImmutabilityPolicyProperties.state`;
https://github.com/Azure/azure-rest-api-specs/tree/main/specification/storage/resource-manager/Microsoft.Storage).
Each is an extensible enum (`x-ms-enum` with `modelAsString: true`) and Resource Manager takes
its values without regard to case: `publicAccess: "none"` deploys a private container. A value
read is put in the spec's spelling (`arm_json.enum`), whoever wrote it."""

_TIMESPAN = re.compile(r"(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2})")
"""`sasExpirationPeriod`'s format, D.HH:MM:SS (the day part optional)."""


def mapping(value: object) -> Maybe[Mapping[str, Any]]:
    """`value` as a mapping; None and absent are an empty one."""
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return value
    return UNKNOWN


def get_bool(data: Mapping[str, Any], key: str, default: bool) -> Maybe[bool]:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and arm_fold(value) in ("true", "false"):
        return arm_fold(value) == "true"
    return UNKNOWN


def get_int(data: Mapping[str, Any], key: str) -> Maybe[int | None]:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return UNKNOWN
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return UNKNOWN


def get_str(data: Mapping[str, Any], key: str, choices: tuple[str, ...] = ()) -> Maybe[str | None]:
    """The text at `key`; with `choices`, an enum's value in the spec's spelling."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return enum(value, choices) if choices else value
    return UNKNOWN


def get_strs(
    data: Mapping[str, Any], key: str, choices: tuple[str, ...] = ()
) -> Maybe[tuple[str, ...]]:
    value = data.get(key)
    if value is None:
        return ()
    is_list = isinstance(value, Sequence) and not isinstance(value, str)
    if is_list and all(isinstance(item, str) for item in value):
        return tuple(enum(item, choices) for item in value)
    return UNKNOWN


def blob_shared_key_access(props: Mapping[str, Any]) -> Maybe[bool | None]:
    """`allowSharedKeyAccessForServices.blob.enabled`; None when the blob service sets nothing.

    The per-service setting arrived with azure-mgmt-storage 25.x's default api-version
    (2026-09-01, `StorageAccountSharedKeyAccessProperties`); older api-versions never return it.
    """
    services = mapping(props.get("allowSharedKeyAccessForServices"))
    if services is UNKNOWN:
        return UNKNOWN
    blob = mapping(services.get("blob"))
    if blob is UNKNOWN:
        return UNKNOWN
    if blob.get("enabled") is None:
        return None
    return get_bool(blob, "enabled", False)


def network(props: Mapping[str, Any], acls_key: str) -> Network:
    """Public network access and the firewall. Absent means open: "By default, storage
    accounts accept connections from clients on any network"
    (https://learn.microsoft.com/azure/storage/common/storage-network-security), so an absent
    `publicNetworkAccess` is Enabled and absent network rules allow; `bypass` defaults to
    AzureServices (NetworkRuleSet in the Microsoft.Storage REST spec) when absent; an empty
    `bypass` is present and names no service, as the Azure Policy definition reads it."""
    access = get_str(props, "publicNetworkAccess", NETWORK_ACCESS)
    acls = mapping(props.get(acls_key))
    if acls is UNKNOWN:
        return Network("Enabled" if access is None else access, UNKNOWN, UNKNOWN)
    action = get_str(acls, "defaultAction", ACTIONS)
    bypass = get_str(acls, "bypass")
    return Network(
        public_network_access="Enabled" if access is None else access,
        default_action="Allow" if action is None else action,
        bypass=(
            bypass
            if bypass is UNKNOWN
            else tuple(
                enum(part.strip(), BYPASS)
                for part in ("AzureServices" if bypass is None else bypass).split(",")
            )
        ),
    )


def encryption(props: Mapping[str, Any]) -> Encryption:
    """Absent means platform keys without the infrastructure layer (the REST spec's
    defaults: keySource Microsoft.Storage, requireInfrastructureEncryption false)."""
    data = mapping(props.get("encryption"))
    if data is UNKNOWN:
        return Encryption(UNKNOWN, UNKNOWN)
    source = get_str(data, "keySource", KEY_SOURCES)
    return Encryption(
        infrastructure=get_bool(data, "requireInfrastructureEncryption", False),
        key_source="Microsoft.Storage" if source is None else source,
    )


def timespan_seconds(value: Maybe[str | None]) -> Maybe[int | None]:
    """D.HH:MM:SS as seconds; None stays None, anything else unreadable is UNKNOWN."""
    if value is None or value is UNKNOWN:
        return value
    match = _TIMESPAN.fullmatch(value)
    if match is None:
        return UNKNOWN
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _policy_value(props: Mapping[str, Any], policy: str, key: str) -> object:
    data = mapping(props.get(policy))
    return UNKNOWN if data is UNKNOWN else data.get(key)


def _optional_bool(props: Mapping[str, Any], key: str) -> Maybe[bool | None]:
    """A switch whose absence has no documented default: None when unset."""
    return None if props.get(key) is None else get_bool(props, key, False)


def account_settings(
    kind: Maybe[str | None], props: Mapping[str, Any], https_key: str, acls_key: str
) -> AccountSettings:
    """Account settings from camelCase properties; absent values take the REST API's
    documented defaults. ARM reads and Pulumi inputs differ only in where `kind` sits and in
    the names of the HTTPS flag (`supportsHttpsTrafficOnly` vs `enableHttpsTrafficOnly`) and
    of the firewall (`networkAcls` vs `networkRuleSet`).

    Absent means permissive for all three security switches, never "off":
    - `allowBlobPublicAccess`: "the storage account permits anonymous access when the
      AllowBlobPublicAccess property is null or true" (older accounts never set it;
      https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-prevent, and the
      Az.Storage model: "The default interpretation is true for this property",
      https://learn.microsoft.com/dotnet/api/microsoft.azure.powershell.cmdlets.functions.models.istorageaccountpropertiesupdateparameters.allowblobpublicaccess).
    - `allowSharedKeyAccess`: "The default value is null, which is equivalent to true"
      (StorageAccountPropertiesCreateParameters in the Microsoft.Storage REST spec).
    - `minimumTlsVersion`: absent means TLS1_0 (the REST spec's documented default).
    - `allowCrossTenantReplication`: Microsoft: "cross-tenant object replication is disabled
      for all new storage accounts created after Dec 15, 2023", but the property "was not set
      by default" on older accounts, which stay allowed; absent is read as allowed (a Pulumi
      program may also adopt an older account), so the setting must be explicit
      (https://learn.microsoft.com/azure/storage/blobs/object-replication-prevent-cross-tenant-policies).
    - `isLocalUserEnabled` has no documented default: None when unset (the local user
      list decides).
    """
    tls = get_str(props, "minimumTlsVersion", TLS_VERSIONS)
    key_days = _policy_value(props, "keyPolicy", "keyExpirationPeriodInDays")
    sas_period = _policy_value(props, "sasPolicy", "sasExpirationPeriod")
    return AccountSettings(
        kind=enum(kind, KINDS),
        is_hns_enabled=get_bool(props, "isHnsEnabled", False),
        allow_shared_key_access=get_bool(props, "allowSharedKeyAccess", True),
        allow_blob_public_access=get_bool(props, "allowBlobPublicAccess", True),
        https_only=get_bool(props, https_key, True),
        minimum_tls_version="TLS1_0" if tls is None else tls,
        blob_shared_key_access=blob_shared_key_access(props),
        network=network(props, acls_key),
        encryption=encryption(props),
        allow_cross_tenant_replication=get_bool(props, "allowCrossTenantReplication", True),
        key_expiration_days=(
            UNKNOWN if key_days is UNKNOWN else get_int({"days": key_days}, "days")
        ),
        sas_expiration_seconds=(
            UNKNOWN
            if sas_period is UNKNOWN
            else timespan_seconds(get_str({"period": sas_period}, "period"))
        ),
        sftp_enabled=get_bool(props, "isSftpEnabled", False),
        local_users_enabled=_optional_bool(props, "isLocalUserEnabled"),
        immutability=account_immutability(props),
    )


def sku(holder: Mapping[str, Any]) -> Maybe[str]:
    """`sku.name` of an account body or StorageAccount inputs, in the spec's spelling (`SkuName`).
    Every account has one (ARM requires it on create), so an absent SKU is UNKNOWN, not a default."""
    data = mapping(holder.get("sku"))
    name = UNKNOWN if data is UNKNOWN else get_str(data, "name", SKUS)
    return UNKNOWN if name is None else name


def account_immutability(props: Mapping[str, Any]) -> Maybe[AccountImmutability]:
    """`immutableStorageWithVersioning`; absent means off, as on any account created without it
    (https://learn.microsoft.com/azure/storage/blobs/immutable-version-level-worm-policies)."""
    data = mapping(props.get("immutableStorageWithVersioning"))
    if data is UNKNOWN:
        return UNKNOWN
    policy = mapping(data.get("immutabilityPolicy"))
    state: Maybe[str | None] = UNKNOWN
    if policy is not UNKNOWN:
        found = get_str(policy, "state", POLICY_STATES)
        # A default policy given without a state is in force: ARM creates it Unlocked.
        state = None if not policy else ("Unlocked" if found is None else found)
    return AccountImmutability(enabled=get_bool(data, "enabled", False), default_policy_state=state)


def retention(value: object, *, with_permanent_delete: bool) -> Retention:
    data = mapping(value)
    if data is UNKNOWN:
        return Retention(enabled=UNKNOWN, days=UNKNOWN, allow_permanent_delete=UNKNOWN)
    return Retention(
        enabled=get_bool(data, "enabled", False),
        days=get_int(data, "days"),
        allow_permanent_delete=(
            get_bool(data, "allowPermanentDelete", False) if with_permanent_delete else False
        ),
    )


def blob_service_properties(props: Mapping[str, Any]) -> BlobService:
    """From blob service properties (ARM `properties` or azure-native inputs); absent policies
    are off (the REST spec's defaults: no change feed, no restore policy)."""
    feed = mapping(props.get("changeFeed"))
    return BlobService(
        delete_retention=retention(props.get("deleteRetentionPolicy"), with_permanent_delete=True),
        container_delete_retention=retention(
            props.get("containerDeleteRetentionPolicy"), with_permanent_delete=False
        ),
        versioning_enabled=get_bool(props, "isVersioningEnabled", False),
        change_feed_enabled=UNKNOWN if feed is UNKNOWN else get_bool(feed, "enabled", False),
        restore_policy=retention(props.get("restorePolicy"), with_permanent_delete=False),
    )


def container(
    name: Maybe[str], props: Mapping[str, Any], read_only_absent: Maybe[bool] = UNKNOWN
) -> Container:
    """A container; `read_only_absent` is what an absent read-only flag (`hasImmutabilityPolicy`,
    `hasLegalHold`) means: UNKNOWN for a read (ARM's list returns both flags, so a body without
    them was not read whole), False for a program's inputs (a legal hold is an action, never an
    input, and the program's own immutability policies are resources `pulumi_props` adds)."""
    version = mapping(props.get("immutableStorageWithVersioning"))
    return Container(
        name=name,
        public_access=get_str(props, "publicAccess", PUBLIC_ACCESS),
        worm_policy=_worm_policy(props, read_only_absent),
        legal_hold=(
            read_only_absent
            if props.get("hasLegalHold") is None
            else get_bool(props, "hasLegalHold", False)
        ),
        version_immutability=(
            UNKNOWN if version is UNKNOWN else get_bool(version, "enabled", False)
        ),
    )


def _worm_policy(props: Mapping[str, Any], absent: Maybe[bool]) -> Maybe[bool]:
    """`hasImmutabilityPolicy` ("set to true by SRP if ImmutabilityPolicy has been created for
    this container", ContainerProperties in the Microsoft.Storage REST spec) decides; without it,
    an `immutabilityPolicy` carrying a retention period is one."""
    if props.get("hasImmutabilityPolicy") is not None:
        return get_bool(props, "hasImmutabilityPolicy", False)
    policy = mapping(props.get("immutabilityPolicy"))
    inner = UNKNOWN if policy is UNKNOWN else mapping(policy.get("properties", policy))
    if inner is UNKNOWN:
        return UNKNOWN
    return True if inner.get("immutabilityPeriodSinceCreationInDays") is not None else absent


def _delete_days(action: object) -> Maybe[int | None]:
    """The smallest day count of a delete action; None when there is no delete action."""
    data = mapping(action)
    if data is UNKNOWN:
        return UNKNOWN
    delete = mapping(data.get("delete"))
    if delete is UNKNOWN:
        return UNKNOWN
    days: list[int] = []
    for key in (
        "daysAfterCreationGreaterThan",
        "daysAfterModificationGreaterThan",
        "daysAfterLastAccessTimeGreaterThan",
    ):
        value = get_int(delete, key)
        if value is UNKNOWN:
            return UNKNOWN
        if value is not None:
            days.append(value)
    return min(days) if days else None


def _tag_filters(value: object) -> Maybe[tuple[TagFilter, ...]]:
    if value is None:
        return ()
    if not isinstance(value, Sequence) or isinstance(value, str):
        return UNKNOWN
    filters: list[TagFilter] = []
    for item in value:
        data = mapping(item)
        if data is UNKNOWN:
            return UNKNOWN
        name, op, val = get_str(data, "name"), get_str(data, "op"), get_str(data, "value")
        filters.append(
            TagFilter(
                name=UNKNOWN if name is None else name,
                op=UNKNOWN if op is None else op,
                value=UNKNOWN if val is None else val,
            )
        )
    return tuple(filters)


def lifecycle_rule(value: object) -> LifecycleRule:
    data = mapping(value)
    if data is UNKNOWN:
        data = {"enabled": UNKNOWN, "definition": UNKNOWN}
    name = get_str(data, "name")
    definition = mapping(data.get("definition"))
    filters = UNKNOWN if definition is UNKNOWN else mapping(definition.get("filters"))
    actions = UNKNOWN if definition is UNKNOWN else mapping(definition.get("actions"))
    return LifecycleRule(
        name=UNKNOWN if name is None else name,
        enabled=get_bool(data, "enabled", True),
        blob_types=UNKNOWN if filters is UNKNOWN else get_strs(filters, "blobTypes", BLOB_TYPES),
        prefixes=UNKNOWN if filters is UNKNOWN else get_strs(filters, "prefixMatch"),
        tag_filters=UNKNOWN if filters is UNKNOWN else _tag_filters(filters.get("blobIndexMatch")),
        delete_after_days=UNKNOWN if actions is UNKNOWN else _delete_days(actions.get("baseBlob")),
        version_delete_after_days=(
            UNKNOWN if actions is UNKNOWN else _delete_days(actions.get("version"))
        ),
    )


def lifecycle_rules(policy: object) -> Maybe[tuple[LifecycleRule, ...]]:
    """From a management policy's `policy` object ({"rules": [...]})."""
    data = mapping(policy)
    if data is UNKNOWN:
        return UNKNOWN
    rules = data.get("rules")
    if rules is None:
        return ()
    if not isinstance(rules, Sequence) or isinstance(rules, str):
        return UNKNOWN
    return tuple(lifecycle_rule(rule) for rule in rules)


def permissions(value: object) -> tuple[Maybe[tuple[str, ...]], ...]:
    """(actions, notActions, dataActions, notDataActions), each the union over permission blocks."""
    keys = ("actions", "notActions", "dataActions", "notDataActions")
    if not isinstance(value, Sequence) or isinstance(value, str):
        return (UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN)
    merged: dict[str, list[str]] = {key: [] for key in keys}
    for block in value:
        data = mapping(block)
        if data is UNKNOWN:
            return (UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN)
        for key in keys:
            items = get_strs(data, key)
            if items is UNKNOWN:
                return (UNKNOWN, UNKNOWN, UNKNOWN, UNKNOWN)
            merged[key].extend(items)
    return tuple(tuple(merged[key]) for key in keys)


def private_endpoint_status(connection: Mapping[str, Any]) -> Maybe[str]:
    """A private endpoint connection's `privateLinkServiceConnectionState.status`."""
    props = mapping(connection.get("properties"))
    state = UNKNOWN if props is UNKNOWN else mapping(props.get("privateLinkServiceConnectionState"))
    status = UNKNOWN if state is UNKNOWN else get_str(state, "status", CONNECTION_STATES)
    return UNKNOWN if status is None else status


def defender_enabled(settings: Mapping[str, Any]) -> Maybe[bool]:
    """A DefenderForStorageSetting's `isEnabled` (absent: not enabled)."""
    props = mapping(settings.get("properties"))
    return UNKNOWN if props is UNKNOWN else get_bool(props, "isEnabled", False)


def plan_enabled(pricing: Mapping[str, Any]) -> Maybe[bool]:
    """A Defender plan (pricing) is on when its tier is Standard; Free or absent is off."""
    props = mapping(pricing.get("properties"))
    tier = UNKNOWN if props is UNKNOWN else get_str(props, "pricingTier")
    if tier is UNKNOWN:
        return UNKNOWN
    return tier is not None and arm_fold(tier) == "standard"


def plan_coverage(pricing: Mapping[str, Any]) -> bool | None:
    """Whether a subscription's plan reports every one of its resources protected (True) or
    none (False), from `resourcesCoverageStatus` FullyCovered or NotCovered; None when it
    reports a mix (PartiallyCovered), nothing, or something else. The field reflects each
    resource's own status, which may differ from the plan's tier (Pricings - Get, 2024-01-01:
    https://learn.microsoft.com/rest/api/defenderforcloud/pricings/get)."""
    props = mapping(pricing.get("properties"))
    status = None if props is UNKNOWN else props.get("resourcesCoverageStatus")
    if not isinstance(status, str):
        return None
    return {"fullycovered": True, "notcovered": False}.get(arm_fold(status))
