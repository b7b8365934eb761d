"""The undo nets: a deleted blob comes back, and nobody can purge it early.

Expected answers, from Microsoft's REST reference:
- Undelete Blob restores a soft-deleted blob and its soft-deleted snapshots (200 OK);
  List Blobs with include=deleted lists soft-deleted blobs,
  https://learn.microsoft.com/rest/api/storageservices/undelete-blob and
  https://learn.microsoft.com/rest/api/storageservices/list-blobs
- Delete Blob with deletetype=permanent applies only to a soft-deleted snapshot or version; the
  service answers 409 (Conflict) when permanent delete is not enabled on the account (or the
  snapshot is not soft-deleted), https://learn.microsoft.com/rest/api/storageservices/delete-blob
  ("Permanent delete" in Remarks).
- An emulator that does not implement soft delete answers Undelete Blob with 501 (Azurite).
- With blob versioning on, every write answers with x-ms-version-id and a deleted blob becomes
  a previous version instead of a soft-deleted blob,
  https://learn.microsoft.com/azure/storage/blobs/versioning-overview
"""

from __future__ import annotations

from dataclasses import dataclass

from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient

from blob_safetynet.policies.probes.base import (
    Observation,
    Probe,
    Target,
    describe_refusal,
    failed,
    not_verifiable,
    passed,
    payload,
    status_and_code,
)
from blob_safetynet.settings.vocabulary import PENDING, tag_condition

NOT_IMPLEMENTED = 501


@dataclass(frozen=True)
class UndeleteRefused:
    """Undelete Blob answered an error: `verdict` when that alone settles the probe (the target
    does not implement soft delete, or the identity may not undelete), else None for the
    caller to judge `status` and `code`."""

    status: int
    code: str | None
    verdict: Observation | None


def undelete(blob: BlobClient, said: str = "") -> UndeleteRefused | None:
    """Undelete Blob of `blob`, None when it was answered with success; `said` leads the
    verdict's detail. Emulators answer 501 (Azurite accepts the soft delete setting, not the
    operation): nothing about the nets can be verified there."""
    lead = f"{said}; " if said else ""
    try:
        blob.undelete_blob()
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if status == NOT_IMPLEMENTED:
            return UndeleteRefused(
                status,
                code,
                not_verifiable(
                    f"{lead}Undelete Blob answered {status} {code or 'NotImplemented'}: the "
                    "target does not implement soft delete (Azurite accepts the setting but not "
                    "the operation)"
                ),
            )
        if status in (401, 403):
            return UndeleteRefused(
                status,
                code,
                not_verifiable(
                    f"{lead}Undelete Blob was refused to this identity: {status} {code}"
                ),
            )
        return UndeleteRefused(status, code, None)
    return None


def check_soft_delete(target: Target) -> Observation:
    blob = target.blob("soft-delete")
    data = payload("soft delete")
    version = target.create(blob, data).get("version_id")
    if version:
        # With versioning on, Delete Blob turns the current version into a previous one and
        # Undelete Blob does not bring it back (restoring means copying a version over the base
        # blob, https://learn.microsoft.com/azure/storage/blobs/versioning-overview): this probe
        # would read a working net as missing.
        return not_verifiable(
            f"blob versioning is on (Put Blob answered version {version}): a deleted blob "
            "becomes a previous version, which Undelete Blob does not restore; the settings "
            "rule judges soft delete's retention"
        )
    target.delete(blob, PENDING)
    listed = any(
        item.name == blob.blob_name and item.deleted
        for item in target.container.list_blobs(
            name_starts_with=blob.blob_name, include=["deleted"]
        )
    )
    refused = undelete(blob)
    if refused is not None:
        status, code = refused.status, refused.code
        if refused.verdict is not None:
            return refused.verdict
        if listed:
            return failed(
                f"the deleted blob is listed as deleted but Undelete Blob answered {status} {code}"
            )
        return failed(
            f"the deleted blob was not kept (not listed as deleted; undelete {status} {code})"
        )
    try:
        restored = blob.download_blob().readall()
    except ResourceNotFoundError:
        return failed(
            "Undelete Blob answered OK but the blob did not come back: blob soft delete is off"
            + ("" if listed else " (it was not listed among deleted blobs either)")
        )
    target.ledger.tagged(blob.blob_name, PENDING)
    if restored != data:
        return failed("the undeleted blob's bytes differ from the deleted ones")
    if not listed:
        return failed("the blob came back, but List Blobs include=deleted did not list it")
    return passed(
        "the deleted probe blob was listed among deleted blobs and undelete restored identical bytes"
    )


SOFT_DELETE = Probe(
    id="SNV-SOFT-DELETE",
    title="A deleted blob can be undeleted with its bytes",
    proves=("SN-BLOB-SOFT-DELETE",),
    action=(
        "deletes a probe blob, lists it among deleted blobs, undeletes it and compares the bytes"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/undelete-blob",
    requests=5,
    on_emulator="NOT_VERIFIABLE: undelete answers 501",
    on_live="PASS with soft delete on; FAIL when the blob is not kept; NOT_VERIFIABLE with versioning on",
    run=check_soft_delete,
)


def check_permanent_delete(target: Target) -> Observation:
    blob = target.blob("permanent-delete")
    target.create(blob, payload("permanent delete"))
    snapshot = str(blob.create_snapshot()["snapshot"])
    snapshot_client = target.container.get_blob_client(blob.blob_name, snapshot=snapshot)
    # A snapshot has tags of its own (Get Blob Tags takes `snapshot`,
    # https://learn.microsoft.com/rest/api/storageservices/get-blob-tags), copied from the
    # base blob when taken: pending. Guarded like every delete here (invariant I3).
    snapshot_client.delete_blob(if_tags_match_condition=tag_condition(PENDING))
    soft_deleted = any(
        item.name == blob.blob_name and item.snapshot == snapshot and item.deleted
        for item in target.container.list_blobs(
            name_starts_with=blob.blob_name, include=["deleted", "snapshots"]
        )
    )
    if not soft_deleted:
        where = f"; {target.emulator_reason()}" if target.emulator_host else ""
        return not_verifiable(
            "the deleted snapshot was not kept as soft-deleted, so there is nothing to try a "
            f"permanent delete on (blob soft delete is off or not implemented){where}"
        )
    try:
        snapshot_client.delete_blob(blob_delete_type="Permanent")
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if status == 409:
            return passed(
                f"permanent delete of a soft-deleted snapshot was refused with {status} {code}".strip()
            )
        if status in (401, 403):
            return not_verifiable(
                f"refused with {describe_refusal(error)}: the identity lacks "
                "permanentDelete/action, so the setting's refusal cannot be seen"
            )
        return not_verifiable(f"permanent delete answered {describe_refusal(error)}, not 409")
    return failed(
        "a soft-deleted snapshot was purged with deletetype=permanent: permanent delete is allowed"
    )


PERMANENT_DELETE = Probe(
    id="SNV-NO-PERMANENT-DELETE",
    title="A soft-deleted blob cannot be purged",
    proves=("SN-NO-PERMANENT-DELETE",),
    action=(
        "snapshots a probe blob, deletes the snapshot (soft) and tries Delete Blob "
        "deletetype=permanent on it; it must be refused with 409"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/delete-blob",
    requests=5,
    on_emulator="NOT_VERIFIABLE: no soft-deleted snapshot to try",
    on_live="PASS with 409; NOT_VERIFIABLE (403) without permanentDelete/action, which the verifier role does not hold",
    run=check_permanent_delete,
)
