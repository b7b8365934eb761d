"""Review of issue 8: attacks on the paths that delete blobs, each kept as a test."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.crash import SimulatedCrash, crash_after
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import ProtocolError, ReservationExpiredError, UploadProtocol
from blob_safetynet.reconcile.listing import (
    RepairRefusedError,
    apply_plan,
    list_blobs,
    plan_orphan_deletion,
    reconcile,
)
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, DocumentTable, Status, new_document_id
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.sweep import ContainerBindingError, Sweeper
from tests.sweeper.conftest import CUTOFF

FUTURE = datetime.now(UTC) + timedelta(hours=1)


def sweep_after_grace(store: DocumentStore, container: ContainerClient) -> Sweeper:
    return Sweeper(
        store,
        container,
        SweepSettings(cutoff=CUTOFF),
        clock=lambda: datetime.now(UTC) + timedelta(hours=3),
    )


def undo_delete(store: DocumentStore, document: Document) -> None:
    """The application restores a deleted row from its own backup (or a table-only restore)."""
    with store.engine.begin() as conn:
        conn.execute(
            store.table.insert().values(
                id=document.id,
                name=document.name,
                blob_name=document.blob_name,
                status=Status.READY.value,
                created=document.created_utc,
            )
        )


def test_a_retired_blob_a_ready_row_references_again_is_not_deleted(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A retired record whose blob a Ready row references again (row restored) keeps the blob."""
    document = protocol.put("undo.txt", b"keep me", ".txt")
    protocol.delete(document.id)
    undo_delete(store, document)
    assert blobs.state_of(container.get_blob_client(document.blob_name)) == RETIRED

    report = sweep_after_grace(store, container).run()

    assert report.retired_deleted == 0
    assert any(document.id in error for error in report.errors)
    assert protocol.read("undo.txt") == b"keep me"
    assert [r.blob_name for r in store.records()] == [document.blob_name]


def test_a_retried_delete_leaves_the_blob_a_restored_row_names_committed(
    protocol_factory: Callable[..., UploadProtocol],
    store: DocumentStore,
    container: ContainerClient,
) -> None:
    """A delete stopped after its row went (the blob still committed), the document restored
    meanwhile under a new id naming the same blob, then the delete retried: it returns as done
    and leaves the blob committed, so the restored row never points at a retired blob."""
    document = protocol_factory().put("undo.txt", b"keep me", ".txt")
    with pytest.raises(SimulatedCrash):
        protocol_factory(crash_after("delete.row")).delete(document.id)
    undo_delete(store, dataclasses.replace(document, id=new_document_id()))
    blob = container.get_blob_client(document.blob_name)
    assert blobs.state_of(blob) == COMMITTED

    protocol_factory().delete(document.id)

    assert blobs.state_of(blob) == COMMITTED
    assert protocol_factory().read("undo.txt") == b"keep me"
    assert reconcile(store, container, FUTURE).unsealed == []


def test_reconcile_reports_a_ready_row_whose_blob_is_tagged_retired(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A Ready row pointing at a retired-tagged blob is a finding; repair re-seals it and
    forgets its retired record."""
    document = protocol.put("undo.txt", b"keep me", ".txt")
    protocol.delete(document.id)
    undo_delete(store, document)
    blobs.bind(container, store.database_id())

    found = reconcile(store, container, FUTURE)
    assert [d.id for d in found.unsealed] == [document.id]
    assert found.unresolved

    repaired = reconcile(store, container, FUTURE, repair=True)
    assert repaired.repaired == [document.blob_name]
    assert not repaired.unresolved
    assert tags_state(container, document.blob_name) == "committed"
    assert store.records() == []  # so the next sweeps do not report the live blob forever
    assert sweep_after_grace(store, container).run().errors == []
    assert protocol.read("undo.txt") == b"keep me"


def tags_state(container: ContainerClient, name: str) -> str:
    return container.get_blob_client(name).get_blob_tags()[STATE_TAG]


def test_a_binding_marker_without_a_database_id_refuses_the_sweep(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A binding marker that names no database (forged or stripped) is not taken as ours."""
    container.upload_blob(blobs.BINDING_BLOB, b"")

    with pytest.raises(ContainerBindingError, match="names no database"):
        Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()
    assert blobs.bound_database(container) is None


@pytest.mark.parametrize("old_blob", ["retired", "retired and swept"])
def test_a_sealed_intent_is_kept_when_its_document_has_no_other_blob(
    old_blob: str, store: DocumentStore, container: ContainerClient
) -> None:
    """After a restore to a point mid-replace, the sealed new blob holds the newest bytes."""
    document = UploadProtocol(store, container).put("cv.txt", b"v1", ".txt")
    crashing = UploadProtocol(store, container, checkpoint=crash_after("replace.seal"))
    with pytest.raises(SimulatedCrash):
        crashing.replace(document.id, b"v2", ".txt")
    (intent,) = store.records()
    # What the lost part of the database's history did to the old blob before the restore.
    blobs.retire(container.get_blob_client(document.blob_name))
    if old_blob == "retired and swept":
        container.delete_blob(document.blob_name)
    binding.bind(store, container)  # a pair swept before: no first-sweep proof

    report = sweep_after_grace(store, container).run()

    assert report.abandoned_replacements == 0
    assert any(document.id in error and intent.blob_name in error for error in report.errors)
    assert container.download_blob(intent.blob_name).readall() == b"v2"


def test_abandon_refuses_a_ready_document(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """abandon() of a published document raises and keeps its row and blob."""
    document = protocol.put("ready.txt", b"ready", ".txt")
    with pytest.raises(ProtocolError, match="not abandoned"):
        protocol.abandon(document.id)
    assert protocol.read("ready.txt") == b"ready"


def test_a_sweep_of_another_container_is_refused_and_keeps_the_rows(
    store: DocumentStore, container_factory: Callable[[], ContainerClient]
) -> None:
    """A database swept with its container refuses a sweep naming another one (a typo)."""
    right, wrong = container_factory(), container_factory()
    Sweeper(store, right, SweepSettings(cutoff=CUTOFF)).run()
    sealed = UploadProtocol(store, right, checkpoint=crash_after("seal"))
    with pytest.raises(SimulatedCrash):
        sealed.put("sealed.txt", b"complete bytes", ".txt")

    with pytest.raises(ContainerBindingError, match=wrong.container_name):
        sweep_after_grace(store, wrong).run()

    assert blobs.bound_database(wrong) is None
    assert sweep_after_grace(store, right).run().rolled_forward == 1
    assert UploadProtocol(store, right).read("sealed.txt") == b"complete bytes"


def test_a_replace_whose_intent_was_swept_before_its_upload_leaves_no_committed_orphan(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A replace stalled before its upload, whose intent a sweep cleared, retires its new blob."""
    document = UploadProtocol(store, container).put("cv.txt", b"v1", ".txt")

    def stall(step: str) -> None:
        if step == "replace.intent":
            sweep_after_grace(store, container).run()

    with pytest.raises(ReservationExpiredError):
        UploadProtocol(store, container, checkpoint=stall).replace(document.id, b"v2", ".txt")

    listed = list_blobs(container)
    assert {n: b.state for n, b in listed.items() if n != document.blob_name} != {}
    assert all(b.state == RETIRED for n, b in listed.items() if n != document.blob_name)
    assert UploadProtocol(store, container).read("cv.txt") == b"v1"


@pytest.mark.parametrize("slow_finish", ["delete", "publish"])
def test_a_slow_sweeper_whose_claim_expired_finishes_nothing(
    slow_finish: str,
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: Callable[..., list[Document]],
) -> None:
    """Once another sweeper took over an expired claim, the slow one's finish changes no row."""
    (row,) = stale_rows(1)
    now = datetime.now(UTC)
    cutoff, ttl = now - CUTOFF, timedelta(minutes=10)
    slow_at = now - timedelta(minutes=20)
    assert store.claim_stale(cutoff, 10, "slow", slow_at, slow_at - ttl) == [row]
    assert store.claim_stale(cutoff, 10, "fast", now, now - ttl) == [row]

    done = {"delete": ([row.id], []), "publish": ([], [row.id])}[slow_finish]
    assert store.finish_claim("slow", [row.id], *done) == (0, 0)
    assert store.get(row.id) == row

    assert store.finish_claim("fast", [row.id], [row.id], []) == (1, 0)


def test_the_store_never_abandons_a_ready_row(
    protocol: UploadProtocol, store: DocumentStore
) -> None:
    """DocumentStore.abandon of a Ready row (a caller skipping the protocol's check) removes nothing."""
    document = protocol.put("ready.txt", b"ready", ".txt")
    assert store.abandon(document.id) is False
    assert store.get(document.id) == document


@pytest.mark.postgres
def test_db_upgrade_of_a_populated_table_in_its_own_schema_loses_nothing(
    postgres_database: str, container: ContainerClient
) -> None:
    """Upgrading a mixed-case table in a named schema keeps its rows, twice, and then sweeps."""
    schema = f"app_{uuid.uuid4().hex[:8]}"
    layout = DocumentTable(
        table="AppFiles", id="FileId", name="Path", blob_name="ObjectKey", schema=schema
    )
    store = DocumentStore.from_url(postgres_database, layout)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        conn.exec_driver_sql(
            f'CREATE TABLE "{schema}"."AppFiles" ("FileId" VARCHAR(36) PRIMARY KEY, '
            '"Path" VARCHAR(1024) NOT NULL UNIQUE, "ObjectKey" VARCHAR(1024) NOT NULL UNIQUE, '
            "status VARCHAR(16) NOT NULL, created_utc TIMESTAMP WITH TIME ZONE NOT NULL)"
        )
        conn.exec_driver_sql(
            f'INSERT INTO "{schema}"."AppFiles" VALUES '
            "('1', 'kept', 'kept.bin', 'Ready', '2026-01-01 00:00:00+00:00'), "
            "('2', 'stale', 'stale.bin', 'Pending', '2026-01-01 00:00:00+00:00')"
        )
    try:
        assert store.upgrade_schema()
        assert store.upgrade_schema() == []
        store.check_schema()
        assert {d.name for d in store.all()} == {"kept", "stale"}
        binding.bind(store, container)  # a table swept before: its Ready row's blob is elsewhere
        report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()
        assert (report.missing_blobs, report.errors) == (1, [])
        assert [d.name for d in store.all()] == ["kept"]
    finally:
        with store.engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        store.engine.dispose()


@pytest.mark.parametrize("bad_entry", [{"blob": "b.bin"}, "b.bin", {"blob": 7, "etag": "x"}])
def test_a_hand_edited_plan_with_a_malformed_entry_is_refused_whole(
    bad_entry: object, store: DocumentStore, container: ContainerClient
) -> None:
    """A plan entry without a blob name and ETag refuses the plan before anything is deleted."""
    for name in ("a.bin", "b.bin"):
        container.upload_blob(name, b"o", tags={STATE_TAG: COMMITTED})
    blobs.bind(container, store.database_id())
    plan = plan_orphan_deletion(store, container, reconcile(store, container, FUTURE))
    plan["delete"] = [e for e in plan["delete"] if e["blob"] == "a.bin"] + [bad_entry]

    with pytest.raises(RepairRefusedError, match="entry 2"):
        apply_plan(store, container, plan, max_delete=2, max_share=1.0)
    assert {"a.bin", "b.bin"} <= set(list_blobs(container))


def test_repair_with_another_table_of_the_same_database_is_refused(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A second table in the same database has its own identity: repair through it is refused."""
    document = protocol.put("live.txt", b"live", ".txt")
    container.upload_blob("pending-orphan.bin", b"p", tags={STATE_TAG: "pending"})
    blobs.bind(container, store.database_id())
    other = DocumentStore(store.engine, DocumentTable(table="other_documents"))
    other.init_schema()

    with pytest.raises(RepairRefusedError, match="wrong table"):
        reconcile(other, container, FUTURE, repair=True)
    assert set(list_blobs(container)) == {document.blob_name, "pending-orphan.bin"}
