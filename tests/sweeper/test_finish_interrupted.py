"""Issue 29 on Azurite with SQLite and PostgreSQL: an interrupted run can always be finished. A
`reconcile --apply-plan` stopped by SIGINT or SIGTERM at a random instant is finished by the same
command; a delete whose database answer was lost (testkit/pg_proxy.py) is retried to success."""

from __future__ import annotations

import json
import random
import re
import signal
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import OperationFailedError, ProtocolError, UploadProtocol
from blob_safetynet.reconcile.listing import RepairRefusedError, plan_orphan_deletion, reconcile
from blob_safetynet.reconcile.listing import _check_share as check_share
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore, new_document_id
from testkit.fault_proxy import LatencyProxy
from testkit.pg_proxy import postgres_proxy
from tests import tree
from tests.conftest import RunCli

ORPHANS = 40
DOCUMENTS = 10
SHARE = ORPHANS / (ORPHANS + DOCUMENTS)
"""The plan's share of the container when it is written: the most `--max-share` allows."""


def apply_plan_command(
    db_url: str, connection_string: str, container: ContainerClient, plan: Path
) -> list[str]:
    return [
        "reconcile",
        "--db",
        db_url,
        "--connection-string",
        connection_string,
        "--container",
        container.container_name,
        "--apply-plan",
        str(plan),
        "--max-delete",
        str(ORPHANS),
        "--max-share",
        f"{SHARE:g}",
    ]


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_plan_is_finished_by_the_same_command(
    db_url: str,
    store: DocumentStore,
    container: ContainerClient,
    protocol: UploadProtocol,
    proxy: LatencyProxy,
    run_cli: RunCli,
    tmp_path: Path,
    sent: signal.Signals,
) -> None:
    """Stopped after a random number of deletes, the plan's own message names the command, and
    that command run again deletes the rest and exits 0; no document is touched."""
    rng = random.Random(f"finish-{sent.name}-{db_url[:6]}")
    blobs.bind(container, store.database_id())
    documents = [protocol.put(f"kept-{n}", f"bytes {n}".encode()) for n in range(DOCUMENTS)]
    for round_number in range(2):
        orphans = [f"orphan-{round_number}-{n}.bin" for n in range(ORPHANS)]
        for name in orphans:
            container.upload_blob(name, b"o", tags={STATE_TAG: COMMITTED})
        plan_file = tmp_path / f"plan-{round_number}.json"
        future = datetime.now(UTC) + timedelta(hours=1)
        plan = plan_orphan_deletion(store, container, reconcile(store, container, future))
        assert len(plan["delete"]) == ORPHANS
        plan_file.write_text(json.dumps(plan), encoding="utf-8")
        command = apply_plan_command(db_url, proxy.connection_string, container, plan_file)
        process = subprocess.Popen(
            [*tree.MODULE, *command],
            cwd=tree.TREE,
            env=tree.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deletes = proxy.counts()["DELETE"] + rng.randint(1, ORPHANS - 10)
        deadline = time.monotonic() + 120
        while proxy.counts()["DELETE"] < deletes and time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()
            time.sleep(rng.uniform(0, 0.02))
        process.send_signal(sent)
        _, err = process.communicate(timeout=120)
        expected = ExitCode.INTERRUPTED if sent is signal.SIGINT else ExitCode.TERMINATED
        assert process.returncode == expected, err
        assert "Traceback" not in err
        again = f"--apply-plan {plan_file} --max-delete {ORPHANS} --max-share {SHARE:g}"
        assert "run the same command again" in err
        assert again in err
        left = [name for name in orphans if container.get_blob_client(name).exists()]
        assert 0 < len(left) < ORPHANS

        code, out, err = run_cli(
            *apply_plan_command(db_url, proxy.connection_string, container, plan_file)
        )

        assert code == ExitCode.OK, out + err
        assert not any(container.get_blob_client(name).exists() for name in orphans)
        assert [protocol.read(d.name) for d in documents] == [
            f"bytes {n}".encode() for n in range(DOCUMENTS)
        ]


@pytest.mark.postgres
def test_a_delete_retried_after_its_lost_commit_answer_returns_as_done(
    postgres_url: str, container: ContainerClient
) -> None:
    """A delete whose COMMIT answer was lost, retried, returns as done and leaves its blob
    tagged retired; a delete of an id that never existed still raises ProtocolError."""
    parsed = sa.make_url(postgres_url)
    with postgres_proxy((parsed.host or "127.0.0.1", parsed.port or 5432)) as database:
        store = DocumentStore.from_url(database.url_through(postgres_url))
        store.init_schema()
        protocol = UploadProtocol(store, container)
        document = protocol.put("gone.txt", b"bye", ".txt")
        database.lose_next_commit_answer()
        with pytest.raises(OperationFailedError):
            protocol.delete(document.id)

        protocol.delete(document.id)

        assert store.get(document.id) is None
        assert blobs.state_of(container.get_blob_client(document.blob_name)) == RETIRED
        assert store.retired_blobs_of(document.id) == [document.blob_name]
        with pytest.raises(ProtocolError, match="is not a Ready document"):
            protocol.delete(new_document_id())
        store.engine.dispose()


@pytest.mark.parametrize(("deleting", "total"), [(287, 500), (1, 3), (2, 3), (400, 401)])
def test_the_share_a_refusal_suggests_lets_the_plan_through(deleting: int, total: int) -> None:
    """The `--max-share` a refused plan is told to pass is rounded up, so passing it works."""
    with pytest.raises(RepairRefusedError) as refused:
        check_share(deleting, total, 0.01)
    suggested = re.search(r"pass --max-share ([0-9.]+)$", str(refused.value))
    assert suggested is not None

    check_share(deleting, total, float(suggested.group(1)))
