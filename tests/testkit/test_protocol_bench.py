"""The protocol benchmark's harness: the two-request floor, and the mirror's check after a run."""

from __future__ import annotations

from typing import Any, cast

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from benchmarks.protocol import Bench, Run, two_bare_requests
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


def test_a_run_whose_mirror_differs_from_azurite_is_refused(
    azurite: Azurite, container: ContainerClient
) -> None:
    """A blob of a mirror run written behind the double's back makes the run's release fail,
    naming the blob, so its figures are not reported; a read-through run needs no check."""
    with (
        OutOfProcessDouble(azurite.port, mirror=True) as mirroring,
        OutOfProcessDouble(azurite.port) as reading,
    ):
        bench = Bench(reading, mirroring, cast(Any, None), cast(Any, None), None)
        through = BlobServiceClient.from_connection_string(mirroring.connection_string)
        two_bare_requests(through.get_blob_client(container.container_name, "kept"), b"x")
        two_bare_requests(through.get_blob_client(container.container_name, "changed"), b"x")
        container.get_blob_client("changed").set_blob_tags({"state": "retired"})
        bench.release(Run("read-through", 1, mirror=False), container.container_name)
        with pytest.raises(RuntimeError, match=r"1 of 2 blobs .*/changed\)"):
            bench.release(Run("mirror", 1), container.container_name)
