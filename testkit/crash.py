"""The crash harness: a process that "dies" right after a chosen protocol step, then repair.

`crash_after(step)` is a protocol checkpoint that raises `SimulatedCrash` once `step` is done;
`run_crash_case` runs one such crash beside a bystander document, lets time pass, sweeps,
reconciles, sweeps again and judges the invariants I1-I6 (`testkit.invariants`). `Lab` gives
each experiment a fresh container and SQLite table on one Azurite. The demo, the crash-matrix
tests and the interleaving tests share it; it is test support, not product code.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.storage.blob import BlobServiceClient, ContainerClient

from sweeper import binding
from sweeper.protocol import UploadProtocol
from sweeper.reconcile import list_blobs, reconcile
from sweeper.settings import SweepSettings
from sweeper.store import DocumentStore, Status
from sweeper.sweep import Sweeper, SweepReport
from testkit.invariants import DeleteLog, InvariantResult, InvariantWatch, check_invariants

CUTOFF = timedelta(minutes=15)
LATER = timedelta(hours=1)
"""Sweeps in the demo run with a clock this far ahead, so every abandoned upload is stale."""


@dataclass(frozen=True)
class CrashCase:
    step: str
    measured: str
    invariants: list[InvariantResult]
    crashed: bool = True
    """False when the named step never ran, so the case proved nothing about that crash."""

    @property
    def ok(self) -> bool:
        return self.crashed and all(i.holds for i in self.invariants)


class SimulatedCrash(Exception):
    """Raised from a protocol checkpoint: the process 'dies' right after that step."""


class Lab:
    """A fresh container and SQLite table per experiment, on one Azurite."""

    def __init__(self, service: BlobServiceClient, workdir: Path) -> None:
        self.service = service
        self.workdir = workdir

    @contextmanager
    def fresh_workspace(self) -> Iterator[tuple[DocumentStore, ContainerClient]]:
        tag = uuid.uuid4().hex[:10]
        container = self.service.create_container(f"demo{tag}")
        store = DocumentStore.from_url(f"sqlite:///{self.workdir / f'{tag}.db'}")
        store.init_schema()
        try:
            yield store, container
        finally:
            store.engine.dispose()
            container.delete_container()


def later() -> datetime:
    return datetime.now(UTC) + LATER


def sweep_later(store: DocumentStore, container: ContainerClient) -> SweepReport:
    return Sweeper(store, container, SweepSettings(cutoff=CUTOFF), clock=later).run()


def describe_counts(store: DocumentStore, container: ContainerClient) -> str:
    blob_count = len(list_blobs(container))  # the toolkit's own marker blobs are not counted
    return f"rows={store.count()} pending={store.count(Status.PENDING)} blobs={blob_count}"


# The crash matrix: the process dies right after each durable step, then time passes,
# the sweeper and a reconcile pass run, a second sweep must change nothing, and I1-I6 hold.
PUT_STEPS = ("reserve", "upload", "seal", "publish")
REPLACE_STEPS = (
    "replace.intent",
    "replace.upload",
    "replace.seal",
    "replace.switch",
    "replace.retire",
)
DELETE_STEPS = ("delete.row", "delete.retire")
CRASH_STEPS = PUT_STEPS + REPLACE_STEPS + DELETE_STEPS


def crash_after(step: str) -> Callable[[str], None]:
    def checkpoint(reached: str) -> None:
        if reached == step:
            raise SimulatedCrash(step)

    return checkpoint


def run_crash_case(
    store: DocumentStore,
    container: ContainerClient,
    step: str,
    protocol_type: type[UploadProtocol] = UploadProtocol,
    client_type: type[ContainerClient] = ContainerClient,
) -> CrashCase:
    """One crash after `step` with a bystander document, then sweep, reconcile, check.

    I1, I2, I3 and I6 are judged at every instant: after each protocol step, right after the
    crash before any repair, and after each repair. I3 sees every delete sent, through a
    client with a request hook; I6 is also judged once against the state before the operation.
    `protocol_type` and `client_type` let a test run the same matrix over a deliberately
    broken protocol or blob client.
    """
    deletes = DeleteLog(container.container_name)
    watched = client_type.from_container_url(
        container.url, credential=container.credential, raw_request_hook=deletes
    )
    binding.bind(store, watched)  # a deployment bound before its first upload
    UploadProtocol(store, watched).put("bystander.txt", b"untouched", ".txt")
    if step not in PUT_STEPS:
        document = UploadProtocol(store, watched).put("subject.txt", b"v1", ".txt")
    watch = InvariantWatch(store, watched, deletes)
    before = dict(watch.previous)
    protocol = protocol_type(store, watched, checkpoint=watch.then(crash_after(step)))
    try:
        if step in PUT_STEPS:
            protocol.put("subject.txt", b"v1", ".txt")
        elif step in REPLACE_STEPS:
            protocol.replace(document.id, b"v2", ".txt")
        else:
            protocol.delete(document.id)
    except SimulatedCrash:
        crashed = True
    else:
        crashed = False
    watch.check(f"crash after {step}")
    left = describe_counts(store, container)
    sweep_later(store, watched)
    watch.check("sweep")
    repaired = reconcile(store, watched, older_than=later() - CUTOFF, repair=True).repaired
    watch.check("reconcile")
    second = sweep_later(store, watched)
    watch.check("second sweep")
    stale_before = later() - CUTOFF
    final = {r.id: r for r in check_invariants(store, watched, before, stale_before, second, [])}
    instant = {r.id: r for r in watch.summary()}
    overwritten = final["I6"]
    instant["I6"] = InvariantResult(
        "I6",
        instant["I6"].holds and overwritten.holds,
        "; ".join(d for d in (instant["I6"].detail, overwritten.detail) if d),
    )
    invariants = [instant.get(i) or final[i] for i in ("I1", "I2", "I3", "I4", "I5", "I6")]
    measured = (
        f"{left} -> {describe_counts(store, container)}, reconcile repaired {len(repaired)}, "
        f"checked at {watch.moments} instants"
    )
    return CrashCase(step, measured, invariants, crashed)
