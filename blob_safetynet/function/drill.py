"""The recovery drill's acts (SNV-RECOVERY-DRILL): the upload protocol writes the probe
document, a delete behind the protocol loses its blob, `recover_one` gives it back.

The probe (blob_safetynet/policies/probes/drill.py) judges; it cannot import the protocol, the
store or the recovery code (tests/test_boundaries.py), so this layer, which may, hands them in
on the `Target`. `safetynet verify` and the verification timer both use `recovery_drill`.

The verifier has no documents table: unless one is given, the probe document's row goes to a
throwaway SQLite store in a temporary folder, removed at the end, and the probe's detail says
so. Its blob is under the run's prefix (`.safetynet/verify/<run id>/`), where the verifier
identity may act and nothing else of the project looks.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from azure.storage.blob import BlobClient, ContainerClient

from blob_safetynet.policies.probes import Target
from blob_safetynet.policies.probes.drill import DrillOutcome, DrillSetupError
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import ProtocolError, UploadProtocol
from blob_safetynet.recover.apply import recover_one
from blob_safetynet.settings.vocabulary import COMMITTED
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.engine import StoreError
from blob_safetynet.store.tables import Content, Document, Status, new_document_id

THROWAWAY = "a throwaway SQLite store (the verifier has no database)"


class _UnprobedGuards(blobs.TagGuards):
    """Whether x-ms-if-tags is evaluated, decided without the guard probe's own blob (it lives
    outside the run's prefix, where the verifier may not write): Azure evaluates it; an
    emulator is taken to ignore it, the safe side (the seal reads the state back)."""

    def enforced(self, container: ContainerClient) -> bool:
        return not blobs.looks_like_emulator(container)


class ProtocolDrill:
    """`RecoveryDrill` through the real parts, one probe document per run."""

    def __init__(self, documents: DocumentStore, store: str) -> None:
        self.documents = documents
        self.store = store
        self.document_id: str | None = None

    def plant(self, target: Target, blob: BlobClient, data: bytes) -> None:
        """Reserve a row naming `blob` (the protocol's first step, with the bytes' length and
        SHA-256), complete the upload, seal and publish through the protocol, then delete the
        committed blob behind it: the row still says Ready."""
        document = Document(
            new_document_id(),
            f"recovery drill {target.run_id}",
            blob.blob_name,
            Status.PENDING,
            datetime.now(UTC),
        )
        content = Content(len(data), hashlib.sha256(data).hexdigest())
        protocol = UploadProtocol(self.documents, target.container, guards=_UnprobedGuards())
        target.ledger.created(blob.blob_name)
        try:
            self.documents.reserve(document, content)
            protocol.complete(document.id, data)
        except (ProtocolError, StoreError) as error:
            raise DrillSetupError(str(error)) from None
        self.document_id = document.id
        target.ledger.tagged(blob.blob_name, COMMITTED)
        target.delete(blob, COMMITTED)

    def recover(self, target: Target, blob: BlobClient) -> DrillOutcome:
        """`safetynet recover`'s code for one document (`recover_one`), on the planted one."""
        if self.document_id is None:
            raise DrillSetupError("no probe document was planted")
        outcome = recover_one(self.documents, target.container, self.document_id)
        return DrillOutcome(outcome.status, outcome.detail, outcome.source)


@contextmanager
def recovery_drill(store: DocumentStore | None = None) -> Iterator[ProtocolDrill]:
    """The drill's acts on `store`, or on a throwaway SQLite store removed afterwards."""
    if store is not None:
        yield ProtocolDrill(store, "the documents table given")
        return
    with tempfile.TemporaryDirectory(prefix="safetynet-drill-") as folder:
        throwaway = DocumentStore.from_url(f"sqlite:///{Path(folder) / 'drill.db'}")
        try:
            throwaway.init_schema()
            yield ProtocolDrill(throwaway, THROWAWAY)
        finally:
            throwaway.engine.dispose()
