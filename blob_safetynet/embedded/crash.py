"""The crash harness: a process that "dies" right after a chosen protocol step, then repair.

`crash_after(step)` is a protocol checkpoint that raises `SimulatedCrash` once `step` is done;
`run_crash_case` runs one such crash beside a bystander document, lets time pass, sweeps,
reconciles, sweeps again and judges the invariants I1-I6 (`blob_safetynet.embedded.invariants`). `Lab` gives
each experiment a fresh container and SQLite table on one Azurite. The demo, the crash-matrix
tests and the interleaving tests share it; it is test support, not product code.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.invariants import (
    DeleteLog,
    InvariantResult,
    InvariantWatch,
    check_invariants,
    unreachable_blobs,
)
from blob_safetynet.protocol.upload import ReservationExpiredError, UploadProtocol, no_checkpoint
from blob_safetynet.reconcile.listing import ListedBlob, list_blobs, reconcile
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport

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
        container = create_unique_container(self.service, "demo")
        tag = container.container_name
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
    measured, invariants = _repair_and_judge(store, container, watched, watch, before)
    return CrashCase(step, measured, invariants, crashed)


def _repair_and_judge(
    store: DocumentStore,
    container: ContainerClient,
    watched: ContainerClient,
    watch: InvariantWatch,
    before: dict[str, ListedBlob],
    early: Mapping[str, str] | None = None,
) -> tuple[str, list[InvariantResult]]:
    """Sweep, reconcile and sweep again under `watch`; then (what changed, I1-I6).

    An instant invariant holds if it held at every moment watched (I6 also against `before`);
    the others are judged after the repair. `early` holds offenders an invariant had at a
    moment before the repair (I5 right after a refused publish), which fail it too.
    """
    left = describe_counts(store, container)
    sweep_later(store, watched)
    watch.check("sweep")
    repaired = reconcile(store, watched, older_than=later() - CUTOFF, repair=True).repaired
    watch.check("reconcile")
    second = sweep_later(store, watched)
    watch.check("second sweep")
    final = {
        r.id: r for r in check_invariants(store, watched, before, later() - CUTOFF, second, [])
    }
    instant = {r.id: r for r in watch.summary()}
    invariants = []
    for invariant in ("I1", "I2", "I3", "I4", "I5", "I6"):
        results = [instant.get(invariant) or final[invariant]]
        if invariant == "I6":
            results.append(final[invariant])
        offenders = (early or {}).get(invariant, "")
        details = [offenders, *(r.detail for r in results)]
        invariants.append(
            InvariantResult(
                invariant,
                not offenders and all(r.holds for r in results),
                "; ".join(d for d in details if d),
            )
        )
    measured = (
        f"{left} -> {describe_counts(store, container)}, reconcile repaired {len(repaired)}, "
        f"checked at {watch.moments} instants"
    )
    return measured, invariants


# The races: no crash, but the reservation vanishes while its upload is on its way, so the
# upload lands and seals after the row is gone. Publish must leave the sealed blob recorded
# (I5 judged right after the failure, before any repair), and the sweeper removes it.
BLOCK = 4096
"""The racing writer's client stages anything larger in blocks of this size."""


class RacingStream(io.BytesIO):
    """A stream that runs `action` before its `at_read`-th read: something another process does
    while the upload reads its bytes (before the first block, or between two)."""

    def __init__(self, data: bytes, action: Callable[[], object], at_read: int = 1) -> None:
        super().__init__(data)
        self._action = action
        self._at_read = at_read
        self._reads = 0

    def read(self, size: int | None = -1) -> bytes:
        self._reads += 1
        if self._reads == self._at_read:
            self._action()
        return super().read(size)


@dataclass(frozen=True)
class Race:
    name: str
    size: int
    at_read: int
    abandon: bool
    """True: another process abandons the reservation; False: a sweep past the cutoff takes it."""


RACES = (
    Race("swept before the first block", 3 * BLOCK, 1, abandon=False),
    Race("abandoned before the first block", 3 * BLOCK, 1, abandon=True),
    Race("swept between staged blocks", 3 * BLOCK, 2, abandon=False),
    Race("abandoned between staged blocks", 3 * BLOCK, 2, abandon=True),
)
"""Staged uploads only: the SDK reads a block before it builds that block's request, while a
single Put Blob reads its body after signing (a race there is the blob proxy's to inject)."""


def run_race_case(
    store: DocumentStore,
    container: ContainerClient,
    race: Race,
    protocol_type: type[UploadProtocol] = UploadProtocol,
) -> CrashCase:
    """A put whose reservation vanishes mid-upload, beside a bystander; then repair and check.

    `crashed` says whether the race happened (the put raised ReservationExpiredError);
    `protocol_type` lets a test run the racing writer as a deliberately broken protocol."""
    deletes = DeleteLog(container.container_name)
    watched = ContainerClient.from_container_url(
        container.url,
        credential=container.credential,
        raw_request_hook=deletes,
        max_single_put_size=BLOCK,
        max_block_size=BLOCK,
    )
    # The other process has a client of its own, as it would.
    other = ContainerClient.from_container_url(
        container.url, credential=container.credential, raw_request_hook=deletes
    )
    UploadProtocol(store, watched).put("bystander.txt", b"untouched", ".txt")
    watch = InvariantWatch(store, watched, deletes)
    before = dict(watch.previous)

    def vanish() -> None:
        (subject,) = [d for d in store.all() if d.name == "subject.bin"]
        if race.abandon:
            UploadProtocol(store, other).abandon(subject.id)
        else:
            sweep_later(store, other)

    data = RacingStream(uuid.uuid4().bytes * (race.size // 16), vanish, race.at_read)
    protocol = protocol_type(store, watched, checkpoint=watch.then(no_checkpoint))
    try:
        protocol.put("subject.bin", data, ".bin", length=race.size)
    except ReservationExpiredError:
        raced = True
    else:
        raced = False
    watch.check(f"{race.name}: publish refused")
    orphans = unreachable_blobs(store, watched)
    early = {"I5": f"after the refused publish: {', '.join(orphans)}"} if orphans else {}
    measured, invariants = _repair_and_judge(store, container, watched, watch, before, early)
    return CrashCase(race.name, measured, invariants, raced)
