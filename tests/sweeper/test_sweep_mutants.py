"""What the sweeper does at its edges, pinned one behaviour per test: the per-blob fallback, the
records of replaces and deletes, the only-copy check, the dry run, blob names at their limits.

Each was found unguarded by the mutation run of `blob_safetynet/sweeper/sweep.py` (docs/reliability.md).
`_delete_one` and a record's unreachable blob are called directly: the sweeper reaches the
first only when the SDK cannot build a Blob Batch or a batch answers short, and the second only
when the service fails between two calls, neither of which Azurite does on its own.
"""

from __future__ import annotations

import base64
import logging
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.blobs import BINDING_BLOB
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import BlobRecordKind, Document, Status, new_document_id
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.lease import ACQUIRED, LEASE_BLOB, LEASE_SECONDS, SweepLease
from blob_safetynet.sweeper.sweep import (
    BlobOutcome,
    ContainerBindingError,
    Sweeper,
    SweepReport,
    Verdict,
    _code,
)
from testkit.fault_proxy import Fault, LatencyProxy
from tests.sweeper.conftest import CUTOFF

ODD = "odd"
"""A state tag the protocol never writes."""


def sweeper(store: DocumentStore, container: ContainerClient, dry_run: bool = False) -> Sweeper:
    """A sweeper whose clock is three hours ahead: every row and record here is due."""
    return Sweeper(
        store,
        container,
        SweepSettings(cutoff=CUTOFF, dry_run=dry_run),
        clock=lambda: datetime.now(UTC) + timedelta(hours=3),
    )


def blob(container: ContainerClient, name: str, state: str | None) -> None:
    """A blob tagged `state`; none at all when `state` is None."""
    if state is not None:
        container.upload_blob(name, b"x", tags={STATE_TAG: state})


def exists(container: ContainerClient, name: str) -> bool:
    return bool(container.get_blob_client(name).exists())


def row(store: DocumentStore, blob_name: str, status: Status = Status.PENDING) -> Document:
    """A row an hour old naming `blob_name`."""
    document = Document(
        new_document_id(),
        f"doc-{new_document_id()}",
        blob_name,
        status,
        datetime.now(UTC) - timedelta(hours=1),
    )
    with store.engine.begin() as conn:
        conn.execute(
            store.table.insert().values(
                id=document.id,
                name=document.name,
                blob_name=document.blob_name,
                status=document.status.value,
                created=document.created_utc,
            )
        )
    return document


def record(store: DocumentStore, kind: BlobRecordKind, blob_name: str, document_id: str) -> None:
    """A crash-window record two hours old (past the cutoff and the retired grace)."""
    with store.engine.begin() as conn:
        conn.execute(
            store.blobs.insert().values(
                blob_name=blob_name,
                document_id=document_id,
                kind=kind.value,
                recorded_utc=datetime.now(UTC) - timedelta(hours=2),
            )
        )


def statuses(store: DocumentStore) -> dict[str, Status]:
    return {d.blob_name: d.status for d in store.all()}


# The per-blob fallback answers as a Blob Batch sub-response would.


def test_one_by_one_delete_removes_a_pending_blob_with_its_snapshots(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A pending blob with a snapshot is deleted, snapshot and all, and answers 202."""
    blob(container, "p.bin", PENDING)
    container.get_blob_client("p.bin").create_snapshot()
    assert sweeper(store, container)._delete_one("p.bin") == 202
    assert list(container.list_blobs(include=["snapshots"])) == []


def test_one_by_one_delete_leaves_a_blob_that_is_not_pending(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A committed blob is not deleted: the delete is guarded by the pending tag, answers 412."""
    blob(container, "c.bin", COMMITTED)
    assert sweeper(store, container)._delete_one("c.bin") == 412
    assert exists(container, "c.bin")


def test_one_by_one_delete_of_a_missing_blob_answers_404(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A blob that never landed answers 404, so its row can go."""
    assert sweeper(store, container)._delete_one("never.bin") == 404


def test_one_by_one_delete_in_a_missing_container_is_a_failure_not_a_404(
    store: DocumentStore, container: ContainerClient
) -> None:
    """ContainerNotFound is not BlobNotFound: it answers 0, so no row is removed for it."""
    missing = ContainerClient.from_container_url(
        container.url + "gone", credential=container.credential
    )
    assert sweeper(store, missing)._delete_one("p.bin") == 0


def test_one_by_one_delete_of_a_leased_blob_is_a_failure_not_a_412(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A 412 for a lease (LeaseIdMissing) is not "not pending": it answers 0, the blob stays."""
    blob(container, "l.bin", PENDING)
    lease = container.get_blob_client("l.bin").acquire_lease(lease_duration=60)
    try:
        assert sweeper(store, container)._delete_one("l.bin") == 0
    finally:
        lease.release()
    assert exists(container, "l.bin")


def test_one_by_one_delete_refused_for_another_reason_answers_that_status(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A refusal other than 404/412 (here a wrong account key, 403) answers its own status."""
    blob(container, "p.bin", PENDING)
    wrong_key = base64.b64encode(b"not the account key, 32 bytes!!!").decode()
    intruder = ContainerClient.from_container_url(
        container.url,
        credential={"account_name": container.account_name, "account_key": wrong_key},
        retry_total=0,
    )
    assert sweeper(store, intruder)._delete_one("p.bin") == 403
    assert exists(container, "p.bin")


def test_one_by_one_delete_that_never_reaches_the_service_is_transient(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A delete that gets no answer (connection refused) answers 503, which is retried."""
    unreachable = ContainerClient(
        f"http://127.0.0.1:1/{container.account_name}",
        container.container_name,
        credential=container.credential,
        retry_total=0,
    )
    assert sweeper(store, unreachable)._delete_one("p.bin") == 503


def test_one_by_one_delete_of_a_name_the_sdk_refuses_is_a_failure(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A name the SDK cannot send (empty) answers 0, a failure, without raising."""
    assert sweeper(store, container)._delete_one("") == 0


def test_an_error_that_names_no_service_code_reads_as_no_code() -> None:
    """An HttpResponseError raised by azure-core itself (no x-ms-error-code) has no code."""
    assert _code(HttpResponseError(message="raised before any answer")) is None


# Records of replaces and deletes.


def test_a_retired_record_never_deletes_a_pending_blob(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A retired record's delete is guarded by `retired`: a pending blob of its name is kept."""
    blob(container, "r.bin", PENDING)
    record(store, BlobRecordKind.RETIRED, "r.bin", "doc-1")
    report = sweeper(store, container).run()
    assert report.errors == [
        f"retired blob r.bin of document doc-1: tagged {STATE_TAG}='pending'; left for a human"
    ]
    assert exists(container, "r.bin")
    assert [r.blob_name for r in store.records()] == ["r.bin"]


def test_an_intent_whose_blob_is_already_retired_is_deleted(
    store: DocumentStore, container: ContainerClient
) -> None:
    """An intent whose blob a previous sweep retired but did not delete is finished now."""
    blob(container, "i.bin", RETIRED)
    record(store, BlobRecordKind.INTENT, "i.bin", "doc-1")
    report = sweeper(store, container).run()
    assert (report.abandoned_replacements, report.errors) == (1, [])
    assert not exists(container, "i.bin")
    assert store.records() == []


def test_a_retired_record_of_a_committed_blob_retires_and_deletes_it(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A retired record whose blob is still committed (a delete's crash window) removes it."""
    blob(container, "r.bin", COMMITTED)
    record(store, BlobRecordKind.RETIRED, "r.bin", "doc-1")
    report = sweeper(store, container).run()
    assert (report.retired_deleted, report.errors) == (1, [])
    assert not exists(container, "r.bin")
    assert store.records() == []


def test_a_record_of_a_leased_blob_is_reported_with_the_service_answer(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A record whose blob is leased reports the service's status and code; both are kept."""
    blob(container, "r.bin", RETIRED)
    record(store, BlobRecordKind.RETIRED, "r.bin", "doc-1")
    lease = container.get_blob_client("r.bin").acquire_lease(lease_duration=60)
    try:
        report = sweeper(store, container).run()
    finally:
        lease.release()
    assert report.errors == [
        "retired blob r.bin of document doc-1: delete answered 412 LeaseIdMissing"
    ]
    assert exists(container, "r.bin")
    assert [r.blob_name for r in store.records()] == ["r.bin"]


def test_a_record_whose_blob_cannot_be_reached_is_kept_and_says_why(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A record whose delete gets no answer is not cleared; the error names the failure."""
    record(store, BlobRecordKind.RETIRED, "r.bin", "doc-1")
    unreachable = ContainerClient(
        f"http://127.0.0.1:1/{container.account_name}",
        container.container_name,
        credential=container.credential,
        retry_total=0,
    )
    (retired,) = store.records()
    assert sweeper(store, unreachable)._clear_record(retired) == "ServiceRequestError"


def test_a_record_with_a_tag_the_protocol_never_writes_is_left_for_a_human(
    store: DocumentStore, container: ContainerClient
) -> None:
    """An intent whose blob is tagged neither pending, committed nor retired is kept."""
    blob(container, "i.bin", ODD)
    record(store, BlobRecordKind.INTENT, "i.bin", "doc-1")
    report = sweeper(store, container).run()
    assert report.errors == [
        f"intent blob i.bin of document doc-1: tagged {STATE_TAG}='odd'; left for a human"
    ]
    assert exists(container, "i.bin")


# A sealed replacement that may be a document's only copy (a database restored mid-replace).


@pytest.mark.parametrize(
    ("own_state", "why"),
    [
        (
            None,
            "is missing and this sealed replacement is the only copy left; kept for a person "
            "(reconcile lists the row)",
        ),
        (
            RETIRED,
            "is already retired: the database looks older than the container (restored?); "
            "this sealed replacement is kept for a person",
        ),
    ],
)
def test_a_sealed_replacement_is_kept_when_its_document_has_no_live_blob(
    own_state: str | None, why: str, store: DocumentStore, container: ContainerClient
) -> None:
    """A sealed intent of a Ready row whose own blob is gone or retired is kept, with the reason."""
    blob(container, "own.bin", own_state)
    blob(container, "new.bin", COMMITTED)
    document = row(store, "own.bin", Status.READY)
    record(store, BlobRecordKind.INTENT, "new.bin", document.id)
    binding.bind(store, container)  # a pair swept before: no first-sweep proof
    report = sweeper(store, container).run()
    assert report.errors == [
        f"intent blob new.bin of document {document.id}: "
        f"document {document.id}'s blob own.bin {why}"
    ]
    assert exists(container, "new.bin")
    assert [r.blob_name for r in store.records()] == ["new.bin"]


@pytest.mark.parametrize("own", ["ready, blob committed", "row gone", "row pending"])
def test_a_sealed_replacement_is_removed_when_it_is_not_the_only_copy(
    own: str, store: DocumentStore, container: ContainerClient
) -> None:
    """A sealed intent is removed when its document's blob is live, or no Ready row needs it."""
    document_id = "doc-gone"
    if own == "ready, blob committed":
        blob(container, "own.bin", COMMITTED)
        document_id = row(store, "own.bin", Status.READY).id
    elif own == "row pending":
        # Its blob is missing: were the row Ready, the replacement would be its only copy.
        document_id = row(store, "own.bin", Status.PENDING).id
    blob(container, "new.bin", COMMITTED)
    record(store, BlobRecordKind.INTENT, "new.bin", document_id)
    report = sweeper(store, container).run()
    assert report.abandoned_replacements == 1
    assert not exists(container, "new.bin")


# A stale row whose delete answered 412: only an exactly committed tag rolls it forward.


def test_a_stale_row_whose_blob_has_an_odd_tag_is_reported_and_kept(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A 412 on a blob tagged neither pending nor committed leaves row and blob, with why."""
    blob(container, "o.bin", ODD)
    document = row(store, "o.bin")
    report = sweeper(store, container).run()
    assert report.errors == [
        f"document {document.id}: blob o.bin not swept: tagged {STATE_TAG}='odd', "
        "neither pending nor committed; not rolled forward"
    ]
    assert statuses(store) == {"o.bin": Status.PENDING}
    assert exists(container, "o.bin")


def test_a_stale_row_whose_tag_cannot_be_read_after_a_412_is_kept(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """When the tag cannot be read after a 412, the row is neither rolled forward nor removed."""
    blob(container, "c.bin", COMMITTED)
    document = row(store, "c.bin")
    binding.bind(store, container)  # a pair swept before: no first-sweep proof
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        proxy.fail_next("GET comp=tags", 1)
        report = sweeper(store, proxied).run()
    assert report.errors == [
        f"document {document.id}: blob c.bin not swept: tag unreadable: HttpResponseError"
    ]
    assert statuses(store) == {"c.bin": Status.PENDING}


def test_a_blob_gone_between_the_412_and_the_tag_read_lets_the_row_go(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """A blob deleted after its 412 (another sweeper retired it) counts as missing: row removed."""
    blob(container, "c.bin", COMMITTED)
    row(store, "c.bin")
    binding.bind(store, container)  # a pair swept before: no first-sweep proof
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        proxy.once("GET comp=tags", lambda: container.delete_blob("c.bin"))
        report = sweeper(store, proxied).run()
    assert (report.missing_blobs, report.deleted_rows, report.errors) == (1, 1, [])
    assert store.all() == []


def test_a_stale_row_whose_delete_is_refused_is_reported_with_the_answer(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A delete refused for a reason other than the tag (a lease) names its answer in the report."""
    blob(container, "l.bin", PENDING)
    document = row(store, "l.bin")
    lease = container.get_blob_client("l.bin").acquire_lease(lease_duration=60)
    try:
        report = sweeper(store, container).run()
    finally:
        lease.release()
    assert report.errors == [f"document {document.id}: blob l.bin not swept: delete answered 0"]
    assert statuses(store) == {"l.bin": Status.PENDING}


# The Blob Batch: what a failed batch may and may not be taken to mean.


def test_a_batch_deletes_a_pending_blob_with_its_snapshots(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A stale row's pending blob that has a snapshot is deleted, snapshot and all."""
    blob(container, "s.bin", PENDING)
    container.get_blob_client("s.bin").create_snapshot()
    row(store, "s.bin")
    report = sweeper(store, container).run()
    assert (report.deleted_blobs, report.errors) == (1, [])
    assert [b.name for b in container.list_blobs(include=["snapshots"])] == [BINDING_BLOB]


def test_a_whole_batch_refused_says_nothing_about_any_blob(
    azurite: Azurite,
    store: DocumentStore,
    container: ContainerClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch answered 412 as a whole is not "not pending" for each blob: rows fail with 0."""
    blob(container, "p.bin", PENDING)
    document = row(store, "p.bin")
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        proxy.inject("POST comp=batch", Fault(status=412))
        with caplog.at_level(logging.WARNING, logger="safetynet.sweeper"):
            report = sweeper(store, proxied).run()
    assert report.errors == [f"document {document.id}: blob p.bin not swept: delete answered 0"]
    assert "blob batch failed: Precondition Failed" in caplog.messages
    assert exists(container, "p.bin")


def test_a_batch_that_gets_no_answer_is_retried_then_reported(
    azurite: Azurite,
    store: DocumentStore,
    container: ContainerClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A batch whose connection is reset every time is retried, then the row is reported as
    still failing after the attempts, with the error's type and the blob's name logged."""
    blob(container, "p.bin", PENDING)
    document = row(store, "p.bin")
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        proxy.inject("POST comp=batch", Fault(reset="before"), Fault(reset="before"))
        settings = SweepSettings(cutoff=CUTOFF, max_attempts=2)
        later = lambda: datetime.now(UTC) + timedelta(hours=3)  # noqa: E731
        with caplog.at_level(logging.WARNING, logger="safetynet.sweeper"):
            report = Sweeper(store, proxied, settings, clock=later, sleep=lambda _: None).run()
    assert report.errors == [
        f"document {document.id}: blob p.bin not swept: still failing after 2 attempts"
    ]
    failures = [m for m in caplog.messages if m.startswith("blob batch failed: ")]
    assert failures == ["blob batch failed: ServiceResponseError"] * 2
    assert "blob p.bin: still failing after 2 attempts" in caplog.messages
    assert exists(container, "p.bin")


# The dry run: tags are read, nothing changes.


def test_a_dry_run_reports_what_a_sweep_would_do_to_each_stale_row(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A dry run counts a pending blob deleted, a missing one missing, a committed one rolled
    forward, and reports an odd tag; no blob or row changes."""
    for name, state in [("p", PENDING), ("m", None), ("c", COMMITTED), ("o", ODD)]:
        blob(container, f"{name}.bin", state)
    odd = [row(store, f"{name}.bin") for name in "pmco"][-1]
    report = sweeper(store, container, dry_run=True).run()
    counts = (report.deleted_blobs, report.missing_blobs, report.rolled_forward)
    assert counts == (1, 1, 1)
    assert report.deleted_rows == 2
    assert report.errors == [
        f"document {odd.id}: blob o.bin not swept: tagged {STATE_TAG}='odd'; would not roll forward"
    ]
    assert set(statuses(store).values()) == {Status.PENDING}
    assert sorted(b.name for b in container.list_blobs()) == ["c.bin", "o.bin", "p.bin"]


def test_a_dry_run_over_records_reports_only_tags_the_protocol_never_writes(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A dry run counts every record it would clear and reports the one with an odd tag."""
    records = [
        (BlobRecordKind.INTENT, "ip.bin", PENDING),
        (BlobRecordKind.INTENT, "im.bin", None),
        (BlobRecordKind.INTENT, "io.bin", ODD),
        (BlobRecordKind.RETIRED, "rr.bin", RETIRED),
        (BlobRecordKind.RETIRED, "rc.bin", COMMITTED),
    ]
    for kind, name, state in records:
        blob(container, name, state)
        record(store, kind, name, "doc-1")
    report = sweeper(store, container, dry_run=True).run()
    assert report.errors == [
        f"intent blob io.bin of document doc-1: tagged {STATE_TAG}='odd'; would be left for a human"
    ]
    assert (report.abandoned_replacements, report.retired_deleted) == (2, 2)
    assert len(store.records()) == len(records)
    assert len(list(container.list_blobs())) == 4


# Blob names: what cannot be sent is reported, everything up to the limits is swept.


def test_names_the_service_cannot_take_are_reported_and_left(
    store: DocumentStore, container: ContainerClient
) -> None:
    """Empty, blank, over-long and control-character names are reported; their rows stay."""
    problems = {
        "": "blob name is empty",
        "   ": "blob name is empty",
        "tab\there": "blob name contains control characters",
    }
    if store.engine.dialect.name == "sqlite":
        # PostgreSQL's column holds at most 1024 characters: there such a row cannot exist.
        problems["x" * 1025] = "blob name is 1025 characters; at most 1024"
    documents = {name: row(store, name) for name in problems}
    binding.bind(store, container)  # a pair swept before: no first-sweep proof
    report = sweeper(store, container).run()
    assert sorted(report.errors) == sorted(
        f"document {documents[name].id}: {problem}; left for a human"
        for name, problem in problems.items()
    )
    assert set(statuses(store).values()) == {Status.PENDING}


def test_names_at_the_limits_are_swept(store: DocumentStore, container: ContainerClient) -> None:
    """A name of exactly 1024 characters and one with a space are valid and swept."""
    names = ["y" * 1024, "with space.bin"]
    for name in names:
        blob(container, name, PENDING)
        row(store, name)
    report = sweeper(store, container).run()
    assert (report.deleted_blobs, report.deleted_rows, report.errors) == (2, 2, [])
    assert [b.name for b in container.list_blobs()] == [BINDING_BLOB]


@pytest.mark.parametrize("dry_run", [False, True], ids=["sweep", "dry run"])
def test_a_sweep_one_row_and_one_record_per_chunk_counts_every_chunk(
    store: DocumentStore, container: ContainerClient, dry_run: bool
) -> None:
    """With chunks of one, every row and record is its own chunk, reported as it finishes, and
    the totals add up every chunk, not the last one's."""
    for name, state in [("p1", PENDING), ("p2", PENDING), ("c1", COMMITTED), ("c2", COMMITTED)]:
        blob(container, f"{name}.bin", state)
        row(store, f"{name}.bin")
    for kind, name, state in [
        (BlobRecordKind.INTENT, "i1.bin", PENDING),
        (BlobRecordKind.INTENT, "i2.bin", PENDING),
        (BlobRecordKind.RETIRED, "r1.bin", RETIRED),
        (BlobRecordKind.RETIRED, "r2.bin", RETIRED),
    ]:
        blob(container, name, state)
        record(store, kind, name, "doc-1")
    progress: list[dict[str, object]] = []
    report = Sweeper(
        store,
        container,
        SweepSettings(cutoff=CUTOFF, dry_run=dry_run, chunk_size=1),
        clock=sweeper(store, container).clock,
        on_progress=lambda now: progress.append(now.as_dict()),
    ).run()
    assert (report.examined, report.deleted_blobs, report.deleted_rows) == (4, 2, 2)
    assert report.rolled_forward == 2
    assert (report.abandoned_replacements, report.retired_deleted) == (2, 2)
    assert [p["examined"] for p in progress] == [1, 2, 3, 4, 4, 4, 4, 4]
    assert [p["abandoned_replacements"] for p in progress][4:] == [1, 2, 2, 2]
    assert report.errors == []


# `_finish` is called directly: the batch and the dry run answer for every name they are given,
# so a row without a verdict, or a failure without a detail, never comes from them.


def test_a_row_without_a_verdict_is_reported_as_unanswered(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A row no verdict speaks for is reported "no answer"; a failure without a detail is
    reported without one; neither is counted as swept."""
    unanswered, bare = row(store, "u.bin"), row(store, "b.bin")
    report = SweepReport(dry_run=True)
    verdicts = {"b.bin": Verdict(BlobOutcome.FAILED)}
    sweeper(store, container, dry_run=True)._finish("", [], [unanswered, bare], verdicts, report)
    assert report.errors == [
        f"document {unanswered.id}: blob u.bin not swept: no answer",
        f"document {bare.id}: blob b.bin not swept",
    ]
    assert (report.examined, report.deleted_rows, report.rolled_forward) == (2, 0, 0)


def test_rows_and_records_another_sweep_just_claimed_are_left_to_it(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A row and a record claimed by another sweep a moment ago are not taken over: a claim is
    only expired once it is older than the claim time-to-live."""
    late = sweeper(store, container)
    now = late.clock()
    blob(container, "p.bin", PENDING)
    document = row(store, "p.bin")
    blob(container, "i.bin", PENDING)
    record(store, BlobRecordKind.INTENT, "i.bin", "doc-1")
    assert store.claim_stale(now - CUTOFF, 10, "other", now, now - timedelta(minutes=10))
    assert store.claim_records(BlobRecordKind.INTENT, now, 10, "other", now, now)
    report = late.run()
    assert (report.examined, report.abandoned_replacements, report.errors) == (0, 0, [])
    assert statuses(store) == {document.blob_name: Status.PENDING}
    assert exists(container, "p.bin")
    assert exists(container, "i.bin")


def test_a_lease_release_that_fails_is_a_warning_of_the_report(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """A sweep under the lease whose release gets no answer still returns its report, with
    the failed release as its one warning; a clean release leaves no warning."""
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        settings = SweepSettings(cutoff=CUTOFF, use_lease=True)
        assert Sweeper(store, proxied, settings).run().warnings == []
        proxy.inject("PUT comp=lease release", Fault(reset="after"))
        report = Sweeper(store, proxied, settings).run()
    assert report.warnings == [
        f"releasing the lease on {LEASE_BLOB} failed (ServiceResponseError); the sweep's "
        f"report stands, and a lease of ours expires within {LEASE_SECONDS} s"
    ]
    assert (report.errors, report.stopped) == ([], None)


def test_a_lease_lost_mid_sweep_stops_it_with_the_reason(
    azurite: Azurite,
    store: DocumentStore,
    container: ContainerClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A renewal that fails before the first chunk stops the sweep: the reason is its one error,
    what `stopped` says and what is logged, and the stale row is left as it was."""
    blob(container, "p.bin", PENDING)
    row(store, "p.bin")
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name, retry_total=0
        )
        proxy.inject("PUT comp=lease renew", Fault(reset="before"))
        settings = SweepSettings(cutoff=CUTOFF, use_lease=True)
        clock = sweeper(store, container).clock
        with caplog.at_level(logging.ERROR, logger="safetynet.sweeper"):
            report = Sweeper(store, proxied, settings, clock=clock).run()
    lost = f"lease renewal on {LEASE_BLOB} failed (ServiceResponseError); sweep stopped"
    assert (report.errors, report.stopped, report.examined) == ([lost], lost, 0)
    assert caplog.messages == [f"sweep stopped: {lost}"]
    assert statuses(store) == {"p.bin": Status.PENDING}
    assert exists(container, "p.bin")


def test_a_database_failing_mid_sweep_stops_it_with_the_reason(
    store: DocumentStore, container: ContainerClient, caplog: pytest.LogCaptureFixture
) -> None:
    """The records table gone after the rows' chunk stops the sweep: the database's error is
    what `stopped` says, the one error and the log line; the rows already swept stay swept."""
    blob(container, "p.bin", PENDING)
    row(store, "p.bin")

    def drop_records_table(_: SweepReport) -> None:
        with store.engine.begin() as conn:
            conn.execute(sa.text(f"DROP TABLE {store.blobs.name}"))

    settings = SweepSettings(cutoff=CUTOFF)
    clock = sweeper(store, container).clock
    with caplog.at_level(logging.ERROR, logger="safetynet.sweeper"):
        report = Sweeper(store, container, settings, clock, on_progress=drop_records_table).run()
    assert report.stopped
    assert report.stopped.startswith("database")
    assert report.errors == [f"sweep stopped: {report.stopped}"]
    assert caplog.messages == [f"sweep stopped: {report.stopped}"]
    assert (report.deleted_rows, statuses(store)) == (1, {})


# The binding refusals, word for word: a person reads them to find which side is wrong.


def test_a_container_bound_to_another_database_is_refused_naming_both(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A container whose marker names another database is refused, the message naming the
    container, its database and this one."""
    blobs.bind(container, "other-db")
    with pytest.raises(ContainerBindingError) as refused:
        sweeper(store, container).run()
    assert str(refused.value) == (
        f"container {container.container_name!r} is bound to database other-db, not to this "
        f"one ({store.database_id()}); refusing to sweep with the wrong table"
    )


def test_a_marker_naming_no_database_is_refused_saying_what_to_do(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A binding marker without a database id is refused, telling a person what to check."""
    container.upload_blob(BINDING_BLOB, b"")
    with pytest.raises(ContainerBindingError) as refused:
        sweeper(store, container).run()
    assert str(refused.value) == (
        f"container {container.container_name!r} has a binding marker ({BINDING_BLOB}) that "
        "names no database; refusing to sweep until a person checks which database it belongs "
        "to and removes the marker"
    )


def test_a_database_bound_to_another_container_is_refused_naming_both(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A database bound to another container is refused, the message naming both."""
    store.bind_container("elsewhere/other")
    with pytest.raises(ContainerBindingError) as refused:
        sweeper(store, container).run()
    identity = f"{container.account_name}/{container.container_name}"
    assert str(refused.value) == (
        f"database {store.database_id()} belongs to container 'elsewhere/other', not "
        f"{identity!r}; refusing to sweep the wrong container"
    )


def test_a_database_bound_to_another_container_while_binding_is_refused(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """A sweep of another container that binds the database between this sweep's read and its
    write wins; this one is refused, the message naming both containers."""
    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name
        )
        # The binding marker's read comes after this sweep found the database unbound.
        proxy.once("HEAD", lambda: store.bind_container("elsewhere/other"))
        with pytest.raises(ContainerBindingError) as refused:
            sweeper(store, proxied).run()
    identity = f"{proxied.account_name}/{container.container_name}"
    assert str(refused.value) == (
        f"database {store.database_id()} was just bound to container 'elsewhere/other' by "
        f"another sweep, not {identity!r}"
    )


def test_a_sweep_given_a_lease_sweeps_under_that_one(
    store: DocumentStore, container: ContainerClient
) -> None:
    """The lease a sweeper is given is the one it takes: the lease blob carries its clock."""
    taken = datetime(2020, 1, 2, tzinfo=UTC)
    lease = SweepLease(container, clock=lambda: taken)
    settings = SweepSettings(cutoff=CUTOFF, use_lease=True)
    assert Sweeper(store, container, settings, lease=lease).run().errors == []
    metadata = container.get_blob_client(LEASE_BLOB).get_blob_properties().metadata
    assert metadata[ACQUIRED] == taken.isoformat()


def test_a_record_that_fails_does_not_hold_up_the_rest_of_its_chunk(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A record left for a person is reported, and the records after it in the same chunk are
    still cleared."""
    for name, state in [("a.bin", ODD), ("b.bin", PENDING), ("c.bin", PENDING)]:
        blob(container, name, state)
        record(store, BlobRecordKind.INTENT, name, "doc-1")
    report = sweeper(store, container).run()
    assert report.errors == [
        f"intent blob a.bin of document doc-1: tagged {STATE_TAG}='odd'; left for a human"
    ]
    assert report.abandoned_replacements == 2
    assert [r.blob_name for r in store.records()] == ["a.bin"]
    assert not exists(container, "b.bin")


def test_rows_in_a_sweep_carry_a_token_of_its_own_that_keeps_other_sweeps_out(
    azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> None:
    """While their deletes are out, a sweep's rows and records carry one fresh token of its
    own, and another sweep's claim gets none of them."""
    blob(container, "p.bin", PENDING)
    row(store, "p.bin")
    blob(container, "i.bin", PENDING)
    record(store, BlobRecordKind.INTENT, "i.bin", "doc-1")
    seen: list[object] = []
    now = datetime.now(UTC) + timedelta(hours=3)
    expired = now - timedelta(minutes=10)

    def look_at_rows() -> None:
        with store.engine.begin() as conn:
            seen.append(conn.execute(sa.select(store.table.c.claim_token)).scalar_one())
        seen.append(store.claim_stale(now - CUTOFF, 10, "other", now, expired))

    def look_at_records() -> None:
        with store.engine.begin() as conn:
            seen.append(conn.execute(sa.select(store.blobs.c.claim_token)).scalar_one())
        seen.append(store.claim_records(BlobRecordKind.INTENT, now, 10, "other", now, expired))

    with LatencyProxy(azurite.port, delay_s=0) as proxy:
        proxied = ContainerClient.from_connection_string(
            proxy.connection_string, container.container_name
        )
        proxy.once("POST comp=batch", look_at_rows)
        proxy.once("DELETE", look_at_records)
        report = sweeper(store, proxied).run()
    assert (report.deleted_rows, report.abandoned_replacements) == (1, 1)
    row_token, rows_taken, record_token, records_taken = seen
    assert isinstance(row_token, str)
    assert str(uuid.UUID(row_token)) == row_token
    assert record_token == row_token
    assert (rows_taken, records_taken) == ([], [])


@pytest.mark.parametrize("concurrency", [1, 3])
def test_batches_run_on_as_many_named_sweep_threads_as_the_concurrency_allows(
    store: DocumentStore,
    container: ContainerClient,
    caplog: pytest.LogCaptureFixture,
    concurrency: int,
) -> None:
    """Three one-blob batches run on `concurrency` threads named after the sweep, which is
    what their log lines show."""
    leases = []
    for name in ("a.bin", "b.bin", "c.bin"):
        blob(container, name, PENDING)
        row(store, name)
        leases.append(container.get_blob_client(name).acquire_lease(lease_duration=60))
    settings = SweepSettings(cutoff=CUTOFF, batch_size=1, concurrency=concurrency)
    clock = sweeper(store, container).clock
    try:
        with caplog.at_level(logging.WARNING, logger="safetynet.sweeper"):
            assert len(Sweeper(store, container, settings, clock).run().errors) == 3
    finally:
        for lease in leases:
            lease.release()
    threads = {r.threadName for r in caplog.records if r.getMessage().endswith("answered 0")}
    assert threads == {f"sweep_{i}" for i in range(concurrency)}


def test_records_younger_than_their_wait_are_left_alone(
    store: DocumentStore, container: ContainerClient
) -> None:
    """An intent younger than the cutoff (a replace in progress) and a retired blob younger
    than the grace period (a reader may still hold it) are neither cleared nor claimed."""
    for kind, name, state in [
        (BlobRecordKind.INTENT, "i.bin", PENDING),
        (BlobRecordKind.RETIRED, "r.bin", RETIRED),
    ]:
        blob(container, name, state)
        with store.engine.begin() as conn:
            conn.execute(
                store.blobs.insert().values(
                    blob_name=name,
                    document_id="doc-1",
                    kind=kind.value,
                    recorded_utc=datetime.now(UTC) - timedelta(minutes=1),
                )
            )
    report = Sweeper(store, container, SweepSettings(cutoff=CUTOFF)).run()
    assert (report.abandoned_replacements, report.retired_deleted, report.errors) == (0, 0, [])
    assert sorted(r.blob_name for r in store.records()) == ["i.bin", "r.bin"]
    assert exists(container, "i.bin")
    assert exists(container, "r.bin")
