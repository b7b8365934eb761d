"""One reading of an endpoint URL decides where a credential may go and where it goes.

The unit half checks `parse_endpoint` against the parsers of the HTTP stack; the other half
aims every entry point at hostile URLs through `testkit.token_trap`, a loopback proxy that
records where each request was going and its Authorization header: a refused URL must leave
the trap empty, and the controls show the trap does see a token when one is sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import pytest
from urllib3.util import parse_url

from blob_safetynet.policies.sources.connection import StaticTokenCredential
from blob_safetynet.policies.sources.live import run_audit
from blob_safetynet.policies.sources.results import Scope
from blob_safetynet.protocol.clients import blob_service_client
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError
from blob_safetynet.settings.endpoints import parse_endpoint
from testkit.token_trap import TokenTrap
from tests.conftest import RunCli

SUBSCRIPTION = "00000000-0000-0000-0000-00000000a0d1"
ACCEPTED = [
    "https://acct.blob.core.windows.net",
    "https://ACCT.Blob.Core.Windows.Net/",
    "https://acct.blob.core.usgovcloudapi.net/some/path",
    "http://127.0.0.1:10000/devstoreaccount1",
    "https://[::1]:10000/devstoreaccount1",
    "https://localhost:8443",
    "https://management.azure.com",
    "https://storage.example.org:443/",
]
BLOB_HOSTILE = {
    "backslash": "https://localhost\\.blob.core.windows.net",
    "backslash-user-info": "https://evil.example\\@acct.blob.core.windows.net",
    "user-info": "https://user:pw@acct.blob.core.windows.net",
    "percent-encoded-host": "https://localhost%5c.blob.core.windows.net",
    "trailing-dot": "https://acct.blob.core.windows.net.",
    "zone-id": "https://[::1%25lo]:1",
    "whitespace": "https://local\thost.blob.core.windows.net",
    "non-ascii-dot": "https://evil.example\u3002.blob.core.windows.net",
    "fullwidth-backslash": "https://localhost\uff3c.blob.core.windows.net",
    "numeric-host": "https://127.1",
}
ARM_HOSTILE = {
    "backslash": "https://localhost\\.management.azure.com",
    "backslash-user-info": "https://evil.example\\@management.azure.com",
    "trailing-dot": "https://management.azure.com.",
    "zone-id": "https://[::1%25lo]:1",
    "percent-encoded-host": "https://management%2eazure.com",
    "non-ascii": "https://management.azure.com\u3002evil.example",
}


@pytest.mark.parametrize("url", ACCEPTED)
def test_an_accepted_url_names_the_host_and_port_urllib3_and_urlsplit_connect_to(url: str) -> None:
    """Whatever `parse_endpoint` accepts, urllib3 (the transport's parser) and urlsplit read as
    the same host and port."""
    endpoint = parse_endpoint(url, "--account-url")
    theirs, ours = parse_url(url), urlsplit(url)
    assert endpoint.host.strip("[]") == (theirs.host or "").lower().strip("[]") == ours.hostname
    assert endpoint.port == theirs.port == ours.port


@pytest.mark.parametrize("url", [*BLOB_HOSTILE.values(), *ARM_HOSTILE.values()])
def test_a_url_the_parsers_read_apart_is_refused_with_the_setting_named(url: str) -> None:
    """Backslashes, user info, encoded, non-ASCII or numeric hosts, trailing dots, zone ids and
    whitespace are refused, the message naming the setting and never the user info."""
    with pytest.raises(SettingsError, match=r"^--account-url ") as refused:
        parse_endpoint(url, "--account-url")
    assert "pw" not in str(refused.value)


@pytest.fixture
def trap(monkeypatch: pytest.MonkeyPatch) -> Iterator[TokenTrap]:
    """Every client of this process goes through the trap; DefaultAzureCredential takes its
    token from the trap's managed identity endpoint."""
    for name in ("AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID", "MSI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    with TokenTrap() as running:
        for name, value in running.environment().items():
            monkeypatch.setenv(name, value)
        yield running


def _touch(container_client: Any) -> None:
    container_client.get_container_properties()


def test_the_trap_sees_the_token_an_allowed_blob_endpoint_is_sent(trap: TokenTrap) -> None:
    """Control: a client for an Azure blob endpoint sends the managed identity's token, and the
    trap records it with the host the client connected for."""
    service = blob_service_client("https://acct.blob.core.windows.net")
    with pytest.raises(Exception, match="AuthorizationFailure"):
        _touch(service.get_container_client("documents"))
    assert [(seen.target, seen.method) for seen in trap.bearers()] == [
        ("acct.blob.core.windows.net:443", "GET")
    ]


@pytest.mark.parametrize("url", BLOB_HOSTILE.values(), ids=BLOB_HOSTILE.keys())
def test_the_python_api_sends_no_token_for_a_refused_account_url(trap: TokenTrap, url: str) -> None:
    """`blob_service_client` refuses the URL before a client exists: nothing reaches any host."""
    with pytest.raises(SettingsError, match="--account-url"):
        _touch(blob_service_client(url).get_container_client("documents"))
    assert trap.seen == []


@pytest.fixture
def sqlite_db(tmp_path: Path, run_cli: RunCli) -> str:
    url = f"sqlite:///{tmp_path / 'documents.db'}"
    code, _, err = run_cli("db", "init", "--db", url)
    assert code == 0, err
    return url


@pytest.mark.parametrize("command", ["sweep", "reconcile"])
@pytest.mark.parametrize("url", BLOB_HOSTILE.values(), ids=BLOB_HOSTILE.keys())
def test_sweep_and_reconcile_send_no_token_for_a_refused_account_url(
    trap: TokenTrap, run_cli: RunCli, sqlite_db: str, command: str, url: str
) -> None:
    """The CLI refuses the --account-url as bad usage (exit 2) and nothing reaches any host."""
    code, _, err = run_cli(command, "--db", sqlite_db, "--account-url", url)
    assert (code, trap.seen) == (2, []), err
    assert "--account-url" in err


@pytest.mark.parametrize("url", BLOB_HOSTILE.values(), ids=BLOB_HOSTILE.keys())
def test_verify_sends_no_token_for_a_refused_account_url(
    trap: TokenTrap, run_cli: RunCli, url: str
) -> None:
    """`verify --account-url` refuses it before the first probe: exit 2, nothing sent."""
    code, _, err = run_cli("verify", "--account-url", url)
    assert (code, trap.seen) == (2, []), err
    assert "--account-url" in err


@pytest.mark.parametrize("url", BLOB_HOSTILE.values(), ids=BLOB_HOSTILE.keys())
def test_the_function_sends_no_token_for_a_refused_account_url_setting(
    trap: TokenTrap, function_app: ModuleType, sqlite_db: str, url: str
) -> None:
    """The Function's loader refuses SAFETYNET_ACCOUNT_URL, naming the setting; nothing sent."""
    env = {appsettings.DB_URL.name: sqlite_db, appsettings.ACCOUNT_URL.name: url}
    with pytest.raises(SettingsError, match=appsettings.ACCOUNT_URL.name):
        function_app.sweep_once(env)
    assert trap.seen == []


def test_the_trap_sees_the_token_an_allowed_arm_endpoint_is_sent(trap: TokenTrap) -> None:
    """Control: the audit's Python API sends its token to Resource Manager, and the trap sees
    it there."""
    report = run_audit(Scope(SUBSCRIPTION), StaticTokenCredential(trap.token), concurrency=1)
    assert report.errors
    assert {seen.target for seen in trap.bearers()} == {"management.azure.com:443"}


@pytest.mark.parametrize("url", ARM_HOSTILE.values(), ids=ARM_HOSTILE.keys())
def test_the_audit_python_api_sends_no_token_for_a_refused_arm_endpoint(
    trap: TokenTrap, url: str
) -> None:
    """`run_audit` applies the endpoint rule itself: a refused ARM endpoint raises, unsent."""
    with pytest.raises(SettingsError, match="--arm-endpoint"):
        run_audit(Scope(SUBSCRIPTION), StaticTokenCredential(trap.token), arm_endpoint=url)
    assert trap.seen == []


@pytest.mark.parametrize("command", ["audit", "verify"])
@pytest.mark.parametrize("url", ARM_HOSTILE.values(), ids=ARM_HOSTILE.keys())
def test_audit_and_verify_send_no_token_for_a_refused_arm_endpoint(
    trap: TokenTrap, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, url: str, command: str
) -> None:
    """`audit`/`verify --arm-endpoint` refuse it as bad usage (exit 2); the token goes nowhere."""
    monkeypatch.setenv(appsettings.ARM_TOKEN.name, trap.token)
    account = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg"
        "/providers/Microsoft.Storage/storageAccounts/acct"
    )
    scope = ["--subscription", SUBSCRIPTION] if command == "audit" else ["--account", account]
    code, _, err = run_cli(command, *scope, "--arm-endpoint", url)
    assert (code, trap.seen) == (2, []), err
    assert "--arm-endpoint" in err


KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""Azurite's documented development key."""
ENDPOINT_HOSTILE = {
    "zone-id": "https://[::1%25lo]:1/devstoreaccount1",
    "backslash": "http://127.0.0.1:10000\\@evil.example/devstoreaccount1",
    "numeric-host": "http://127.1:10000/devstoreaccount1",
}


@pytest.mark.parametrize("endpoint", ENDPOINT_HOSTILE.values(), ids=ENDPOINT_HOSTILE.keys())
def test_a_connection_string_endpoint_the_parsers_read_apart_sends_no_key(
    trap: TokenTrap, endpoint: str
) -> None:
    """A BlobEndpoint outside the grammar is refused before the shared key signs anything."""
    text = f"AccountName=devstoreaccount1;AccountKey={KEY};BlobEndpoint={endpoint}"
    with pytest.raises(SettingsError, match="--connection-string endpoint"):
        _touch(blob_service_client(connection_string=text).get_container_client("documents"))
    assert trap.seen == []
