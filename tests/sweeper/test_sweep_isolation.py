"""No database transaction spans a blob call: rows stay unlocked while the blob service is slow."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from testkit.fault_proxy import LatencyProxy
from tests.sweeper.conftest import CUTOFF, later, stale_rows_in

BATCH = "POST comp=batch"
SLOW_S = 0.8


@pytest.fixture
def slow_container(azurite: Azurite, container: ContainerClient) -> Iterator[ContainerClient]:
    """The test's container behind a proxy that holds every request for SLOW_S seconds."""
    with LatencyProxy(azurite.port, delay_s=SLOW_S) as proxy:
        service = BlobServiceClient.from_connection_string(proxy.connection_string, retry_total=0)
        slow = service.get_container_client(container.container_name)
        slow.proxy = proxy  # type: ignore[attr-defined]
        yield slow


def wait_for(proxy: LatencyProxy, kind: str) -> None:
    deadline = time.monotonic() + 20
    while proxy.counts()[kind] == 0:
        assert time.monotonic() < deadline, f"the sweeper never sent {kind}"
        time.sleep(0.005)


@pytest.mark.postgres
@pytest.mark.parametrize(("dry_run", "blob_call"), [(False, BATCH), (True, "GET comp=tags")])
def test_rows_are_not_locked_while_blobs_are_deleted(
    dry_run: bool,
    blob_call: str,
    postgres_url: str,
    container: ContainerClient,
    slow_container: ContainerClient,
) -> None:
    """During a slow blob call (a batch, or a dry run's tag read) no row is locked, none idles."""
    store = DocumentStore.from_url(postgres_url)
    store.init_schema()
    documents = stale_rows_in(store, container, 3)
    probe = sa.create_engine(postgres_url)
    settings = SweepSettings(cutoff=CUTOFF, dry_run=dry_run)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(Sweeper(store, slow_container, settings).run)
        wait_for(slow_container.proxy, blob_call)  # type: ignore[attr-defined]
        with probe.begin() as conn:
            locked = conn.execute(
                sa.select(store.table.c.id)
                .where(store.table.c.id == documents[0].id)
                .with_for_update(nowait=True)
            ).all()
            idle = conn.execute(
                sa.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND state = 'idle in transaction'"
                )
            ).scalar_one()
        report = running.result()
    probe.dispose()
    store.engine.dispose()
    assert len(locked) == 1
    assert idle == 0
    assert (report.deleted_rows, report.errors) == (3, [])
    assert store.count() == (3 if dry_run else 0)


@pytest.mark.postgres
def test_idle_in_transaction_timeout_does_not_kill_a_sweep(
    postgres_url: str, container: ContainerClient, slow_container: ContainerClient
) -> None:
    """A server that ends idle transactions after 300 ms still sees a slow sweep finish."""
    options = sa.make_url(postgres_url).query["options"]
    strict_url = (
        sa.make_url(postgres_url)
        .update_query_dict({"options": f"{options} -c idle_in_transaction_session_timeout=300"})
        .render_as_string(hide_password=False)
    )
    store = DocumentStore.from_url(strict_url)
    store.init_schema()
    stale_rows_in(store, container, 3)
    report = Sweeper(store, slow_container, SweepSettings(cutoff=CUTOFF)).run()
    store.engine.dispose()
    assert (report.deleted_rows, report.errors) == (3, [])


def test_a_database_error_mid_sweep_is_reported(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A database that fails during a sweep ends it with a reported error, not a traceback."""
    stale_rows_in(store, container, 3)

    def drop_records_table(report: SweepReport) -> None:
        with store.engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE IF EXISTS {store.blobs.name}"))

    report = Sweeper(
        store, container, SweepSettings(cutoff=CUTOFF), on_progress=drop_records_table
    ).run()
    assert report.deleted_rows == 3
    assert len(report.errors) == 1
    assert "sweep stopped: database" in report.errors[0]


def test_a_claim_racing_another_never_takes_its_rows(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A sweeper that claims between another's read and its stamp keeps its rows."""
    stale_rows_in(store, container, 50, with_blobs=False)
    now = later()
    second: list[set[str]] = []

    def interleave(conn: object, cursor: object, statement: str, *args: object) -> None:
        if statement.startswith("UPDATE") and "claimed_by" in statement and not second:
            second.append(set())  # the second sweeper claims right now, in between
            second[0] |= {d.id for d in store.claim_stale(now, 50, "b", now, now - CUTOFF)}

    sa.event.listen(store.engine, "before_cursor_execute", interleave)
    try:
        first = {d.id for d in store.claim_stale(now, 50, "a", now, now - CUTOFF)}
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", interleave)
    assert not first & second[0]
    assert len(first | second[0]) == 50
