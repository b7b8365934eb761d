"""Checks that can fail: each safety check passes on the real part and catches its broken twin."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.crash import SimulatedCrash, crash_after, run_crash_case
from blob_safetynet.embedded.invariants import DeleteLog, InvariantWatch, check_invariants
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.sweep import Sweeper
from tests.sweeper import broken
from tests.sweeper.conftest import CUTOFF, age_row, stale_rows_in


def watched(
    container: ContainerClient, client_type: type[ContainerClient] = ContainerClient
) -> tuple[ContainerClient, DeleteLog]:
    """The same container through a client whose every delete is logged for I3."""
    log = DeleteLog(container.container_name)
    client = client_type.from_container_url(
        container.url, credential=container.credential, raw_request_hook=log
    )
    return client, log


def sweep_row_classes(
    store: DocumentStore,
    container: ContainerClient,
    sweeper_type: type[Sweeper] = Sweeper,
    claim_store: DocumentStore | None = None,
    client_type: type[ContainerClient] = ContainerClient,
) -> list[str]:
    """Sweeps every row class once and returns each safety property that did not hold."""
    client, log = watched(container)
    sweeper_client = client_type.from_container_url(
        container.url, credential=container.credential, raw_request_hook=log
    )
    protocol = UploadProtocol(store, client)
    stale = stale_rows_in(store, container, 2, prefix="stale")
    stale_rows_in(store, container, 1, with_blobs=False, prefix="never")
    (sealed,) = stale_rows_in(store, container, 1, prefix="sealed")
    container.get_blob_client(sealed.blob_name).set_blob_tags({STATE_TAG: COMMITTED})
    fresh = protocol.reserve("fresh.txt", ".txt")
    protocol.upload(fresh, b"still uploading")
    ready = protocol.put("old.txt", b"published long ago", ".txt")
    age_row(store, ready.id, timedelta(days=30))
    watch = InvariantWatch(store, client, log)

    report = sweeper_type(claim_store or store, sweeper_client, SweepSettings(cutoff=CUTOFF)).run()

    watch.check("sweep")
    problems = [f"{v.result.id}: {v.result.detail}" for v in watch.violations]
    rows = {d.name: d for d in store.all()}
    states = {name: blob.state for name, blob in watch.previous.items()}
    if report.examined != 4:
        problems.append(f"claimed {report.examined} rows, expected the 4 stale Pending ones")
    old = rows.get("old.txt")
    if (old and (old.status, old.blob_name)) != (Status.READY, ready.blob_name) or states.get(
        ready.blob_name
    ) != COMMITTED:
        problems.append("the old Ready document was touched")
    if "fresh.txt" not in rows or states.get(fresh.blob_name) != "pending":
        problems.append("an upload younger than the cutoff was swept")
    if getattr(rows.get("sealed-0"), "status", None) is not Status.READY:
        problems.append("a sealed stale row was not rolled forward")
    if states.get(sealed.blob_name) != COMMITTED:
        problems.append("a sealed blob was deleted")
    if {"stale-0", "stale-1", "never-0"} & rows.keys() or {d.blob_name for d in stale} & set(
        states
    ):
        problems.append("a stale pending upload was left behind")
    return problems


def test_real_sweeper_keeps_every_safety_property(
    store: DocumentStore, container: ContainerClient
) -> None:
    """The sweeper claims only stale Pending rows, deletes only pending blobs, rolls sealed forward."""
    assert sweep_row_classes(store, container) == []


@pytest.mark.parametrize(
    ("sweeper_type", "store_type", "client_type", "caught"),
    [
        (Sweeper, broken.ClaimsEveryStatus, ContainerClient, "claimed 5 rows"),
        (Sweeper, broken.ClaimsFreshRows, ContainerClient, "younger than the cutoff was swept"),
        (Sweeper, DocumentStore, broken.UnguardedContainer, "sealed-0.bin (was committed)"),
        (Sweeper, DocumentStore, broken.UnguardedContainer, "a sealed blob was deleted"),
        (Sweeper, DocumentStore, broken.SealedLooksMissing, "not rolled forward"),
        (broken.IdleSweeper, DocumentStore, ContainerClient, "pending upload was left behind"),
    ],
)
def test_broken_sweepers_are_caught(
    store: DocumentStore,
    container: ContainerClient,
    sweeper_type: type[Sweeper],
    store_type: type[DocumentStore],
    client_type: type[ContainerClient],
    caught: str,
) -> None:
    """Each deliberately broken sweeper, claim query or blob client fails the row-class check."""
    twin_store = store_type(store.engine, store.layout)
    problems = sweep_row_classes(store, container, sweeper_type, twin_store, client_type)
    assert any(caught in p for p in problems), problems


@pytest.mark.parametrize(
    ("protocol_type", "client_type", "step", "invariant", "moment"),
    [
        # Ends fully repaired: only the check right after publish can see the reversed order.
        (broken.PublishBeforeSeal, ContainerClient, "seal", "I2", "after publish"),
        (broken.DeleteFirstReplace, ContainerClient, "replace.upload", "I2", "replace.retire"),
        (broken.DeleteFirstReplace, ContainerClient, "replace.upload", "I1", "after replace."),
        # The sweeper's batch delete of an abandoned upload, sent without its guard.
        (UploadProtocol, broken.UnguardedContainer, "upload", "I3", "delete without guard"),
    ],
)
def test_crash_matrix_catches_broken_protocols(
    store: DocumentStore,
    container: ContainerClient,
    protocol_type: type[UploadProtocol],
    client_type: type[ContainerClient],
    step: str,
    invariant: str,
    moment: str,
) -> None:
    """The crash matrix, run over a broken part, names the invariant and the instant it broke."""
    case = run_crash_case(store, container, step, protocol_type, client_type)
    failed = {i.id: i.detail for i in case.invariants if not i.holds}
    assert invariant in failed, case
    assert moment in failed[invariant]


def test_retry_that_overwrites_is_caught_as_i6(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A retried upload (same bytes) without the create-only condition overwrites: I6."""
    outcomes = {}
    for protocol_type in (UploadProtocol, broken.OverwritingUpload):
        watch = InvariantWatch(store, container)
        first = protocol_type(store, container, checkpoint=watch.then(crash_after("upload")))
        name = f"{protocol_type.__name__}.txt"
        with pytest.raises(SimulatedCrash):
            first.put(name, b"first attempt", ".txt")
        document = store.get_by_name(name)
        assert document is not None
        protocol_type(store, container, checkpoint=watch.check).complete(
            document.id, b"first attempt"
        )
        outcomes[protocol_type] = [v.result.id for v in watch.violations]
    assert outcomes == {UploadProtocol: [], broken.OverwritingUpload: ["I6"]}


def test_idle_sweeper_is_caught_as_i4(store: DocumentStore, container: ContainerClient) -> None:
    """A sweeper that claims stale rows and finishes none leaves them, flagged as I4."""
    stale_rows_in(store, container, 3)
    settings = SweepSettings(cutoff=CUTOFF)
    broken.IdleSweeper(store, container, settings).run()
    second = Sweeper(store, container, settings).run()
    results = check_invariants(store, container, {}, datetime.now(UTC) - CUTOFF, second)
    assert [r.id for r in results if not r.holds] == ["I4"]


def test_unguarded_delete_of_a_pending_blob_is_still_caught_by_the_log(
    store: DocumentStore, container: ContainerClient
) -> None:
    """With a delete log, I3 flags a delete sent without its guard even when the blob was pending."""
    client, log = watched(container)
    (document,) = stale_rows_in(store, container, 1)
    watch = InvariantWatch(store, client, log)
    blobs.delete_guarded(client.get_blob_client(document.blob_name), "pending")
    assert [r.id for r in watch.check("guarded") if not r.holds] == []
    container.upload_blob("second.bin", b"x", tags={STATE_TAG: "pending"})
    watch.check("upload")
    client.get_blob_client("second.bin").delete_blob()
    assert [r.id for r in watch.check("unguarded") if not r.holds] == ["I3"]
