"""Issue 29 on Azurite with SQLite and PostgreSQL: `safetynet adopt --apply` killed at random
instants (SIGKILL, seeded) beside a live application that puts, replaces and deletes documents,
adopted or not yet. After a final adopt and a sweep no blob is left that no row names, no record
is left, and every document reads the bytes it was last given; I1, I2, I3 and I6 hold at every
round's end, with every delete the sweeper sent judged by its guard.

Set Blob Tags' ETag condition is enforced by testkit's double in front of Azurite, for adopt and
for the application alike (Azurite ignores it).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.embedded.invariants import DeleteLog, InvariantWatch
from blob_safetynet.protocol import blobs
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import INTERNAL_PREFIX, reconcile
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.settings.vocabulary import COMMITTED, RETIRED, STATE_TAG
from blob_safetynet.store.documents import Document, DocumentStore, Status, new_document_id
from blob_safetynet.sweeper import binding
from blob_safetynet.sweeper.sweep import Sweeper
from testkit.etag_double import etag_guarding_service
from testkit.fault_proxy import LatencyProxy
from testkit.service_doubles import ServiceDouble
from tests import tree
from tests.conftest import RunCli
from tests.sweeper.conftest import CUTOFF
from tests.sweeper.test_adopt import SAFETYNET, cli_args

LEGACY_READY = 120
LEGACY_PENDING = 12
ROUNDS = 4
WRITERS = 3
AHEAD = timedelta(hours=3)
"""The final sweep's clock: past the cutoff and the retired grace of everything written."""


@pytest.fixture
def guarded(azurite: Azurite, service_client: BlobServiceClient) -> Iterator[ServiceDouble]:
    with etag_guarding_service(azurite.port, service_client) as double:
        yield double


def through(endpoint: str, container: ContainerClient) -> ContainerClient:
    service = BlobServiceClient.from_connection_string(endpoint)
    return service.get_container_client(container.container_name)


def legacy(
    store: DocumentStore, container: ContainerClient, number: int, status: Status
) -> tuple[Document, bytes]:
    """A row and its blob written before the protocol: no state tag (some blobs no tag at all)."""
    document = Document(
        new_document_id(), f"legacy-{number}", new_document_id(), status, datetime.now(UTC)
    )
    store.reserve(document)
    data = f"legacy bytes {number}".encode()
    tags = {"tenant": "t1"} if number % 2 else None
    container.upload_blob(document.blob_name, data, tags=tags)
    return document, data


@dataclass
class Application:
    """Writers on the protocol, each putting, replacing or deleting a random document that no
    other writer holds, until the round is over; `live` is what every document must read."""

    protocol: UploadProtocol
    live: dict[str, tuple[str, bytes]]
    seed: str
    errors: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"put": 0, "replace": 0, "delete": 0})
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def round(self, number: int, over: threading.Event) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self._write, args=(number, writer, over))
            for writer in range(WRITERS)
        ]
        for thread in threads:
            thread.start()
        return threads

    def _write(self, number: int, writer: int, over: threading.Event) -> None:
        rng = random.Random(f"{self.seed}-{number}-{writer}")
        made = 0
        while not over.is_set():
            action = rng.choice(["put", "replace", "replace", "delete"])
            try:
                if action == "put":
                    made += 1
                    name = f"new-{number}-{writer}-{made}"
                    data = os.urandom(rng.randint(1, 64))
                    document = self.protocol.put(name, data, ".bin")
                    self._give_back(name, document.id, data)
                else:
                    self._change(rng, action)
            except Exception as error:
                self.errors.append(f"{action}: {type(error).__name__}: {error}")
                return
            with self._lock:
                self.counts[action] += 1

    def _change(self, rng: random.Random, action: str) -> None:
        with self._lock:
            if not self.live:
                return
            name = rng.choice(sorted(self.live))
            document_id, _ = self.live.pop(name)
        if action == "delete":
            self.protocol.delete(document_id)
            return
        data = os.urandom(rng.randint(1, 64))
        self.protocol.replace(document_id, data, ".bin")
        self._give_back(name, document_id, data)

    def _give_back(self, name: str, document_id: str, data: bytes) -> None:
        with self._lock:
            self.live[name] = (document_id, data)


def sweep_ahead(store: DocumentStore, container: ContainerClient) -> Sweeper:
    """A sweeper of the bound pair whose clock is AHEAD of this machine's."""
    binding.bind(store, container)
    return Sweeper(
        store, container, SweepSettings(cutoff=CUTOFF), clock=lambda: datetime.now(UTC) + AHEAD
    )


def not_adopted_yet(
    store: DocumentStore, container: ContainerClient, legacy_blobs: set[str]
) -> list[str]:
    """I2 before adoption ends: a Ready row's blob is committed, or untagged and legacy."""
    listed = container.list_blobs(include=["tags"])
    states = {b.name: (b.tags or {}).get(STATE_TAG, "") for b in listed}
    return [
        f"{d.name} ({states.get(d.blob_name)!r})"
        for d in store.all()
        if d.status is Status.READY
        and states.get(d.blob_name) != COMMITTED
        and not (states.get(d.blob_name) == "" and d.blob_name in legacy_blobs)
    ]


def adopt_killed(
    db_url: str, proxy: LatencyProxy, container: ContainerClient, rng: random.Random
) -> str:
    """`safetynet adopt --apply` through the latency proxy, SIGKILLed after a random number of
    its tag writes (or left to finish, when it has fewer to do); how it ended."""
    env = tree.environment({k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")})
    process = subprocess.Popen(
        [
            str(SAFETYNET),
            "adopt",
            *cli_args(db_url, proxy.connection_string, container),
            "--apply",
            "--workers",
            "4",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    target = proxy.counts()["PUT comp=tags"] + rng.randint(1, 60)
    deadline = time.monotonic() + 120
    while proxy.counts()["PUT comp=tags"] < target and time.monotonic() < deadline:
        if process.poll() is not None:
            return f"finished ({process.returncode})"
        time.sleep(rng.uniform(0, 0.01))
    process.send_signal(signal.SIGKILL)
    process.wait()
    return "killed"


@pytest.mark.e2e  # adopt killed four times beside three writers: about a minute per database
def test_adopt_killed_beside_a_live_application_leaves_no_orphan_and_loses_nothing(
    db_url: str,
    store: DocumentStore,
    azurite: Azurite,
    container: ContainerClient,
    guarded: ServiceDouble,
    run_cli: RunCli,
) -> None:
    """Rounds of adopt SIGKILLed at a random instant while writers replace and delete legacy and
    new documents; then one adopt and one sweep: every blob is a row's, every row Ready with the
    bytes last written, no record left, a second sweep finds nothing, I1-I3 and I6 always held."""
    rng = random.Random(f"adopt-live-{db_url[:6]}")
    live: dict[str, tuple[str, bytes]] = {}
    untouched: dict[str, bytes] = {}
    for number in range(LEGACY_READY + LEGACY_PENDING):
        status = Status.READY if number < LEGACY_READY else Status.PENDING
        document, data = legacy(store, container, number, status)
        if status is Status.READY:
            live[document.name] = (document.id, data)
        else:
            untouched[document.name] = data  # the protocol replaces Ready documents only
    legacy_blobs = {d.blob_name for d in store.all()}
    deletes = DeleteLog(container.container_name)
    watched = ContainerClient.from_container_url(
        container.url, credential=container.credential, raw_request_hook=deletes
    )
    watch = InvariantWatch(store, watched, deletes)
    application = Application(
        UploadProtocol(store, through(guarded.connection_string, container)),
        live,
        rng.random().hex(),
    )
    endings = []
    with LatencyProxy(guarded.port, delay_s=0.01) as proxy:
        for number in range(ROUNDS):
            over = threading.Event()
            writers = application.round(number, over)
            endings.append(adopt_killed(db_url, proxy, container, rng))
            over.set()
            for writer in writers:
                writer.join()
            watch.check(f"round {number} ({endings[-1]})")
            assert not_adopted_yet(store, container, legacy_blobs) == [], number
            assert application.errors == [], application.errors
    assert "killed" in endings
    assert application.counts["replace"] > 0
    assert application.counts["delete"] > 0

    code, out, _ = run_cli(
        "adopt", *cli_args(db_url, guarded.connection_string, container), "--apply"
    )
    assert code == 0, out
    adopted = watch.check("the final adopt")
    sweeper = sweep_ahead(store, watched)
    report = sweeper.run()
    swept = watch.check("the sweep")
    again = sweeper.run()

    assert report.errors == []
    assert (again.retired_deleted, again.deleted_blobs, again.errors) == (0, 0, [])
    assert store.records() == []
    rows = store.all()
    names = {b.name for b in container.list_blobs() if not b.name.startswith(INTERNAL_PREFIX)}
    assert names == {d.blob_name for d in rows}
    assert all(d.status is Status.READY for d in rows)
    expected = {name: data for name, (_, data) in live.items()} | untouched
    stored = {d.name: container.download_blob(d.blob_name).readall() for d in rows}
    assert stored == expected
    assert reconcile(store, container, datetime.now(UTC) + AHEAD).clean
    assert [r for r in watch.summary() if r.id != "I2" and not r.holds] == []
    assert [r for r in [*adopted, *swept] if not r.holds] == []


def test_a_delete_before_adoption_retires_the_untagged_blob_and_the_sweep_removes_it(
    store: DocumentStore, container: ContainerClient
) -> None:
    """The protocol's delete of a document adopt has not tagged yet tags its blob retired
    (guarded by its ETag); the sweep deletes it without a word for a human."""
    document, _ = legacy(store, container, 1, Status.READY)
    UploadProtocol(store, container).delete(document.id)
    assert blobs.state_of(container.get_blob_client(document.blob_name)) == RETIRED

    report = sweep_ahead(store, container).run()

    assert (report.retired_deleted, report.errors) == (1, [])
    assert not container.get_blob_client(document.blob_name).exists()


def test_a_replace_stopped_before_it_retired_an_untagged_blob_leaves_it_to_the_sweep(
    store: DocumentStore, container: ContainerClient
) -> None:
    """A replace of a not-yet-adopted document that stops right after its switch leaves the old
    blob untagged but recorded retired: the sweep tags and deletes it; the new bytes stay."""
    document, _ = legacy(store, container, 2, Status.READY)

    def stop_after_switch(step: str) -> None:
        if step == "replace.switch":
            raise RuntimeError("crash")

    with pytest.raises(RuntimeError):
        UploadProtocol(store, container, checkpoint=stop_after_switch).replace(document.id, b"v2")
    assert blobs.state_of(container.get_blob_client(document.blob_name)) == ""

    report = sweep_ahead(store, container).run()

    assert (report.retired_deleted, report.errors) == (1, [])
    assert not container.get_blob_client(document.blob_name).exists()
    assert UploadProtocol(store, container).read(document.name) == b"v2"


def test_an_untagged_blob_rewritten_while_it_is_retired_keeps_its_new_bytes_untagged(
    store: DocumentStore, container: ContainerClient, guarded: ServiceDouble
) -> None:
    """The retire of an untagged blob is guarded by the ETag it read: bytes rewritten between
    that read and the tag write make Set Blob Tags answer 412, and the blob stays untagged."""
    document, _ = legacy(store, container, 3, Status.READY)
    rewritten: list[str] = []

    def rewrite_before_the_tag_read(request: Any) -> None:
        http = request.http_request
        if http.method == "GET" and "comp=tags" in http.url and not rewritten:
            rewritten.append(http.url)
            container.upload_blob(document.blob_name, b"rewritten", overwrite=True)

    client = BlobServiceClient.from_connection_string(
        guarded.connection_string, raw_request_hook=rewrite_before_the_tag_read
    ).get_blob_client(container.container_name, document.blob_name)

    with pytest.raises(blobs.TagTransitionError, match="changed since it was read"):
        blobs.retire_untagged(client)

    assert rewritten
    assert blobs.state_of(container.get_blob_client(document.blob_name)) == ""
    assert container.download_blob(document.blob_name).readall() == b"rewritten"
