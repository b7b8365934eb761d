"""Sweeper settings: parsed and range-checked once, shared by the CLI and the Azure Function."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Final
from urllib.parse import unquote, urlsplit

import sqlalchemy as sa

from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import DB_AUTH_ENTRA as DB_AUTH_ENTRA
from blob_safetynet.settings.appsettings import DB_AUTH_MODES as DB_AUTH_MODES
from blob_safetynet.settings.appsettings import DB_AUTH_PASSWORD as DB_AUTH_PASSWORD
from blob_safetynet.settings.appsettings import SettingsError as SettingsError
from blob_safetynet.settings.endpoints import is_loopback_host, parse_endpoint
from blob_safetynet.settings.redaction import display_db_url, display_url, printable
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER

_CONTAINER = re.compile(r"[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){2,62}", re.ASCII)
"""3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit:
https://learn.microsoft.com/en-us/rest/api/storageservices/naming-and-referencing-containers--blobs--and-metadata"""
AZURE_BLOB_SUFFIXES = (
    # Azure public cloud: https://learn.microsoft.com/en-us/azure/storage/common/storage-account-overview#standard-endpoints
    ".blob.core.windows.net",
    # Azure Government: https://learn.microsoft.com/en-us/azure/azure-government/compare-azure-government-global-azure
    ".blob.core.usgovcloudapi.net",
    # Azure operated by 21Vianet: https://learn.microsoft.com/en-us/azure/china/resources-developer-guide
    ".blob.core.chinacloudapi.cn",
)
"""Blob endpoints a storage token or key may be sent to without --allow-custom-endpoint."""
MAX_BLOB_BATCH = 256
"""Blob Batch accepts at most 256 sub-requests (257 -> 400 ExceedsMaxBatchRequestCount)."""


DB_AUTH_SETTING: Final = appsettings.DB_AUTH.name
ENTRA_SSLMODES: Final = ("require", "verify-ca", "verify-full")
"""libpq modes that never fall back to plain text; `prefer` would, and would send the token."""
LIBPQ_SSLMODES: Final = ("disable", "allow", "prefer", *ENTRA_SSLMODES)
"""https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-SSLMODE"""


def _bounded_int(raw: str | int, setting: str, low: int, high: int) -> int:
    text = str(raw).strip()
    if not (text.isascii() and text.lstrip("-").isdigit()) or len(text) > 12:
        raise SettingsError(f"{setting}: '{printable(text)}' is not a whole number")
    value = int(text)
    if not low <= value <= high:
        raise SettingsError(f"{setting}: {value} is out of range; allowed {low} to {high}")
    return value


@dataclass(frozen=True)
class SweepSettings:
    cutoff: timedelta = timedelta(minutes=15)
    container: str = DEFAULT_CONTAINER
    batch_size: int = MAX_BLOB_BATCH
    concurrency: int = 4
    chunk_size: int = 1024
    """Rows claimed per database transaction; batches within a chunk run concurrently."""
    max_attempts: int = 5
    dry_run: bool = False
    use_lease: bool = False
    retired_grace: timedelta = timedelta(hours=1)
    """How long a replaced or deleted document's old blob stays readable before it is deleted."""
    claim_ttl: timedelta = timedelta(minutes=10)
    """A claim older than this belongs to a sweeper that died; its rows may be claimed again."""

    def __post_init__(self) -> None:
        _bounded_int(self.batch_size, "batch size", 1, MAX_BLOB_BATCH)
        _bounded_int(self.concurrency, "concurrency", 1, 64)
        _bounded_int(self.chunk_size, "chunk size", 1, 100_000)
        _bounded_int(self.max_attempts, "max attempts", 1, 20)
        check_container_name(self.container)


def check_container_name(name: str, setting: str = "container") -> str:
    """`name` if Azure accepts it as a container name; else a SettingsError saying why."""
    if not _CONTAINER.fullmatch(name):
        raise SettingsError(
            f"{setting}: '{printable(name)}' is not a container name; use 3-63 lowercase letters, "
            "digits and single hyphens, starting and ending with a letter or digit"
        )
    return name


def check_blob_endpoint(
    url: str, *, with_key: bool, allow_custom: bool = False, setting: str = "account URL"
) -> None:
    """The one endpoint rule of the CLI and the Function, for account URLs and connection strings.

    A token (account URL) goes only to Azure's public or sovereign blob endpoints or to an
    emulator on loopback; a shared key (connection string) only to loopback. Anything else,
    e.g. a custom domain or Azure Stack, needs `allow_custom`: a credential must never be sent to
    an arbitrary server because an option or a setting was mistyped or planted. The host is read
    by `parse_endpoint`, as the HTTP client reads it.
    """
    endpoint = parse_endpoint(url, setting)
    shown = display_url(url)
    if endpoint.scheme not in ("https", "http"):
        raise SettingsError(f"{setting} {shown} is not an http(s) URL")
    if with_key:
        trusted = endpoint.loopback
    else:
        if endpoint.scheme != "https":
            raise SettingsError(
                f"{setting} {shown} must be https://<account>.blob.core.windows.net "
                "(tokens are never sent over plain HTTP)"
            )
        if endpoint.has_query:
            raise SettingsError(
                f"{setting} {shown}: remove the query string (a SAS); the sweeper authenticates "
                "with DefaultAzureCredential, never with a SAS"
            )
        trusted = endpoint.loopback or endpoint.host.endswith(AZURE_BLOB_SUFFIXES)
    if not (trusted or allow_custom):
        allowed = (
            "a loopback emulator"
            if with_key
            else "Azure blob endpoints ("
            + ", ".join(f"*{suffix}" for suffix in AZURE_BLOB_SUFFIXES)
            + ") or a loopback emulator"
        )
        raise SettingsError(
            f"{setting} {shown} is not {allowed}; to send credentials to this host anyway, "
            "pass --allow-custom-endpoint "
            f"(app setting {appsettings.ALLOW_CUSTOM_ENDPOINT.name}=true)"
        )


def parse_db_auth(text: str, setting: str = DB_AUTH_SETTING) -> str:
    """`password` or `entra`, exactly; anything else is an error, never a silent default."""
    if text not in DB_AUTH_MODES:
        raise SettingsError(
            f"{setting}: '{printable(text)}' is not a database authentication; "
            f"use {' or '.join(DB_AUTH_MODES)}"
        )
    return text


def check_entra_url(parsed: sa.URL, setting: str = "database URL") -> sa.URL:
    """`parsed` made fit for a Microsoft Entra token as its password, or a SettingsError.

    Only PostgreSQL accepts the token, the URL must not carry a password of its own (which one
    would win is a guess an operator should never have to make), and the token travels only
    over TLS unless the server is on loopback: `sslmode=require` is added when absent.
    """
    shown = display_db_url(parsed.render_as_string(hide_password=False))
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        raise SettingsError(
            f"{setting} {shown}: {DB_AUTH_SETTING}={DB_AUTH_ENTRA} works only with PostgreSQL "
            f"(Azure Database for PostgreSQL); use {DB_AUTH_PASSWORD} for this database"
        )
    if parsed.password is not None or "password" in parsed.query:
        raise SettingsError(
            f"{setting} {shown} carries a password, but {DB_AUTH_SETTING}={DB_AUTH_ENTRA} sends "
            "a Microsoft Entra token as the password; remove the password from the URL"
        )
    if not parsed.username:
        raise SettingsError(
            f"{setting} {shown} names no user; with {DB_AUTH_SETTING}={DB_AUTH_ENTRA} the user is "
            "the database principal of the identity (e.g. its name)"
        )
    mode = parsed.query.get("sslmode")
    if parsed.host is not None and is_loopback_host(parsed.host.lower()):
        return parsed
    if mode is None:
        return parsed.update_query_dict({"sslmode": "require"})
    if mode not in ENTRA_SSLMODES:
        # Only libpq's own words are shown; any other value may be anything (a pasted secret).
        named = f"sslmode={mode}" if mode in LIBPQ_SSLMODES else "an sslmode libpq does not know"
        raise SettingsError(
            f"{setting} {shown}: {named} may send the token unencrypted; use sslmode=require, "
            "verify-ca or verify-full (or leave it out: require is added)"
        )
    return parsed


def _values(query: Mapping[str, str | tuple[str, ...]], key: str) -> tuple[str, ...]:
    value = query.get(key, ())
    return (value,) if isinstance(value, str) else value


def sqlite_file(parsed: sa.URL, setting: str = "database URL") -> str | None:
    """The file a SQLite URL opens, or None when its database ends with the connection.

    SQLAlchemy hands `file:` names to SQLite as URIs when the URL has `uri=true`; then
    `file::memory:`, `mode=memory`, `vfs=memdb` and an empty path all make a database that is
    gone when the connection closes (https://www.sqlite.org/inmemorydb.html,
    https://www.sqlite.org/uri.html). Without it `:memory:` and an empty name do.
    """
    path = parsed.database or ""
    try:
        as_uri = any(sa.util.asbool(value) for value in _values(parsed.query, "uri"))
    except ValueError:
        raise SettingsError(f"{setting}: the query key uri is not true or false") from None
    if as_uri and path.startswith("file:"):
        path = unquote(urlsplit(path).path)
    memory = "memory" in _values(parsed.query, "mode") or (
        as_uri and "memdb" in _values(parsed.query, "vfs")
    )
    return None if memory or path in ("", ":memory:") else path


def check_database_url(
    url: str, *, creating: bool = False, setting: str = "database URL", entra: bool = False
) -> None:
    """Refuse database URLs that would connect somewhere unintended or create something.

    Only `db init` (`creating`) may create: every other command needs an existing SQLite file
    (connecting would create an empty one). In-memory SQLite vanishes when the command exits;
    a PostgreSQL URL without a database name connects to libpq's default database.
    """
    shown = display_db_url(url)
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        raise SettingsError(
            f"{setting} is malformed; expected scheme://[user[:password]@]host[:port]/database "
            "or sqlite:///path"
        ) from None
    if "@" in (parsed.host or ""):
        raise SettingsError(
            f"{setting} {shown}: the user info holds an unencoded '@'; percent-encode it as %40"
        )
    if entra:
        check_entra_url(parsed, setting)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = sqlite_file(parsed, setting)
        if path is None:
            raise SettingsError(
                f"{setting} {shown} is an in-memory or temporary SQLite database, gone when "
                "the command exits; use sqlite:///path/to/file.db"
            )
        if not creating and not Path(path).is_file():
            raise SettingsError(
                f"{setting} {shown}: no such SQLite file; create it with `safetynet db init`"
            )
    elif backend == "postgresql" and not parsed.database:
        raise SettingsError(
            f"{setting} {shown} names no database; add it: postgresql+psycopg://host/database"
        )


@dataclass(frozen=True)
class FunctionSettings:
    """The Azure Function's app settings (names in blob_safetynet/settings/appsettings.py, documented in docs/configuration.md)."""

    db_url: str
    account_url: str | None
    sweep: SweepSettings
    connection_string: str | None = None
    """Azurite only (tests); on Azure the account URL and the app's identity are used."""
    allow_custom_endpoint: bool = False
    db_auth: str = DB_AUTH_PASSWORD
    table: appsettings.TableNames = field(default_factory=appsettings.TableNames)
    """The documents table and its column names (SAFETYNET_TABLE, SAFETYNET_COLUMNS)."""

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> FunctionSettings:
        """The settings in `env` (the app settings), each checked before anything connects."""
        names = appsettings
        db_url = names.DB_URL.read(env)
        if not db_url:
            raise SettingsError(f"missing app setting(s): {names.DB_URL.name}")
        account_url = names.ACCOUNT_URL.read(env) or None
        connection_string = names.CONNECTION_STRING.read(env) or None
        if bool(account_url) == bool(connection_string):
            raise SettingsError(
                f"set exactly one of {names.ACCOUNT_URL.name} (Azure) or "
                f"{names.CONNECTION_STRING.name} (Azurite only)"
            )
        sweep = SweepSettings(
            cutoff=names.CUTOFF.duration(names.CUTOFF.read(env)),
            container=check_container_name(names.CONTAINER.read(env), names.CONTAINER.name),
            use_lease=names.LEASE.boolean(names.LEASE.read(env)),
            retired_grace=names.RETIRED_GRACE.duration(names.RETIRED_GRACE.read(env)),
        )
        allow_custom = names.ALLOW_CUSTOM_ENDPOINT.boolean(names.ALLOW_CUSTOM_ENDPOINT.read(env))
        db_auth = parse_db_auth(names.DB_AUTH.read(env))
        check_database_url(db_url, setting=names.DB_URL.name, entra=db_auth == DB_AUTH_ENTRA)
        table = names.TableNames.from_environment(env)
        return cls(db_url, account_url, sweep, connection_string, allow_custom, db_auth, table)
