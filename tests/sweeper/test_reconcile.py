"""Reconcile lists what crash windows leave and repairs it under tag guards."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from safetynet.azurite import Azurite
from safetynet.cli import main
from safetynet.constants import COMMITTED, PENDING, STATE_TAG
from sweeper.protocol import UploadProtocol
from sweeper.reconcile import reconcile
from sweeper.store import DocumentStore

FUTURE = datetime.now(UTC) + timedelta(hours=1)


def test_finds_each_kind_of_finding(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Orphans, Ready rows without blobs and Ready rows with pending blobs are all listed."""
    container.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    dangling = protocol.put("dangling.txt", b"d", ".txt")
    container.delete_blob(dangling.blob_name)
    unsealed = protocol.reserve("unsealed.txt", ".txt")
    protocol.upload(unsealed, b"u")
    store.publish(unsealed.id)
    protocol.put("fine.txt", b"f", ".txt")

    result = reconcile(store, container, FUTURE)

    assert [b.name for b in result.orphans] == ["orphan.bin"]
    assert [d.id for d in result.dangling] == [dangling.id]
    assert [d.id for d in result.unsealed] == [unsealed.id]


def test_young_blobs_are_not_judged(store: DocumentStore, container: ContainerClient) -> None:
    """A blob newer than the cutoff may belong to an upload in flight: it is not an orphan."""
    container.upload_blob("in-flight.bin", b"x", tags={STATE_TAG: COMMITTED})
    assert reconcile(store, container, datetime.now(UTC) - timedelta(minutes=15)).clean


def test_repair_deletes_orphans_and_seals_ready_blobs(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Repair removes committed and pending orphans, seals pending blobs of Ready rows."""
    container.upload_blob("orphan-committed", b"o", tags={STATE_TAG: COMMITTED})
    container.upload_blob("orphan-pending", b"o", tags={STATE_TAG: PENDING})
    unsealed = protocol.reserve("unsealed.txt", ".txt")
    protocol.upload(unsealed, b"u")
    store.publish(unsealed.id)

    repaired = reconcile(store, container, FUTURE, repair=True)

    assert sorted(repaired.repaired) == sorted(
        ["orphan-committed", "orphan-pending", unsealed.blob_name]
    )
    assert [b.name for b in container.list_blobs()] == [unsealed.blob_name]
    assert container.get_blob_client(unsealed.blob_name).get_blob_tags() == {STATE_TAG: COMMITTED}
    assert reconcile(store, container, FUTURE).clean


def test_untagged_orphan_is_left_for_a_human(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A blob without the protocol's tag was not written by it: repair reports, never deletes."""
    container.upload_blob("foreign.bin", b"f")
    result = reconcile(store, container, FUTURE, repair=True)
    assert result.errors
    assert [b.name for b in container.list_blobs()] == ["foreign.bin"]


@pytest.mark.parametrize(("repair", "code"), [([], 1), (["--repair"], 0)])
def test_cli_exit_code_says_whether_findings_remain(
    repair: list[str],
    code: int,
    azurite: Azurite,
    container: ContainerClient,
    store: DocumentStore,
    db_url: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`reconcile` exits 1 while an orphan remains, and 0 once `--repair` removed it."""
    container.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    argv = ["reconcile", "--db", db_url, "--connection-string", azurite.connection_string]
    argv += ["--container", container.container_name, "--older-than", "1s", "--json", *repair]
    time.sleep(1.1)  # --older-than takes whole seconds; the orphan must be older than 1 s
    assert main(argv) == code
    report = json.loads(capsys.readouterr().out)
    assert [o["blob"] for o in report["orphans"]] == ["orphan.bin"]
