"""The protocol benchmark's two-request floor: what the double counts per operation."""

from __future__ import annotations

from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks.protocol import two_bare_requests
from blob_safetynet.embedded.azurite import Azurite
from testkit.double_process import OutOfProcessDouble


def test_the_floor_is_two_blob_requests_per_operation_and_no_tag_read(
    azurite: Azurite, container: ContainerClient
) -> None:
    """Each floor operation is one create-only Put Blob and one unconditional Set Blob Tags,
    and the double sends Azurite nothing of its own for it (no condition to evaluate)."""
    with OutOfProcessDouble(azurite.port, mirror=True) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        double.reset()
        for i in range(3):
            two_bare_requests(through.get_blob_client(container.container_name, f"f{i}"), b"x")
        counts, timings = double.counts(), double.timings()
    assert counts == {"PUT": 3, "PUT comp=tags": 3}
    assert sum(sum(m["tag_reads"]) for m in timings.values()) == 0
    assert container.get_blob_client("f2").get_blob_tags() == {"state": "committed"}
