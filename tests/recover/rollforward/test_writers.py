"""The roll-forward beside the application back online after the restore: writers put, replace
and delete (restored documents and rebuilt ones among them) and the sweeper deletes retired
blobs at once, while the roll-forward runs; a last run once they stop. Every document ends as
the writers and the history before the restore were told, nothing they deleted comes back, no
committed blob is lost, and the table and the container agree."""

from __future__ import annotations

import random
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import ProtocolError, UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs, reconcile
from blob_safetynet.recover.rollforward_apply import roll_forward
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.restore_point import RestorePoint
from tests.recover.rollforward.history import History, run_history

OPERATIONS = 16
WRITES = 30


def expected_by_id(history: History, restored: set[str]) -> dict[str, bytes]:
    """id -> bytes after a roll-forward that keeps deleted documents (the default), before the
    writers: `history.expected` by document instead of by name."""
    readable = {doc: data for doc, (_, data) in history.live.items()}
    names = {name for name, _ in history.live.values()}
    for doc, (name, data) in history.last.items():
        if doc in restored and doc not in history.live and name not in names:
            readable[doc] = data
    return readable


class Writers:
    """The application: puts, replaces and deletes of Ready documents, told outcomes kept."""

    def __init__(self, store: DocumentStore, container: ContainerClient, seed: int) -> None:
        self.protocol = UploadProtocol(store, container)
        self.store = store
        self.rng = random.Random(seed)
        self.put: dict[str, bytes] = {}
        self.replaced: dict[str, bytes] = {}
        self.deleted: set[str] = set()
        self.errors: list[BaseException] = []

    def run(self, stop: threading.Event) -> None:
        try:
            for number in range(WRITES):
                if stop.is_set():
                    return
                self.write(number)
        except BaseException as error:
            self.errors.append(error)

    def write(self, number: int) -> None:
        ready = [d for d in self.store.all() if d.status is Status.READY]
        roll = self.rng.random()
        data = self.rng.randbytes(self.rng.randint(1, 40))
        if not ready or roll < 0.3:
            document = self.protocol.put(f"live-{number}.bin", data, ".bin")
            self.put[document.id] = data
            return
        document = self.rng.choice(ready)
        try:
            if roll < 0.7:
                self.protocol.replace(document.id, data, ".bin")
                self.replaced[document.id] = data
            else:
                self.protocol.delete(document.id)
                self.deleted.add(document.id)
        except ProtocolError:
            pass  # changed under us (the roll-forward or a race): the application retries later

    def applied_to(self, expected: dict[str, bytes]) -> dict[str, bytes]:
        final = {**expected, **self.put, **self.replaced}
        return {doc: data for doc, data in final.items() if doc not in self.deleted}


def sweep_until(store: DocumentStore, container: ContainerClient, stop: threading.Event) -> None:
    settings = SweepSettings(cutoff=timedelta(hours=1), retired_grace=timedelta(0))
    while not stop.wait(0.2):
        Sweeper(store, container, settings).run()


@pytest.mark.parametrize("seed", [5, 8, 13])
def test_roll_forward_beside_writers_and_the_sweeper(
    store: DocumentStore, bound: ContainerClient, point: RestorePoint, seed: int, tmp_path: Path
) -> None:
    """Two runs while writers and the sweeper work, then one after: every document holds what
    its last acknowledged write put there, deleted ones stay deleted, committed blobs of the
    container before the run are gone only where a writer's replace or delete retired them,
    and reconcile reports nothing."""
    # Names are not reused: a writer's replace of a document deleted after the restore point
    # brings it back beside the one put later under its name, a conflict left for a person.
    unique = tuple(f"doc-{n}.bin" for n in range(OPERATIONS))
    history = run_history(random.Random(seed), store, bound, point, OPERATIONS, unique)
    point.restore()
    restored = {d.id for d in store.all()}
    expected = expected_by_id(history, restored)
    committed = {
        name: b.document_id for name, b in list_blobs(bound).items() if b.state == COMMITTED
    }
    committed = {
        name: b.document_id for name, b in list_blobs(bound).items() if b.state == COMMITTED
    }
    writers = Writers(store, bound, seed)
    stop = threading.Event()
    threads = [
        threading.Thread(target=writers.run, args=(stop,)),
        threading.Thread(target=sweep_until, args=(store, bound, stop)),
    ]
    for thread in threads:
        thread.start()
    passes = []
    try:
        for _ in range(2):
            passes.append(roll_forward(store, bound))
    finally:
        threads[0].join(timeout=120)
        stop.set()
        threads[1].join(timeout=60)
    result = roll_forward(store, bound)

    assert writers.errors == []
    assert result.agree, (history.restore_point, result.outcomes, result.after)
    final = writers.applied_to(expected)
    protocol = UploadProtocol(store, bound)
    ready = {d.id: d for d in store.all() if d.status is Status.READY}
    assert set(ready) == set(final), history.restore_point
    for doc, data in final.items():
        assert protocol.read(ready[doc].name) == data, (history.restore_point, doc)
    listed = list_blobs(bound)
    assert all(listed[d.blob_name].state == COMMITTED for d in ready.values())
    gone = {doc for name, doc in committed.items() if name not in listed}
    assert gone <= set(writers.replaced) | writers.deleted, gone
    assert reconcile(store, bound, datetime.now(UTC) + timedelta(hours=1)).clean
    import collections

    print(
        collections.Counter((o.step.action, o.status) for r in passes for o in r.outcomes),
        len(writers.replaced),
        len(writers.deleted),
        len(writers.put),
    )
