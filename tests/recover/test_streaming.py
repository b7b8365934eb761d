"""The dry run reads the listing and the table side by side in blob name order, a page of each
at a time (blob_safetynet/recover/nets.py `stream_nets`, plan.py `plan_rows`)."""

from __future__ import annotations

from typing import Any

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.recover.nets import ListingOrderError, stream_nets
from blob_safetynet.recover.plan import MISSING, OVERWRITTEN, plan_rows
from blob_safetynet.store.documents import DocumentStore


def lose_some(protocol: UploadProtocol, container: ContainerClient) -> dict[str, str]:
    """24 documents; 8 deleted and 4 overwritten behind the protocol: blob name -> finding."""
    documents = [protocol.put(f"d{n}.txt", f"bytes {n}".encode(), ".txt") for n in range(24)]
    lost = {}
    for document in documents[:8]:
        container.delete_blob(document.blob_name)
        lost[document.blob_name] = MISSING
    for document in documents[8:12]:
        container.upload_blob(document.blob_name, b"other", overwrite=True)
        lost[document.blob_name] = OVERWRITTEN
    return lost


def test_pages_of_the_listing_give_each_name_once_in_order_with_its_copies(
    protocol: UploadProtocol, bound: ContainerClient
) -> None:
    """Listed three entries a page, every name comes once, in order, its live blob and kept
    copies together, as one listing held at once shows them."""
    lost = lose_some(protocol, bound)

    names = list(stream_nets(bound, page_size=3))

    assert [n for n, _ in names] == sorted({n for n, _ in names})
    kept = {n for n, nets in names if nets.copies}
    assert set(lost) <= kept
    assert all(nets.live is None for n, nets in names if lost.get(n) == MISSING)


def test_the_merged_plan_finds_every_lost_row_in_blob_name_order(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """The rows and the listing merged by name give exactly the deleted and the overwritten
    documents, in blob name order."""
    lost = lose_some(protocol, bound)

    rows = plan_rows(store, bound)

    assert {r.document.blob_name: r.finding for r in rows} == lost
    assert [r.document.blob_name for r in rows] == sorted(lost)


class Reversed(ContainerClient):
    """A container whose listing comes in the reverse of code point order."""

    def list_blobs(self, *args: Any, **kwargs: Any) -> Any:
        return list(reversed(list(super().list_blobs(*args, **kwargs))))


def test_a_listing_out_of_order_is_refused_by_the_stream_and_planned_from_the_whole(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """A service that lists names out of order cannot be merged: the stream says so, and the
    plan is made from the whole listing instead, finding the same rows."""
    lost = lose_some(protocol, bound)
    reversed_listing = Reversed.from_container_url(bound.url, credential=bound.credential)

    with pytest.raises(ListingOrderError):
        list(stream_nets(reversed_listing))
    rows = plan_rows(store, reversed_listing)

    assert {r.document.blob_name: r.finding for r in rows} == lost
