"""Connecting to the documents database: a SQLAlchemy engine for a supported URL, with a
Microsoft Entra token as the password when asked, and the errors that say what went wrong
without echoing a secret."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from azure.core.credentials import TokenCredential
from sqlalchemy.engine import Engine
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.pool import ConnectionPoolEntry

from blob_safetynet.settings.parsed import SettingsError, check_entra_url
from blob_safetynet.settings.redaction import display_db_url, printable

_DRIVERS = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
SUPPORTED_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")
CONNECT_TIMEOUT_S = 10
"""A database that does not answer fails a timer run in seconds, not at the OS's TCP timeout."""
ENTRA_DATABASE_SCOPE = "https://ossrdbms-aad.database.windows.net/.default"
"""The audience of Microsoft Entra tokens for Azure Database for PostgreSQL; the token is sent as
the password: https://learn.microsoft.com/en-us/azure/postgresql/flexible-server/
how-to-configure-sign-in-azure-ad-authentication (same scope in Microsoft.Azure.PostgreSQL.Auth,
https://learn.microsoft.com/en-us/dotnet/api/overview/azure/Microsoft.Azure.PostgreSQL.Auth-readme).
"""


class StoreError(RuntimeError):
    """The database URL, the connection or the table is not usable."""


class DatabaseTokenError(StoreError):
    """No usable Microsoft Entra token for the database: the connection was not even tried."""


def is_unreachable(error: StoreError) -> bool:
    """True when the database could not be looked at (down, refused, no token), not misused."""
    return isinstance(error, DatabaseTokenError) or isinstance(
        error.__cause__, sa.exc.OperationalError
    )


def create_engine(
    url: str, token_credential: TokenCredential | None = None, pool_size: int | None = None
) -> Engine:
    """An engine for `url`, or a StoreError that says which schemes are supported.

    With `token_credential` (created once by the caller; DefaultAzureCredential on Azure) every
    new connection authenticates with a Microsoft Entra token instead of a password: PostgreSQL
    only, no password in the URL, TLS unless the server is on loopback (`check_entra_url`).

    `pool_size`: the most threads that use the engine at once. SQLAlchemy keeps 5 connections
    by default and closes each one opened beyond them when it is returned
    (https://docs.sqlalchemy.org/en/20/core/pooling.html#sqlalchemy.pool.QueuePool), so more
    writers than that open a new server connection for most of their statements.
    """
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        # The URL may carry a password: never echo it back.
        raise StoreError(
            "malformed database URL; expected scheme://[user[:password]@]host[:port]/database "
            "or sqlite:///path"
        ) from None
    backend = parsed.get_backend_name()
    if parsed.drivername in _DRIVERS:
        parsed = parsed.set(drivername=_DRIVERS[parsed.drivername])
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"unsupported database URL scheme {parsed.drivername!r}; "
            f"use one of {', '.join(SUPPORTED_SCHEMES)} (e.g. sqlite:///documents.db)"
        )
    if token_credential is not None:
        try:
            parsed = check_entra_url(parsed)
        except SettingsError as error:
            raise StoreError(str(error)) from None
    connect_args = {"connect_timeout": CONNECT_TIMEOUT_S} if backend == "postgresql" else {}
    pool = {} if pool_size is None else {"pool_size": pool_size}
    try:
        engine = sa.create_engine(parsed, pool_pre_ping=True, connect_args=connect_args, **pool)
    except (ValueError, TypeError):
        # The driver's words quote the value (e.g. `?timeout=`), which may be anything: name
        # the keys only.
        keys = ", ".join(printable(key) for key in parsed.query) or "none"
        raise StoreError(
            f"cannot use database URL {display_db_url(url)}: the driver refused a value of "
            f"its query (keys: {keys}); values are not shown"
        ) from None
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as error:
        # ImportError: the URL names a driver that is not installed (postgresql+pg8000://).
        reason = (
            f"driver {error.name!r} is not installed"
            if isinstance(error, ImportError)
            else type(error).__name__
        )
        raise StoreError(f"cannot use database URL {display_db_url(url)}: {reason}") from None
    if token_credential is not None:
        _send_token_as_password(engine, token_credential)
    return engine


def _send_token_as_password(engine: Engine, credential: TokenCredential) -> None:
    """Asks `credential` for a token on every new connection and hands it to the driver.

    A token is valid for 5 to 60 minutes and is checked only when a connection is opened; an
    open connection outlives it (https://learn.microsoft.com/en-us/azure/postgresql/
    flexible-server/concepts-azure-ad-authentication). So each new connection asks again, never
    a token cached here: the credential keeps its own cache and refreshes before expiry.
    """

    def token_as_password(
        dialect: Dialect, record: ConnectionPoolEntry, cargs: object, cparams: dict[str, Any]
    ) -> None:
        try:
            token = credential.get_token(ENTRA_DATABASE_SCOPE).token
        except Exception as error:
            # The credential's own message names its sources; it never holds the token.
            raise DatabaseTokenError(
                f"no Microsoft Entra token for the database: {type(error).__name__}"
            ) from None
        if not token or not token.isprintable() or token != token.strip():
            raise DatabaseTokenError(
                "the credential returned a malformed Microsoft Entra token (not shown)"
            )
        cparams["password"] = token

    sa.event.listen(engine, "do_connect", token_as_password)
