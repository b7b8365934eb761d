"""The stack's configuration: every key, its default, its allowed range, validated in one place.

`parse` is pure (a mapping of raw values in, a `StackConfig` out) so it can be tested without
Pulumi; `load` is the thin adapter that reads the same keys from `pulumi.Config`. A value that is
missing, malformed or out of range stops the program with a `ConfigError` naming the key and what
is allowed; nothing is clamped, because a silently "corrected" retention or expiry is exactly
the kind of drift a safety net must not have.

Over 500 lines on purpose: every stack configuration key with its range, in one place, so a
key cannot be parsed twice with different rules.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final, TypedDict
from urllib.parse import parse_qs, urlsplit

from blob_safetynet.settings import appsettings, untrusted
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER, DEFAULT_INVENTORY_CONTAINER

NAMESPACE: Final = "blob-safetynet"
"""The Pulumi project name, and so the namespace of every key (`blob-safetynet:<key>`)."""

DATABASE_URL_KEY: Final = "sweeperDatabaseUrl"
DATABASE_AUTH_KEY: Final = "sweeperDatabaseAuth"
WEBHOOKS_KEY: Final = "alertWebhooks"
DATABASE_AUTH_MODES: Final = appsettings.DB_AUTH_MODES
"""The sweeper's database authentication modes, written to its app setting as they are."""
MIN_DEPLOYED_CUTOFF: Final = timedelta(minutes=1)
"""The deployed sweeper's cutoff floor (the CLI's is 1s): a Function whose schedule fires every
few minutes gains nothing from a cutoff under a minute, which only risks racing live uploads."""

STORAGE_SKUS: Final = (
    "Standard_LRS",
    "Standard_ZRS",
    "Standard_GRS",
    "Standard_RAGRS",
    "Standard_GZRS",
    "Standard_RAGZRS",
)
"""The SKUs a StorageV2 account holding block blobs takes: ARM's SKU table ("SKU Types",
https://learn.microsoft.com/rest/api/storagerp/srp_sku_types) allows these and Premium_LRS and
Premium_ZRS for StorageV2, but a premium StorageV2 account is a premium page blob account ("Storage
account overview", https://learn.microsoft.com/azure/storage/common/storage-account-overview),
where block blobs, blob index tags and lifecycle rules do not exist. The StandardV2_* and
PremiumV2_* names are FileStorage SKUs."""
PAGE_BLOB_SKUS: Final = frozenset({"Premium_LRS", "Premium_ZRS"})
LOCK_LEVELS: Final = ("CanNotDelete", "none")
READ_ONLY_LOCK: Final = "ReadOnly"
MIN_LOG_RETENTION_DAYS: Final = 30
MAX_LOG_RETENTION_DAYS: Final = 730
"""A workspace keeps data interactively 30 days by default and up to two years; under 31 days
costs the same ("Manage data retention in a Log Analytics workspace",
https://learn.microsoft.com/azure/azure-monitor/logs/data-retention-configure)."""

DEFAULTS: Final[Mapping[str, object]] = {
    "location": "westeurope",
    "storageSku": "Standard_ZRS",
    "containerName": DEFAULT_CONTAINER,
    "blobSoftDeleteDays": 14,
    "containerSoftDeleteDays": 14,
    "versioning": False,
    "versionExpiryDays": 30,
    "pendingExpiryDays": 1,
    "retiredBlobDays": 7,
    "inventoryReportDays": 30,
    "uploaderPrincipalIds": [],
    "readerPrincipalIds": [],
    "verifierPrincipalIds": [],
    "deployerPrincipalType": "User",
    "publicNetworkAccess": "Enabled",
    "networkDefaultAction": "Deny",
    "allowedIpRanges": [],
    "allowedSubnetIds": [],
    "sweeperSubnetId": "",
    "privateEndpointSubnetId": "",
    "privateDnsZoneId": "",
    "infrastructureEncryption": True,
    "sweeperSchedule": "0 */5 * * * *",
    "sweeperCutoff": appsettings.CUTOFF.default,
    "sweeperLease": False,
    "sweeperPackagePath": "build/sweeper-function.zip",
    "sweeperTable": appsettings.TABLE.default,
    "sweeperColumns": {},
    DATABASE_AUTH_KEY: appsettings.DB_AUTH_PASSWORD,
    "verifySchedule": "0 30 3 * * *",
    "alertEmails": [],
    WEBHOOKS_KEY: [],
    # The nets Microsoft recommends for an account (issue 46); see NETS below.
    "lock": "CanNotDelete",
    "logRetentionDays": 30,
    "pointInTimeRestoreDays": 0,
    "changeFeed": False,
    # The remaining nets (issue 46): backup, customer-managed keys, Defender for Storage.
    "backup": "none",
    "backupOperationalDays": 7,
    "backupVaultedDays": 30,
    "encryptionKeyUri": "",
    "encryptionIdentityId": "",
    "defenderForStorage": False,
}
"""Every key with a default. `sweeperDatabaseUrl` has none: it is required and must be a secret."""

PRINCIPAL_TYPES: Final = ("User", "Group", "ServicePrincipal")
"""The principal kinds a role assignment names; ARM refuses one that does not match Entra."""
_PRINCIPALS_SHAPE: Final = (
    'a list of {"id": <Entra object id>, "type": "User", "Group" or "ServicePrincipal"}, '
    "possibly empty (apps and managed identities are ServicePrincipal)"
)

MAX_OPERATIONAL_DAYS: Final = 360
"""The operational tier's longest retention ("The backup policy can have a maximum retention of
360 days", https://learn.microsoft.com/azure/backup/blob-backup-overview)."""
MAX_VAULTED_DAYS: Final = 3650
"""The vaulted tier keeps data "for up to 10 years" (same page)."""

ALLOWED: Final[Mapping[str, str]] = {
    "location": "an Azure region name: lowercase letters and digits, e.g. westeurope",
    "containerName": "3-63 characters: lowercase letters, digits and single hyphens, "
    f"starting and ending with a letter or digit; not {DEFAULT_INVENTORY_CONTAINER} (the Blob "
    "Inventory reports' container)",
    "blobSoftDeleteDays": "an integer from 1 to 365",
    "containerSoftDeleteDays": "an integer from 1 to 365",
    "versioning": "true or false",
    "versionExpiryDays": "an integer from 1 to 365",
    "pendingExpiryDays": "an integer from 1 to 365",
    "retiredBlobDays": "an integer from 2 to 365: blobs tagged state=retired are deleted this "
    "many days after they were last read",
    "inventoryReportDays": "an integer from 2 to 365: Blob Inventory reports (container "
    f"{DEFAULT_INVENTORY_CONTAINER}) are deleted this many days after they were written; "
    "reconcile --inventory reads only the newest",
    "uploaderPrincipalIds": _PRINCIPALS_SHAPE,
    "readerPrincipalIds": _PRINCIPALS_SHAPE,
    "verifierPrincipalIds": f"{_PRINCIPALS_SHAPE}: pipeline identities that run `safetynet verify`",
    "deployerPrincipalType": "User or ServicePrincipal: the kind of identity running "
    "`pulumi up` (a service principal, managed identity or workload identity is "
    "ServicePrincipal), which gets Key Vault Secrets Officer on the vault",
    "publicNetworkAccess": "Enabled or Disabled: Disabled needs privateEndpointSubnetId",
    "networkDefaultAction": "Deny or Allow: what the data account's firewall does with traffic "
    "no rule allows; Deny needs sweeperSubnetId",
    "allowedIpRanges": "a list of public IPv4 addresses or CIDR ranges (prefix /30 or "
    "shorter), possibly empty, allowed through the data account's firewall",
    "allowedSubnetIds": "a list of subnet resource ids, possibly empty, allowed through the "
    "data account's firewall (each with the Microsoft.Storage service endpoint)",
    "sweeperSubnetId": "a subnet resource id the sweeper's Flex Consumption app joins, "
    "delegated to Microsoft.App/environments, with the Microsoft.Storage service endpoint, in "
    "a subscription with the Microsoft.App resource provider registered; or empty; required "
    "unless networkDefaultAction is Allow",
    "privateEndpointSubnetId": "a subnet resource id for the data account's blob private "
    "endpoint, or empty (no private endpoint)",
    "privateDnsZoneId": "the resource id of an existing privatelink.blob.core.windows.net "
    "private DNS zone (any subscription, e.g. a landing zone's hub), or empty: the stack "
    "creates its own zone and links the endpoint's and the sweeper's networks to it; with an "
    "id it creates neither and the endpoint's zone group writes into the given zone; needs "
    "privateEndpointSubnetId",
    "infrastructureEncryption": "true or false: a second layer of encryption, chosen when an "
    "account is created (false only for accounts created without it)",
    "sweeperSchedule": "an NCRONTAB expression with 6 fields "
    "(second minute hour day month weekday) that fires at a fixed rate (every N minutes, "
    "hourly, every N hours or daily), e.g. 0 */5 * * * *: the heartbeat alert waits two periods",
    "sweeperCutoff": "a duration such as 15m, 2h or 1d: at least 1m and shorter than "
    "pendingExpiryDays",
    "sweeperLease": "true or false: hold the lease on .safetynet/sweeper.lease while sweeping, "
    "so sweepers outside this app (e.g. `safetynet sweep`) never overlap it",
    DATABASE_URL_KEY: "a database URL with a scheme (e.g. postgresql+psycopg://...), "
    "set with `pulumi config set --secret`; with sweeperDatabaseAuth=entra a PostgreSQL URL "
    "without a password",
    DATABASE_AUTH_KEY: "password (the URL carries the password) or entra (the sweeper's identity "
    "gets a Microsoft Entra token for Azure Database for PostgreSQL; the URL has no password)",
    "sweeperPackagePath": "a path to the zip built by `make function-zip`",
    "verifySchedule": "an NCRONTAB expression with 6 fields for the verification timer, of a "
    "form whose period can be read (every N minutes `0 */N * * * *`, every N hours "
    "`0 M */N * * *`, daily `0 M H * * *`), at most daily: the silence alert waits two periods",
    "alertEmails": "a list of email addresses, possibly empty, that the alerts' action group mails",
    WEBHOOKS_KEY: "a list of https:// URLs, possibly empty, that the alerts' action group "
    "posts the common alert schema to; set with `pulumi config set --secret` (a webhook URL "
    "often carries a token)",
    "sweeperTable": "the documents table the sweeper cleans: name or schema.name, letters, "
    f"digits and _ (at most {appsettings.MAX_TABLE_NAME} characters)",
    "sweeperColumns": "an object of the columns named otherwise than their key, e.g. "
    f'{{"id": "file_id", "name": "path"}}; keys {", ".join(appsettings.COLUMN_KEYS)}',
    "lock": "CanNotDelete (an Azure Resource Manager delete lock on the data account) or none; "
    "ReadOnly is refused (it blocks List Keys and the stack's own management writes)",
    "logRetentionDays": "an integer from 30 to 730: how long the Log Analytics workspace keeps "
    "the blob resource logs (who read, wrote and deleted what) and the sweeper's telemetry",
    "storageSku": "one of " + ", ".join(STORAGE_SKUS) + " (Premium_LRS and "
    "Premium_ZRS make a StorageV2 account hold page blobs only, and the documents are block "
    "blobs)",
    "pointInTimeRestoreDays": "an integer from 0 (off) to 364, below blobSoftDeleteDays; "
    "above 0 it needs versioning and changeFeed true",
    "changeFeed": "true or false: the blob change feed, a log of every change to the blobs "
    "(point-in-time restore needs it)",
    "backup": "none, operational (Azure Backup's continuous tier, kept in the account itself) "
    "or vaulted (the operational tier plus a daily copy to a Backup vault); operational and "
    "vaulted need versioning true and blobSoftDeleteDays at least backupOperationalDays + 5",
    "backupOperationalDays": f"an integer from 1 to {MAX_OPERATIONAL_DAYS}: how far back the "
    "operational tier restores",
    "backupVaultedDays": f"an integer from 1 to {MAX_VAULTED_DAYS} (10 years): how long the "
    "vaulted tier keeps each daily recovery point",
    "encryptionKeyUri": "a Key Vault key URI without a version, "
    "https://<vault>.vault.azure.net/keys/<key>, so the account follows the key's rotations; "
    "or empty (Microsoft-managed keys); needs encryptionIdentityId",
    "encryptionIdentityId": "the resource id of a user-assigned managed identity that holds "
    "Key Vault Crypto Service Encryption User on the key; or empty; needed by, and only with, "
    "encryptionKeyUri",
    "defenderForStorage": "true or false: turn Microsoft Defender for Storage on for the data "
    "account (billed per account and month; malware scanning stays off)",
}
"""What each key accepts, in words: the docs table and every `ConfigError` quote these."""

KEYS: Final = (*DEFAULTS, DATABASE_URL_KEY)

_LOCATION: Final = re.compile(r"[a-z][a-z0-9]{1,49}")
_CONTAINER: Final = re.compile(r"(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*")
_GUID: Final = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_NCRONTAB_FIELD: Final = re.compile(r"[0-9A-Za-z*/,\-]+")
_URL: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://\S+")
_SUBNET: Final = re.compile(
    r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]{1,90}/providers/"
    r"Microsoft\.Network/virtualNetworks/[-\w.]{2,64}/subnets/[-\w.]{1,80}",
    re.IGNORECASE,
)
_BLOB_ZONE_ID: Final = re.compile(
    r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]{1,90}/providers/"
    r"Microsoft\.Network/privateDnsZones/"
    r"privatelink\.blob\.core\.(windows\.net|usgovcloudapi\.net|chinacloudapi\.cn)",
    re.IGNORECASE,
)
"""The blob sub-resource's zone in the public, US Government and China clouds ("Azure Private
Endpoint private DNS zone values", https://learn.microsoft.com/azure/private-link/private-endpoint-dns)."""
MAX_ALLOWED_PREFIX: Final = 30
"""Storage firewall IP rules take no /31 or /32 ranges (give a single address instead)."""
RFC1918: Final = tuple(
    ipaddress.IPv4Network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
"""Private ranges a storage IP rule cannot hold ("Azure Storage firewall rules"): traffic from
them reaches the account through a subnet's service endpoint or a private endpoint instead."""
MAX_LIST_BYTES: Final = 64 * 2**10
"""A list of principal ids in the stack configuration: some hundred GUIDs at most."""


class ConfigError(ValueError):
    """A stack configuration value is missing or not allowed; the message names key and range."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        default = DEFAULTS.get(key)
        shown_default = "" if default is None else f" (default {json.dumps(default)})"
        allowed = ALLOWED.get(key, "one of the keys in docs/configuration.md (Stack configuration)")
        super().__init__(f"{NAMESPACE}:{key}: {problem}; allowed: {allowed}{shown_default}")


@dataclass(frozen=True)
class Principal:
    """An Entra object id and the kind of principal it is, as its role assignment names it."""

    object_id: str
    type: str


@dataclass(frozen=True)
class NetworkConfig:
    """The data account's network rules and the sweeper's way through them."""

    public_network_access: str = "Enabled"
    default_action: str = "Deny"
    allowed_ip_ranges: tuple[str, ...] = ()
    allowed_subnet_ids: tuple[str, ...] = ()
    sweeper_subnet_id: str | None = None
    private_endpoint_subnet_id: str | None = None
    private_dns_zone_id: str | None = None
    """An existing blob private DNS zone (a hub's) the endpoint registers in; None: its own."""

    @property
    def closed(self) -> bool:
        """The data account takes no traffic from networks no rule names (the default)."""
        return self.default_action == "Deny" or self.public_network_access == "Disabled"

    @property
    def firewall_subnet_ids(self) -> tuple[str, ...]:
        """The allowed subnets plus the sweeper's, each once."""
        extra = () if self.sweeper_subnet_id is None else (self.sweeper_subnet_id,)
        return tuple(dict.fromkeys((*self.allowed_subnet_ids, *extra)))


def virtual_network_id(subnet_id: str) -> str:
    """`.../virtualNetworks/<vnet>/subnets/<subnet>` -> `.../virtualNetworks/<vnet>`."""
    return subnet_id[: subnet_id.lower().rindex("/subnets/")]


BACKUP_NONE: Final = "none"
BACKUP_OPERATIONAL: Final = "operational"
BACKUP_VAULTED: Final = "vaulted"
BACKUP_MODES: Final = (BACKUP_NONE, BACKUP_OPERATIONAL, BACKUP_VAULTED)
SOFT_DELETE_MARGIN_DAYS: Final = 5
"""Operational backup sets blob soft delete to its retention plus five days ("Soft delete: Set
to 'n+5' days", https://learn.microsoft.com/azure/backup/blob-backup-overview); a stack that
asked for fewer would set it back under the backup at its next update."""


@dataclass(frozen=True)
class BackupConfig:
    """Azure Backup for the data account: which tiers, and how long each keeps data."""

    mode: str = BACKUP_NONE
    operational_days: int = 7
    vaulted_days: int = 30

    @property
    def enabled(self) -> bool:
        return self.mode != BACKUP_NONE

    @property
    def vaulted(self) -> bool:
        return self.mode == BACKUP_VAULTED


@dataclass(frozen=True)
class CustomerKey:
    """A customer-managed key in Key Vault (no version: the account follows its rotations) and
    the user-assigned identity the account reads it as."""

    key_vault_uri: str
    """`https://<vault>.vault.azure.net/`, as `keyVaultProperties.keyVaultUri` takes it."""
    key_name: str
    identity_id: str

    @property
    def key_uri(self) -> str:
        """The versionless key URI, as `encryptionKeyUri` gives it."""
        return f"{self.key_vault_uri}keys/{self.key_name}"


@dataclass(frozen=True)
class StackConfig:
    """The validated configuration the program is built from."""

    location: str
    storage_sku: str
    container_name: str
    blob_soft_delete_days: int
    container_soft_delete_days: int
    versioning: bool
    version_expiry_days: int
    pending_expiry_days: int
    retired_blob_days: int
    uploader_principals: tuple[Principal, ...]
    reader_principals: tuple[Principal, ...]
    verifier_principals: tuple[Principal, ...]
    sweeper_schedule: str
    sweeper_cutoff: str
    sweeper_lease: bool
    sweeper_package_path: Path
    database_url: str = field(repr=False)
    database_auth: str = appsettings.DB_AUTH_PASSWORD
    deployer_principal_type: str = "User"
    network: NetworkConfig = field(default_factory=NetworkConfig)
    infrastructure_encryption: bool = True
    verify_schedule: str = "0 30 3 * * *"
    alert_emails: tuple[str, ...] = ()
    alert_webhooks: tuple[str, ...] = field(default=(), repr=False)
    inventory_report_days: int = 30
    backup: BackupConfig = field(default_factory=BackupConfig)
    customer_key: CustomerKey | None = None
    defender_for_storage: bool = False
    lock: str = "CanNotDelete"
    """The data account's Resource Manager lock level, or "none"."""
    log_retention_days: int = 30
    point_in_time_restore_days: int = 0
    """0: point-in-time restore off."""
    change_feed: bool = False

    @property
    def locked(self) -> bool:
        return self.lock != "none"

    @property
    def sweeper_period(self) -> timedelta:
        return schedule_period(self.sweeper_schedule, "sweeperSchedule")

    @property
    def verify_period(self) -> timedelta:
        return schedule_period(self.verify_schedule, "verifySchedule")

    sweeper_table: appsettings.TableNames = field(default_factory=appsettings.TableNames)

    @property
    def sweeper_cutoff_seconds(self) -> int:
        return duration_seconds(self.sweeper_cutoff)


def duration_seconds(text: str, key: str = "sweeperCutoff") -> int:
    """`15m` -> 900, in the sweeper's duration grammar within the deployed cutoff's bounds."""
    try:
        duration = appsettings.parse_duration(
            text, minimum=MIN_DEPLOYED_CUTOFF, maximum=appsettings.MAX_DURATION, name=key
        )
    except appsettings.SettingsError as error:
        raise ConfigError(key, error.problem) from None
    return int(duration.total_seconds())


def parse(
    raw: Mapping[str, object], *, root: Path | None = None, with_sweeper: bool = True
) -> StackConfig:
    """Validates `raw` (key -> value as typed or as the string Pulumi stores) against the table.

    Without the sweeper (`SafetyNetStorage` with no sweeper app), its database URL and subnet are
    not asked for: the config carries an empty URL nothing reads.

    Keys missing from `raw` take their default; unknown keys are refused, so a typo cannot leave
    a safety setting at a value nobody chose. A relative package path is resolved against `root`.
    """
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ConfigError(unknown[0], unknown_key(unknown[0]))
    values = {**DEFAULTS, **raw}
    pending_days = _integer(values, "pendingExpiryDays", 1, 365)
    cutoff = _text(values, "sweeperCutoff")
    cutoff_seconds = duration_seconds(cutoff)
    if cutoff_seconds >= pending_days * 86400:
        raise ConfigError(
            "sweeperCutoff",
            f"{cutoff!r} is not shorter than pendingExpiryDays={pending_days}: the lifecycle "
            "rule is the backstop and must act after the sweeper",
        )

    database_auth = _choice(values, DATABASE_AUTH_KEY, frozenset(DATABASE_AUTH_MODES))
    nets = _nets(values)
    package = Path(_text(values, "sweeperPackagePath"))
    if root is not None and not package.is_absolute():
        package = root / package

    return StackConfig(
        location=_matching(values, "location", _LOCATION),
        storage_sku=_sku(values, "storageSku"),
        container_name=_container(values, "containerName"),
        blob_soft_delete_days=_integer(values, "blobSoftDeleteDays", 1, 365),
        container_soft_delete_days=_integer(values, "containerSoftDeleteDays", 1, 365),
        versioning=_boolean(values, "versioning"),
        version_expiry_days=_integer(values, "versionExpiryDays", 1, 365),
        pending_expiry_days=pending_days,
        # Access times are updated at most once a day: 2 days keep a blob read today.
        retired_blob_days=_integer(values, "retiredBlobDays", 2, 365),
        # The newest daily report must outlive the next day's lifecycle run.
        inventory_report_days=_integer(values, "inventoryReportDays", 2, 365),
        uploader_principals=_principals(values, "uploaderPrincipalIds"),
        reader_principals=_principals(values, "readerPrincipalIds"),
        verifier_principals=_principals(values, "verifierPrincipalIds"),
        sweeper_schedule=_periodic(values, "sweeperSchedule"),
        sweeper_cutoff=cutoff,
        sweeper_lease=_boolean(values, "sweeperLease"),
        sweeper_package_path=package,
        database_url=_database_url(values, database_auth) if with_sweeper else "",
        database_auth=database_auth,
        deployer_principal_type=_choice(
            values, "deployerPrincipalType", frozenset({"User", "ServicePrincipal"})
        ),
        network=_network(values, with_sweeper),
        infrastructure_encryption=_boolean(values, "infrastructureEncryption"),
        verify_schedule=_periodic(values, "verifySchedule"),
        alert_emails=_emails(values, "alertEmails"),
        alert_webhooks=_webhooks(values, WEBHOOKS_KEY),
        sweeper_table=_table_names(values, "sweeperTable", "sweeperColumns"),
        **nets,
        backup=_backup(values),
        customer_key=_customer_key(values),
        defender_for_storage=_boolean(values, "defenderForStorage"),
    )


def unknown_key(key: str) -> str:
    """The problem with a key the table does not have, naming the nearest keys (a typo), not
    all of them."""
    folded = {known.casefold(): known for known in KEYS}
    near = difflib.get_close_matches(key.casefold(), folded, n=3, cutoff=0.6)
    if not near:
        return "unknown key, and no key of this program is close to it"
    return f"unknown key; did you mean {' or '.join(folded[n] for n in near)}?"


def refuse_plain_secrets(present: Mapping[str, object], is_secret: Callable[[str], bool]) -> None:
    """The database URL, and alert webhooks when there are any, must be stored as secrets
    (`pulumi config set --secret`): ConfigError when `present` holds one in plain text."""
    if present.get(DATABASE_URL_KEY) is not None and not is_secret(DATABASE_URL_KEY):
        raise ConfigError(DATABASE_URL_KEY, "is stored in plain text")
    hooks = present.get(WEBHOOKS_KEY)
    has_hooks = hooks is not None and str(hooks).strip() not in ("", "[]")
    if has_hooks and not is_secret(WEBHOOKS_KEY):
        raise ConfigError(
            WEBHOOKS_KEY,
            "is stored in plain text; a webhook URL often carries its token: set it with "
            "`pulumi config set --secret`",
        )


def load() -> StackConfig:
    """Reads every key from the stack's configuration (namespace `blob-safetynet`) and parses it."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    prefix = f"{NAMESPACE}:"
    present = {
        *runtime_config.CONFIG.get(),
        *runtime_config.get_config_env(),
    }
    raw: dict[str, object] = {key[len(prefix) :]: None for key in present if key.startswith(prefix)}
    for key in list(raw):
        # The raw value, read without Config.get so reading the secret logs no warning; it is
        # wrapped back into a secret Output wherever the program uses it.
        raw[key] = runtime_config.get_config(f"{prefix}{key}")
    refuse_plain_secrets(raw, lambda key: runtime_config.is_config_secret(f"{prefix}{key}"))
    root_directory = pulumi.runtime.get_root_directory()
    return parse(raw, root=Path(root_directory) if root_directory else Path.cwd())


def _text(values: Mapping[str, object], key: str) -> str:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigError(key, "is missing")
    if not isinstance(value, str):
        shown = "the value" if key == DATABASE_URL_KEY else repr(value)
        raise ConfigError(key, f"{shown} is not a string")
    return value.strip()


def _matching(values: Mapping[str, object], key: str, pattern: re.Pattern[str]) -> str:
    value = _text(values, key)
    if pattern.fullmatch(value) is None:
        raise ConfigError(key, f"{value!r} is not allowed")
    return value


def _container(values: Mapping[str, object], key: str) -> str:
    name = _matching(values, key, _CONTAINER)
    if name == DEFAULT_INVENTORY_CONTAINER:
        raise ConfigError(key, f"{name!r} holds the Blob Inventory reports, which expire")
    return name


def _choice(values: Mapping[str, object], key: str, choices: frozenset[str]) -> str:
    value = _text(values, key)
    if value not in choices:
        raise ConfigError(key, f"{value!r} is not allowed")
    return value


def _integer(values: Mapping[str, object], key: str, low: int, high: int) -> int:
    value = values.get(key)
    if value is None:
        raise ConfigError(key, "is missing")
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        number = int(value.strip())
    elif isinstance(value, int) and not isinstance(value, bool):
        number = value
    else:
        raise ConfigError(key, f"{value!r} is not an integer")
    if not low <= number <= high:
        raise ConfigError(key, f"{number} is out of range")
    return number


def _boolean(values: Mapping[str, object], key: str) -> bool:
    value = values.get(key)
    if isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ConfigError(key, f"{value!r} is not a boolean; use true or false")
    try:
        return appsettings.parse_bool(value, name=key)
    except appsettings.SettingsError as error:
        raise ConfigError(key, error.problem) from None


def _json_list(values: Mapping[str, object], key: str) -> list[object]:
    value = values.get(key)
    if isinstance(value, str):
        try:
            value = (
                untrusted.load_json(value, "the value", max_bytes=MAX_LIST_BYTES)
                if value.strip()
                else []
            )
        except untrusted.UntrustedInputError as error:
            raise ConfigError(key, f"{error}; expected a JSON list") from None
    if not isinstance(value, list | tuple):
        raise ConfigError(key, f"{value!r} is not a list")
    return list(value)


def _table_names(
    values: Mapping[str, object], table_key: str, columns_key: str
) -> appsettings.TableNames:
    """The sweeper's table, in the vocabulary of SAFETYNET_TABLE and SAFETYNET_COLUMNS."""
    table = _text(values, table_key)
    columns = values.get(columns_key)
    if isinstance(columns, str):
        try:
            columns = json.loads(columns) if columns.strip() else {}
        except json.JSONDecodeError:
            raise ConfigError(columns_key, "is not a JSON object") from None
    if not isinstance(columns, Mapping):
        raise ConfigError(columns_key, f"{columns!r} is not an object")
    for key, given in ((table_key, {}), (columns_key, columns)):
        try:
            names = appsettings.table_names(
                table, given, table_name=table_key, columns_name=columns_key
            )
        except appsettings.SettingsError as error:
            raise ConfigError(key, error.problem) from None
    return names


def _principals(values: Mapping[str, object], key: str) -> tuple[Principal, ...]:
    """Typed principals; a bare id is refused, since its kind cannot be told from it."""
    principals: list[Principal] = []
    for item in _json_list(values, key):
        if isinstance(item, str):
            raise ConfigError(
                key,
                f"{item!r} has no principal type; give "
                f'{{"id": "{item}", "type": "ServicePrincipal"}} (or User, Group)',
            )
        if not isinstance(item, dict) or set(item) != {"id", "type"}:
            raise ConfigError(key, f"{item!r} is not an object with exactly id and type")
        object_id, kind = item["id"], item["type"]
        if not isinstance(object_id, str) or _GUID.fullmatch(object_id) is None:
            raise ConfigError(key, f"{object_id!r} is not a GUID")
        if kind not in PRINCIPAL_TYPES:
            raise ConfigError(key, f"type {kind!r} of {object_id} is not allowed")
        if object_id.lower() in {principal.object_id for principal in principals}:
            raise ConfigError(key, f"{object_id!r} is listed twice")
        principals.append(Principal(object_id.lower(), kind))
    return tuple(principals)


def _subnet(value: object, key: str) -> str:
    if not isinstance(value, str) or _SUBNET.fullmatch(value.strip()) is None:
        raise ConfigError(key, f"{value!r} is not a subnet resource id")
    return value.strip()


def _optional_subnet(values: Mapping[str, object], key: str) -> str | None:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return _subnet(value, key)


def _optional_zone(values: Mapping[str, object], key: str) -> str | None:
    value = values.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str) or _BLOB_ZONE_ID.fullmatch(value.strip()) is None:
        raise ConfigError(key, f"{value!r} is not the resource id of a blob private DNS zone")
    return value.strip()


def _subnets(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    subnets = [_subnet(item, key) for item in _json_list(values, key)]
    if len({subnet.lower() for subnet in subnets}) != len(subnets):
        raise ConfigError(key, "a subnet is listed twice")
    return tuple(subnets)


def _ip_ranges(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    ranges: list[str] = []
    for item in _json_list(values, key):
        try:
            network = ipaddress.IPv4Network(item if isinstance(item, str) else "", strict=True)
        except ValueError:
            raise ConfigError(key, f"{item!r} is not an IPv4 address or CIDR range") from None
        if any(network.subnet_of(block) for block in RFC1918):
            raise ConfigError(key, f"{item!r} is a private range; allow its subnet instead")
        if "/" in str(item) and network.prefixlen > MAX_ALLOWED_PREFIX:
            raise ConfigError(key, f"{item!r} is a /31 or /32 range; give the address")
        ranges.append(str(network.network_address if "/" not in str(item) else network))
    return tuple(ranges)


def _network(values: Mapping[str, object], with_sweeper: bool = True) -> NetworkConfig:
    """The network keys, refusing a combination that would leave the sweeper no way in."""
    network = NetworkConfig(
        public_network_access=_choice(
            values, "publicNetworkAccess", frozenset({"Enabled", "Disabled"})
        ),
        default_action=_choice(values, "networkDefaultAction", frozenset({"Deny", "Allow"})),
        allowed_ip_ranges=_ip_ranges(values, "allowedIpRanges"),
        allowed_subnet_ids=_subnets(values, "allowedSubnetIds"),
        sweeper_subnet_id=_optional_subnet(values, "sweeperSubnetId"),
        private_endpoint_subnet_id=_optional_subnet(values, "privateEndpointSubnetId"),
        private_dns_zone_id=_optional_zone(values, "privateDnsZoneId"),
    )
    if network.private_dns_zone_id is not None and network.private_endpoint_subnet_id is None:
        raise ConfigError(
            "privateDnsZoneId",
            "is set without privateEndpointSubnetId: only a private endpoint registers in the zone",
        )
    if network.public_network_access == "Disabled" and network.private_endpoint_subnet_id is None:
        raise ConfigError(
            "privateEndpointSubnetId",
            "is missing: with publicNetworkAccess Disabled only a private endpoint reaches "
            "the data account",
        )
    if network.closed and with_sweeper and network.sweeper_subnet_id is None:
        raise ConfigError(
            "sweeperSubnetId",
            "is missing: behind networkDefaultAction Deny (the default) or publicNetworkAccess "
            "Disabled the sweeper reaches the data account only from a subnet it joins "
            "(Flex Consumption VNet integration); set it, or set networkDefaultAction Allow",
        )
    return network


def _ncrontab(values: Mapping[str, object], key: str) -> str:
    value = _text(values, key)
    fields = value.split()
    if len(fields) != 6 or not all(_NCRONTAB_FIELD.fullmatch(part) for part in fields):
        raise ConfigError(key, f"{value!r} does not have 6 NCRONTAB fields")
    return " ".join(fields)


_EVERY: Final = re.compile(r"\*/([0-9]{1,2})")
_FIXED: Final = re.compile(r"[0-9]{1,2}")
_EMAIL: Final = re.compile(r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]+(\.[A-Za-z0-9\-]+)+")
MAX_PERIOD: Final = timedelta(days=1)


def schedule_period(schedule: str, key: str) -> timedelta:
    """The period of an NCRONTAB schedule that fires at a fixed rate: every N minutes, every N
    hours or daily; ConfigError for any other form (an alert cannot wait for "twice the period"
    of a schedule whose gaps differ)."""
    fields = schedule.split()
    if len(fields) == 6 and fields[3:] == ["*", "*", "*"] and _FIXED.fullmatch(fields[0]):
        minute, hour = fields[1], fields[2]
        every_minute, every_hour = _EVERY.fullmatch(minute), _EVERY.fullmatch(hour)
        if every_minute and hour == "*" and 60 % int(every_minute[1]) == 0:
            return timedelta(minutes=int(every_minute[1]))
        if _FIXED.fullmatch(minute) and hour == "*":
            return timedelta(hours=1)
        if _FIXED.fullmatch(minute) and every_hour and 24 % int(every_hour[1]) == 0:
            return timedelta(hours=int(every_hour[1]))
        if _FIXED.fullmatch(minute) and _FIXED.fullmatch(hour):
            return MAX_PERIOD
    raise ConfigError(
        key,
        f"{schedule!r} does not fire at a fixed rate the alerts can read (every N minutes "
        "`0 */N * * * *` with N dividing 60, hourly `0 M * * * *`, every N hours `0 M */N * * *` "
        "with N dividing 24, or daily `0 M H * * *`)",
    )


def _periodic(values: Mapping[str, object], key: str) -> str:
    schedule = _ncrontab(values, key)
    schedule_period(schedule, key)
    return schedule


def _emails(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    emails = []
    for item in _json_list(values, key):
        if not isinstance(item, str) or _EMAIL.fullmatch(item.strip()) is None:
            raise ConfigError(key, f"{appsettings.shown(str(item))!r} is not an email address")
        emails.append(item.strip())
    if len(set(emails)) != len(emails):
        raise ConfigError(key, "lists an address twice")
    return tuple(emails)


def _webhooks(values: Mapping[str, object], key: str) -> tuple[str, ...]:
    """https URLs with a host; a refused one is named by its position only (it may hold a token)."""
    hooks = []
    for position, item in enumerate(_json_list(values, key), start=1):
        try:
            parts = urlsplit(item) if isinstance(item, str) else None
        except ValueError:
            parts = None
        if parts is None or parts.scheme != "https" or not parts.hostname or " " in str(item):
            raise ConfigError(key, f"entry {position} is not an https:// URL with a host")
        hooks.append(str(item))
    return tuple(hooks)


def _database_url(values: Mapping[str, object], database_auth: str) -> str:
    value = _text(values, DATABASE_URL_KEY)
    if _URL.fullmatch(value) is None:
        raise ConfigError(DATABASE_URL_KEY, "is not a URL with a scheme")
    if database_auth == appsettings.DB_AUTH_ENTRA:
        # Refused here, at preview, rather than by the sweeper on its first tick; never echoed.
        try:
            parts = urlsplit(value)
        except ValueError:
            raise ConfigError(DATABASE_URL_KEY, "is not a URL with a scheme") from None
        if not parts.scheme.startswith("postgres"):
            raise ConfigError(DATABASE_URL_KEY, f"{DATABASE_AUTH_KEY}=entra needs a PostgreSQL URL")
        if parts.password is not None or "password" in parse_qs(parts.query):
            raise ConfigError(
                DATABASE_URL_KEY,
                f"carries a password, but {DATABASE_AUTH_KEY}=entra sends a Microsoft Entra token "
                "as the password",
            )
    return value


def _sku(values: Mapping[str, object], key: str) -> str:
    value = _text(values, key)
    if value in PAGE_BLOB_SKUS:
        raise ConfigError(
            key,
            f"{value!r} makes a premium page blob account (StorageV2 with a Premium SKU holds "
            "page blobs only), where the documents' block blobs cannot be written",
        )
    if value not in STORAGE_SKUS:
        raise ConfigError(key, f"{value!r} is not a StorageV2 SKU for block blobs")
    return value


def _lock(values: Mapping[str, object], key: str) -> str:
    """The lock level; ReadOnly refused for what it would break
    ("Apply an Azure Resource Manager lock to a storage account",
    https://learn.microsoft.com/azure/storage/common/lock-account-resource; "Lock your
    resources", https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources)."""
    value = _text(values, key)
    if value.casefold() == READ_ONLY_LOCK.casefold():
        raise ConfigError(
            key,
            "ReadOnly is refused: a ReadOnly lock on a storage account blocks List Keys (a POST, "
            "which ARM counts as a write), and so the portal's and az's data-plane paths that "
            "use keys, and it blocks every management write this stack makes to the account "
            "(the lifecycle rule, the blob service properties, the network rules); CanNotDelete "
            "keeps the account from being deleted and lets the stack keep managing it",
        )
    if value not in LOCK_LEVELS:
        raise ConfigError(key, f"{value!r} is not allowed")
    return value


class _Nets(TypedDict):
    lock: str
    log_retention_days: int
    point_in_time_restore_days: int
    change_feed: bool


def _nets(values: Mapping[str, object]) -> _Nets:
    """The lock, the log retention, and point-in-time restore with what ARM requires of it: blob
    soft delete, versioning and the change feed on, and restore days below the soft-delete days
    ("Point-in-time restore for block blobs",
    https://learn.microsoft.com/azure/storage/blobs/point-in-time-restore-overview)."""
    restore_days = _integer(values, "pointInTimeRestoreDays", 0, 364)
    change_feed = _boolean(values, "changeFeed")
    if restore_days:
        soft_delete_days = _integer(values, "blobSoftDeleteDays", 1, 365)
        if not _boolean(values, "versioning"):
            raise ConfigError(
                "pointInTimeRestoreDays",
                f"{restore_days} needs versioning true: point-in-time restore rebuilds blobs "
                "from their versions",
            )
        if not change_feed:
            raise ConfigError(
                "pointInTimeRestoreDays",
                f"{restore_days} needs changeFeed true: point-in-time restore replays the "
                "change feed",
            )
        if restore_days >= soft_delete_days:
            raise ConfigError(
                "pointInTimeRestoreDays",
                f"{restore_days} is not below blobSoftDeleteDays={soft_delete_days}: ARM "
                "requires the restore period to be at least a day shorter than blob soft delete",
            )
    return _Nets(
        lock=_lock(values, "lock"),
        log_retention_days=_integer(
            values, "logRetentionDays", MIN_LOG_RETENTION_DAYS, MAX_LOG_RETENTION_DAYS
        ),
        point_in_time_restore_days=restore_days,
        change_feed=change_feed,
    )


_KEY_URI: Final = re.compile(
    r"(?P<vault>https://[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]\."
    r"(vault\.azure\.net|vault\.usgovcloudapi\.net|vault\.azure\.cn|managedhsm\.azure\.net))"
    r"(:443)?/keys/(?P<key>[A-Za-z0-9-]{1,127})(?P<version>/[^/]*)?/?",
)
"""A Key Vault (or Managed HSM) key URI, its version if it has one ("Azure Key Vault keys,
secrets and certificates overview": object identifiers,
https://learn.microsoft.com/azure/key-vault/general/about-keys-secrets-certificates)."""
_USER_IDENTITY: Final = re.compile(
    r"/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]{1,90}/providers/"
    r"Microsoft\.ManagedIdentity/userAssignedIdentities/[A-Za-z0-9][-\w]{2,127}",
    re.IGNORECASE,
)


def _backup(values: Mapping[str, object]) -> BackupConfig:
    """The backup keys. Azure Backup turns on what its tiers rely on (versioning, change feed,
    point-in-time restore, soft delete of n+5 days, a delete lock: "Overview of Azure Blob
    backup", https://learn.microsoft.com/azure/backup/blob-backup-overview; vaulted backup copies
    by object replication, which needs versioning too); a stack that declared them off would turn
    them off again at its next update, under the backup, so that is refused here."""
    backup = BackupConfig(
        mode=_choice(values, "backup", frozenset(BACKUP_MODES)),
        operational_days=_integer(values, "backupOperationalDays", 1, MAX_OPERATIONAL_DAYS),
        vaulted_days=_integer(values, "backupVaultedDays", 1, MAX_VAULTED_DAYS),
    )
    if not backup.enabled:
        return backup
    if not _boolean(values, "versioning"):
        raise ConfigError(
            "backup",
            f"{backup.mode!r} needs versioning true: Azure Backup turns blob versioning on, and "
            "versioning false would turn it off under the backup",
        )
    soft_delete = _integer(values, "blobSoftDeleteDays", 1, 365)
    needed = backup.operational_days + SOFT_DELETE_MARGIN_DAYS
    if soft_delete < needed:
        raise ConfigError(
            "blobSoftDeleteDays",
            f"{soft_delete} is shorter than backupOperationalDays + {SOFT_DELETE_MARGIN_DAYS} = "
            f"{needed}, the soft delete retention Azure Backup sets for its operational tier",
        )
    return backup


def _customer_key(values: Mapping[str, object]) -> CustomerKey | None:
    """The customer-managed key, or None (Microsoft-managed keys). A versioned URI is refused:
    with the version omitted "Azure Storage automatically uses the latest version of the key"
    ("Automatically update the key version",
    https://learn.microsoft.com/azure/storage/common/customer-managed-keys-overview), so a
    rotation needs no update of the stack; with one, each rotation must be deployed by hand."""
    uri = values.get("encryptionKeyUri")
    identity = values.get("encryptionIdentityId")
    given_uri = isinstance(uri, str) and bool(uri.strip())
    given_identity = isinstance(identity, str) and bool(identity.strip())
    if not given_uri and uri not in (None, ""):
        raise ConfigError("encryptionKeyUri", f"{uri!r} is not a string")
    if not given_uri:
        if given_identity:
            raise ConfigError(
                "encryptionIdentityId", "is set without encryptionKeyUri: no key uses it"
            )
        return None
    match = _KEY_URI.fullmatch(str(uri).strip())
    if match is None:
        raise ConfigError("encryptionKeyUri", f"{uri!r} is not a Key Vault key URI")
    if match["version"] not in (None, "/"):
        raise ConfigError(
            "encryptionKeyUri",
            f"{uri!r} names a key version; omit it so the account follows the key's rotations",
        )
    if not given_identity:
        raise ConfigError(
            "encryptionIdentityId",
            "is missing: the account reads the key in encryptionKeyUri as a user-assigned identity",
        )
    if _USER_IDENTITY.fullmatch(str(identity).strip()) is None:
        raise ConfigError(
            "encryptionIdentityId",
            f"{identity!r} is not the resource id of a user-assigned managed identity",
        )
    return CustomerKey(
        key_vault_uri=f"{match['vault'].lower()}/",
        key_name=match["key"],
        identity_id=str(identity).strip(),
    )
