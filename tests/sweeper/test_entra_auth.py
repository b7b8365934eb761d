"""SAFETYNET_DB_AUTH=entra: a Microsoft Entra token from a passed-in credential is the password.

The credential is a real object of the TokenCredential shape, not a patch: it counts its calls.
The local PostgreSQL trusts every connection, so what is checked is what the driver is handed.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import sqlalchemy as sa
from azure.core.credentials import AccessToken
from azure.core.exceptions import ClientAuthenticationError

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.settings.parsed import FunctionSettings, SettingsError
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import (
    ENTRA_DATABASE_SCOPE,
    DatabaseTokenError,
    StoreError,
    create_engine,
    is_unreachable,
)
from tests.conftest import RunCli

REMOTE = "postgresql+psycopg://sweeper-identity@db.example.com/documents"
URL_PASSWORD = "pw-in-the-url-7Qx"


class CountingCredential:
    """Hands out `token-1`, `token-2`, ... and remembers the scopes it was asked for."""

    def __init__(self, fixed: str | None = None, fail: bool = False) -> None:
        self.fixed = fixed
        self.fail = fail
        self.scopes: list[tuple[str, ...]] = []

    def get_token(
        self,
        *scopes: str,
        claims: str | None = None,
        tenant_id: str | None = None,
        enable_cae: bool = False,
        **kwargs: Any,
    ) -> AccessToken:
        self.scopes.append(scopes)
        if self.fail:
            raise ClientAuthenticationError("no managed identity endpoint")
        token = f"token-{len(self.scopes)}" if self.fixed is None else self.fixed
        return AccessToken(token, int(time.time()) + 3600)


def record_passwords(store: DocumentStore) -> list[object]:
    """The password each new connection hands to the driver, seen after the store's own hook."""
    seen: list[object] = []

    def record(dialect: object, record: object, cargs: object, cparams: dict[str, Any]) -> None:
        seen.append(cparams.get("password"))

    sa.event.listen(store.engine, "do_connect", record)
    return seen


@pytest.mark.postgres
def test_each_new_connection_asks_for_a_token_and_sends_it_as_the_password(
    postgres_url: str,
) -> None:
    """Two connections, two token requests for the database scope, each token the password."""
    credential = CountingCredential()
    store = DocumentStore.from_url(postgres_url, token_credential=credential)
    seen = record_passwords(store)
    try:
        store.init_schema()
        store.engine.dispose()  # the next statement needs a new connection
        assert store.count() == 0
    finally:
        store.engine.dispose()
    assert credential.scopes == [(ENTRA_DATABASE_SCOPE,), (ENTRA_DATABASE_SCOPE,)]
    assert seen == ["token-1", "token-2"]


@pytest.mark.postgres
@pytest.mark.parametrize("token", ["tok\r\nen-secret-Zq9", "tok-secret-Zq9\n", ""])
def test_a_malformed_token_is_refused_and_never_shown(
    postgres_url: str, token: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A token with CR/LF (or none) stops the connection; the message and logs do not hold it."""
    caplog.set_level(logging.DEBUG)
    store = DocumentStore.from_url(postgres_url, token_credential=CountingCredential(token))
    seen = record_passwords(store)
    with pytest.raises(DatabaseTokenError) as raised:
        store.count()
    store.engine.dispose()
    assert seen == []
    assert is_unreachable(raised.value)
    if token:
        assert "secret-Zq9" not in str(raised.value)
        assert "secret-Zq9" not in caplog.text


@pytest.mark.postgres
def test_a_credential_that_fails_makes_the_database_unreachable_not_misused(
    postgres_url: str,
) -> None:
    """No token means the database could not be looked at (exit 3), not a bad option (exit 2)."""
    store = DocumentStore.from_url(postgres_url, token_credential=CountingCredential(fail=True))
    with pytest.raises(DatabaseTokenError, match="ClientAuthenticationError") as raised:
        store.count()
    store.engine.dispose()
    assert is_unreachable(raised.value)


def test_tls_is_required_for_a_remote_server() -> None:
    """A non-loopback host gets sslmode=require; a weaker mode is refused, a stricter one kept."""
    credential = CountingCredential()
    assert create_engine(REMOTE, credential).url.query["sslmode"] == "require"
    strict = create_engine(f"{REMOTE}?sslmode=verify-full", credential)
    assert strict.url.query["sslmode"] == "verify-full"
    for weak in ("disable", "allow", "prefer"):
        with pytest.raises(StoreError, match=f"sslmode={weak}"):
            create_engine(f"{REMOTE}?sslmode={weak}", credential)
    loopback = create_engine("postgresql://app@127.0.0.1/documents", credential)
    assert "sslmode" not in loopback.url.query
    assert "sslmode" not in create_engine(REMOTE).url.query  # password mode is unchanged
    assert credential.scopes == []  # nothing is fetched before a connection


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"postgresql://app:{URL_PASSWORD}@db.example.com/documents", "carries a password"),
        (f"postgresql://app@db.example.com/documents?password={URL_PASSWORD}", "password"),
        ("postgresql://db.example.com/documents", "names no user"),
        ("sqlite:///documents.db", "only with PostgreSQL"),
    ],
)
def test_urls_entra_cannot_use_are_refused_without_echoing_them(url: str, reason: str) -> None:
    """A password in the URL, no user, or SQLite: a clear refusal that never shows the URL."""
    with pytest.raises(StoreError, match=reason) as raised:
        create_engine(url, CountingCredential())
    assert URL_PASSWORD not in str(raised.value)


def test_the_function_reads_the_mode_strictly() -> None:
    """SAFETYNET_DB_AUTH is password (default) or entra; anything else or a bad URL is refused."""
    env = {"SAFETYNET_DB_URL": REMOTE, "SAFETYNET_ACCOUNT_URL": "https://a.blob.core.windows.net"}
    assert FunctionSettings.from_environment(env).db_auth == "password"
    entra = FunctionSettings.from_environment({**env, "SAFETYNET_DB_AUTH": "entra"})
    assert entra.db_auth == "entra"
    for value in ("Entra", "aad", "", "entra "):
        with pytest.raises(SettingsError, match="SAFETYNET_DB_AUTH"):
            FunctionSettings.from_environment({**env, "SAFETYNET_DB_AUTH": value})
    with_password = f"postgresql://app:{URL_PASSWORD}@db.example.com/documents"
    with pytest.raises(SettingsError, match="carries a password") as raised:
        FunctionSettings.from_environment(
            {**env, "SAFETYNET_DB_URL": with_password, "SAFETYNET_DB_AUTH": "entra"}
        )
    assert URL_PASSWORD not in str(raised.value)


@pytest.mark.parametrize("command", [("db", "init"), ("db", "upgrade"), ("sweep",), ("reconcile",)])
@pytest.mark.parametrize(
    ("db", "auth", "reason"),
    [
        ("sqlite:///documents.db", "entra", "only with PostgreSQL"),
        (f"postgresql://app:{URL_PASSWORD}@db.example.com/d", "entra", "carries a password"),
        ("postgresql://app@db.example.com/d?sslmode=disable", "entra", "token unencrypted"),
        ("postgresql://app@db.example.com/d", "kerberos", "not a database authentication"),
    ],
)
def test_the_cli_exits_2_for_entra_misuse(
    run_cli: RunCli, command: tuple[str, ...], db: str, auth: str, reason: str
) -> None:
    """Every command that opens the database refuses these before any credential or connection."""
    target = () if command[0] == "db" else ("--account-url", "https://a.blob.core.windows.net")
    code, out, err = run_cli(*command, "--db", db, "--db-auth", auth, *target)
    assert code == ExitCode.USAGE
    assert reason in out + err
    assert URL_PASSWORD not in out + err


def test_the_cli_reads_the_mode_from_the_environment(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SAFETYNET_DB_AUTH is the default of --db-auth, checked just as strictly."""
    monkeypatch.setenv("SAFETYNET_DB_AUTH", "yes")
    code, _, err = run_cli("db", "init", "--db", "postgresql://app@db.example.com/d")
    assert code == ExitCode.USAGE
    assert "SAFETYNET_DB_AUTH" in err
