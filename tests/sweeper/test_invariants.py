"""The invariant checker catches each violation it exists for (so passing checks mean something)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.invariants import InvariantResult, check_invariants, snapshot
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.sweep import SweepReport

NOW_PLUS = datetime.now(UTC) + timedelta(days=1)


def broken(results: list[InvariantResult]) -> set[str]:
    return {r.id for r in results if not r.holds}


def test_clean_state_breaks_nothing(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A published document alone satisfies all six invariants."""
    protocol.put("a.txt", b"a", ".txt")
    assert (
        broken(check_invariants(store, container, snapshot(container), NOW_PLUS, SweepReport()))
        == set()
    )


def test_deleting_a_published_blob_breaks_i1_and_i3(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """An unguarded delete of a Ready document's blob is flagged as I1 and I3."""
    document = protocol.put("a.txt", b"a", ".txt")
    before = snapshot(container)
    container.delete_blob(document.blob_name)
    assert broken(check_invariants(store, container, before, NOW_PLUS, SweepReport())) == {
        "I1",
        "I3",
    }


def test_pending_blob_under_ready_row_breaks_i2(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Publishing without sealing (the wrong order) is flagged as I2."""
    document = protocol.reserve("a.txt", ".txt")
    protocol.upload(document, b"a")
    store.publish(document.id)
    assert "I2" in broken(
        check_invariants(store, container, snapshot(container), NOW_PLUS, SweepReport())
    )


def test_stale_row_or_busy_second_sweep_breaks_i4(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """A Pending row older than the cutoff, or a second sweep that changed something, is I4."""
    protocol.reserve("a.txt", ".txt")
    assert broken(check_invariants(store, container, {}, NOW_PLUS, SweepReport())) == {"I4"}
    busy = SweepReport(deleted_rows=1)
    assert "I4" in broken(
        check_invariants(store, container, {}, datetime.now(UTC) - timedelta(days=1), busy)
    )


def test_unreferenced_committed_blob_breaks_i5(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A committed blob no row references is an orphan; a pending one is the lifecycle rule's."""
    container.upload_blob("orphan", b"o", tags={STATE_TAG: COMMITTED})
    container.upload_blob("abandoned", b"p", tags={STATE_TAG: PENDING})
    results = check_invariants(store, container, {}, NOW_PLUS, SweepReport())
    assert broken(results) == {"I5"}
    assert next(r for r in results if r.id == "I5").detail == "orphan"


def test_overwritten_bytes_break_i6(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Replacing a blob's bytes in place is flagged as I6."""
    document = protocol.put("a.txt", b"a", ".txt")
    before = snapshot(container)
    container.upload_blob(document.blob_name, b"b", overwrite=True, tags={STATE_TAG: COMMITTED})
    assert broken(check_invariants(store, container, before, NOW_PLUS, SweepReport())) == {"I6"}
