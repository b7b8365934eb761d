"""`safetynet demo --scenario restore`: the database restored to an earlier time, then rolled
forward from the container, on the local stack (Azurite + a SQLite file).

Documents are put, the SQLite file is copied (the restore point T, with SQLite's online backup,
https://www.sqlite.org/backup.html), one document is put, one replaced and one deleted, and the
copy is put back: what a point-in-time restore leaves. Each row states the expected outcome
beside the measured one; the expectations follow from the protocol (docs/operations.md, "The
database was restored to an earlier time"), never from this run.
"""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.demo import DemoReport, Scenario
from blob_safetynet.embedded.crash import Lab
from blob_safetynet.protocol import blobs, identity
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import plan_orphan_deletion, reconcile
from blob_safetynet.recover.rollforward import View, judge
from blob_safetynet.recover.rollforward_apply import roll_forward
from blob_safetynet.recover.rollforward_bytes import verified
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Content

BEFORE = {"contract.pdf": b"signed in March", "invoice.pdf": b"invoice 1", "memo.txt": b"memo"}


def _copy(source: str, target: str) -> None:
    with sqlite3.connect(source) as reading, sqlite3.connect(target) as writing:
        reading.backup(writing)


def _forge(container: ContainerClient) -> str:
    """A committed blob whose metadata names a document and a SHA-256 its bytes do not have."""
    data = b"bytes someone put here"
    claimed = Content(len(data), hashlib.sha256(b"not these bytes, same len").hexdigest())
    metadata = identity.encode("forged", "forged.txt", datetime.now(UTC), content=claimed)
    name = "0" * 32 + ".txt"
    container.upload_blob(name, data, metadata=metadata, tags={STATE_TAG: COMMITTED})
    return name


def restore_story(store: DocumentStore, container: ContainerClient, workdir: str) -> list[Scenario]:
    database = str(store.engine.url.database)
    blobs.bind(container, store.database_id())
    store.bind_container(f"{container.account_name}/{container.container_name}")
    protocol = UploadProtocol(store, container)
    documents = {name: protocol.put(name, data, ".bin") for name, data in BEFORE.items()}
    _copy(database, f"{workdir}/restore-point.db")
    protocol.put("after T.txt", b"acknowledged after T", ".txt")
    protocol.replace(documents["invoice.pdf"].id, b"invoice 2", ".pdf")
    protocol.delete(documents["memo.txt"].id)
    store.engine.dispose()
    shutil.copyfile(f"{workdir}/restore-point.db", database)
    forged = _forge(container)
    later = datetime.now(UTC) + timedelta(hours=1)

    found = reconcile(store, container, later)
    planned = plan_orphan_deletion(store, container, found)["delete"]
    rows = [
        Scenario(
            "T1",
            "after the restore: the new, the replacement and the forged blob kept out of deletion",
            "identified=3 planned=0",
            f"identified={len(found.identified)} planned={len(planned)}",
        )
    ]
    plan = verified(judge(View.read(store, container)), container)
    steps = Counter(step.action for step in plan.steps)
    rows.append(
        Scenario(
            "T2",
            "the dry run: rebuild, move, keep the deleted one; forged metadata left",
            "rebuild=1 move=1 reseal=1 left=1",
            f"rebuild={steps['rebuild']} move={steps['move']} reseal={steps['reseal']} "
            f"left={len(plan.findings)}",
        )
    )
    result = roll_forward(store, container)
    rows.append(
        Scenario(
            "T3",
            "applied: what is left for a person",
            "metadata does not match the bytes",
            ", ".join(f.kind for f in result.after.findings if f.blob == forged),
        )
    )
    expected = {**BEFORE, "invoice.pdf": b"invoice 2", "after T.txt": b"acknowledged after T"}
    reads = sum(1 for name, data in expected.items() if protocol.read(name) == data)
    rows.append(
        Scenario(
            "T4",
            "every acknowledged document reads its newest bytes (the deleted one kept)",
            f"{len(expected)}/{len(expected)}",
            f"{reads}/{len(expected)}",
        )
    )
    # A person removes the forged blob, no document's: tagged retired, deleted under that tag.
    client = container.get_blob_client(forged)
    client.set_blob_tags({STATE_TAG: RETIRED})
    blobs.delete_guarded(client, RETIRED)
    after = reconcile(store, container, later)
    rows.append(
        Scenario(
            "T5",
            "reconcile after the roll-forward (the forged blob removed by hand)",
            "clean",
            "clean" if after.clean else f"not clean: {after}",
        )
    )
    return rows


def run_restore_demo(service: BlobServiceClient) -> DemoReport:
    report = DemoReport()
    with tempfile.TemporaryDirectory(prefix="safetynet-demo-") as workdir:
        lab = Lab(service, Path(workdir))
        with lab.fresh_workspace() as (store, container):
            report.scenarios += restore_story(store, container, workdir)
    return report


def render_restore(report: DemoReport) -> str:
    rows = [("id", "the database restored to an earlier time", "expected", "measured", "")]
    rows += [
        (s.id, s.title, s.expected, s.measured, "ok" if s.ok else "MISMATCH")
        for s in report.scenarios
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    verdict = "the table and the container agree; nothing acknowledged was lost"
    return "\n".join([*lines, "", verdict if report.ok else "FAILED"])
