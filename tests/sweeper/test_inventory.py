"""reconcile --inventory finds what the listing finds, from a run written in Azure's layout."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.inventory import (
    read_ahead,
    reconcile_from_inventory,
    reconcile_inventory,
)
from blob_safetynet.reconcile.inventory_report import (
    InventoryConfigError,
    InventoryError,
    download,
    find_run,
    sorted_chunks,
)
from blob_safetynet.reconcile.listing import Reconciliation, plan_orphan_deletion, reconcile
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.sweeper.lease import LEASE_BLOB
from testkit.fault_proxy import LatencyProxy
from testkit.inventory import RunSpec, write_run
from tests.conftest import RunCli

FUTURE = datetime.now(UTC) + timedelta(hours=1)
DAY = timedelta(days=1)
RULE = "safetynet"


@pytest.fixture
def destination(container_factory: Callable[[], ContainerClient]) -> ContainerClient:
    """The inventory's destination container, beside the test's data container."""
    return container_factory()


def every_finding(
    protocol: UploadProtocol, store: DocumentStore, container: ContainerClient
) -> None:
    """Each class of finding once, next to blobs that are fine."""
    for state in (COMMITTED, PENDING, RETIRED):
        container.upload_blob(f"orphan-{state}.bin", b"o", tags={STATE_TAG: state})
    container.upload_blob("orphan-untagged.bin", b"o")
    dangling = protocol.put("dangling.txt", b"d", ".txt")
    container.delete_blob(dangling.blob_name)
    for state in (PENDING, RETIRED):
        unsealed = protocol.reserve(f"unsealed-{state}.txt", ".txt")
        protocol.upload(unsealed, b"u")
        store.publish(unsealed.id)
        container.get_blob_client(unsealed.blob_name).set_blob_tags({STATE_TAG: state})
    for number in range(3):
        protocol.put(f"fine-{number}.txt", b"f", ".txt")
    replaced = protocol.put("replaced.txt", b"old", ".txt")
    protocol.replace(replaced.id, b"new", ".txt")
    blobs.bind(container, store.database_id())


def findings(result: Reconciliation) -> dict[str, Any]:
    return {
        "orphans": sorted((b.name, b.state, b.etag) for b in result.orphans),
        "dangling": sorted(d.id for d in result.dangling),
        "unsealed": sorted(d.id for d in result.unsealed),
        "blob_count": result.blob_count,
    }


def from_inventory(
    store: DocumentStore, container: ContainerClient, destination: ContainerClient
) -> Reconciliation:
    return reconcile_from_inventory(store, container, destination, RULE, FUTURE, DAY)


def same_on_both_paths(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    view: Callable[[Reconciliation], Any] = findings,
) -> bool:
    """Whether `view` of the inventory path's result is `view` of the listing path's."""
    inventoried = view(from_inventory(store, container, destination))
    return bool(inventoried == view(reconcile(store, container, FUTURE)))


def test_findings_match_the_listing_path(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """On one state, the inventory path reports every class of finding as listing does."""
    every_finding(protocol, store, container)
    write_run(container, destination)

    listed = reconcile(store, container, FUTURE)
    inventoried = from_inventory(store, container, destination)

    assert findings(inventoried) == findings(listed)
    assert len(listed.orphans) == 4
    assert len(listed.dangling) == 1
    assert len(listed.unsealed) == 2


def test_the_plan_is_the_listing_paths_plan(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """The plan written from the inventory is the listing's plan: same blobs, ETags (in List
    Blobs' unquoted form), times and count."""
    every_finding(protocol, store, container)
    write_run(container, destination)

    def plan(result: Reconciliation) -> dict[str, Any]:
        return plan_orphan_deletion(store, container, result)

    assert same_on_both_paths(store, container, destination, plan)


def test_changes_after_the_run_are_judged_live(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """A blob deleted or sealed since the run, or a row whose blob came after it, is judged as
    it is now: the findings are the listing's of the current state."""
    every_finding(protocol, store, container)
    write_run(container, destination)
    container.delete_blob("orphan-committed.bin")
    sealed = store.get_by_name("unsealed-pending.txt")
    assert sealed is not None
    container.get_blob_client(sealed.blob_name).set_blob_tags({STATE_TAG: COMMITTED})
    protocol.put("after-the-run.txt", b"a", ".txt")

    inventoried = from_inventory(store, container, destination)

    assert "orphan-committed.bin" not in {b.name for b in inventoried.orphans}
    assert sealed.id not in {d.id for d in inventoried.unsealed}
    assert inventoried.dangling == reconcile(store, container, FUTURE).dangling
    listed = findings(reconcile(store, container, FUTURE))
    listed.pop("blob_count")
    now = findings(inventoried)
    now.pop("blob_count")
    assert now == listed


def test_each_suspect_is_read_once_live(
    azurite: Azurite,
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """A suspect orphan costs one read of its properties and tags; a suspect row one read of its
    blob's state (the judge's, with the row read again), not a live read before that one."""
    every_finding(protocol, store, container)
    write_run(container, destination)
    with LatencyProxy(azurite.port, delay_s=0.0) as proxy:
        through = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name
        )
        result = reconcile_from_inventory(store, through, destination, RULE, FUTURE, DAY)
        counts = proxy.counts()
    orphans, rows = len(result.orphans), len(result.dangling) + len(result.unsealed)
    assert (orphans, rows) == (4, 3)
    assert counts["HEAD"] == orphans
    assert counts["GET comp=tags"] == orphans + rows


def test_repair_acts_on_the_live_state(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """--repair from the inventory seals and deletes what listing's repair does, no more."""
    every_finding(protocol, store, container)
    write_run(container, destination)

    repaired = reconcile_from_inventory(store, container, destination, RULE, FUTURE, DAY, True)

    assert sorted(repaired.repaired) == sorted(
        [b.name for b in repaired.orphans if b.state in (PENDING, RETIRED)]
        + [d.blob_name for d in repaired.unsealed]
    )
    assert reconcile(store, container, FUTURE).unsealed == []


@pytest.mark.parametrize("fan_in", [2, 100])
def test_runs_merge_in_name_order_with_repeats_dropped(
    container: ContainerClient, destination: ContainerClient, tmp_path: Path, fan_in: int
) -> None:
    """Shuffled rows spread over files and many spilled runs (merged in passes, or at once) come
    out in byte order with repeats next to each other, the internal marker blobs left out."""
    names = [f"b{n:03d}" for n in range(40)] + ["é", "Z", "a/b", LEASE_BLOB]
    for name in names:
        container.upload_blob(name, b"x", tags={STATE_TAG: COMMITTED})
    write_run(container, destination, RunSpec(files=4))
    found = find_run(destination, RULE, container.container_name, datetime.now(UTC), DAY)
    files = download(destination, found, tmp_path)

    chunks = list(
        sorted_chunks(files, container.container_name, tmp_path, run_rows=3, fan_in=fan_in)
    )

    got = [name for chunk in chunks for name in chunk["name"].to_pylist()]
    expected = sorted(n for n in names if n != LEASE_BLOB)
    assert sorted(set(got)) == got or got == sorted(got)
    assert list(dict.fromkeys(got)) == expected
    assert not any(u for chunk in chunks for u in chunk["unsealed"].to_pylist())


def test_a_run_that_cannot_be_spilled_raises_and_leaves_no_thread(
    container: ContainerClient, destination: ContainerClient, tmp_path: Path
) -> None:
    """A run the spilling thread cannot write raises its error in the reader, whichever run it
    is, and the spilling thread is gone once the error is raised."""
    for number in range(10):
        container.upload_blob(f"b{number}", b"x", tags={STATE_TAG: COMMITTED})
    write_run(container, destination, RunSpec(files=2))
    found = find_run(destination, RULE, container.container_name, datetime.now(UTC), DAY)
    files = download(destination, found, tmp_path)
    before = {thread.name for thread in threading.enumerate()}

    with pytest.raises(OSError, match="missing"):
        list(sorted_chunks(files, container.container_name, tmp_path / "missing", run_rows=3))

    assert {thread.name for thread in threading.enumerate()} == before


def test_a_stale_run_is_refused(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """A run older than the maximum age is an error naming its age, never an empty result."""
    write_run(container, destination, RunSpec(started=datetime.now(UTC) - 3 * DAY))

    with pytest.raises(InventoryError, match=r"older than the maximum age 24\.0 h"):
        from_inventory(store, container, destination)


def test_no_run_is_an_error(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """An empty destination (or only another rule's runs) is 'no completed run'."""
    write_run(container, destination, RunSpec(rule="other"))

    with pytest.raises(InventoryError, match="no completed inventory run of rule 'safetynet'"):
        from_inventory(store, container, destination)


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (RunSpec(status="Pending", checksum=False), "is 'Pending'"),
        (RunSpec(status="Failed"), "is 'Failed'"),
        (RunSpec(checksum=False), "has no checksum file yet"),
    ],
)
def test_an_unfinished_run_is_not_used(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    spec: RunSpec,
    reason: str,
) -> None:
    """A running, failed or checksum-less run is skipped, and said so when none is left."""
    write_run(container, destination, spec)

    with pytest.raises(InventoryError, match=reason):
        from_inventory(store, container, destination)


def test_an_older_completed_run_stands_in_for_a_running_one(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """While today's run is still Pending, yesterday's completed one (within age) is used."""
    every_finding(protocol, store, container)
    write_run(container, destination, RunSpec(started=datetime.now(UTC) - timedelta(hours=20)))
    write_run(container, destination, RunSpec(status="Pending", checksum=False))

    assert same_on_both_paths(store, container, destination)


def test_a_manifest_changed_after_its_checksum_is_not_used(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """A manifest whose MD5 is not the checksum file's is skipped as incomplete."""
    prefix = write_run(container, destination)
    manifest = destination.get_blob_client(f"{prefix}{RULE}-manifest.json")
    changed = json.loads(manifest.download_blob().readall())
    changed["summary"]["objectCount"] += 1
    manifest.upload_blob(json.dumps(changed), overwrite=True)

    with pytest.raises(InventoryError, match="does not match its checksum"):
        from_inventory(store, container, destination)


def test_a_cut_short_file_is_an_incomplete_run(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
) -> None:
    """A report file of another size than its manifest says fails before any finding."""
    every_finding(protocol, store, container)
    prefix = write_run(container, destination)
    destination.upload_blob(f"{prefix}{RULE}_0.parquet", b"PAR1", overwrite=True)

    with pytest.raises(InventoryError, match="the run is incomplete"):
        from_inventory(store, container, destination)


def test_fewer_rows_than_counted_is_an_incomplete_run(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    tmp_path: Path,
) -> None:
    """Files holding fewer rows than the manifest's objectCount fail before any finding."""
    every_finding(protocol, store, container)
    write_run(container, destination)
    run = find_run(destination, RULE, container.container_name, datetime.now(UTC), DAY)
    files = download(destination, run, tmp_path)[1:]
    chunks = sorted_chunks(files, container.container_name, tmp_path, run.object_count)

    with pytest.raises(InventoryError, match="the run is incomplete"):
        reconcile_inventory(store, container, chunks, FUTURE)


@pytest.mark.parametrize(
    ("filters", "reason"),
    [
        ({"blobTypes": ["blockBlob"], "prefixMatch": ["elsewhere"]}, "does not cover"),
        ({"blobTypes": ["appendBlob"]}, "lack blockBlob"),
        ({"blobTypes": ["blockBlob"], "includeSnapshots": True}, "includeSnapshots is true"),
    ],
)
def test_a_rule_that_cannot_stand_in_for_a_listing_is_refused(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    filters: dict[str, Any],
    reason: str,
) -> None:
    """A run that does not cover the whole container, or holds more than base blobs, is refused."""
    write_run(container, destination, RunSpec(filters=filters))

    with pytest.raises(InventoryConfigError, match=reason):
        from_inventory(store, container, destination)


def cli_args(azurite: Azurite, db_url: str, container: ContainerClient) -> list[str]:
    return [
        "reconcile",
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
        "--older-than",
        "1s",
    ]


def test_the_cli_reports_findings_and_writes_the_plan(
    protocol: UploadProtocol,
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    azurite: Azurite,
    db_url: str,
    run_cli: RunCli,
    tmp_path: Path,
) -> None:
    """`reconcile --inventory DEST --json` exits 1 with the listing's findings and plan."""
    every_finding(protocol, store, container)
    write_run(container, destination)
    args = cli_args(azurite, db_url, container)
    time.sleep(1.5)  # every blob and row older than --older-than 1s

    code, out, _ = run_cli(*args, "--json", "--inventory", destination.container_name)
    listed_code, listed_out, _ = run_cli(*args, "--json")

    assert code == listed_code == ExitCode.FINDINGS, out
    got, listed = json.loads(out), json.loads(listed_out)
    assert sorted(map(str, got["orphans"])) == sorted(map(str, listed["orphans"]))
    assert sorted(got["dangling"]) == sorted(listed["dangling"])
    assert sorted(got["unsealed"]) == sorted(listed["unsealed"])


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--inventory-max-age", "1s"], ExitCode.INCOMPLETE, "older than the maximum age"),
        (["--inventory-rule", "nothing"], ExitCode.INCOMPLETE, "no completed inventory run"),
        (["--inventory-max-age", "soon"], ExitCode.USAGE, "--inventory-max-age"),
        (["--inventory-rule", "a/b"], ExitCode.USAGE, "--inventory-rule"),
    ],
)
def test_the_cli_refuses_an_unusable_inventory(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    azurite: Azurite,
    db_url: str,
    run_cli: RunCli,
    extra: list[str],
    code: ExitCode,
    message: str,
) -> None:
    """A stale or missing run exits 3 and a malformed option 2, each with a message saying why."""
    write_run(container, destination, RunSpec(started=datetime.now(UTC) - timedelta(hours=1)))
    args = cli_args(azurite, db_url, container)

    got, out, _ = run_cli(*args, "--json", "--inventory", destination.container_name, *extra)

    assert got == code
    assert message in json.loads(out)["error"]["message"]


def test_the_cli_names_a_missing_inventory_container(
    store: DocumentStore,
    container: ContainerClient,
    azurite: Azurite,
    db_url: str,
    run_cli: RunCli,
) -> None:
    """An inventory container that does not exist is bad usage (exit 2), named."""
    args = cli_args(azurite, db_url, container)

    code, out, _ = run_cli(*args, "--json", "--inventory", "no-such-inventory")

    assert code == ExitCode.USAGE
    assert "'no-such-inventory' does not exist" in json.loads(out)["error"]["message"]


def test_the_cli_refuses_to_apply_a_plan_from_the_inventory(
    store: DocumentStore,
    container: ContainerClient,
    azurite: Azurite,
    db_url: str,
    run_cli: RunCli,
    tmp_path: Path,
) -> None:
    """--apply-plan re-reads the container itself: with --inventory it is bad usage (exit 2)."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "delete": []}), encoding="utf-8")
    args = cli_args(azurite, db_url, container)

    code, out, _ = run_cli(
        *args, "--json", "--inventory", "--apply-plan", str(plan), "--max-delete", "1"
    )

    assert code == ExitCode.USAGE
    assert "drop --inventory" in json.loads(out)["error"]["message"]


def test_the_read_ahead_hands_over_errors_and_stops_with_its_reader() -> None:
    """The table's read-ahead thread raises its source's error in the reader, and a reader
    that stops early (an error on the report's side) does not wait for the whole table."""

    def failing() -> Iterator[int]:
        yield 1
        raise InventoryError("the table went away")

    with pytest.raises(InventoryError, match="went away"):
        list(read_ahead(failing()))
    endless = read_ahead(itertools.count())
    assert next(endless) == 0
    endless.close()
