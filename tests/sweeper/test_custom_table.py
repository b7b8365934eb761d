"""An application's own table and column names, given to `db`, `sweep`, `reconcile`, `verify`
and the Function in one vocabulary (SAFETYNET_TABLE, SAFETYNET_COLUMNS), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from types import ModuleType

import pytest
import sqlalchemy as sa
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.policies.probes import ProbeOutcome, ProbeSettings, Target, run_probes
from blob_safetynet.policies.probes.liveness import SWEEPER_HEARTBEAT
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.appsettings import SettingsError, TableNames, table_names
from blob_safetynet.settings.parsed import FunctionSettings
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, HEARTBEAT_TABLE_FIELD
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import DocumentTable, Status
from blob_safetynet.sweeper.heartbeat import write_heartbeat
from tests.conftest import RunCli
from tests.sweeper.conftest import stale_rows_in

COLUMNS = "id=file_id,name=path,blob_name=object_key,status=state,created_utc=uploaded_at"
LAYOUT = DocumentTable(
    table="app_files",
    id="file_id",
    name="path",
    blob_name="object_key",
    status="state",
    created_utc="uploaded_at",
)


def table_options(db_url: str) -> list[str]:
    return ["--db", db_url, "--table", "app_files", "--columns", COLUMNS]


def target_options(db_url: str, azurite: Azurite, container: ContainerClient) -> list[str]:
    return [
        *table_options(db_url),
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
    ]


def blob_exists(container: ContainerClient, name: str) -> bool:
    try:
        container.get_blob_client(name).get_blob_properties()
    except ResourceNotFoundError:
        return False
    return True


def test_the_custom_table_works_end_to_end(
    db_url: str,
    azurite: Azurite,
    container: ContainerClient,
    run_cli: RunCli,
    function_app: ModuleType,
) -> None:
    """db init, put, sweep, the Function and reconcile all work on a table named by the app."""
    code, out, _ = run_cli("db", "init", *table_options(db_url))
    assert code == 0, out
    assert "'app_files' ready" in out
    store = DocumentStore.from_url(db_url, LAYOUT)
    columns = {c["name"] for c in sa.inspect(store.engine).get_columns("app_files")}
    assert {"file_id", "path", "object_key", "state", "uploaded_at"} <= columns
    published = UploadProtocol(store, container).put("report.pdf", b"published", extension=".pdf")
    stale = stale_rows_in(store, container, 2, prefix="cli")

    code, out, err = run_cli("sweep", "--json", *target_options(db_url, azurite, container))
    assert code == 0, err
    assert json.loads(out)["deleted_rows"] == 2
    assert not any(blob_exists(container, d.blob_name) for d in stale)

    later = stale_rows_in(store, container, 3, prefix="timer")
    env = {
        appsettings.DB_URL.name: db_url,
        appsettings.CONNECTION_STRING.name: azurite.connection_string,
        appsettings.CONTAINER.name: container.container_name,
        appsettings.TABLE.name: "app_files",
        appsettings.COLUMNS.name: COLUMNS,
    }
    report = function_app.sweep_once(env)
    assert report is not None
    assert report.deleted_rows == 3
    assert not any(blob_exists(container, d.blob_name) for d in later)
    heartbeat = json.loads(container.download_blob(HEARTBEAT_BLOB).readall())
    assert heartbeat[HEARTBEAT_TABLE_FIELD] == "app_files"

    code, out, err = run_cli("reconcile", *target_options(db_url, azurite, container))
    assert (code, out.strip().splitlines()[-1]) == (0, "container and table agree"), err
    kept = store.get(published.id)
    assert kept is not None
    assert kept.status is Status.READY
    store.engine.dispose()


def test_without_the_table_options_the_default_table_is_looked_for(
    db_url: str, azurite: Azurite, container: ContainerClient, run_cli: RunCli
) -> None:
    """A sweep of an app's table without --table fails on the missing default table (exit 2)."""
    assert run_cli("db", "init", *table_options(db_url))[0] == 0
    options = target_options(db_url, azurite, container)
    code, _, err = run_cli("sweep", *options[:2], *options[6:])
    assert code == 2
    assert "documents" in err


def heartbeat_outcome(
    service: BlobServiceClient, container: ContainerClient, table: str | None
) -> tuple[ProbeOutcome, str]:
    target = Target(service, container.container_name, settings=ProbeSettings(sweeper_table=table))
    result = run_probes(target, [SWEEPER_HEARTBEAT]).results[0]
    return result.outcome, result.detail


def test_verify_checks_which_table_the_heartbeat_names(
    service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """With a table to expect, a heartbeat of another table's sweeper fails; without, any passes."""
    assert write_heartbeat(container, {"examined": 1}, source="function", table="app_files")
    assert heartbeat_outcome(service_client, container, "app_files")[0] is ProbeOutcome.PASS
    outcome, detail = heartbeat_outcome(service_client, container, "documents")
    assert outcome is ProbeOutcome.FAIL
    assert "swept table 'app_files', not 'documents'" in detail
    outcome, detail = heartbeat_outcome(service_client, container, None)
    assert (outcome, "table 'app_files'" in detail) == (ProbeOutcome.PASS, True)


def test_verify_refuses_a_table_that_is_not_a_name(run_cli: RunCli) -> None:
    """`verify --table` with a non-identifier is bad usage (exit 2) before anything starts."""
    code, _, err = run_cli("verify", "--table", "a;b", "--connection-string", "x")
    assert code == 2
    assert "--table (SAFETYNET_TABLE): 'a;b' is not an SQL identifier" in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (
            ["--table", "app files"],
            "--table (SAFETYNET_TABLE): 'app files' is not an SQL identifier",
        ),
        (["--table", "x" * 41], "is longer than 40 characters"),
        (["--columns", "id=1st"], "--columns (SAFETYNET_COLUMNS): '1st' is not an SQL identifier"),
        (["--columns", "colour=hue"], "'colour' is not a column key; use id, name"),
        (["--columns", "id"], "'id' is not key=column"),
        (["--columns", "id=a,id=b"], "'id' is given twice"),
        (["--columns", "name=id"], "'id' names two columns"),
        (["--columns", "id=x;drop table t"], "is not an SQL identifier"),
    ],
)
def test_a_malformed_name_is_bad_usage(
    tmp_path: object, run_cli: RunCli, argv: list[str], words: str
) -> None:
    """A table or column that is not a plain identifier is refused with exit 2, naming it."""
    code, _, err = run_cli("db", "init", "--db", f"sqlite:///{tmp_path}/x.db", *argv)
    assert code == 2
    assert words in err


def test_the_function_loader_names_the_setting_it_refuses() -> None:
    """SAFETYNET_COLUMNS that is not key=column fails the loader with the setting's name."""
    env = {
        appsettings.DB_URL.name: "postgresql+psycopg://u@db.example/app",
        appsettings.ACCOUNT_URL.name: "https://acct.blob.core.windows.net",
        appsettings.COLUMNS.name: "id:file_id",
    }
    with pytest.raises(SettingsError, match=r"^SAFETYNET_COLUMNS: 'id:file_id' is not key=column"):
        FunctionSettings.from_environment(env)


def test_the_names_round_trip_through_their_text() -> None:
    """columns_text() is read back by table_names() as the same names, and unnamed keys vanish."""
    names = table_names("billing.app_files", "name=path, id = file_id, status=status")
    assert names == TableNames("app_files", "billing", (("id", "file_id"), ("name", "path")))
    assert table_names(names.qualified, names.columns_text()) == names
    layout = DocumentTable.from_names(names)
    assert (layout.schema, layout.table, layout.id, layout.name) == (
        "billing",
        "app_files",
        "file_id",
        "path",
    )


def test_the_column_keys_are_the_layouts_columns() -> None:
    """Every key the vocabulary accepts is a column field of DocumentTable, and every one is."""
    fields = set(DocumentTable.__dataclass_fields__) - {
        "table",
        "schema",
        "blobs_table",
        "meta_table",
    }
    assert set(appsettings.COLUMN_KEYS) == fields
