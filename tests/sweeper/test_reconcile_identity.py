"""Issue 45, a warning before harm: after a database restore, the committed blobs of documents
whose rows were lost name their documents in their metadata, and reconcile keeps them out of
any deletion plan (listing and inventory paths alike) and points to the roll-forward; blobs
without that metadata ("identity unknown") are judged as before. Azurite, SQLite, PostgreSQL."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.inventory import reconcile_from_inventory
from blob_safetynet.reconcile.listing import (
    ROLL_FORWARD,
    apply_plan,
    list_blobs,
    plan_orphan_deletion,
    reconcile,
)
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document
from testkit.inventory import write_run
from tests.conftest import RunCli

FUTURE = datetime.now(UTC) + timedelta(hours=1)
LEGACY = "legacy-without-identity.bin"


def restored_after_a_put(
    store: DocumentStore, container: ContainerClient, db_url: str, tmp_path: Path
) -> Document:
    """A bound container where one document was put after the database's restore point: its
    committed blob (with its identity) is there, its row is not. SQLite restores a file copy
    taken before the put; PostgreSQL loses the row as a restore would. Beside it, a committed
    blob written without identity metadata."""
    protocol = UploadProtocol(store, container)
    protocol.put("kept.txt", b"before the restore point", ".txt")
    blobs.bind(container, store.database_id())
    container.upload_blob(LEGACY, b"old", tags={STATE_TAG: COMMITTED})
    if db_url.startswith("sqlite"):
        database = Path(db_url.removeprefix("sqlite:///"))
        store.engine.dispose()
        shutil.copy(database, tmp_path / "snapshot.db")
        lost = protocol.put("acknowledged after T.txt", b"after the restore point", ".txt")
        store.engine.dispose()
        shutil.copy(tmp_path / "snapshot.db", database)
    else:
        lost = protocol.put("acknowledged after T.txt", b"after the restore point", ".txt")
        with store.engine.begin() as conn:
            conn.execute(store.table.delete().where(store.table.c.id == lost.id))
    assert store.get(lost.id) is None
    return lost


def test_a_committed_blob_that_names_a_document_without_a_row_is_never_planned(
    store: DocumentStore, container: ContainerClient, db_url: str, tmp_path: Path
) -> None:
    """The lost document's blob is reported apart with its document, left out of the plan, and
    applying the plan deletes only the blob of unknown identity."""
    lost = restored_after_a_put(store, container, db_url, tmp_path)

    result = reconcile(store, container, FUTURE)

    assert [(b.name, b.document_id) for b in result.identified] == [(lost.blob_name, lost.id)]
    assert [b.name for b in result.orphans] == [LEGACY]
    assert result.unresolved
    plan = plan_orphan_deletion(store, container, result)
    assert [entry["blob"] for entry in plan["delete"]] == [LEGACY]
    applied = apply_plan(store, container, plan, max_delete=5)
    assert (applied.repaired, applied.errors) == ([LEGACY], [])
    assert set(list_blobs(container)) == {lost.blob_name, store.all()[0].blob_name}


def test_a_plan_that_did_not_name_the_blob_as_a_document_s_leaves_it(
    store: DocumentStore, container: ContainerClient, db_url: str, tmp_path: Path
) -> None:
    """A plan listing the blob without its identity (one written before this check, or by
    hand) deletes nothing of it: the entry is refused with the advice to roll forward."""
    lost = restored_after_a_put(store, container, db_url, tmp_path)
    listed = list_blobs(container)[lost.blob_name]
    plan = {
        "version": 1,
        "container": container.container_name,
        "database_id": store.database_id(),
        "delete": [{"blob": lost.blob_name, "etag": listed.etag}],
    }

    applied = apply_plan(store, container, plan, max_delete=5)

    assert applied.repaired == []
    (error,) = applied.errors
    assert f"names document {lost.id}" in error
    assert ROLL_FORWARD in error
    assert lost.blob_name in list_blobs(container)


def cli_target(azurite: Azurite, db_url: str, container: ContainerClient) -> list[str]:
    return [
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
        "--older-than",
        "1s",
    ]


def test_the_cli_says_to_roll_forward_and_plans_the_blob_only_when_told(
    run_cli: RunCli,
    azurite: Azurite,
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    tmp_path: Path,
) -> None:
    """`--write-plan` keeps the blob out and says to run the roll-forward first (exit 1);
    `--include-identified` plans it with its identity, and that plan deletes it."""
    lost = restored_after_a_put(store, container, db_url, tmp_path)
    target = cli_target(azurite, db_url, container)
    plan_path = tmp_path / "plan.json"
    time.sleep(1.1)  # --older-than takes whole seconds; the blobs must be older than 1 s

    code, out, _ = run_cli("reconcile", *target, "--write-plan", str(plan_path))
    assert code == ExitCode.FINDINGS
    assert f"committed blob {lost.blob_name}: no row names it" in out
    assert f"run `{ROLL_FORWARD}` first" in out
    assert "kept out of any plan" in out
    assert [e["blob"] for e in json.loads(plan_path.read_text())["delete"]] == [LEGACY]

    code, out, _ = run_cli("reconcile", *target, "--json")
    (reported,) = json.loads(out)["identified"]
    assert reported == {
        "blob": lost.blob_name,
        "document": lost.id,
        "name": "acknowledged after T.txt",
        "identity_problem": None,
    }

    code, out, _ = run_cli(
        "reconcile", *target, "--write-plan", str(plan_path), "--include-identified"
    )
    entries = {e["blob"]: e for e in json.loads(plan_path.read_text())["delete"]}
    assert entries[lost.blob_name]["identity"]["document"] == lost.id
    assert "(planned: --include-identified)" in out
    code, _, _ = run_cli("reconcile", *target, "--apply-plan", str(plan_path), "--max-delete", "2")
    assert code == ExitCode.OK
    assert lost.blob_name not in list_blobs(container)


def test_include_identified_without_a_plan_is_a_usage_error(
    run_cli: RunCli, azurite: Azurite, store: DocumentStore, container: ContainerClient, db_url: str
) -> None:
    """The flag only widens a plan: alone it is refused with exit 2, nothing read."""
    code, _, err = run_cli(
        "reconcile", *cli_target(azurite, db_url, container), "--include-identified"
    )
    assert code == ExitCode.USAGE
    assert "--include-identified plans deletions: it needs --write-plan" in err


@pytest.fixture
def destination(container_factory: Callable[[], ContainerClient]) -> ContainerClient:
    return container_factory()


def test_the_inventory_path_keeps_the_blob_apart_too(
    store: DocumentStore,
    container: ContainerClient,
    destination: ContainerClient,
    db_url: str,
    tmp_path: Path,
) -> None:
    """The report does not carry metadata; the suspect is read live and judged the same way."""
    lost = restored_after_a_put(store, container, db_url, tmp_path)
    write_run(container, destination)

    result = reconcile_from_inventory(
        store, container, destination, "safetynet", FUTURE, timedelta(days=1)
    )

    assert [b.document_id for b in result.identified] == [lost.id]
    assert [b.name for b in result.orphans] == [LEGACY]
    assert [e["blob"] for e in plan_orphan_deletion(store, container, result)["delete"]] == [LEGACY]
