"""The sweep timer's sample of Ready rows whose blob is missing (blob_safetynet/recover/sample.py)."""

from __future__ import annotations

from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.recover.sample import sample_missing, sample_rows
from blob_safetynet.store.documents import DocumentStore


def test_the_sample_starts_anywhere_and_wraps_around_once(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """From any starting id the sample takes the next rows in id order, then the lowest ones,
    never a row twice and never more than asked."""
    protocol = UploadProtocol(store, bound)
    ids = sorted(protocol.put(f"d{n}.txt", b"x", ".txt").id for n in range(6))

    middle = [d.id for d in sample_rows(store, 4, ids[3])]
    everything = [d.id for d in sample_rows(store, 10, ids[2])]

    assert middle == [ids[4], ids[5], ids[0], ids[1]]
    assert sorted(everything) == ids
    assert len(everything) == len(set(everything))


def test_only_ready_rows_whose_blob_is_gone_count(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """Blobs deleted behind the protocol count, named; a document deleted through the protocol
    (its row gone) and a pending reservation do not."""
    protocol = UploadProtocol(store, bound)
    kept, lost, deleted = (protocol.put(f"d{n}.txt", b"x", ".txt") for n in range(3))
    protocol.reserve("pending.txt", ".txt")
    bound.delete_blob(lost.blob_name)
    protocol.delete(deleted.id)

    sample = sample_missing(store, bound, size=10, start="")

    assert (sample.sampled, sample.missing, sample.names) == (2, 1, (lost.blob_name,))
    assert kept.blob_name not in sample.names


def test_a_row_that_moved_while_sampled_is_not_counted(
    nets: RecoveryDouble, store: DocumentStore, bound: ContainerClient
) -> None:
    """A document replaced (and its old blob removed) between the sample's read of its row and
    the blob check is read again and not counted; the same check on a row that stayed counts."""
    protocol = UploadProtocol(store, bound)
    document = protocol.put("d.txt", b"old", ".txt")

    replaced: list[str] = []

    def replace_meanwhile() -> None:
        replaced.append(protocol.replace(document.id, b"new", ".txt").blob_name)
        bound.delete_blob(document.blob_name)

    nets.once("HEAD", replace_meanwhile)
    moved = sample_missing(store, bound, size=1, start="")
    bound.delete_blob(replaced[0])
    lost = sample_missing(store, bound, size=1, start="")

    assert (moved.sampled, moved.missing) == (1, 0)
    assert (lost.sampled, lost.missing) == (1, 1)
