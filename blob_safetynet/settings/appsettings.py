"""Every environment variable and app setting by name, with the one duration grammar and the one
boolean parser that the CLI, the Azure Function and the infra program share.

Standard library only: infra/ and blob_safetynet/policies/ import it as part of the bottom layer
(tests/test_boundaries.py), so it may not drag in SQLAlchemy, Azure or Pulumi. Parsers name the
setting in every error and show a value only escaped and shortened, and never the value of a
secret setting (a URL or connection string may carry a password, a SAS or an account key).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Final, NoReturn, TypeVar

from blob_safetynet.settings.vocabulary import (
    DEFAULT_CONTAINER,
    DEFAULT_TABLE,
)
from blob_safetynet.settings.vocabulary import (
    RECOVER_INVENTORY_RULE as RECOVER_RULE_NAME,
)


class SettingsError(ValueError):
    """A setting is missing, malformed or out of range; the message names it.

    `problem` is the message without the setting's name, for callers that name the setting in
    their own words (the infra program prefixes its stack configuration key).
    """

    def __init__(self, message: str, *, problem: str | None = None) -> None:
        super().__init__(message)
        self.problem = message if problem is None else problem


@dataclass(frozen=True)
class Setting:
    """One environment variable or app setting: its name, what it means, its default."""

    name: str
    meaning: str
    default: str | None = None
    """The text used when the variable is unset; None when there is none (required or optional)."""
    secret: bool = False
    """Its value may hold a password, key, SAS or token: never logged, never shown in an error."""
    function: bool = False
    """Read by the Azure Function, so documented in its app-settings table."""
    minimum: timedelta | None = None
    maximum: timedelta | None = None
    """The bounds of a duration setting (both None for any other kind)."""
    bounds_reason: str | None = None
    """Why the bounds are what they are, told with an out-of-range value."""

    def read(self, env: Mapping[str, str]) -> str:
        """The value in `env` as set (even empty, which a parser then refuses), else the
        default, else empty."""
        return env.get(self.name, self.default or "")

    def duration(self, text: str, name: str | None = None) -> timedelta:
        """`text` parsed as a duration within this setting's bounds; errors say `name`."""
        if self.minimum is None or self.maximum is None:
            raise TypeError(f"{self.name} is not a duration setting")
        return parse_duration(
            text,
            minimum=self.minimum,
            maximum=self.maximum,
            name=name or self.name,
            reason=self.bounds_reason,
        )

    def boolean(self, text: str, name: str | None = None) -> bool:
        """`text` parsed as a boolean; errors say `name` (an option) or this setting's name."""
        return parse_bool(text, name=name or self.name)


MIN_DURATION: Final = timedelta(seconds=1)
MAX_DURATION: Final = timedelta(days=365)
MIN_RETIRED_GRACE: Final = timedelta(minutes=15)
"""The retired grace's floor: a replaced document's old blob must outlive every download that
started before the replace (a reader fetches the rest of its chunks later). 15 minutes, like the
default cutoff that bounds the longest accepted upload, covers a 4 GiB read at 5 MB/s; `1s`
would fail slow readers mid-download."""

DB_AUTH_PASSWORD: Final = "password"  # noqa: S105 - the name of a mode, not a password
DB_AUTH_ENTRA: Final = "entra"
DB_AUTH_MODES: Final = (DB_AUTH_PASSWORD, DB_AUTH_ENTRA)
"""`password`: the URL carries the password (the default). `entra`: the password is a Microsoft
Entra token fetched for every new connection (Azure Database for PostgreSQL only)."""

# The sweeper's target: the CLI's options fall back to these, the Function reads them.
DB_URL: Final = Setting(
    "SAFETYNET_DB_URL", "SQLAlchemy URL of the documents database", secret=True, function=True
)
DB_AUTH: Final = Setting(
    "SAFETYNET_DB_AUTH",
    "password or entra: how the sweeper signs in to the database",
    default=DB_AUTH_PASSWORD,
    function=True,
)
ACCOUNT_URL: Final = Setting(
    "SAFETYNET_ACCOUNT_URL", "blob endpoint of the data account", secret=True, function=True
)
CONNECTION_STRING: Final = Setting(
    "SAFETYNET_CONNECTION_STRING", "Azurite only: a connection string", secret=True, function=True
)
ALLOW_CUSTOM_ENDPOINT: Final = Setting(
    "SAFETYNET_ALLOW_CUSTOM_ENDPOINT",
    "true sends credentials to a host outside the endpoint rule",
    default="false",
    function=True,
)
CONTAINER: Final = Setting(
    "SAFETYNET_CONTAINER",
    "container holding the documents' blobs",
    default=DEFAULT_CONTAINER,
    function=True,
)
CUTOFF: Final = Setting(
    "SAFETYNET_CUTOFF",
    "age after which a Pending row counts as abandoned",
    default="15m",
    function=True,
    minimum=MIN_DURATION,
    maximum=MAX_DURATION,
)
RETIRED_GRACE: Final = Setting(
    "SAFETYNET_RETIRED_GRACE",
    "how long a replaced or deleted document's old blob stays readable",
    default="1h",
    function=True,
    minimum=MIN_RETIRED_GRACE,
    maximum=MAX_DURATION,
    bounds_reason="the old blob must outlive every download started before the replace",
)
LEASE: Final = Setting(
    "SAFETYNET_LEASE",
    "true holds the sweeper lease so one sweeper runs at a time",
    default="false",
    function=True,
)
TABLE: Final = Setting(
    "SAFETYNET_TABLE",
    "the documents table: name or schema.name (letters, digits, _)",
    default=DEFAULT_TABLE,
    function=True,
)
COLUMNS: Final = Setting(
    "SAFETYNET_COLUMNS",
    "the table's column names that differ from the defaults: key=column,key=column",
    default="",
    function=True,
)
SCHEDULE: Final = Setting(
    "SAFETYNET_SCHEDULE", "NCRONTAB schedule of the timer (resolved by the host)", function=True
)
CONCURRENCY: Final = Setting("SAFETYNET_CONCURRENCY", "Blob Batches in flight", default="4")

# `reconcile --inventory`: Blob Inventory's report instead of a listing.
INVENTORY_CONTAINER: Final = Setting(
    "SAFETYNET_INVENTORY_CONTAINER", "container Blob Inventory writes its reports into"
)
INVENTORY_RULE: Final = Setting(
    "SAFETYNET_INVENTORY_RULE", "the inventory rule whose runs reconcile reads", default="safetynet"
)
RECOVER_INVENTORY_RULE: Final = Setting(
    "SAFETYNET_RECOVER_INVENTORY_RULE",
    "the inventory rule whose runs `recover --inventory` reads (with deleted blobs, snapshots "
    "and versions)",
    default=RECOVER_RULE_NAME,
)
INVENTORY_MAX_AGE: Final = Setting(
    "SAFETYNET_INVENTORY_MAX_AGE",
    "an inventory run started longer ago than this is refused as stale",
    default="2d",
    minimum=MIN_DURATION,
    maximum=MAX_DURATION,
)
# Continuous verification: the Function's second timer.
VERIFY_SCHEDULE: Final = Setting(
    "SAFETYNET_VERIFY_SCHEDULE",
    "NCRONTAB schedule of the verification timer (resolved by the host)",
    function=True,
)
VERIFIER_CLIENT_ID: Final = Setting(
    "SAFETYNET_VERIFIER_CLIENT_ID",
    "client id of the user-assigned identity holding the verifier role (ABAC: .safetynet/verify/)",
    function=True,
)
PENDING_DAYS: Final = Setting(
    "SAFETYNET_PENDING_DAYS",
    "the lifecycle rule's days for blobs tagged pending (the canary's deadline is two more)",
    default="7",
    function=True,
)
VERIFY_ACCOUNT_ID: Final = Setting(
    "SAFETYNET_VERIFY_ACCOUNT_ID",
    "resource id of the data account whose settings each verification run audits",
    function=True,
)

# The audit and verify commands.
ARM_ENDPOINT: Final = Setting("SAFETYNET_ARM_ENDPOINT", "Resource Manager URL", function=True)
ARM_TOKEN: Final = Setting(
    "SAFETYNET_ARM_TOKEN", "a pipeline's bearer token for ARM", secret=True, function=True
)
SWEEPER_PERIOD: Final = Setting(
    "SAFETYNET_SWEEPER_PERIOD",
    "the sweeper's schedule period (verify's heartbeat check)",
    default="5m",
    function=True,
    minimum=MIN_DURATION,
    maximum=MAX_DURATION,
)
AZURITE_BIN: Final = Setting("SAFETYNET_AZURITE_BIN", "path of azurite-blob")

# Azure's own names that the project reads or the infra program writes.
AZURE_SUBSCRIPTION_ID: Final = Setting("AZURE_SUBSCRIPTION_ID", "subscription to audit")
AZURE_CLIENT_ID: Final = Setting(
    "AZURE_CLIENT_ID", "the identity DefaultAzureCredential picks (a user-assigned one)"
)
AZURE_CLIENT_SECRET: Final = Setting(
    "AZURE_CLIENT_SECRET", "a service principal's secret", secret=True
)
AZURE_TENANT_ID: Final = Setting("AZURE_TENANT_ID", "the tenant of a service principal")
AZURE_TOKEN_CREDENTIALS: Final = Setting(
    "AZURE_TOKEN_CREDENTIALS",
    "which credentials DefaultAzureCredential tries: dev, prod or one credential's name",
)
HOST_STORAGE_ACCOUNT: Final = Setting(
    "AzureWebJobsStorage__accountName", "the Functions host's storage account"
)
HOST_STORAGE_CREDENTIAL: Final = Setting(
    "AzureWebJobsStorage__credential", "managedidentity: host storage through the identity"
)
HOST_STORAGE_CLIENT_ID: Final = Setting(
    "AzureWebJobsStorage__clientId", "the identity the host reaches its storage with"
)
INSIGHTS_CONNECTION_STRING: Final = Setting(
    "APPLICATIONINSIGHTS_CONNECTION_STRING", "where telemetry goes"
)
INSIGHTS_AUTHENTICATION_STRING: Final = Setting(
    "APPLICATIONINSIGHTS_AUTHENTICATION_STRING", "Entra authentication of telemetry"
)

SETTINGS: Final = (
    DB_URL,
    DB_AUTH,
    ACCOUNT_URL,
    CONNECTION_STRING,
    ALLOW_CUSTOM_ENDPOINT,
    CONTAINER,
    CUTOFF,
    RETIRED_GRACE,
    LEASE,
    TABLE,
    COLUMNS,
    SCHEDULE,
    CONCURRENCY,
    INVENTORY_CONTAINER,
    INVENTORY_RULE,
    RECOVER_INVENTORY_RULE,
    INVENTORY_MAX_AGE,
    VERIFY_SCHEDULE,
    VERIFIER_CLIENT_ID,
    PENDING_DAYS,
    VERIFY_ACCOUNT_ID,
    ARM_ENDPOINT,
    ARM_TOKEN,
    SWEEPER_PERIOD,
    AZURITE_BIN,
    AZURE_SUBSCRIPTION_ID,
    AZURE_CLIENT_ID,
    AZURE_CLIENT_SECRET,
    AZURE_TENANT_ID,
    AZURE_TOKEN_CREDENTIALS,
    HOST_STORAGE_ACCOUNT,
    HOST_STORAGE_CREDENTIAL,
    HOST_STORAGE_CLIENT_ID,
    INSIGHTS_CONNECTION_STRING,
    INSIGHTS_AUTHENTICATION_STRING,
)
"""Every setting, once."""
SECRET_NAMES: Final = tuple(setting.name for setting in SETTINGS if setting.secret)
"""Settings whose values are scrubbed from every log line and error (the CLI and the Function)."""
FUNCTION_SETTINGS: Final = tuple(setting for setting in SETTINGS if setting.function)

_DURATION: Final = re.compile(r"([0-9]+)([smhd])", re.ASCII)
_UNIT_SECONDS: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_MAX_DIGITS: Final = 12
"""More digits than any bound needs (365d is 31,536,000 s); longer numbers are out of range
without being converted (int() refuses over 4,300 digits)."""
_BOOLEANS: Final = {"true": True, "false": False}
_SHOWN_CHARACTERS: Final = 40


def parse_duration(
    text: str, *, minimum: timedelta, maximum: timedelta, name: str, reason: str | None = None
) -> timedelta:
    """`90s`, `15m`, `2h` or `1d`: a whole number in ASCII digits and one unit, between the
    setting's `minimum` and `maximum`; surrounding whitespace is ignored, nothing else is.
    An out-of-range error ends with `reason` when one is given."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        _fail(
            name,
            text,
            "is not a duration; use a whole number (digits 0-9) and a unit s, m, h or d "
            "(e.g. 90s, 15m, 2h, 1d)",
        )
    digits, unit = match.groups()
    # Compared as whole seconds first: timedelta(days=10**22) raises OverflowError.
    seconds = int(digits) * _UNIT_SECONDS[unit] if len(digits) <= _MAX_DIGITS else None
    if seconds is None or not minimum.total_seconds() <= seconds <= maximum.total_seconds():
        _fail(
            name,
            text,
            f"is out of range; allowed {format_duration(minimum)} to {format_duration(maximum)}"
            + (f" ({reason})" if reason else ""),
        )
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest spelling of `value` in the grammar `parse_duration` reads (`90s`, `1d`)."""
    seconds = int(value.total_seconds())
    for unit in ("d", "h", "m"):
        if seconds and seconds % _UNIT_SECONDS[unit] == 0:
            return f"{seconds // _UNIT_SECONDS[unit]}{unit}"
    return f"{seconds}s"


def parse_bool(text: str, *, name: str) -> bool:
    """`true` or `false` in any case, surrounding whitespace ignored; anything else (`yes`, `1`,
    empty) is an error naming the setting, never a silent false."""
    value = _BOOLEANS.get(text.strip().lower())
    if value is None:
        _fail(name, text, "is not a boolean; use true or false")
    return value


def format_bool(value: bool) -> str:
    """The spelling `parse_bool` reads back as `value`."""
    return "true" if value else "false"


COLUMN_KEYS: Final = (
    "id",
    "name",
    "blob_name",
    "status",
    "created_utc",
    "claimed_by",
    "claimed_utc",
    "content_length",
    "content_sha256",
)
"""The documents table's columns an application may name (`DocumentTable`'s fields)."""
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*", re.ASCII)
MAX_TABLE_NAME: Final = 40
"""PostgreSQL keeps 63 bytes of an identifier and cuts the rest silently
(https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-IDENTIFIERS); the
longest name derived from the table's, `ix_<table>_blobs_kind_recorded`, adds 23."""
MAX_COLUMN_NAME: Final = 63
_MAX_COLUMNS_TEXT: Final = 1000


@dataclass(frozen=True)
class TableNames:
    """Where an application keeps its documents: the table, its schema, the renamed columns.

    The crash-window and identity tables are `<table>_blobs` and `<table>_meta` beside it.
    """

    table: str = DEFAULT_TABLE
    schema: str | None = None
    columns: tuple[tuple[str, str], ...] = ()
    """(key, column) for each column whose name is not its key, in COLUMN_KEYS order."""

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> TableNames:
        """The names in SAFETYNET_TABLE and SAFETYNET_COLUMNS of `env`, checked."""
        return table_names(TABLE.read(env), COLUMNS.read(env))

    @property
    def qualified(self) -> str:
        """`schema.table` or `table`: how commands and the heartbeat name the table."""
        return qualified_name(self.schema, self.table)

    def columns_text(self) -> str:
        """The SAFETYNET_COLUMNS spelling of `columns` (empty when none is renamed)."""
        return ",".join(f"{key}={column}" for key, column in self.columns)


def qualified_name(schema: str | None, table: str) -> str:
    return f"{schema}.{table}" if schema else table


def table_names(
    table: str,
    columns: str | Mapping[str, object],
    *,
    table_name: str = TABLE.name,
    columns_name: str = COLUMNS.name,
) -> TableNames:
    """`table` (`name` or `schema.name`) and `columns` (`key=column,...` or a mapping) checked:
    identifiers only (letters, digits and `_`, not starting with a digit), bounded, every key a
    column of COLUMN_KEYS named once, no two columns alike. Errors name the setting."""
    schema, _, name = table.strip().rpartition(".")
    _identifier(table_name, table, name, MAX_TABLE_NAME)
    if schema or table.strip().startswith("."):
        _identifier(table_name, table, schema, MAX_COLUMN_NAME)
    mapping = _column_mapping(columns, columns_name)
    for key, column in mapping.items():
        if key not in COLUMN_KEYS:
            _fail(columns_name, key, f"is not a column key; use {', '.join(COLUMN_KEYS)}")
        _identifier(columns_name, column, column, MAX_COLUMN_NAME)
    named = {key: mapping.get(key, key) for key in COLUMN_KEYS}
    folded = [column.lower() for column in named.values()]
    for key, column in named.items():
        if folded.count(column.lower()) > 1:
            _fail(columns_name, column, f"names two columns (one of them {key})")
    renamed = tuple((key, column) for key, column in named.items() if column != key)
    return TableNames(name, schema or None, renamed)


def _column_mapping(columns: str | Mapping[str, object], name: str) -> dict[str, str]:
    if not isinstance(columns, str):
        if not all(isinstance(value, str) for value in columns.values()):
            problem = "every column name must be a string"
            raise SettingsError(f"{name}: {problem}", problem=problem)
        return {str(key): str(value) for key, value in columns.items()}
    if len(columns) > _MAX_COLUMNS_TEXT:
        _fail(name, columns, f"is longer than {_MAX_COLUMNS_TEXT} characters")
    mapping: dict[str, str] = {}
    for pair in filter(None, (part.strip() for part in columns.split(","))):
        key, equals, column = (part.strip() for part in pair.partition("="))
        if not equals:
            _fail(name, pair, "is not key=column (e.g. id=file_id,name=path)")
        if key in mapping:
            _fail(name, key, "is given twice")
        mapping[key] = column
    return mapping


def _identifier(name: str, text: str, part: str, longest: int) -> None:
    if not _IDENTIFIER.fullmatch(part):
        _fail(
            name,
            text,
            "is not an SQL identifier; use letters, digits and _ (not starting with a digit)",
        )
    if len(part) > longest:
        _fail(name, text, f"is longer than {longest} characters")


T = TypeVar("T")


def from_credential_environment(build: Callable[[], T], env: Mapping[str, str]) -> T:
    """`build()` (DefaultAzureCredential, which reads the environment), its ValueError over a
    malformed variable a SettingsError naming that variable.

    Accepted AZURE_TOKEN_CREDENTIALS values: `dev`, `prod` or one credential's name
    (https://learn.microsoft.com/azure/developer/python/sdk/authentication/credential-chains).
    """
    try:
        return build()
    except ValueError as error:
        reason = str(error)
    for setting, words, problem in (
        (
            AZURE_TOKEN_CREDENTIALS,
            AZURE_TOKEN_CREDENTIALS.name,
            "is not dev, prod or a credential's name",
        ),
        (AZURE_TENANT_ID, "tenant id", "is not a tenant id (a GUID or a domain name)"),
    ):
        if setting.name in env and words.lower() in reason.lower():
            _fail(setting.name, env[setting.name], problem)
    raise SettingsError(f"DefaultAzureCredential refused the environment: {shown(reason)}")


def shown(text: str) -> str:
    """`text` fit for an error message: escaped so it stays on one line (what `repr` escapes is
    what `str.isprintable` refuses: controls, format and line-separator characters), and cut
    short so a pasted blob of text does not become the message."""
    escaped = repr(text)[1:-1]
    if len(escaped) > _SHOWN_CHARACTERS:
        return escaped[:_SHOWN_CHARACTERS] + "..."
    return escaped


def _fail(name: str, text: str, problem: str) -> NoReturn:
    """Raise the SettingsError for `text`, shown unless `name` is a secret setting."""
    quoted = "the value" if name in SECRET_NAMES else f"'{shown(text)}'"
    raise SettingsError(f"{name}: {quoted} {problem}", problem=f"{quoted} {problem}")
