"""Throttling and dropped connections during recovery are retried, or reported for the one row
they hit; the rest of the plan goes on."""

from __future__ import annotations

from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.clients import blob_service_client
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.recover.apply import FAILED, RESTORED, apply_plan
from blob_safetynet.recover.plan import make_plan
from blob_safetynet.store.documents import DocumentStore
from testkit.fault_proxy import Fault


def through_retries(nets: RecoveryDouble, bound: ContainerClient) -> ContainerClient:
    """The container through the client the CLI builds (its retry policy)."""
    service = blob_service_client(None, nets.connection_string)
    return service.get_container_client(bound.container_name)


def test_throttling_and_resets_are_retried(
    nets: RecoveryDouble, protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """503 ServerBusy, 500 and connection resets on the listing, the undelete, the copy and
    the reads are retried by the client: every document comes back."""
    documents = [protocol.put(f"d{n}.txt", f"bytes {n}".encode(), ".txt") for n in range(4)]
    bound.delete_blob(documents[0].blob_name)
    bound.delete_blob(documents[1].blob_name)
    bound.upload_blob(documents[2].blob_name, b"wrong", overwrite=True)
    container = through_retries(nets, bound)
    nets.inject("GET comp=list", Fault(status=503, retry_after_s=0), Fault(reset="before"))
    plan = make_plan(store, container)
    nets.inject("PUT comp=undelete", Fault(status=503, retry_after_s=0), Fault(reset="after"))
    nets.inject("PUT", Fault(status=503, retry_after_s=0))
    nets.inject("GET", Fault(reset="before"), Fault(status=500))

    result = apply_plan(store, container, plan)

    assert result.count(RESTORED) == 3, result.outcomes


def test_a_fault_that_outlasts_the_retries_is_reported_for_its_row_alone(
    soft_delete_only: RecoveryDouble, store: DocumentStore
) -> None:
    """Undelete answered 503 more times than the client retries, or 429 (which the storage
    client does not retry: the Blob service throttles with 503 ServerBusy): that row is
    reported failed with the service's answer, and the third row is restored."""
    container = through_retries(soft_delete_only, _bound(soft_delete_only, store))
    protocol = UploadProtocol(store, container)
    for number in range(3):
        container.delete_blob(protocol.put(f"d{number}.txt", b"x" * (number + 1)).blob_name)
    plan = make_plan(store, container)
    soft_delete_only.inject(
        "PUT comp=undelete", *[Fault(status=503, retry_after_s=0)] * 4, Fault(status=429)
    )

    # One row at a time, so the faults meet the rows in the plan's order.
    result = apply_plan(store, container, plan, workers=1)

    assert sorted((o.status, o.detail) for o in result.outcomes) == [
        (FAILED, "HTTP 429 InjectedFault"),
        (FAILED, "HTTP 503 ServerBusy"),
        (RESTORED, "bytes equal the row's (length and SHA-256)"),
    ]
    container.delete_container()


def _bound(nets: RecoveryDouble, store: DocumentStore) -> ContainerClient:
    from blob_safetynet.embedded.azurite import create_unique_container

    container = create_unique_container(blob_service_client(None, nets.connection_string), "f")
    blobs.bind(container, store.database_id())
    return container
