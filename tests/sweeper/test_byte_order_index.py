"""The byte-order index the inventory join reads (`DocumentTable.byte_order_index`): PostgreSQL
only, created by `db init`, added by `db upgrade` concurrently beside a live writer, rebuilt
when an interrupted build left it invalid."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from blob_safetynet.reconcile.inventory import _table_query
from blob_safetynet.store.documents import DocumentStore, IndexState
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import (
    IDENTIFIER_BYTES,
    Document,
    DocumentTable,
    Status,
    fit_identifier,
    new_document_id,
)
from tests import tree

SAFETYNET = tree.CONSOLE_SCRIPT


def pending(name: str) -> Document:
    return Document(new_document_id(), name, f"{name}.bin", Status.PENDING, datetime.now(UTC))


def test_long_table_names_get_a_deterministic_index_name_within_the_limit() -> None:
    assert DocumentTable().byte_order_index_name == "ix_documents_blob_name_c"
    first = DocumentTable(table="t" * 60 + "_a").byte_order_index_name
    second = DocumentTable(table="t" * 60 + "_b").byte_order_index_name
    assert len(first.encode()) <= IDENTIFIER_BYTES
    assert first != second
    assert first == DocumentTable(table="t" * 60 + "_a").byte_order_index_name
    wide = fit_identifier("ix_" + "é" * 40)
    assert len(wide.encode()) <= IDENTIFIER_BYTES
    assert wide.startswith("ix_é")


def test_sqlite_gets_no_such_index(tmp_path: Path) -> None:
    """SQLite has no "C" collation (the index would fail `db init`) and needs none: BINARY is
    byte order already. `db upgrade` adds nothing there either."""
    store = DocumentStore.from_url(f"sqlite:///{tmp_path / 'd.db'}")
    store.init_schema()
    with store.engine.connect() as conn:
        names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='index'")
        assert store.layout.byte_order_index_name not in {row[0] for row in names}
    assert store.byte_order_index_state() is None
    assert store.upgrade_schema() == []


def _fill(store: DocumentStore, rows: int) -> None:
    table = store.engine.dialect.identifier_preparer.quote(store.layout.table)
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                f"INSERT INTO {table} (id, name, blob_name, status, created_utc) "
                "SELECT md5('id' || n)::uuid::text, 'doc-' || n, md5(n::text) || '.bin', "
                "'Ready', now() - interval '1 day' FROM generate_series(1, :rows) AS n"
            ),
            {"rows": rows},
        )


def _drop_index(store: DocumentStore) -> None:
    with store.engine.begin() as conn:
        conn.execute(sa.text(f"DROP INDEX {store._index_ref()}"))


@pytest.mark.postgres
def test_the_inventory_query_reads_the_index_instead_of_sorting(postgres_url: str) -> None:
    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    assert store.byte_order_index_state() is IndexState.VALID
    _fill(store, 20_000)
    with store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM ANALYZE documents"))
        query = _table_query(store, by_bytes=True).compile(
            dialect=store.engine.dialect, compile_kwargs={"literal_binds": True}
        )
        plan = "\n".join(r[0] for r in conn.execute(sa.text(f"EXPLAIN {query}")))
    assert f"Index Only Scan using {store.layout.byte_order_index_name} on documents" in plan
    assert "Merge Append" in plan, plan
    sorted_relations = [
        line for line in plan.splitlines() if "Sort" in line and "documents " in line
    ]
    assert not sorted_relations, plan
    assert "Seq Scan on documents " not in plan, plan
    store.engine.dispose()


@pytest.mark.postgres
def test_check_schema_passes_without_the_index_and_db_upgrade_adds_it(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from blob_safetynet.cli.main import main

    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    _drop_index(store)
    store.check_schema()
    assert store.byte_order_index_state() is IndexState.MISSING

    assert main(["db", "upgrade", "--db", postgres_url]) == 0
    assert capsys.readouterr().out.strip() == f"added index {store.layout.byte_order_index_name}"
    assert store.byte_order_index_state() is IndexState.VALID
    assert main(["db", "upgrade", "--db", postgres_url]) == 0
    assert "up to date" in capsys.readouterr().out
    store.engine.dispose()


@pytest.mark.postgres
def test_the_inventory_join_notes_a_missing_index(postgres_url: str, tmp_path: Path) -> None:
    from blob_safetynet.cli.commands.reconcile_inventory import index_note

    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    assert index_note(store) is None
    _drop_index(store)
    note = index_note(store)
    assert note is not None
    assert "is missing" in note
    assert "safetynet db upgrade" in note
    assert index_note(DocumentStore.from_url(f"sqlite:///{tmp_path / 'd.db'}")) is None
    store.engine.dispose()


@contextmanager
def writer_blocking_the_build(store: DocumentStore) -> Iterator[None]:
    """An open transaction that has written to the table: `CREATE INDEX CONCURRENTLY` waits for
    it before it builds (a plain `CREATE INDEX` would queue its ShareLock behind it, and every
    later writer behind that)."""
    with store.engine.connect() as conn:
        conn.execute(
            store.table.insert().values(
                id=new_document_id(),
                name="held",
                blob_name="held.bin",
                status="Pending",
                created=datetime.now(UTC),
            )
        )
        yield
        conn.rollback()


def _build_waiting(store: DocumentStore, timeout: float = 30) -> int:
    """The server process of the concurrent build once it waits for older transactions."""
    deadline = time.monotonic() + timeout
    with store.engine.connect() as conn:
        while time.monotonic() < deadline:
            pid = conn.execute(
                sa.text(
                    "SELECT pid FROM pg_stat_progress_create_index "
                    "WHERE command = 'CREATE INDEX CONCURRENTLY' AND phase LIKE 'waiting%' "
                    "AND relid = to_regclass(:t)"
                ),
                {"t": store.layout.table},
            ).scalar_one_or_none()
            if pid is not None:
                return int(pid)
            conn.rollback()
            time.sleep(0.05)
    raise AssertionError("the concurrent build never started waiting")


def _lock_modes(store: DocumentStore, pid: int) -> set[str]:
    with store.engine.connect() as conn:
        return set(
            conn.execute(
                sa.text(
                    "SELECT mode FROM pg_locks WHERE pid = :pid AND granted "
                    "AND relation = to_regclass(:t)"
                ),
                {"pid": pid, "t": store.layout.table},
            ).scalars()
        )


@pytest.mark.postgres
def test_db_upgrade_builds_the_index_while_a_writer_goes_on(postgres_url: str) -> None:
    """While the build is held in progress for HELD seconds, a writer thread inserts and
    publishes rows through the store: none fails, none waits anywhere near HELD, and the
    build holds ShareUpdateExclusiveLock on the table, never ShareLock."""
    held = 3.0
    store = DocumentStore.from_url(postgres_url, pool_size=4)
    store.init_schema()
    _drop_index(store)
    _fill(store, 5_000)
    latencies: list[float] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        number = 0
        while not stop.is_set():
            number += 1
            started = time.monotonic()
            try:
                document = store.reserve(pending(f"live-{number}"))
                assert store.publish(document.id)
            except BaseException as error:
                errors.append(error)
                return
            latencies.append(time.monotonic() - started)

    upgraded: list[list[str]] = []
    with writer_blocking_the_build(store):
        builder = threading.Thread(target=lambda: upgraded.append(store.upgrade_schema()))
        builder.start()
        pid = _build_waiting(store)
        writer = threading.Thread(target=write)
        writer.start()
        time.sleep(held)
        modes = _lock_modes(store, pid)
        during = len(latencies)
    builder.join(60)
    time.sleep(0.5)
    stop.set()
    writer.join(10)

    assert not errors, errors
    assert upgraded == [[f"index {store.layout.byte_order_index_name}"]]
    assert "ShareUpdateExclusiveLock" in modes, modes
    assert "ShareLock" not in modes, modes
    assert during >= 10, during
    assert max(latencies) < held / 2, max(latencies)
    assert store.byte_order_index_state() is IndexState.VALID
    store.engine.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_build_exits_with_its_code_and_a_rerun_finishes(
    postgres_url: str, stop: signal.Signals
) -> None:
    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    _drop_index(store)
    _fill(store, 1_000)
    with writer_blocking_the_build(store):
        process = subprocess.Popen(
            [str(SAFETYNET), "db", "upgrade", "--db", postgres_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=tree.environment(),
        )
        pid = _build_waiting(store)
        process.send_signal(stop)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 128 + stop, (out, err)
        assert f"stopped by {stop.name}" in err
        assert "run `safetynet db upgrade` again" in err
        assert "Traceback" not in err
        assert store.byte_order_index_state() is IndexState.INVALID
        with store.engine.connect() as conn:
            still = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE pid = :p AND state = 'active'"
                ),
                {"p": pid},
            ).scalar_one()
        assert still == 0, "the build goes on in the server after the command stopped"

    rerun = subprocess.run(
        [str(SAFETYNET), "db", "upgrade", "--db", postgres_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=tree.environment(),
    )
    assert rerun.returncode == 0, rerun.stderr
    assert "rebuilt: an interrupted build had left it invalid" in rerun.stdout
    assert store.byte_order_index_state() is IndexState.VALID
    store.engine.dispose()


@pytest.mark.postgres
def test_the_inventory_bench_table_gets_the_index_as_the_product_does(postgres_url: str) -> None:
    """A table the bench filled before the index existed gets it through `upgrade_schema` when
    reused; one filled now has it from `init_schema` (rebuilt with the others after the fill)."""
    from benchmarks.inventory import fill_table, upgrade_cached

    fill_table(postgres_url, 2_000)
    store = DocumentStore.from_url(postgres_url)
    assert store.byte_order_index_state() is IndexState.VALID
    _drop_index(store)
    upgrade_cached(postgres_url)
    assert store.byte_order_index_state() is IndexState.VALID
    store.engine.dispose()


@pytest.mark.postgres
def test_db_upgrade_refuses_while_another_session_builds_the_index(postgres_url: str) -> None:
    """An invalid index still being built elsewhere is not dropped (the drop would wait for
    the build and then throw it away): the second upgrade says to run again later."""
    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    _drop_index(store)
    with writer_blocking_the_build(store):
        builder = threading.Thread(target=store.upgrade_schema)
        builder.start()
        _build_waiting(store)
        second = DocumentStore.from_url(postgres_url)
        with pytest.raises(StoreError, match="being built by another session"):
            second.upgrade_schema()
        second.engine.dispose()
    builder.join(60)
    assert store.byte_order_index_state() is IndexState.VALID
    store.engine.dispose()
