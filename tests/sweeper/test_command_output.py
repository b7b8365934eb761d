"""What `reconcile` and `sweep` tell a person: plans on small containers, honest refusals, one
next step, progress records that add up to the summary, a progress line ended before it."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import (
    SHARE_FLOOR,
    RepairRefusedError,
    apply_plan,
    list_blobs,
    plan_orphan_deletion,
    reconcile,
)
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from tests.conftest import RunCli
from tests.sweeper.conftest import stale_rows_in
from tests.sweeper.conftest import target_options as target

LATER = datetime.now(UTC) + timedelta(hours=1)


@pytest.fixture
def bound(store: DocumentStore, container: ContainerClient) -> ContainerClient:
    blobs.bind(container, store.database_id())
    return container


def small_container(store: DocumentStore, container: ContainerClient, orphans: int) -> None:
    """Three live documents and `orphans` committed blobs no row references."""
    protocol = UploadProtocol(store, container)
    for i in range(3):
        protocol.put(f"live-{i}.txt", b"live", ".txt")
    for i in range(orphans):
        container.upload_blob(f"orphan-{i}.bin", b"o", tags={STATE_TAG: COMMITTED})


@dataclass(frozen=True)
class WrittenPlan:
    options: list[str]
    path: Path
    code: int
    out: str


@pytest.fixture
def written_plan(
    store: DocumentStore,
    bound: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    tmp_path: Path,
) -> WrittenPlan:
    """`reconcile --write-plan` run over three live documents and two committed orphans."""
    small_container(store, bound, 2)
    time.sleep(1.1)
    path = tmp_path / "plan.json"
    options = [*target(db_url, azurite, bound), "--older-than", "1s"]
    code, out, _ = run_cli("reconcile", *options, "--write-plan", str(path))
    return WrittenPlan(options, path, code, out)


def test_the_default_share_lets_a_small_container_be_cleaned(
    written_plan: WrittenPlan, bound: ContainerClient, run_cli: RunCli
) -> None:
    """Two orphans of five blobs (40 %) are deleted by a reviewed plan under the default share."""
    assert written_plan.code == 1
    apply = ("--apply-plan", str(written_plan.path), "--max-delete", "2")
    code, _, err = run_cli("reconcile", *written_plan.options, *apply)
    assert code == 0, err
    assert not any(name.startswith("orphan-") for name in list_blobs(bound))


def test_a_refused_share_says_what_to_check_not_whom_to_blame(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """Over an explicit --max-share: nothing deleted, what to check, the share that would do."""
    small_container(store, bound, 2)
    plan = plan_orphan_deletion(store, bound, reconcile(store, bound, LATER))
    with pytest.raises(RepairRefusedError) as refused:
        apply_plan(store, bound, plan, max_delete=2, max_share=0.1)
    message = str(refused.value)
    assert "deletes 2 of the container's 5 blobs (40%), more than --max-share 0.1" in message
    assert "nothing deleted" in message
    assert "check them" in message
    assert "pass --max-share 0.40" in message
    assert "probably the wrong one" not in message


def test_the_default_share_refuses_past_its_floor(
    store: DocumentStore, bound: ContainerClient
) -> None:
    """More orphans than the floor, and more than 5 %, are refused by default."""
    small_container(store, bound, SHARE_FLOOR + 1)
    plan = plan_orphan_deletion(store, bound, reconcile(store, bound, LATER))
    with pytest.raises(RepairRefusedError, match=r"the default share 5% \(or 20 blobs\)"):
        apply_plan(store, bound, plan, max_delete=100)
    assert sum(name.startswith("orphan-") for name in list_blobs(bound)) == SHARE_FLOOR + 1


def test_write_plan_names_the_next_step_once(written_plan: WrittenPlan) -> None:
    """After --write-plan the output says how to apply that plan, not to use --write-plan."""
    assert "--write-plan" not in written_plan.out
    assert f"reconcile --apply-plan {written_plan.path} --max-delete 2" in written_plan.out


def progress_records(err: str) -> list[dict[str, object]]:
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [r["sweep"] for r in records if isinstance(r.get("sweep"), dict)]  # type: ignore[misc]


def retired_record(store: DocumentStore, container: ContainerClient) -> None:
    """A deleted document whose retired blob is past its grace."""
    document = UploadProtocol(store, container).put("gone.txt", b"gone", ".txt")
    UploadProtocol(store, container).delete(document.id)
    with store.engine.begin() as conn:
        conn.execute(
            store.blobs.update().values(recorded_utc=datetime.now(UTC) - timedelta(hours=2))
        )


def test_the_last_progress_record_is_the_summary(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
) -> None:
    """Progress records carry the run's totals so far; the last one equals the final summary,
    retired blobs included."""
    stale_rows_in(store, container, 3)
    retired_record(store, container)
    code, out, err = run_cli("sweep", "--json", *target(db_url, azurite, container))
    assert code == 0, err
    summary = json.loads(out)
    records = progress_records(err)
    assert records
    last = records[-1]
    for key in ("examined", "deleted_blobs", "deleted_rows", "retired_deleted", "error_count"):
        assert last[key] == summary[key], key
    assert summary["retired_deleted"] == 1
    assert all(r["totals_so_far"] is True for r in records)


def test_the_progress_line_is_ended_before_the_summary(
    store: DocumentStore,
    container: ContainerClient,
    db_url: str,
    azurite: Azurite,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On a terminal the carriage-return progress line is closed by a newline once the run ends."""
    stale_rows_in(store, container, 2)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    code, out, err = run_cli("sweep", *target(db_url, azurite, container))
    assert code == 0, err
    assert "\rexamined 2" in err
    assert err.endswith("\n")
    assert out.startswith("examined 2 stale rows")
