"""`safetynet recover --after-restore`, document by document: after the database is restored to
an earlier time, the rows of documents put, replaced and deleted since are rolled forward from
the container, nothing is rebuilt from metadata the bytes do not bear out, and the table and the
container agree. Azurite, SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import identity
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import reconcile
from blob_safetynet.recover.rollforward import View, judge
from blob_safetynet.recover.rollforward_apply import DONE, roll_forward
from blob_safetynet.recover.rollforward_bytes import LEFT, SKIPPED, verified
from blob_safetynet.recover.rollforward_plan import (
    DELETE,
    MOVE,
    PUBLISH,
    REBUILD,
    RESEAL,
    RETIRE,
    UNVERIFIED,
)
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecordKind, Content, Status
from testkit.restore_point import RestorePoint

FUTURE = datetime.now(UTC) + timedelta(hours=1)


def read(protocol: UploadProtocol, name: str) -> bytes:
    return protocol.read(name)


def test_every_kind_of_change_after_the_restore_point_is_rolled_forward(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint
) -> None:
    """Put, replaced, deleted (kept by default) and untouched documents all read their newest
    acknowledged bytes after one roll-forward, and reconcile then reports nothing."""
    protocol = UploadProtocol(store, bound)
    protocol.put("untouched.txt", b"untouched", ".txt")
    replaced = protocol.put("replaced.txt", b"old bytes", ".txt")
    deleted = protocol.put("deleted.txt", b"deleted after T", ".txt")
    point.take()
    put = protocol.put("put after T.txt", b"put after T", ".txt")
    protocol.replace(replaced.id, b"new bytes", ".txt")
    protocol.delete(deleted.id)
    point.restore()

    planned = judge(View.read(store, bound))
    assert sorted((s.action, s.document) for s in planned.steps) == sorted(
        [(RESEAL, deleted.id), (MOVE, replaced.id), (REBUILD, put.id)]
    )
    result = roll_forward(store, bound)

    assert {o.status for o in result.outcomes} == {DONE}, result.outcomes
    assert result.agree, result.after
    assert read(protocol, "untouched.txt") == b"untouched"
    assert read(protocol, "replaced.txt") == b"new bytes"
    assert read(protocol, "deleted.txt") == b"deleted after T"
    assert read(protocol, "put after T.txt") == b"put after T"
    assert reconcile(store, bound, FUTURE).clean


def test_reapply_deletes_deletes_again_what_was_deleted_after_the_restore_point(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint
) -> None:
    """With reapply_deletes the document deleted after T stays deleted, its blob recorded
    retired for the sweeper; the table and the container agree."""
    protocol = UploadProtocol(store, bound)
    deleted = protocol.put("deleted.txt", b"deleted after T", ".txt")
    point.take()
    protocol.delete(deleted.id)
    point.restore()

    result = roll_forward(store, bound, reapply_deletes=True)

    assert [(o.step.action, o.status) for o in result.outcomes] == [(DELETE, DONE)]
    assert store.get(deleted.id) is None
    assert [r.blob_name for r in store.records()] == [deleted.blob_name]
    assert result.agree
    assert reconcile(store, bound, FUTURE).clean


def test_forged_metadata_whose_sha256_differs_rebuilds_no_row(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """A committed blob whose metadata names a document and its length but whose bytes hash
    otherwise is reported, before and after the run, and no row is made from it; the blob is
    left as it was."""
    data = b"the bytes in the blob"
    claimed = Content(len(data), hashlib.sha256(b"other bytes, same len").hexdigest())
    forged = bound.get_blob_client("f" * 32 + ".txt")
    forged.upload_blob(
        data,
        metadata=identity.encode(
            "forged-document", "forged.txt", datetime.now(UTC), content=claimed
        ),
        tags={STATE_TAG: COMMITTED},
    )

    dry_run = verified(judge(View.read(store, bound)), bound)
    result = roll_forward(store, bound)

    assert dry_run.steps == []
    assert [(f.kind, f.blob) for f in dry_run.findings] == [(UNVERIFIED, forged.blob_name)]
    assert "SHA-256 differs" in dry_run.findings[0].detail
    assert [(o.step.action, o.status) for o in result.outcomes] == [(REBUILD, LEFT)]
    assert store.get("forged-document") is None
    assert [(f.kind, f.blob) for f in result.after.findings] == [(UNVERIFIED, forged.blob_name)]
    assert not result.agree
    assert forged.get_blob_tags()[STATE_TAG] == COMMITTED
    assert forged.download_blob().readall() == data


def test_a_restored_pending_row_whose_put_finished_is_published(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint
) -> None:
    """A restore point taken between reserve and publish leaves a Pending row: its sealed blob
    makes it Ready."""

    def snapshot(step: str) -> None:
        if step == "reserve":
            point.take()

    protocol = UploadProtocol(store, bound, checkpoint=snapshot)
    document = protocol.put("in flight at T.txt", b"in flight", ".txt")
    point.restore()
    assert store.get(document.id).status is Status.PENDING  # type: ignore[union-attr]

    result = roll_forward(store, bound)

    assert [(o.step.action, o.status) for o in result.outcomes] == [(PUBLISH, DONE)]
    assert read(UploadProtocol(store, bound), "in flight at T.txt") == b"in flight"
    assert result.agree


def test_a_delete_made_since_the_restore_is_not_undone(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint
) -> None:
    """The application, back online, deletes a document whose row the restore rolled back to
    its old blob: the roll-forward finishes that delete (the newer blob retired and recorded)
    instead of rebuilding the document."""
    protocol = UploadProtocol(store, bound)
    document = protocol.put("doc.txt", b"before T", ".txt")
    point.take()
    newer = protocol.replace(document.id, b"after T", ".txt")
    point.restore()
    protocol.delete(document.id)

    result = roll_forward(store, bound)

    assert [(o.step.action, o.step.blob, o.status) for o in result.outcomes] == [
        (RETIRE, newer.blob_name, DONE)
    ]
    assert store.get(document.id) is None
    assert bound.get_blob_client(newer.blob_name).get_blob_tags()[STATE_TAG] == RETIRED
    assert result.agree
    assert reconcile(store, bound, FUTURE).clean


def test_a_replace_made_since_the_restore_wins_over_the_lost_one(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint
) -> None:
    """The application replaces a document from its restored row: its bytes stay, and the
    replace lost with the restore (which replaced the same blob) is retired, not moved to."""
    protocol = UploadProtocol(store, bound)
    document = protocol.put("doc.txt", b"before T", ".txt")
    point.take()
    lost = protocol.replace(document.id, b"after T, lost", ".txt")
    point.restore()
    protocol.replace(document.id, b"after the restore", ".txt")

    result = roll_forward(store, bound)

    assert [(o.step.action, o.step.blob, o.status) for o in result.outcomes] == [
        (RETIRE, lost.blob_name, DONE)
    ]
    assert read(protocol, "doc.txt") == b"after the restore"
    assert result.agree
    assert reconcile(store, bound, FUTURE).clean


@pytest.mark.parametrize(("claimed_ago", "moved"), [(20, True), (2, False)])
def test_a_restored_intent_the_sweeper_holds_is_taken_back_once_its_claim_expired(
    store: DocumentStore,
    bound: ContainerClient,
    point: RestorePoint,
    claimed_ago: int,
    moved: bool,
) -> None:
    """A restore point between a replace's intent and its switch restores the intent; a
    sweeper that claimed it (and kept its blob, the row's being retired) blocks the move while
    its claim is younger than the sweeper's claim TTL (10 minutes), and no longer after."""

    def snapshot(step: str) -> None:
        if step == "replace.intent":
            point.take()

    protocol = UploadProtocol(store, bound, checkpoint=snapshot)
    document = protocol.put("doc.txt", b"before T", ".txt")
    newer = protocol.replace(document.id, b"after T", ".txt")
    point.restore()
    now = store.now()
    claimed = store.claim_records(
        BlobRecordKind.INTENT,
        now + timedelta(minutes=1),
        10,
        "a-sweeper",
        now - timedelta(minutes=claimed_ago),
        now - timedelta(minutes=claimed_ago + 10),
    )
    assert [r.blob_name for r in claimed] == [newer.blob_name]

    result = roll_forward(store, bound)

    assert [(o.step.action, o.status) for o in result.outcomes] == [
        (MOVE, DONE if moved else SKIPPED)
    ]
    assert (store.get(document.id).blob_name == newer.blob_name) is moved  # type: ignore[union-attr]
    assert result.agree is moved
