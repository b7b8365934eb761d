"""`safetynet demo`'s recovery story: documents lost behind the protocol, seen, planned, given back.

Azurite answers Undelete Blob with 501 and keeps nothing a delete or an overwrite removes, so
the story runs on the recovery double in front of it (`blob_safetynet.embedded.recovery`: blob
soft delete and container soft delete as Microsoft documents them), and its first step shows
Azurite's own answer. Each step's expectation comes from the documentation the code cites
(https://learn.microsoft.com/rest/api/storageservices/undelete-blob,
https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview,
https://learn.microsoft.com/rest/api/storageservices/restore-container), never from this run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs, reconcile
from blob_safetynet.recover.apply import RESTORED, apply_plan
from blob_safetynet.recover.plan import MISSING, OVERWRITTEN, make_plan
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status
from blob_safetynet.sweeper import binding

DOCUMENTS = 10
DELETED = 3
OVERWRITTEN_COUNT = 2
HEADING = (
    "Recovery: a wrong delete and a wrong overwrite behind the protocol, seen, planned, given back",
    "(on the recovery double in front of Azurite, blob_safetynet/embedded/recovery.py: Azurite",
    "answers Undelete Blob with 501 (R1) and keeps no deleted blob or snapshot, so blob and",
    "container soft delete run in the double, as Microsoft documents them)",
)


def body(number: int) -> bytes:
    return f"demo document {number}\n".encode() * (3 + number)


def undelete_on_azurite(service: BlobServiceClient) -> str:
    """What plain Azurite answers to Undelete Blob (the reason the double exists)."""
    container = create_unique_container(service, "demo")
    try:
        blob = container.get_blob_client("deleted.txt")
        blob.upload_blob(b"gone")
        blob.delete_blob()
        try:
            blob.undelete_blob()
        except HttpResponseError as error:
            return f"HTTP {error.status_code}"
        return "restored"
    finally:
        container.delete_container()


def bytes_check(store: DocumentStore, container: ContainerClient) -> str:
    """Each Ready row's blob read whole and compared with the row (length and SHA-256)."""
    match = differ = 0
    for document, content in store.ready_with_content("", store.count() + 1):
        if content is None:
            differ += 1
            continue
        try:
            data = container.get_blob_client(document.blob_name).download_blob().readall()
        except HttpResponseError:
            differ += 1
            continue
        same = len(data) == content.length and hashlib.sha256(data).hexdigest() == content.sha256
        match, differ = (match + 1, differ) if same else (match, differ + 1)
    return f"match={match} differ={differ}"


@contextmanager
def _workspace(
    double: RecoveryDouble, workdir: Path
) -> Iterator[tuple[DocumentStore, ContainerClient]]:
    service = BlobServiceClient.from_connection_string(double.connection_string)
    container = create_unique_container(service, "recover")
    store = DocumentStore.from_url(f"sqlite:///{workdir / f'{container.container_name}.db'}")
    store.init_schema()
    try:
        yield store, container
    finally:
        store.engine.dispose()
        if container.exists():
            container.delete_container()


def recovery_story(azurite_port: int, service: BlobServiceClient, workdir: Path) -> list[Any]:
    """The steps R1-R9 as (id, title, expected, measured)."""
    steps: list[tuple[str, str, str, str]] = [
        ("R1", "Undelete Blob on plain Azurite", "HTTP 501", undelete_on_azurite(service))
    ]
    with RecoveryDouble(azurite_port) as double, _workspace(double, workdir) as (store, container):
        binding.bind(store, container)  # as the first sweep leaves a deployment
        protocol = UploadProtocol(store, container)
        documents = [protocol.put(f"contract-{n}.txt", body(n), ".txt") for n in range(DOCUMENTS)]
        steps.append(
            (
                "R2",
                f"{DOCUMENTS} documents put through the protocol",
                f"ready={DOCUMENTS} blobs={DOCUMENTS}",
                f"ready={store.count(Status.READY)} blobs={len(list_blobs(container))}",
            )
        )
        steps.append(_lose(container, documents))
        found = reconcile(store, container, datetime.now(UTC) + timedelta(hours=1))
        steps.append(
            (
                "R4",
                "reconcile (names and state tags: sees the deletes)",
                f"dangling={DELETED} unsealed=0 orphans=0",
                f"dangling={len(found.dangling)} unsealed={len(found.unsealed)} "
                f"orphans={len(found.orphans)}",
            )
        )
        plan = json.loads(json.dumps(make_plan(store, container)))
        steps.append(_planned(plan))
        result = apply_plan(store, container, plan)
        steps.append(
            (
                "R6",
                "recover --apply-plan (each copy read, compared, then restored)",
                f"restored={DELETED + OVERWRITTEN_COUNT} unresolved=0",
                f"restored={result.count(RESTORED)} "
                f"unresolved={len(result.outcomes) - result.count(RESTORED)}",
            )
        )
        steps.append(
            (
                "R7",
                "every document's bytes against its row (length, SHA-256)",
                f"match={DOCUMENTS} differ=0",
                bytes_check(store, container),
            )
        )
        steps.append(
            (
                "R8",
                "recover, dry run again",
                "rows=0",
                f"rows={len(make_plan(store, container)['rows'])}",
            )
        )
        steps.append(_container_story(store, container))
    return steps


def _lose(container: ContainerClient, documents: list[Document]) -> tuple[str, str, str, str]:
    """A wrong delete and a wrong overwrite, with the account key, behind the protocol."""
    for document in documents[:DELETED]:
        container.delete_blob(document.blob_name)
    for document in documents[DELETED : DELETED + OVERWRITTEN_COUNT]:
        container.upload_blob(document.blob_name, b"overwritten by a script", overwrite=True)
    return (
        "R3",
        f"{DELETED} blobs deleted, {OVERWRITTEN_COUNT} overwritten behind the protocol",
        f"blobs={DOCUMENTS - DELETED}",
        f"blobs={len(list_blobs(container))}",
    )


def _planned(plan: dict[str, Any]) -> tuple[str, str, str, str]:
    rows = plan["rows"]
    missing = sum(1 for r in rows if r["finding"] == MISSING)
    overwritten = sum(1 for r in rows if r["finding"] == OVERWRITTEN)
    sources = sorted({r["copies"][0]["kind"] for r in rows if r["copies"]})
    return (
        "R5",
        "recover, dry run: the plan (length, kept snapshots: both)",
        f"missing={DELETED} overwritten={OVERWRITTEN_COUNT} from=deleted,snapshot days_left=7",
        f"missing={missing} overwritten={overwritten} from={','.join(sources)} "
        f"days_left={plan['summary']['soonest_days_left']}",
    )


def _container_story(store: DocumentStore, container: ContainerClient) -> tuple[str, str, str, str]:
    """The whole container deleted (the portal), then recover --apply."""
    container.delete_container()
    plan = make_plan(store, container)
    result = apply_plan(store, container, plan)
    restored = "restored" if result.container_restored else "not restored"
    return (
        "R9",
        "the container deleted, then recover --apply",
        f"container restored, match={DOCUMENTS} differ=0",
        f"container {restored}, {bytes_check(store, container)}",
    )
