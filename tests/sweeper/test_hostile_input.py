"""The sweeper's commands and the Function against hostile input and careless operators.

One test per finding of issue 11: secrets never shown, no traceback, exit codes of the contract
(`blob_safetynet.cli.exitcodes`), no side effect outside `db init`, one endpoint rule, escaped names.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite, dev_connection_string
from blob_safetynet.infra.function_zip import BuildError, build_zip
from blob_safetynet.settings.parsed import SettingsError, check_blob_endpoint
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document
from blob_safetynet.sweeper.lease import SweepLease
from tests.conftest import POSTGRES_ADMIN_URL, RunCli
from tests.sweeper.conftest import stale_rows_in

StaleRows = Callable[..., list[Document]]
QUERY_SECRET = "Qu3ryPassw0rd"
AT_SECRET = "r2@secretpart"
SAS_SIGNATURE = "SASsig0123456789abcdef"
ACCOUNT_KEY = "QWNjb3VudEtleVNlY3JldA=="
DEAD_POSTGRES = f"postgresql+psycopg://sweeper@127.0.0.1:1/documents?password={QUERY_SECRET}"
REMOTE_CONNECTION_STRING = (
    f"DefaultEndpointsProtocol=https;AccountName=prodaccount;AccountKey={ACCOUNT_KEY};"
    "EndpointSuffix=core.windows.net"
)
SAS_ACCOUNT_URL = f"https://acct.blob.core.windows.net/?sv=2025-01-05&sp=rd&sig={SAS_SIGNATURE}"
SECRETS = (QUERY_SECRET, "secretpart", SAS_SIGNATURE, ACCOUNT_KEY)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in text


def sqlite_url(path: Path) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def target(azurite: Azurite, container: ContainerClient) -> list[str]:
    return [
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
    ]


# Secrets printed


@pytest.mark.parametrize("command", ["sweep", "reconcile"])
def test_password_in_the_query_is_not_echoed_by_an_error(
    run_cli: RunCli, target: list[str], command: str
) -> None:
    """A database password given as ?password= appears in no error line, and the exit is 3."""
    code, out, err = run_cli(command, "--db", DEAD_POSTGRES, *target, "--json")
    assert code == ExitCode.INCOMPLETE
    assert json.loads(out)["error"]["exit_code"] == ExitCode.INCOMPLETE
    assert "127.0.0.1:1/documents" in err
    assert_no_secret(out, err)


def test_db_init_error_hides_the_query_password(run_cli: RunCli) -> None:
    """`db init` against an unreachable server names host and database, never the password."""
    code, out, err = run_cli("db", "init", "--db", DEAD_POSTGRES)
    assert code == ExitCode.INCOMPLETE
    assert_no_secret(out, err)


@pytest.mark.postgres
def test_success_lines_hide_the_query_password(
    run_cli: RunCli, postgres_url: str, target: list[str]
) -> None:
    """The success lines of db init, sweep and reconcile show no ?password= value."""
    url = f"{postgres_url}&password={QUERY_SECRET}"
    for argv in (["db", "init"], ["sweep", *target], ["reconcile", *target]):
        code, out, err = run_cli(*argv, "--db", url)
        assert code == ExitCode.OK, err
        assert_no_secret(out, err)


def test_unencoded_at_in_the_password_is_refused_without_half_of_it(run_cli: RunCli) -> None:
    """A password with an unencoded '@' is refused by name, and no part of it is shown."""
    url = f"postgresql+psycopg://bob:{AT_SECRET}@127.0.0.1:1/documents"
    code, out, err = run_cli("db", "init", "--db", url)
    assert code == ExitCode.USAGE
    assert "%40" in err
    assert_no_secret(out, err)


@pytest.mark.parametrize("via", ["option", "environment"])
def test_sas_in_the_account_url_is_refused_without_echo(
    run_cli: RunCli, store: DocumentStore, db_url: str, monkeypatch: pytest.MonkeyPatch, via: str
) -> None:
    """A SAS in --account-url or SAFETYNET_ACCOUNT_URL is refused and its signature never shown."""
    args = ["sweep", "--db", db_url]
    if via == "option":
        args += ["--account-url", SAS_ACCOUNT_URL]
    else:
        monkeypatch.setenv("SAFETYNET_ACCOUNT_URL", SAS_ACCOUNT_URL)
    code, out, err = run_cli(*args)
    assert code == ExitCode.USAGE
    assert "query string" in err
    assert_no_secret(out, err)


# Tracebacks and wrong exit codes


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        ("sweep", "--cutoff", "99999999999999999999999d"),
        ("reconcile", "--older-than", "99999999999999999999999d"),
        ("sweep", "--cutoff", "\u0661\u0665m"),  # Arabic-Indic digits: "15m" to int()
        ("sweep", "--concurrency", "\u0664"),
        ("sweep", "--concurrency", "1_0"),
    ],
)
def test_huge_or_non_ascii_numbers_are_usage_errors(
    run_cli: RunCli,
    store: DocumentStore,
    db_url: str,
    target: list[str],
    command: str,
    option: str,
    value: str,
) -> None:
    """Overflowing durations and non-ASCII digits exit 2 with a message naming the option."""
    code, _, err = run_cli(command, "--db", db_url, *target, option, value)
    assert code == ExitCode.USAGE
    assert option in err


def test_function_refuses_an_overflowing_cutoff(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    function_app: ModuleType,
) -> None:
    """SAFETYNET_CUTOFF of 10**22 days is a settings error naming it, not an OverflowError."""
    with pytest.raises(SettingsError, match="SAFETYNET_CUTOFF"):
        function_app.sweep_once(
            function_settings(azurite, container, db_url) | {"SAFETYNET_CUTOFF": "9" * 23 + "d"}
        )


@pytest.mark.parametrize(
    "url", ["postgresql+pg8000://u@127.0.0.1/db", "sqlite+pysqlcipher:///x.db"]
)
def test_driver_not_installed_is_a_usage_error(run_cli: RunCli, url: str) -> None:
    """A URL naming a driver that is not installed exits 2 and says so."""
    code, _, err = run_cli("db", "init", "--db", url)
    assert code == ExitCode.USAGE
    assert "not installed" in err


@pytest.mark.parametrize("output", ["", ".", "DIR", "DIR/"])
def test_build_function_refuses_a_directory_output(
    run_cli: RunCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, output: str
) -> None:
    """An empty or directory --output exits 2 before building and leaves nothing behind."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DIR").mkdir()
    code, _, err = run_cli("build-function", "--skip-dependencies", "--output", output)
    assert code == ExitCode.USAGE
    assert "--output" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["DIR"]


def test_build_zip_into_a_directory_leaves_nothing_behind(tmp_path: Path) -> None:
    """A folder as the zip's target is refused before building, and nothing is left behind."""
    target = tmp_path / "out.zip"
    target.mkdir()
    with pytest.raises(BuildError, match="is a folder"):
        build_zip(target, with_dependencies=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.zip"]


def test_database_failure_mid_sweep_exits_4_with_json(
    run_cli: RunCli, tmp_path: Path, azurite: Azurite, container: ContainerClient
) -> None:
    """A database that refuses writes mid-run exits 4 (service failed) and still prints JSON."""
    path = tmp_path / "locked.db"
    store = DocumentStore.from_url(sqlite_url(path))
    store.init_schema()
    stale_rows_in(store, container, 2)
    # Another writer holds the RESERVED lock: the reads of the checks work, the sweep's first
    # write (claiming rows) fails with "database is locked" after SQLite's busy timeout.
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        code, out, err = run_cli(
            "sweep",
            "--db",
            sqlite_url(path),
            "--connection-string",
            azurite.connection_string,
            "--container",
            container.container_name,
            "--json",
        )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    report = json.loads(out)
    assert code == ExitCode.SERVICE_FAILED
    assert report["error"]["kind"] == "service_failed"
    # Whether the sweeper stopped itself (its report says `stopped`) or the error reached the
    # command, the JSON says what failed.
    assert "database is locked" in (report.get("stopped") or report["error"]["message"])
    assert "mid-run" in err
    assert store.count() == 2  # nothing lost: the rows stay Pending for the next sweep


def test_lease_held_prints_json(
    run_cli: RunCli,
    store: DocumentStore,
    db_url: str,
    target: list[str],
    container: ContainerClient,
) -> None:
    """With the lease held elsewhere, `sweep --lease --json` prints a JSON object and exits 0."""
    with SweepLease(container):
        code, out, _ = run_cli("sweep", "--db", db_url, *target, "--lease", "--json")
    assert code == ExitCode.OK
    assert json.loads(out)["skipped"]


def test_sweep_error_list_is_capped(
    run_cli: RunCli,
    store: DocumentStore,
    db_url: str,
    target: list[str],
    container: ContainerClient,
    stale_rows: StaleRows,
) -> None:
    """25 failing rows give 20 listed errors and an error_count of 25, in JSON and in text."""
    documents = stale_rows(25)
    leases = [
        container.get_blob_client(d.blob_name).acquire_lease(lease_duration=60) for d in documents
    ]
    try:
        code, out, _ = run_cli("sweep", "--db", db_url, *target, "--json")
        text_code, text, _ = run_cli("sweep", "--db", db_url, *target)
    finally:
        for lease in leases:
            lease.release()
    report = json.loads(out)
    assert (code, len(report["errors"]), report["error_count"]) == (ExitCode.FINDINGS, 20, 25)
    assert text_code == ExitCode.FINDINGS
    assert "and 5 more errors" in text


# Surprising side effects


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_db_init_refuses_in_memory_sqlite(run_cli: RunCli, url: str) -> None:
    """`db init` on an in-memory database exits 2 instead of reporting a table that vanishes."""
    code, out, err = run_cli("db", "init", "--db", url)
    assert code == ExitCode.USAGE
    assert "in-memory" in err
    assert "ready" not in out


@pytest.mark.postgres
def test_db_init_refuses_postgresql_without_a_database(
    run_cli: RunCli, postgres_database: str
) -> None:
    """A PostgreSQL URL without a database name exits 2 and creates no table anywhere."""
    server_only = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    engine = sa.create_engine(f"{server_only}/postgres")
    before = sa.inspect(engine).get_table_names()
    code, _, err = run_cli("db", "init", "--db", server_only)
    after = sa.inspect(engine).get_table_names()
    engine.dispose()
    assert code == ExitCode.USAGE
    assert "names no database" in err
    assert after == before


@pytest.mark.parametrize("command", ["sweep", "reconcile"])
def test_missing_sqlite_file_is_not_created(
    run_cli: RunCli, tmp_path: Path, target: list[str], command: str
) -> None:
    """sweep and reconcile against a missing SQLite file exit 2 and do not create it."""
    path = tmp_path / "missing.db"
    code, _, err = run_cli(command, "--db", sqlite_url(path), *target)
    assert code == ExitCode.USAGE
    assert "db init" in err
    assert not path.exists()


def test_remote_connection_string_is_refused_by_the_cli(
    run_cli: RunCli, store: DocumentStore, db_url: str
) -> None:
    """The CLI refuses a connection string to a non-loopback host, as the Function does."""
    code, out, err = run_cli(
        "sweep", "--db", db_url, "--connection-string", REMOTE_CONNECTION_STRING
    )
    assert code == ExitCode.USAGE
    assert "loopback" in err
    assert_no_secret(out, err)


@pytest.mark.parametrize(
    "url",
    [
        "https://evil.example.com",
        "https://acct.blob.core.windows.net.evil.example.com",
        "https://10.0.0.5",
        "http://127.0.0.1:10000/devstoreaccount1",
    ],
)
def test_account_url_outside_azure_and_loopback_is_refused(
    run_cli: RunCli, store: DocumentStore, db_url: str, url: str
) -> None:
    """A token is never sent to a host that is not Azure's blob endpoint or loopback https."""
    code, _, err = run_cli("sweep", "--db", db_url, "--account-url", url)
    assert code == ExitCode.USAGE
    assert "account-url" in err


@pytest.mark.parametrize(
    "url",
    [
        "https://acct.blob.core.windows.net",
        "https://acct.privatelink.blob.core.windows.net/",
        "https://acct.blob.core.usgovcloudapi.net",
        "https://acct.blob.core.chinacloudapi.cn",
        "https://127.0.0.1:10000/devstoreaccount1",
        "https://localhost:10000/devstoreaccount1",
    ],
)
def test_azure_sovereign_and_loopback_endpoints_are_accepted(url: str) -> None:
    """Public, Government and China blob endpoints and loopback emulators pass the rule."""
    check_blob_endpoint(url, with_key=False)


def test_custom_endpoint_needs_the_opt_in() -> None:
    """A custom domain passes only with allow_custom; a key never goes there without it."""
    with pytest.raises(SettingsError, match="allow-custom-endpoint"):
        check_blob_endpoint("https://files.example.com", with_key=False)
    check_blob_endpoint("https://files.example.com", with_key=False, allow_custom=True)
    with pytest.raises(SettingsError, match="loopback"):
        check_blob_endpoint("https://acct.blob.core.windows.net", with_key=True)


class NotAzure(BaseHTTPRequestHandler):
    """A server that is not Azure: 403 with a plain-text body, which the SDK logs a warning on."""

    def do_GET(self) -> None:
        self.send_response(403)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "4")
        self.end_headers()
        self.wfile.write(b"nope")

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_sdk_log_lines_are_json_like_ours(run_cli: RunCli, tmp_path: Path) -> None:
    """Off a terminal every stderr log line, the Azure SDK's included, is one JSON object."""
    url = sqlite_url(tmp_path / "x.db")
    DocumentStore.from_url(url).init_schema()
    server = ThreadingHTTPServer(("127.0.0.1", 0), NotAzure)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = dev_connection_string(server.server_address[1])
    try:
        code, _, err = run_cli("sweep", "--db", url, "--connection-string", endpoint)
    finally:
        server.shutdown()
        server.server_close()
    assert code == ExitCode.INCOMPLETE
    logs = [json.loads(line) for line in err.splitlines() if not line.startswith("safetynet")]
    assert [entry["logger"].split(".")[0] for entry in logs] == ["azure"]


def test_blob_names_are_escaped_so_none_forges_a_line(
    run_cli: RunCli,
    store: DocumentStore,
    db_url: str,
    target: list[str],
    container: ContainerClient,
) -> None:
    """An orphan named 'x\\ncontainer and table agree' prints as one escaped line."""
    forged = "x\ncontainer and table agree"
    container.upload_blob(forged, b"x", tags={STATE_TAG: COMMITTED})
    time.sleep(1.1)  # reconcile judges only blobs older than --older-than (at least 1 s)
    code, out, _ = run_cli("reconcile", "--db", db_url, *target, "--older-than", "1s", "--json")
    assert code == ExitCode.FINDINGS
    assert json.loads(out)["orphans"][0]["blob"] == forged
    code, out, _ = run_cli("reconcile", "--db", db_url, *target, "--older-than", "1s")
    assert code == ExitCode.FINDINGS
    assert "container and table agree" not in out.splitlines()
    assert "orphan blob x\\ncontainer and table agree" in out


# The Function


def function_settings(azurite: Azurite, container: ContainerClient, db_url: str) -> dict[str, str]:
    return {
        "SAFETYNET_DB_URL": db_url,
        "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
        "SAFETYNET_CONTAINER": container.container_name,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"SAFETYNET_DB_URL": DEAD_POSTGRES},
        {"SAFETYNET_DB_URL": f"postgresql+psycopg://bob:{AT_SECRET}@127.0.0.1:1/documents"},
        {"SAFETYNET_CONNECTION_STRING": "", "SAFETYNET_ACCOUNT_URL": SAS_ACCOUNT_URL},
        {"SAFETYNET_CONNECTION_STRING": REMOTE_CONNECTION_STRING},
    ],
    ids=["query-password", "unencoded-at", "sas", "remote-key"],
)
def test_function_never_logs_or_raises_a_secret(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    caplog: pytest.LogCaptureFixture,
    change: dict[str, str],
    function_app: ModuleType,
) -> None:
    """Whatever setting holds a secret, neither the raised error nor any log record shows it."""
    caplog.set_level(logging.DEBUG)
    settings = function_settings(azurite, container, db_url) | change
    with pytest.raises(Exception) as raised:  # noqa: PT011 (any refusal; its words are checked)
        function_app.sweep_once(settings)
    chained: list[str] = []
    error: BaseException | None = raised.value
    while error is not None:  # what the Functions host prints: the error and its chain
        chained.append(f"{error!r} {error}")
        error = error.__cause__ or error.__context__
    assert_no_secret(*chained, caplog.text)


def test_function_applies_the_endpoint_rule_with_its_opt_in(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    function_app: ModuleType,
) -> None:
    """An account URL on a custom host is refused unless SAFETYNET_ALLOW_CUSTOM_ENDPOINT=true."""
    settings = function_settings(azurite, container, db_url) | {
        "SAFETYNET_CONNECTION_STRING": "",
        "SAFETYNET_ACCOUNT_URL": "https://files.example.com",
    }
    with pytest.raises(SettingsError, match="SAFETYNET_ALLOW_CUSTOM_ENDPOINT"):
        function_app.sweep_once(settings)


def test_a_value_with_a_newline_is_escaped_once(run_cli: RunCli, tmp_path: Path) -> None:
    """A bad --cutoff holding a newline is shown on one line, escaped exactly once."""
    code, _, err = run_cli("sweep", "--db", sqlite_url(tmp_path / "x.db"), "--cutoff=1\nforged")
    assert code == ExitCode.USAGE
    assert err.splitlines()[0].endswith(
        "is not a duration; use a whole number (digits 0-9) and a unit s, m, h or d (e.g. 90s, 15m, 2h, 1d)"
    )
    assert "'1\\nforged'" in err
    assert not any(line.startswith("forged") for line in err.splitlines())
