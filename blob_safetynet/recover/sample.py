"""A cheap sample of Ready rows whose blob is missing: the sweep timer's early warning.

`safetynet recover` counts every lost document, but it lists the whole container. The sweep
timer runs every few minutes and must stay cheap, so it checks a sample: `size` Ready rows from
a random point of the id space (ids are random UUIDs, so consecutive ids are a random sample),
one Get Blob Properties each (404: missing). A row whose blob is missing is read again before
it counts, so a replace or delete that moved the row meanwhile is not counted. The count goes
into the sweep's summary (`ready_missing`), where the `ready-missing` alert rule sees it
(blob_safetynet/infra/alerts.py, docs/operations.md#ready-missing). A wrong delete of many blobs
shows within a tick or two; a single lost document among millions may take many ticks to be
sampled, and `safetynet recover`'s dry run finds it on the day.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import ContainerClient

from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status, new_document_id

SAMPLE_SIZE: Final = 20
"""Rows checked per sweep tick: 20 Get Blob Properties, about 0.2 s at a 10 ms round trip."""


@dataclass(frozen=True)
class MissingSample:
    sampled: int
    missing: int
    names: tuple[str, ...] = ()
    """The blob names found missing (a few; the summary logs them for the runbook)."""


def sample_rows(store: DocumentStore, size: int, start: str) -> list[Document]:
    """Up to `size` Ready rows in id order from `start`, wrapping around to the lowest ids."""
    rows = [document for document, _ in store.ready_with_content(start, size)]
    if len(rows) < size:
        seen = {document.id for document in rows}
        rows += [
            document
            for document, _ in store.ready_with_content("", size - len(rows))
            if document.id not in seen and document.id <= start
        ]
    return rows


def sample_missing(
    store: DocumentStore,
    container: ContainerClient,
    size: int = SAMPLE_SIZE,
    start: str | None = None,
) -> MissingSample:
    """How many of a random sample of Ready rows have no blob (their row read again)."""
    rows = sample_rows(store, size, new_document_id() if start is None else start)
    missing: list[str] = []
    for document in rows:
        try:
            container.get_blob_client(document.blob_name).get_blob_properties()
        except ResourceNotFoundError:
            again = store.get(document.id)
            if (
                again is not None
                and again.status is Status.READY
                and again.blob_name == document.blob_name
            ):
                missing.append(document.blob_name)
    return MissingSample(len(rows), len(missing), tuple(missing[:5]))
