"""Reconcile audits the container against the table and never deletes a live document."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import (
    ROLL_FORWARD,
    RepairRefusedError,
    apply_plan,
    list_blobs,
    plan_orphan_deletion,
    reconcile,
)
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document, Status, new_document_id

FUTURE = datetime.now(UTC) + timedelta(hours=1)


@pytest.fixture
def bound(store: DocumentStore, container: ContainerClient) -> ContainerClient:
    """The test's container bound to the test's database, as the first sweep leaves it."""
    blobs.bind(container, store.database_id())
    return container


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


def test_repair_keeps_committed_orphans_and_fixes_the_rest(
    protocol: UploadProtocol, store: DocumentStore, bound: ContainerClient
) -> None:
    """Repair seals pending blobs of Ready rows and deletes pending orphans; committed stay."""
    bound.upload_blob("orphan-committed", b"o", tags={STATE_TAG: COMMITTED})
    bound.upload_blob("orphan-pending", b"o", tags={STATE_TAG: PENDING})
    unsealed = protocol.reserve("unsealed.txt", ".txt")
    protocol.upload(unsealed, b"u")
    store.publish(unsealed.id)

    repaired = reconcile(store, bound, FUTURE, repair=True)

    assert sorted(repaired.repaired) == sorted(["orphan-pending", unsealed.blob_name])
    assert set(list_blobs(bound)) == {unsealed.blob_name, "orphan-committed"}
    assert bound.get_blob_client(unsealed.blob_name).get_blob_tags() == {STATE_TAG: COMMITTED}
    assert repaired.unresolved
    assert [b.name for b in reconcile(store, bound, FUTURE).orphans] == ["orphan-committed"]


def test_untagged_orphan_is_left_for_a_human(store: DocumentStore, bound: ContainerClient) -> None:
    """A blob without the protocol's tag was not written by it: repair reports, never deletes."""
    bound.upload_blob("foreign.bin", b"f")
    result = reconcile(store, bound, FUTURE, repair=True)
    assert result.unresolved
    assert list(list_blobs(bound)) == ["foreign.bin"]


def test_repair_refuses_a_container_bound_to_another_database(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A container bound to another database is the wrong table: repair does nothing at all."""
    blobs.bind(container, "another-database")
    container.upload_blob("orphan-pending", b"o", tags={STATE_TAG: PENDING})
    with pytest.raises(RepairRefusedError, match="wrong table"):
        reconcile(store, container, FUTURE, repair=True)
    assert list(list_blobs(container)) == ["orphan-pending"]


def test_replace_racing_reconcile_repair_loses_nothing(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """A replace stalled between seal and switch keeps its new blob through a reconcile --repair."""
    document = UploadProtocol(store, bound).put("cv.txt", b"v1", ".txt")

    def stall_then_reconcile(step: str) -> None:
        if step == "replace.seal":
            # The stall outlasts --older-than: the new blob is as old as any orphan.
            reconcile(store, bound, FUTURE, repair=True)

    UploadProtocol(store, bound, checkpoint=stall_then_reconcile).replace(
        document.id, b"v2", ".txt"
    )
    assert UploadProtocol(store, bound).read("cv.txt") == b"v2"


def ready_documents(store: DocumentStore, container: ContainerClient, count: int) -> None:
    protocol = UploadProtocol(store, container)
    for i in range(count):
        protocol.put(f"live-{i}.txt", f"live {i}".encode(), ".txt")


@pytest.mark.parametrize(
    ("case", "code"),
    [
        ("another database", ExitCode.USAGE),
        ("never bound", ExitCode.USAGE),
        ("same database, rows lost", ExitCode.FINDINGS),
    ],
)
def test_repair_against_an_empty_table_keeps_every_document(
    case: str,
    code: ExitCode,
    azurite: Azurite,
    container: ContainerClient,
    store: DocumentStore,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`reconcile --repair` against an empty table keeps every committed blob and exits non-zero;
    the protocol's blobs name their documents, so rows lost point to the roll-forward."""
    ready_documents(store, container, 20)
    url = db_url
    if case == "another database":
        blobs.bind(container, store.database_id())
        url = f"sqlite:///{tmp_path / 'empty.db'}"
        DocumentStore.from_url(url).init_schema()
    elif case == "same database, rows lost":
        blobs.bind(container, store.database_id())
        with store.engine.begin() as conn:
            conn.execute(store.table.delete())
    before = set(list_blobs(container))
    time.sleep(1.1)  # --older-than takes whole seconds; the blobs must be older than 1 s

    exit_code = main(
        [
            "reconcile",
            "--db",
            url,
            "--connection-string",
            azurite.connection_string,
            "--container",
            container.container_name,
            "--older-than",
            "1s",
            "--repair",
        ]
    )

    assert exit_code == code
    assert len(before) == 20
    assert set(list_blobs(container)) == before
    out, err = capsys.readouterr()
    assert (
        ("20 committed blob(s) hold documents no row has" in out and ROLL_FORWARD in out)
        if code == ExitCode.FINDINGS
        else ("refused" in err)
    )


def test_plan_then_apply_deletes_only_what_was_reviewed(
    store: DocumentStore, bound: ContainerClient, tmp_path: Path
) -> None:
    """A written plan deletes its committed orphan once applied; a row added since is respected."""
    ready_documents(store, bound, 40)
    bound.upload_blob("stray.bin", b"s", tags={STATE_TAG: COMMITTED})
    bound.upload_blob("claimed-later.bin", b"c", tags={STATE_TAG: COMMITTED})
    plan = plan_orphan_deletion(store, bound, reconcile(store, bound, FUTURE))
    assert sorted(e["blob"] for e in plan["delete"]) == ["claimed-later.bin", "stray.bin"]
    # Between plan and apply the application starts using one of the blobs.
    store.reserve(
        Document(new_document_id(), "late.txt", "claimed-later.bin", Status.READY, FUTURE)
    )

    result = apply_plan(store, bound, plan, max_delete=2)

    assert result.errors == ["claimed-later.bin: referenced since listing; left alone"]
    assert result.repaired == ["stray.bin"]
    assert "claimed-later.bin" in list_blobs(bound)
    assert "stray.bin" not in list_blobs(bound)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("max_delete", "more than --max-delete"),
        ("share", "of the container"),
        ("database", "another database"),
        ("container", "not"),
    ],
)
def test_unsafe_plans_are_refused_whole(
    change: str, message: str, store: DocumentStore, bound: ContainerClient
) -> None:
    """Too many blobs, too large a share, another database or container: nothing deleted."""
    ready_documents(store, bound, 5)
    for name in ("a.bin", "b.bin"):
        bound.upload_blob(name, b"o", tags={STATE_TAG: COMMITTED})
    plan = plan_orphan_deletion(store, bound, reconcile(store, bound, FUTURE))
    limits = {"max_delete": 2, "max_share": 0.5}
    if change == "max_delete":
        limits["max_delete"] = 1
    elif change == "share":
        limits["max_share"] = 0.1
    elif change == "database":
        plan["database_id"] = "another"
    else:
        plan["container"] = "another-container"
    with pytest.raises(RepairRefusedError, match=message):
        apply_plan(store, bound, plan, int(limits["max_delete"]), limits["max_share"])
    assert {"a.bin", "b.bin"} <= set(list_blobs(bound))


def test_cli_plan_round_trip(
    azurite: Azurite,
    store: DocumentStore,
    bound: ContainerClient,
    db_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--write-plan` deletes nothing and exits 1; `--apply-plan --max-delete` then exits 0."""
    ready_documents(store, bound, 20)
    bound.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    time.sleep(1.1)
    plan = tmp_path / "plan.json"
    argv: Callable[..., list[str]] = lambda *extra: [  # noqa: E731
        "reconcile",
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        bound.container_name,
        "--older-than",
        "1s",
        *extra,
    ]
    assert main(argv("--write-plan", str(plan))) == 1
    assert "orphan.bin" in list_blobs(bound)
    assert [e["blob"] for e in json.loads(plan.read_text())["delete"]] == ["orphan.bin"]
    assert main(argv("--apply-plan", str(plan))) == 2  # no --max-delete: refused
    assert main(argv("--apply-plan", str(plan), "--max-delete", "1")) == 0
    assert "orphan.bin" not in list_blobs(bound)
    capsys.readouterr()
    assert main(argv("--json")) == 0
    assert json.loads(capsys.readouterr().out)["orphans"] == []
