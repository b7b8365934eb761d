"""The ETag double compares and writes as one step: no write through it lands in between."""

from __future__ import annotations

import threading

import pytest
from azure.core.exceptions import ResourceModifiedError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from testkit.etag_double import _EtagGuardHandler, etag_guarding_service


def test_an_overwrite_racing_a_conditional_tag_write_lands_after_it(
    azurite: Azurite, service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """An overwrite sent between the ETag comparison and the tag write waits for the tag write,
    so the tags go on the blob whose ETag was compared and the overwrite then replaces them."""
    container.upload_blob("doc", b"first")
    etag = container.get_blob_client("doc").get_blob_properties().etag
    raced: list[threading.Thread] = []

    class Racing(_EtagGuardHandler):
        def _before_tag_write(self) -> None:
            if raced:
                return
            racer = threading.Thread(target=overwrite)
            raced.append(racer)
            racer.start()
            racer.join(timeout=1.0)

    with etag_guarding_service(azurite.port, service_client, Racing) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        blob = through.get_blob_client(container.container_name, "doc")

        def overwrite() -> None:
            blob.upload_blob(b"second", overwrite=True)

        blob.set_blob_tags({"state": "committed"}, if_match=etag)
        raced[0].join(timeout=10)
    assert not raced[0].is_alive()
    stored = container.get_blob_client("doc")
    assert stored.download_blob().readall() == b"second"
    assert stored.get_blob_tags() == {}


def test_a_stale_etag_is_refused(
    azurite: Azurite, service_client: BlobServiceClient, container: ContainerClient
) -> None:
    """Set Blob Tags with an ETag the blob no longer has answers 412 and writes nothing."""
    container.upload_blob("doc", b"first")
    stale = container.get_blob_client("doc").get_blob_properties().etag
    container.upload_blob("doc", b"second", overwrite=True)
    with etag_guarding_service(azurite.port, service_client) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        blob = through.get_blob_client(container.container_name, "doc")
        with pytest.raises(ResourceModifiedError) as refused:
            blob.set_blob_tags({"state": "committed"}, if_match=stale)
    assert refused.value.status_code == 412
    assert container.get_blob_client("doc").get_blob_tags() == {}
