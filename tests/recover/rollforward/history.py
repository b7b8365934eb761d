"""A random history of puts, replaces and deletes with a restore point taken at a random instant
(between two operations or inside one, at one of the protocol's checkpoints), what the
application was told at each step, and the checks the roll-forward must pass afterwards."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from azure.storage.blob import ContainerClient

from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs, reconcile
from blob_safetynet.recover import rollforward_apply
from blob_safetynet.recover.rollforward_plan import RESEAL
from blob_safetynet.settings.vocabulary import COMMITTED
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Status
from testkit.restore_point import RestorePoint, run_lifecycle

NAMES = ("a.txt", "b.txt", "résumé.pdf", "dir/c.txt", "d e.txt", "日本語.txt", "z" * 300)
CHECKPOINTS = {
    "put": ("reserve", "upload", "seal", "publish"),
    "replace": (
        "replace.intent",
        "replace.upload",
        "replace.seal",
        "replace.switch",
        "replace.retire",
    ),
    "delete": ("delete.row", "delete.retire"),
}


@dataclass
class History:
    """What each document holds as the application was told, and when the restore point fell."""

    live: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """id -> (name, bytes) of every document acknowledged and not deleted at the end."""
    last: dict[str, tuple[str, bytes]] = field(default_factory=dict)
    """id -> (name, bytes) last acknowledged, deleted documents too."""
    restore_point: str = ""
    names: tuple[str, ...] = NAMES


def run_history(
    rng: random.Random,
    store: DocumentStore,
    container: ContainerClient,
    point: RestorePoint,
    operations: int,
    names: tuple[str, ...] = NAMES,
) -> History:
    """`operations` random operations; the restore point is taken inside (or after) one. A
    put takes a name of `names` no live document holds (a deleted one's name comes back)."""
    history = History(names=names)
    at = rng.randrange(operations)
    target: list[str | None] = [None]

    def checkpoint(step: str) -> None:
        if target[0] == step and not point.taken:
            point.take()
            history.restore_point = f"operation {at}, after {step}"

    protocol = UploadProtocol(store, container, checkpoint=checkpoint)
    for number in range(operations):
        kind = _kind(rng, history)
        if number == at:
            target[0] = rng.choice((*CHECKPOINTS[kind], None))
        _operate(rng, protocol, kind, history)
        if number == at and not point.taken:
            point.take()
            history.restore_point = f"after operation {at}"
    return history


def _kind(rng: random.Random, history: History) -> str:
    free = [n for n in history.names if n not in {name for name, _ in history.live.values()}]
    roll = rng.random()
    if not history.live or (free and roll < 0.45):
        return "put"
    return "replace" if roll < 0.75 else "delete"


def _operate(rng: random.Random, protocol: UploadProtocol, kind: str, history: History) -> None:
    data = rng.randbytes(rng.randint(1, 48))
    if kind == "put":
        free = [n for n in history.names if n not in {name for name, _ in history.live.values()}]
        name = rng.choice(free)
        document = protocol.put(name, data, ".bin")
        history.live[document.id] = history.last[document.id] = (name, data)
        return
    document_id = rng.choice(sorted(history.live))
    name = history.live[document_id][0]
    if kind == "replace":
        protocol.replace(document_id, data, ".bin")
        history.live[document_id] = history.last[document_id] = (name, data)
    else:
        protocol.delete(document_id)
        del history.live[document_id]


def expected(history: History, restored: set[str], reapply_deletes: bool) -> dict[str, bytes]:
    """name -> bytes every reader must get after the roll-forward: the documents live at the
    end, and (unless deletes are applied again) those deleted after the restore point whose
    row it kept, when no document live at the end holds the name since."""
    readable = dict(history.live.values())
    if reapply_deletes:
        return readable
    for document_id, (name, data) in history.last.items():
        if document_id in restored and document_id not in history.live and name not in readable:
            readable[name] = data
    return readable


def roll_forward_and_check(
    store: DocumentStore,
    container: ContainerClient,
    history: History,
    *,
    reapply_deletes: bool = False,
    lifecycle: bool = False,
) -> None:
    """Restore, roll forward once (the lifecycle rule run after the re-seals and again after
    the rebuilds when `lifecycle`), and check every promise of the roll-forward."""
    restored = {document.id for document in store.all()}
    committed = {b.name for b in list_blobs(container).values() if b.state == COMMITTED}

    def phase_done(action: str) -> None:
        if lifecycle and action in (RESEAL, "rebuild"):
            run_lifecycle(container)

    result = rollforward_apply.roll_forward(
        store, container, reapply_deletes=reapply_deletes, phase_done=phase_done
    )
    where = f"restore point {history.restore_point}; outcomes {result.outcomes}"
    assert result.agree, f"{where}; left {result.after}"
    listed = list_blobs(container)
    assert committed <= set(listed), f"{where}: committed blobs deleted"
    protocol = UploadProtocol(store, container)
    readable = expected(history, restored, reapply_deletes)
    for name, data in readable.items():
        assert protocol.read(name) == data, f"{where}: {name!r}"
    ready = {d.name for d in store.all() if d.status is Status.READY}
    assert ready == set(readable), where
    assert reconcile(store, container, datetime.now(UTC) + timedelta(hours=1)).clean, where
