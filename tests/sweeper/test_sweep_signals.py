"""SIGINT and SIGTERM stop a real `safetynet sweep` process between chunks, cleanly; a claim a
killed process left behind is reported by the next run, not waited out in silence."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.protocol import blobs
from blob_safetynet.reconcile.listing import plan_orphan_deletion, reconcile
from blob_safetynet.settings.vocabulary import COMMITTED, HEARTBEAT_BLOB, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from testkit.fault_proxy import LatencyProxy
from tests import tree
from tests.conftest import RunCli
from tests.sweeper.conftest import stale_rows_in

pytestmark = pytest.mark.e2e  # real `safetynet` processes, signalled

CHUNK = 1024
"""SweepSettings.chunk_size: rows claimed per chunk."""
ROWS = CHUNK + 76
THREE_CHUNKS = 2 * CHUNK + 76
FIRST_BATCH = "POST comp=batch"


def bound_with_stale_rows(store: DocumentStore, container: ContainerClient, rows: int) -> None:
    stale_rows_in(store, container, rows, with_blobs=False)
    blobs.bind(container, store.database_id())
    store.bind_container(f"{container.account_name}/{container.container_name}")


@pytest.fixture
def two_chunks(store: DocumentStore, container: ContainerClient) -> DocumentStore:
    """Stale rows for one full chunk and part of a second, in a bound pair."""
    bound_with_stale_rows(store, container, ROWS)
    return store


@pytest.fixture
def three_chunks(store: DocumentStore, container: ContainerClient) -> DocumentStore:
    """Stale rows for two full chunks and part of a third, in a bound pair."""
    bound_with_stale_rows(store, container, THREE_CHUNKS)
    return store


def sweep_process(
    db_url: str, proxy: LatencyProxy, container: ContainerClient, *extra: str
) -> subprocess.Popen[str]:
    command = [*tree.MODULE, "sweep", "--db", db_url]
    command += ["--connection-string", proxy.connection_string]
    command += ["--container", container.container_name, "--json", *extra]
    return subprocess.Popen(
        command,
        cwd=tree.TREE,
        env=tree.environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def claimed(store: DocumentStore) -> int:
    with store.engine.begin() as conn:
        return len(
            conn.execute(store.table.select().where(store.table.c.claim_token.is_not(None))).all()
        )


@pytest.mark.parametrize(
    ("sent", "code"),
    [(signal.SIGINT, ExitCode.INTERRUPTED), (signal.SIGTERM, ExitCode.TERMINATED)],
    ids=["SIGINT", "SIGTERM"],
)
def test_a_signal_mid_chunk_stops_the_sweep_between_chunks(
    db_url: str,
    proxy: LatencyProxy,
    container: ContainerClient,
    two_chunks: DocumentStore,
    sent: signal.Signals,
    code: ExitCode,
) -> None:
    """A signal during the first chunk's batch: that chunk is finished, the second (claimed
    ahead at most) is handed back untouched; the JSON report says `stopped`, the heartbeat is written, the lease released, no
    row is left claimed, no traceback, and the exit code is 128 + the signal."""
    process = sweep_process(db_url, proxy, container, "--lease")
    proxy.once(FIRST_BATCH, lambda: process.send_signal(sent))
    out, err = process.communicate(timeout=120)

    assert process.returncode == code, err
    assert "Traceback" not in err
    report = json.loads(out.strip().splitlines()[-1])
    assert report["interrupted"] == sent.name
    assert sent.name in report["stopped"]
    assert (report["examined"], report["deleted_rows"]) == (CHUNK, CHUNK)
    assert (two_chunks.count(), claimed(two_chunks)) == (ROWS - CHUNK, 0)
    heartbeat = json.loads(container.download_blob(HEARTBEAT_BLOB).readall())
    assert (heartbeat["stopped"], heartbeat["examined"]) == (True, CHUNK)
    lease = container.get_blob_client(".safetynet/sweeper.lease").get_blob_properties().lease
    assert lease.state == "available"


def test_the_run_after_a_killed_sweep_reports_the_claims_it_waits_for(
    db_url: str,
    proxy: LatencyProxy,
    container: ContainerClient,
    three_chunks: DocumentStore,
    run_cli: RunCli,
) -> None:
    """A sweep killed mid-chunk leaves its chunk (and the one it claimed ahead, if any)
    claimed: the next run sweeps the rest and says how many claimed rows wait and until when,
    in JSON and in text."""
    process = sweep_process(db_url, proxy, container)
    proxy.once(FIRST_BATCH, process.kill)
    process.communicate(timeout=120)
    assert process.returncode == -signal.SIGKILL
    held = claimed(three_chunks)
    assert held in (CHUNK, 2 * CHUNK)
    target = ["--db", db_url, "--connection-string", proxy.connection_string]
    target += ["--container", container.container_name]

    code, out, _ = run_cli("sweep", *target, "--json")

    report = json.loads(out)
    assert (code, report["deleted_rows"], report["claims_waiting"]) == (
        0,
        THREE_CHUNKS - held,
        held,
    )
    until = datetime.fromisoformat(report["claims_waiting_until"])
    now = datetime.now(UTC)
    assert now < until <= now + timedelta(minutes=10)
    code, out, _ = run_cli("sweep", *target)
    assert f"{held} stale row(s) or record(s) are claimed by another run" in out
    assert until.isoformat() in out


def test_a_signal_stops_an_applied_plan_between_two_blobs(
    db_url: str,
    proxy: LatencyProxy,
    container: ContainerClient,
    store: DocumentStore,
    tmp_path: Path,
) -> None:
    """SIGINT during the plan's first delete: that blob is deleted, the next is not; the JSON
    says `stopped`, no traceback, exit 130."""
    blobs.bind(container, store.database_id())
    for name in ("orphan-1.bin", "orphan-2.bin"):
        container.upload_blob(name, b"o", tags={STATE_TAG: COMMITTED})
    future = datetime.now(UTC) + timedelta(hours=1)
    plan_file = tmp_path / "plan.json"
    plan = plan_orphan_deletion(store, container, reconcile(store, container, future))
    plan_file.write_text(json.dumps(plan), encoding="utf-8")
    command = [*tree.MODULE, "reconcile", "--db", db_url]
    command += ["--connection-string", proxy.connection_string]
    command += ["--container", container.container_name, "--json"]
    command += ["--apply-plan", str(plan_file), "--max-delete", "2", "--max-share", "1"]
    process = subprocess.Popen(
        command,
        cwd=tree.TREE,
        env=tree.environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proxy.once("DELETE", lambda: process.send_signal(signal.SIGINT))
    out, err = process.communicate(timeout=120)

    assert process.returncode == ExitCode.INTERRUPTED, err
    assert "Traceback" not in err
    result = json.loads(out.strip().splitlines()[-1])
    assert (result["stopped"], result["repaired"]) == ("SIGINT", ["orphan-1.bin"])
    assert container.get_blob_client("orphan-2.bin").exists()
