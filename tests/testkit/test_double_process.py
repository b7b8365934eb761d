"""The tag-enforcing double in its own process answers as the in-process one and times itself."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from testkit.double_process import OutOfProcessDouble

PENDING_ONLY = "\"state\" = 'pending'"


def test_a_tag_condition_that_fails_is_refused_and_the_tag_read_is_timed(
    azurite: Azurite, container: ContainerClient
) -> None:
    """A Set Blob Tags whose x-ms-if-tags held is forwarded, the same write once it no longer
    holds is answered 412, and the double reports each request it counted with the time of
    its own tag read."""
    with OutOfProcessDouble(azurite.port) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        blob = through.get_blob_client(container.container_name, "doc")
        blob.upload_blob(b"bytes", tags={"state": "pending"})
        double.reset()
        blob.set_blob_tags({"state": "committed"}, if_tags_match_condition=PENDING_ONLY)
        with pytest.raises(HttpResponseError) as refused:
            blob.set_blob_tags({"state": "committed"}, if_tags_match_condition=PENDING_ONLY)
        counts, timings = double.counts(), double.timings()
    assert refused.value.status_code == 412
    assert container.get_blob_client("doc").get_blob_tags() == {"state": "committed"}
    assert counts == {"PUT comp=tags": 2}
    reads = timings["PUT comp=tags"]["tag_read_s"]
    assert len(reads) == 2
    assert all(
        0 < read <= total
        for read, total in zip(reads, timings["PUT comp=tags"]["handler_s"], strict=True)
    )
