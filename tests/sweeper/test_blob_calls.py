"""The blob calls' return values and side effects, which callers rely on (found unguarded by
the mutation run): create-only refusals, retire of a missing blob, guarded deletes."""

from __future__ import annotations

from azure.storage.blob import ContainerClient

from blob_safetynet.protocol import blobs
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG


def test_second_create_only_upload_reports_false_and_keeps_the_first_bytes(
    container: ContainerClient,
) -> None:
    """A create-only upload to a taken name returns False and the first bytes stay."""
    blob = container.get_blob_client("taken.bin")
    assert blobs.upload_create_only(blob, b"first") is True
    assert blobs.upload_create_only(blob, b"second") is False
    assert blob.download_blob().readall() == b"first"
    assert blobs.state_of(blob) == PENDING


def test_retire_reports_whether_the_blob_was_there(container: ContainerClient) -> None:
    """Retiring a committed blob tags it retired and returns True; a missing one returns False."""
    blob = container.get_blob_client("committed.bin")
    blob.upload_blob(b"c", tags={STATE_TAG: COMMITTED})
    assert blobs.retire(blob) is True
    assert blobs.state_of(blob) == RETIRED
    assert blobs.retire(container.get_blob_client("never-there.bin")) is False


def test_guarded_delete_takes_snapshots_along_and_reports_missing(
    container: ContainerClient,
) -> None:
    """A guarded delete removes the blob with its snapshots (True); a missing blob gives False."""
    blob = container.get_blob_client("pending.bin")
    blob.upload_blob(b"p", tags={STATE_TAG: PENDING})
    blob.create_snapshot()
    assert blobs.delete_guarded(blob, PENDING) is True
    assert list(container.list_blobs(include=["snapshots"])) == []
    assert blobs.delete_guarded(blob, PENDING) is False
