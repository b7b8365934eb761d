"""A malformed credential variable is bad usage (exit 2) naming the variable, never a crash."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from blob_safetynet.function import sweep as sweep_function
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError
from tests.conftest import RunCli

SUBSCRIPTION = "00000000-0000-0000-0000-00000000a0d1"
ACCOUNT_URL = "https://acct.blob.core.windows.net"
GARBLED = "AZURE_TOKEN_CREDENTIALS"


@pytest.fixture
def sqlite_db(tmp_path: Path, run_cli: RunCli) -> str:
    url = f"sqlite:///{tmp_path / 'documents.db'}"
    assert run_cli("db", "init", "--db", url)[0] == 0
    return url


@pytest.fixture
def garbled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GARBLED, "garbled")
    monkeypatch.delenv(appsettings.ARM_TOKEN.name, raising=False)


@pytest.mark.usefixtures("garbled")
@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "--account-url", ACCOUNT_URL],
        ["reconcile", "--account-url", ACCOUNT_URL],
        ["verify", "--account-url", ACCOUNT_URL],
        ["audit", "--subscription", SUBSCRIPTION],
        [
            "verify",
            "--account-url",
            ACCOUNT_URL,
            "--account",
            f"/subscriptions/{SUBSCRIPTION}"
            "/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/acct",
        ],
    ],
    ids=["sweep", "reconcile", "verify", "audit", "verify-settings"],
)
def test_a_garbled_token_credentials_variable_is_bad_usage_naming_it(
    run_cli: RunCli, sqlite_db: str, argv: list[str]
) -> None:
    """AZURE_TOKEN_CREDENTIALS=garbled makes each command exit 2 and name the variable."""
    database = ["--db", sqlite_db] if argv[0] in ("sweep", "reconcile") else []
    code, _, err = run_cli(*argv, *database)
    assert code == 2, err
    assert f"{GARBLED}: 'garbled' is not dev, prod or a credential's name" in err


@pytest.mark.usefixtures("garbled")
def test_db_init_with_entra_auth_and_a_garbled_variable_is_bad_usage(run_cli: RunCli) -> None:
    """`db init --db-auth entra` builds its token credential before connecting: exit 2."""
    code, _, err = run_cli(
        "db", "init", "--db", "postgresql+psycopg://alice@127.0.0.1:1/app", "--db-auth", "entra"
    )
    assert (code, GARBLED in err) == (2, True), err


@pytest.mark.usefixtures("garbled")
def test_the_function_names_the_garbled_variable(function_app: ModuleType, sqlite_db: str) -> None:
    """The Function's invocation fails with a SettingsError naming AZURE_TOKEN_CREDENTIALS."""
    env = {appsettings.DB_URL.name: sqlite_db, appsettings.ACCOUNT_URL.name: ACCOUNT_URL}
    sweep_function._service.cache_clear()
    with pytest.raises(SettingsError, match=GARBLED):
        function_app.sweep_once(env)


@pytest.mark.parametrize("tenant", ["not a tenant!", "../evil", "tenant\u202e"])
def test_a_malformed_second_credential_tenant_is_bad_usage_naming_the_variable(
    run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, tenant: str
) -> None:
    """`verify --second-credential P` with a malformed P_TENANT_ID exits 2 naming it."""
    monkeypatch.setenv("SECOND_CLIENT_ID", "00000000-0000-0000-0000-000000000002")
    monkeypatch.setenv("SECOND_CLIENT_SECRET", "second-secret-canary")
    monkeypatch.setenv("SECOND_TENANT_ID", tenant)
    code, out, err = run_cli(
        "verify", "--account-url", ACCOUNT_URL, "--second-credential", "SECOND"
    )
    assert code == 2, err
    assert "SECOND_TENANT_ID is not a tenant id" in err
    assert "second-secret-canary" not in out + err
