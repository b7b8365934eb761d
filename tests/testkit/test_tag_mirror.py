"""The tag-guarding double's mirror (testkit/tag_mirror.py) gives the verdicts reading Azurite's
tags gives: the same request sequences through both modes, the same statuses and tags."""

from __future__ import annotations

from collections.abc import Callable

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from testkit.double_process import OutOfProcessDouble
from testkit.service_doubles import tag_guarding_service

Step = Callable[[BlobClient], object]


def _when(state: str) -> str:
    return f"\"state\" = '{state}'"


def _set(tags: dict[str, str], condition: str | None = None) -> Step:
    return lambda blob: blob.set_blob_tags(tags, if_tags_match_condition=condition)


def _create(tags: dict[str, str] | None) -> Step:
    return lambda blob: blob.upload_blob(
        b"bytes", tags=tags, overwrite=False, match_condition=MatchConditions.IfMissing
    )


def _overwrite(tags: dict[str, str] | None) -> Step:
    return lambda blob: blob.upload_blob(b"other bytes", tags=tags, overwrite=True)


SEQUENCES: dict[str, list[Step]] = {
    "create, then conditions that hold, fail, are absent": [
        _create({"state": "pending"}),
        _set({"state": "committed"}, _when("pending")),
        _set({"state": "committed"}, _when("pending")),
        _set({"state": "retired", "k": "v"}),
        _set({"state": "x"}, "\"state\" = 'retired' AND \"k\" <> 'w'"),
        _set({"state": "y"}, "\"state\" = 'x' AND \"k\" = 'v'"),
        _set({}),
        _set({"state": "z"}, "\"k\" <> 'v'"),
    ],
    "overwrite with and without tags": [
        _create({"state": "pending"}),
        _overwrite({"state": "committed"}),
        _set({"state": "retired"}, _when("pending")),
        _set({"state": "retired"}, _when("committed")),
        _overwrite(None),
        _set({"state": "a"}, _when("retired")),
        _set({"state": "b"}),
        _set({"state": "c"}, _when("b")),
    ],
    "delete and recreate": [
        _create({"state": "committed"}),
        lambda blob: blob.delete_blob(),
        _set({"state": "retired"}, _when("committed")),
        _create({"state": "pending"}),
        _set({"state": "retired"}, _when("committed")),
        _set({"state": "committed"}, _when("pending")),
    ],
    "a create that meets the blob": [
        _create({"state": "committed"}),
        _create({"state": "pending"}),
        _set({"state": "retired"}, _when("committed")),
    ],
}


def _outcome(blob: BlobClient, step: Step) -> tuple[int, dict[str, str] | None]:
    try:
        step(blob)
        status = 200
    except HttpResponseError as error:
        status = error.status_code or 0
    try:
        return status, dict(blob.get_blob_tags())
    except ResourceNotFoundError:
        return status, None


def _run(connection_string: str, container: str, prefix: str) -> dict[str, list[object]]:
    through = BlobServiceClient.from_connection_string(connection_string)
    return {
        name: [_outcome(through.get_blob_client(container, f"{prefix}-{i}"), s) for s in steps]
        for i, (name, steps) in enumerate(SEQUENCES.items())
    }


def test_the_mirror_gives_the_verdicts_reading_azurite_gives_with_fewer_reads(
    azurite: Azurite, container: ContainerClient
) -> None:
    """Every sequence answers with the same statuses and leaves the same tags in both modes;
    the mirror reads Azurite only for a blob it has not seen written (after a delete, an
    overwrite without tags), so it reads less."""
    name = container.container_name
    with tag_guarding_service(azurite.port) as reading:
        read_through = _run(reading.connection_string, name, "read")
        reads = reading.tag_reads
    with tag_guarding_service(azurite.port, mirror=True) as mirroring:
        mirrored = _run(mirroring.connection_string, name, "mirror")
        mirror_reads = mirroring.tag_reads
        checked, stale = mirroring.audit_mirror()
    assert mirrored == read_through
    assert {status for outcomes in mirrored.values() for status, _ in outcomes} >= {200, 409, 412}
    assert (reads, mirror_reads) == (13, 3)
    assert (checked, stale) == (4, [])


def test_a_write_bypassing_the_double_is_found_by_the_audit_and_the_blob_read_again(
    azurite: Azurite, container: ContainerClient
) -> None:
    """The double cannot see a write sent straight to Azurite, so its mirror is wrong for that
    blob (it would refuse a seal Azure accepts); the audit names the blob and forgets it, and
    the next condition is evaluated on Azurite's tags."""
    with tag_guarding_service(azurite.port, mirror=True) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        blob = through.get_blob_client(container.container_name, "bypassed")
        _create({"state": "pending"})(blob)
        container.get_blob_client("bypassed").set_blob_tags({"state": "committed"})
        before_audit = _outcome(blob, _set({"state": "retired"}, _when("committed")))
        audited = double.audit_mirror()
        after_audit = _outcome(blob, _set({"state": "retired"}, _when("committed")))
    assert before_audit == (412, {"state": "committed"})
    assert audited == (1, [f"{container.container_name}/bypassed"])
    assert after_audit == (200, {"state": "retired"})


def test_the_out_of_process_mirror_sends_azurite_no_tag_read_and_releases_a_container(
    azurite: Azurite, container: ContainerClient
) -> None:
    """With `mirror=True` a create and its guarded seal are the two requests Azurite serves
    (the double's timings count no tag read); releasing the container audits and forgets it."""
    with OutOfProcessDouble(azurite.port, mirror=True) as double:
        through = BlobServiceClient.from_connection_string(double.connection_string)
        blob = through.get_blob_client(container.container_name, "doc")
        double.reset()
        _create({"state": "pending"})(blob)
        _set({"state": "committed"}, _when("pending"))(blob)
        timings = double.timings()
        released, again = double.audit(container.container_name), double.audit()
    assert sum(timings["PUT comp=tags"]["tag_reads"]) == 0
    assert (released, again) == ((1, []), (0, []))
