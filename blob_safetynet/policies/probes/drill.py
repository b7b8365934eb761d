"""The recovery drill: a document lost behind the protocol is given back by the recovery code.

The other undo probes show that a net keeps something (SNV-SOFT-DELETE undeletes a bare blob).
This one runs what a person runs on the day: a probe document is written through the upload
protocol (a Ready row with its length and SHA-256, a committed blob under the run's prefix),
its blob is deleted behind the protocol (the row still says Ready), and `safetynet recover`'s
own code for one document (`recover_one`) judges the nets and restores it. The bytes are then
read back and compared with those written, and the time from the recovery's start to that
comparison is reported and kept in the history (time to recover).

The protocol and the recovery code sit above the policies (tests/test_boundaries.py), so they
are handed in as a `RecoveryDrill` (blob_safetynet/function/drill.py) on the `Target`; a run
without one says so instead of guessing.

Expected answers, from Microsoft's documentation (cited where the recovery code acts, in
blob_safetynet/recover/apply.py): a soft-deleted blob comes back with Undelete Blob
(https://learn.microsoft.com/rest/api/storageservices/undelete-blob); with versioning on, a
deleted blob's bytes are a previous version, copied back over the base blob
(https://learn.microsoft.com/azure/storage/blobs/versioning-overview). An emulator without soft
delete answers Undelete Blob with 501 (Azurite).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobClient

from blob_safetynet.policies.probes.base import (
    Observation,
    Probe,
    Target,
    failed,
    not_verifiable,
    passed,
    payload,
)
from blob_safetynet.policies.probes.recovery import undelete
from blob_safetynet.settings.vocabulary import STATE_TAG

DRILL_BLOB = "recovery-drill"
RESTORED = "restored"
"""The recovery code's status for a document it gave back with the row's bytes."""


@dataclass(frozen=True)
class DrillOutcome:
    """What the recovery code said about the probe document."""

    status: str
    """`restored`, `intact`, `skipped`, `unrecoverable` or `failed` (blob_safetynet/recover/apply.py)."""
    detail: str
    source: str | None = None
    """The kept copy it restored from (`deleted`, `snapshot <time>`, `version <id>`)."""


class DrillSetupError(RuntimeError):
    """The probe document could not be written through the protocol: nothing to recover."""


class RecoveryDrill(Protocol):
    """The drill's acts, done by the upload protocol and the recovery code."""

    store: str
    """Where the probe document's row lives, as the detail says it (a throwaway store when the
    verifier has no database)."""

    def plant(self, target: Target, blob: BlobClient, data: bytes) -> None:
        """Write `data` as a Ready document whose blob is `blob` through the upload protocol,
        then delete the blob behind the protocol; the run's ledger follows the blob.
        DrillSetupError when the protocol refuses."""

    def recover(self, target: Target, blob: BlobClient) -> DrillOutcome:
        """Run the recovery code on the planted document."""


def check_recovery_drill(target: Target) -> Observation:
    drill = target.recovery
    if drill is None:
        return not_verifiable(
            "no recovery code was handed to this run (the probes cannot import it); "
            "`safetynet verify` and the verification timer hand it in"
        )
    blob = target.blob(DRILL_BLOB)
    data = payload("recovery drill")
    try:
        drill.plant(target, blob, data)
    except DrillSetupError as error:
        return not_verifiable(f"the probe document could not be written: {error}")
    started = time.perf_counter()
    outcome = drill.recover(target, blob)
    restored = _bytes(blob)
    seconds = time.perf_counter() - started
    _follow(target, blob)
    where = f"; its row is in {drill.store}"
    if outcome.status == RESTORED:
        if restored == data:
            return passed(
                f"the probe document deleted behind the protocol was restored from "
                f"{outcome.source} with the bytes written, in {seconds:.2f} s{where}",
                seconds,
            )
        return failed(
            f"the recovery reported the document restored from {outcome.source}, but its blob "
            f"does not hold the bytes written{where}"
        )
    # Nothing came back. Undelete Blob, asked once, tells a target without soft delete (501)
    # from a net that is on but kept nothing, or kept what the recovery code missed.
    said = f"the recovery said {outcome.status}: {outcome.detail}"
    refused = undelete(blob, said)
    if refused is not None:
        return refused.verdict or failed(
            f"nothing came back: {said}, and Undelete Blob answered {refused.status} "
            f"{refused.code}{where}"
        )
    again = _bytes(blob)
    _follow(target, blob)
    if again == data:
        return failed(
            f"{said}, yet Undelete Blob restored the bytes written: the recovery code missed "
            f"a kept copy{where}"
        )
    kept = "other bytes came back" if again is not None else "the blob stayed missing"
    return failed(f"nothing came back although Undelete Blob answered OK ({kept}): {said}{where}")


def _bytes(blob: BlobClient) -> bytes | None:
    try:
        return blob.download_blob().readall()
    except ResourceNotFoundError:
        return None


def _follow(target: Target, blob: BlobClient) -> None:
    """The run's ledger learns the state the blob is in now, so clean-up deletes it under
    that state's guard, names it when it is untagged (no guard can hold), or forgets it when
    nothing came back."""
    try:
        state = blob.get_blob_tags().get(STATE_TAG, "")
    except ResourceNotFoundError:
        target.ledger.deleted(blob.blob_name)
        return
    target.ledger.tagged(blob.blob_name, state)


RECOVERY_DRILL = Probe(
    id="SNV-RECOVERY-DRILL",
    title="A document deleted behind the protocol is recovered with its bytes",
    proves=("SN-BLOB-SOFT-DELETE",),
    action=(
        "writes a probe document through the upload protocol, deletes its blob behind the "
        "protocol, runs `safetynet recover`'s code on it and compares the bytes; reports the "
        "time to recover"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/undelete-blob",
    requests=16,
    on_emulator="NOT_VERIFIABLE: undelete answers 501",
    on_live="PASS with soft delete or versioning on (time to recover in the detail and the history); FAIL when nothing or other bytes come back",
    run=check_recovery_drill,
)
