"""The documents table on SQLite and PostgreSQL: schema, conditional updates, clear errors."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from azure.storage.blob import ContainerClient
from sqlalchemy.pool import QueuePool

from blob_safetynet.cli.main import main
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.store.documents import DocumentStore, NameConflictError
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Content, Document, DocumentTable, Status, new_document_id


def pending(name: str, blob_name: str | None = None) -> Document:
    return Document(
        new_document_id(), name, blob_name or f"{name}.bin", Status.PENDING, datetime.now(UTC)
    )


def test_init_schema_twice_is_harmless(db_url: str) -> None:
    """Creating the schema a second time neither fails nor loses rows."""
    store = DocumentStore.from_url(db_url)
    store.init_schema()
    store.reserve(pending("kept"))
    store.init_schema()
    store.check_schema()
    assert store.count() == 1


def test_configured_names_are_used(db_url: str) -> None:
    """An application's own table and column names work end to end."""
    layout = DocumentTable(table="app_files", id="file_id", name="path", blob_name="object_key")
    store = DocumentStore.from_url(db_url, layout)
    store.init_schema()
    document = store.reserve(pending("a"))
    assert store.publish(document.id)
    assert store.get(document.id) == Document(
        document.id, "a", "a.bin", Status.READY, document.created_utc
    )


def test_duplicate_name_is_a_conflict(store: DocumentStore) -> None:
    """A second reservation of a taken name is refused by the unique constraint."""
    store.reserve(pending("same", "first.bin"))
    with pytest.raises(NameConflictError):
        store.reserve(pending("same", "second.bin"))


def test_reserve_retry_with_same_id_returns_existing_row(store: DocumentStore) -> None:
    """Re-inserting the same id and name returns the row already there, its blob name kept."""
    first = store.reserve(pending("doc", "original.bin"))
    retry = Document(first.id, "doc", "other.bin", Status.PENDING, datetime.now(UTC))
    assert store.reserve(retry).blob_name == "original.bin"


def test_publish_only_moves_pending_rows(store: DocumentStore) -> None:
    """Publishing twice succeeds once; the second call reports no change."""
    document = store.reserve(pending("doc"))
    assert store.publish(document.id)
    assert not store.publish(document.id)


def test_created_time_round_trips_as_utc(store: DocumentStore) -> None:
    """Timestamps come back timezone-aware and equal to what was written."""
    document = store.reserve(pending("doc"))
    loaded = store.get(document.id)
    assert loaded is not None
    assert loaded.created_utc == document.created_utc
    assert loaded.created_utc.tzinfo is not None


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("mysql://root@localhost/db", "unsupported database URL scheme"),
        ("oracle+cx://u@h/db", "unsupported database URL scheme"),
        ("not a url", "malformed database URL"),
    ],
)
def test_bad_urls_are_named(url: str, fragment: str) -> None:
    """URLs of unsupported databases, or no URL at all, fail with a message that says so."""
    with pytest.raises(StoreError, match=fragment):
        DocumentStore.from_url(url)


def test_missing_table_is_named(tmp_path: object) -> None:
    """Using a database without the table tells the user to run `safetynet db init`."""
    store = DocumentStore.from_url(f"sqlite:///{tmp_path}/empty.db")
    with pytest.raises(StoreError, match="safetynet db init"):
        store.check_schema()


def test_unreachable_postgres_is_a_store_error() -> None:
    """A server that is not there gives a StoreError naming the database, not a traceback."""
    store = DocumentStore.from_url("postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(StoreError, match=r"127\.0\.0\.1"):
        store.init_schema()


def test_malformed_url_error_hides_the_password() -> None:
    """A URL that cannot be parsed is reported without echoing its password."""
    with pytest.raises(StoreError) as raised:
        DocumentStore.from_url("postgresql://app:s3cret@db:notaport/documents")
    assert "s3cret" not in str(raised.value)


OLD_SCHEMA = """
CREATE TABLE {table} (
    {id} VARCHAR(36) NOT NULL PRIMARY KEY,
    {name} VARCHAR(1024) NOT NULL UNIQUE,
    {blob_name} VARCHAR(1024) NOT NULL UNIQUE,
    {status} VARCHAR(16) NOT NULL,
    {created_utc} TIMESTAMP WITH TIME ZONE NOT NULL
)
"""
"""The table as the first release created it, before claims, content hashes and records."""


@pytest.mark.parametrize(
    "layout",
    [
        DocumentTable(),
        DocumentTable(table="app_files", id="file_id", name="path", blob_name="object_key"),
    ],
)
def test_upgrade_brings_an_old_table_up_to_date(db_url: str, layout: DocumentTable) -> None:
    """An old table is refused with a pointer to `db upgrade`, which adds what it lacks, keeping rows."""
    store = DocumentStore.from_url(db_url, layout)
    names = {f: getattr(layout, f) for f in ("table", "id", "name", "blob_name", "status")}
    with store.engine.begin() as conn:
        conn.exec_driver_sql(OLD_SCHEMA.format(**names, created_utc=layout.created_utc))
        conn.exec_driver_sql(
            f"INSERT INTO {layout.table} VALUES ('1', 'kept', 'kept.bin', 'Ready', "
            "'2026-01-01 00:00:00+00:00')"
        )
    with pytest.raises(StoreError, match="safetynet db upgrade"):
        store.check_schema()

    added = store.upgrade_schema()

    assert "column content_sha256" in added
    assert f"table {layout.table}_blobs" in added
    store.check_schema()
    assert store.upgrade_schema() == []
    assert [d.name for d in store.all()] == ["kept"]
    assert store.database_id()
    document = store.reserve(pending("new"))
    assert store.publish(document.id)


def test_db_upgrade_command(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    """`safetynet db upgrade` reports each addition, then that the table is up to date."""
    url = f"sqlite:///{tmp_path}/old.db"
    store = DocumentStore.from_url(url)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            OLD_SCHEMA.format(
                table="documents",
                id="id",
                name="name",
                blob_name="blob_name",
                status="status",
                created_utc="created_utc",
            )
        )
    assert main(["db", "upgrade", "--db", url]) == 0
    assert "added column claimed_by" in capsys.readouterr().out
    assert main(["db", "upgrade", "--db", url]) == 0
    assert "up to date" in capsys.readouterr().out
    assert main(["db", "upgrade", "--db", f"sqlite:///{tmp_path}/none.db"]) == 2
    assert "db init" in capsys.readouterr().err


@pytest.mark.postgres
def test_reserve_and_publish_send_no_begin_or_commit(postgres_url: str, tmp_path: Path) -> None:
    """A reservation and a publish each send their one statement alone, without BEGIN and
    COMMIT around it: one round trip each (libpq's trace shows every message sent)."""
    store = DocumentStore.from_url(postgres_url, pool_size=1)
    store.init_schema()
    with store.engine.connect() as conn:
        pgconn = conn.connection.dbapi_connection.pgconn  # type: ignore[union-attr]
    trace = tmp_path / "libpq.trace"
    with trace.open("w") as handle:
        pgconn.trace(handle.fileno())
        try:
            assert store.publish(store.reserve(pending("traced")).id)
        finally:
            pgconn.untrace()
    sent = [line for line in trace.read_text().splitlines() if "\tF\t" in line]
    assert any("INSERT" in line for line in sent)
    assert any("UPDATE" in line for line in sent)
    assert not [line for line in sent if '"BEGIN' in line or '"COMMIT' in line]


def test_pool_size_keeps_as_many_connections(db_url: str) -> None:
    """A store made with pool_size keeps that many connections for its concurrent writers,
    instead of SQLAlchemy's default of 5."""
    pool = DocumentStore.from_url(db_url, pool_size=8).engine.pool
    assert isinstance(pool, QueuePool)
    assert pool.size() == 8


def test_reserve_and_publish_execute_statements_built_once(db_url: str) -> None:
    """Every reservation executes the one INSERT the store built, and every publish one of its
    two UPDATEs: SQLAlchemy keys and compiles each statement object once, not once a call."""
    store = DocumentStore.from_url(db_url)
    store.init_schema()
    executed: list[object] = []
    sa.event.listen(
        store.engine, "before_execute", lambda conn, statement, *_: executed.append(statement)
    )
    for i in range(3):
        document = store.reserve(pending(f"once-{i}"), Content(i, f"{i:064x}"))
        assert store.publish(document.id, blob_name=document.blob_name)
        assert not store.publish(document.id)
    reserves, by_blob, by_id = executed[0::3], executed[1::3], executed[2::3]
    for statements in (reserves, by_blob, by_id):
        assert len(statements) == 3
        assert all(statement is statements[0] for statement in statements)
    assert len({id(reserves[0]), id(by_blob[0]), id(by_id[0])}) == 3
    assert [store.content(d.id) for d in store.all()] == [Content(i, f"{i:064x}") for i in range(3)]
    assert store.count(Status.READY) == 3


def test_publish_by_blob_name_refuses_another_blob(store: DocumentStore) -> None:
    """A publish that names a blob the row does not hold leaves the row Pending."""
    document = store.reserve(pending("named", "named.bin"))
    assert not store.publish(document.id, blob_name="other.bin")
    assert store.count(Status.PENDING) == 1
    assert store.publish(document.id, blob_name="named.bin")


@pytest.mark.postgres
def test_a_put_after_the_server_killed_the_pooled_connection(
    postgres_url: str, container: ContainerClient
) -> None:
    """The server ends the pooled session between two puts (pg_terminate_backend, as a
    restart or an idle timeout would): the next put reconnects and succeeds, unretried."""
    url = sa.make_url(postgres_url).update_query_dict({"application_name": "put-under-test"})
    store = DocumentStore.from_url(url.render_as_string(hide_password=False), pool_size=1)
    store.init_schema()
    protocol = UploadProtocol(store, container)
    protocol.put("before.txt", b"before", ".txt")
    killer = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        with killer.connect() as conn:
            killed = conn.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = 'put-under-test'"
                )
            ).scalars()
            assert list(killed) == [True]
        after = protocol.put("after.txt", b"after", ".txt")
        assert store.get(after.id) == after
        assert store.count(Status.READY) == 2
    finally:
        killer.dispose()
        store.engine.dispose()
