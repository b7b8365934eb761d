"""`safetynet demo`: the scenarios behind the protocol replayed for real, the crash matrix, then
the recovery story (`blob_safetynet.cli.demo_recovery`).

Each scenario states its expected outcome beside the measured one. Expectations come from the
Blob REST documentation and the SDK's source, never from this run. The call-shape scenarios are
S1-S9, so their ids cannot be read as the invariants I1-I6 printed below them; the recovery
steps are R1-R9.
"""

from __future__ import annotations

import io
import tempfile
import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from azure.core import MatchConditions
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient, BlobServiceClient, ContainerClient

from blob_safetynet.cli.demo_recovery import HEADING, recovery_story
from blob_safetynet.embedded.crash import (
    CRASH_STEPS,
    CrashCase,
    Lab,
    describe_counts,
    run_crash_case,
    sweep_later,
)
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.pooling import pooled_blob
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG, tag_condition
from blob_safetynet.store.documents import DocumentStore, NameConflictError
from blob_safetynet.store.tables import Document, Status


@dataclass(frozen=True)
class Scenario:
    id: str
    title: str
    expected: str
    measured: str

    @property
    def ok(self) -> bool:
        return self.expected == self.measured


@dataclass
class DemoReport:
    scenarios: list[Scenario] = field(default_factory=list)
    crashes: list[CrashCase] = field(default_factory=list)
    recovery: list[Scenario] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            all(s.ok for s in self.scenarios)
            and all(c.ok for c in self.crashes)
            and all(s.ok for s in self.recovery)
        )


def _orphans(store: DocumentStore, container: ContainerClient) -> int:
    referenced = {d.blob_name for d in store.all()}
    return sum(1 for b in container.list_blobs() if b.name not in referenced)


def _staging_client(container: ContainerClient, name: str, block_size: int) -> BlobClient:
    """A client that stages anything larger than `block_size` as blocks (Put Block List)."""
    return BlobClient.from_blob_url(
        f"{container.url}/{name}",
        credential=container.credential,
        max_single_put_size=block_size,
        max_block_size=block_size,
    )


def scenario_a(lab: Lab) -> Scenario:
    with lab.fresh_workspace() as (store, container):
        UploadProtocol(store, container).put("report.pdf", b"v1", ".pdf")
        blob_name = f"{uuid.uuid4().hex}.pdf"
        container.upload_blob(blob_name, b"naive bytes")
        try:
            store.reserve(
                Document(
                    str(uuid.uuid4()), "report.pdf", blob_name, Status.READY, datetime.now(UTC)
                )
            )
            failure = "insert succeeded"
        except NameConflictError:
            failure = "insert failed"
        measured = f"{failure}, orphaned={_orphans(store, container)}"
    return Scenario(
        "A", "naive upload, then insert hits the unique name", "insert failed, orphaned=1", measured
    )


def scenario_e(lab: Lab) -> Scenario:
    with lab.fresh_workspace() as (store, container), store.engine.connect() as conn:
        transaction = conn.begin()
        blob_name = f"{uuid.uuid4().hex}.txt"
        conn.execute(
            store.table.insert().values(
                id=str(uuid.uuid4()),
                name="tx",
                blob_name=blob_name,
                status=Status.READY.value,
                created=datetime.now(UTC),
            )
        )
        container.upload_blob(blob_name, b"bytes")
        transaction.rollback()
        measured = describe_counts(store, container)
    return Scenario(
        "E", "DB rollback does not undo the upload", "rows=0 pending=0 blobs=1", measured
    )


def scenario_c(lab: Lab) -> Scenario:
    with lab.fresh_workspace() as (store, container):
        protocol = UploadProtocol(store, container)
        protocol.put("kept.txt", b"kept", ".txt")
        crashed = protocol.reserve("crashed.txt", ".txt")
        protocol.upload(crashed, b"never published")
        before = describe_counts(store, container)
        report = sweep_later(store, container)
        measured = f"{before} -> {describe_counts(store, container)} swept={report.deleted_rows}"
    expected = "rows=2 pending=1 blobs=2 -> rows=1 pending=0 blobs=1 swept=1"
    return Scenario("C", "crash before publish, then a sweep", expected, measured)


RACERS = 16
"""Threads racing in scenario G, each with a connection of the shared client's pool."""


def scenario_g(lab: Lab, writers: int = 50) -> Scenario:
    with lab.fresh_workspace() as (_, container):
        blob = pooled_blob(container.get_blob_client("contended.bin"), RACERS)

        def attempt(i: int) -> str:
            try:
                return (
                    "won" if blobs.upload_create_only(blob, f"writer {i}".encode()) else "conflict"
                )
            except HttpResponseError as error:
                return f"HTTP {error.status_code}"

        with ThreadPoolExecutor(RACERS) as pool:
            results = list(pool.map(attempt, range(writers)))
        measured = (
            f"won={results.count('won')} conflict={results.count('conflict')} "
            f"blobs={sum(1 for _ in container.list_blobs())}"
        )
    expected = f"won=1 conflict={writers - 1} blobs=1"
    return Scenario(
        "G", f"{writers} concurrent create-only uploads of one name", expected, measured
    )


_FUTURE = datetime(2100, 1, 1, tzinfo=UTC)
CALL_SHAPES: list[tuple[str, dict[str, Any], str]] = [
    ("upload_blob(data)", {}, "refused 409"),
    ("upload_blob(data, overwrite=False)", {"overwrite": False}, "refused 409"),
    ("upload_blob(data, overwrite=True)", {"overwrite": True}, "overwrote"),
    (
        "upload_blob(data, if_unmodified_since=<future>)",
        {"if_unmodified_since": _FUTURE},
        "overwrote",
    ),
    (
        "upload_blob(data, if_tags_match_condition=...)",
        {"if_tags_match_condition": tag_condition(COMMITTED)},
        "refused 409",
    ),
    (
        "upload_blob(data, etag=<current>, match_condition=IfNotModified)",
        {"match_condition": MatchConditions.IfNotModified},
        "overwrote",
    ),
    (
        "upload_blob(data, match_condition=IfMissing)",
        {"match_condition": MatchConditions.IfMissing},
        "refused 409",
    ),
    (
        "upload_blob(data, etag='*', match_condition=IfMissing)",
        {"etag": "*", "match_condition": MatchConditions.IfMissing},
        "client error TypeError",
    ),
    ("upload_blob(stream, max_single_put_size=1 KiB) staged", {"staged": True}, "refused 409"),
]


def scenario_i(lab: Lab) -> list[Scenario]:
    """Which Python call shapes keep create-only semantics: each tried on an existing blob."""
    scenarios = []
    with lab.fresh_workspace() as (_, container):
        for index, (shape, kwargs, expected) in enumerate(CALL_SHAPES, start=1):
            blob = container.get_blob_client(f"shape-{index}")
            blob.upload_blob(b"original", tags={STATE_TAG: COMMITTED})
            options = dict(kwargs)
            data: Any = b"replacement"
            if options.pop("staged", False):
                blob = _staging_client(container, blob.blob_name, 1024)
                data = io.BytesIO(b"x" * 4096)
            if options.get("match_condition") is MatchConditions.IfNotModified:
                options["etag"] = blob.get_blob_properties().etag
            try:
                blob.upload_blob(data, **options)
            except HttpResponseError as error:
                measured = f"refused {error.status_code}"
            except TypeError:
                measured = "client error TypeError"
            else:
                content = blob.download_blob().readall()
                measured = "overwrote" if content != b"original" else "unchanged"
            scenarios.append(Scenario(f"S{index}", shape, expected, measured))
    return scenarios


def scenario_j(lab: Lab) -> Scenario:
    with lab.fresh_workspace() as (_, container):
        container.upload_blob("still-pending", b"p", tags={STATE_TAG: PENDING})
        container.upload_blob("committed", b"c", tags={STATE_TAG: COMMITTED})
        outcomes = []
        for name in ("still-pending", "committed"):
            try:
                blobs.delete_guarded(container.get_blob_client(name), PENDING)
                outcomes.append(f"{name}: deleted")
            except HttpResponseError as error:
                outcomes.append(f"{name}: {error.status_code}")
        remaining = ",".join(b.name for b in container.list_blobs())
        measured = f"{'; '.join(outcomes)}; remaining={remaining}"
    expected = "still-pending: deleted; committed: 412; remaining=committed"
    return Scenario("J", "tag-guarded delete refuses a committed blob", expected, measured)


def scenario_k(lab: Lab) -> Scenario:
    mib = 1024 * 1024
    with lab.fresh_workspace() as (_, container):
        blob = _staging_client(container, "large.bin", 4 * mib)
        payload = b"\0" * (12 * mib)
        first = blobs.upload_create_only(blob, io.BytesIO(payload), len(payload))
        second = blobs.upload_create_only(blob, io.BytesIO(payload), len(payload))
        _, uncommitted = blob.get_block_list("uncommitted")
        measured = f"first={'created' if first else 'exists'} second={'created' if second else 'exists'} uncommitted_blocks={len(uncommitted)}"
    expected = "first=created second=exists uncommitted_blocks=3"
    return Scenario("K", "a losing staged 12 MiB upload leaves blocks", expected, measured)


def run_demo(service: BlobServiceClient) -> DemoReport:
    report = DemoReport()
    with tempfile.TemporaryDirectory(prefix="safetynet-demo-") as workdir:
        lab = Lab(service, Path(workdir))
        report.scenarios += [scenario_a(lab), scenario_e(lab), scenario_c(lab), scenario_g(lab)]
        report.scenarios += scenario_i(lab)
        report.scenarios += [scenario_j(lab), scenario_k(lab)]
        for step in CRASH_STEPS:
            with lab.fresh_workspace() as (store, container):
                report.crashes.append(run_crash_case(store, container, step))
        port = urlsplit(service.url).port
        assert port is not None, "the demo runs on the embedded Azurite"
        report.recovery = [Scenario(*step) for step in recovery_story(port, service, Path(workdir))]
    return report


def render(report: DemoReport) -> str:
    lines = [
        "Scenarios (expected from the Blob REST docs and the SDK source, measured now)",
        "",
    ]
    rows = [("id", "scenario", "expected", "measured", "")]
    rows += [
        (s.id, s.title, s.expected, s.measured, "ok" if s.ok else "MISMATCH")
        for s in report.scenarios
    ]
    lines += _table(rows)
    lines += [
        "",
        "Crash matrix: crash after each step, sweep, reconcile, second sweep, invariants",
        "",
    ]
    crash_rows = [("crash after", "left -> after repair", "I1 I2 I3 I4 I5 I6", "")]
    for case in report.crashes:
        marks = " ".join("ok" if i.holds else "NO" for i in case.invariants)
        verdict = "ok" if case.ok else "VIOLATED" if case.crashed else "NEVER CRASHED"
        crash_rows.append((case.step, case.measured, marks, verdict))
    lines += _table(crash_rows)
    for case in report.crashes:
        for invariant in case.invariants:
            if not invariant.holds:
                lines.append(
                    f"  {case.step}: {invariant.id} ({invariant.description}) broken by {invariant.detail}"
                )
    lines += ["", *HEADING, ""]
    recovery_rows = [("id", "step", "expected", "measured", "")]
    recovery_rows += [
        (s.id, s.title, s.expected, s.measured, "ok" if s.ok else "MISMATCH")
        for s in report.recovery
    ]
    lines += _table(recovery_rows)
    lines += [
        "",
        "all scenarios match, every invariant holds and every document came back"
        if report.ok
        else "FAILED",
    ]
    return "\n".join(lines)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = [
        " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    out.insert(1, "-+-".join("-" * w for w in widths))
    return out
