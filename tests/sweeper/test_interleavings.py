"""Interleavings on real Azurite and SQLite: writers crashing after any step, retries,
replacements, deletions, reconcile passes, sweepers (one crashing mid-sweep, two racing for
the lease) and a clock moving past the cutoff, in an order hypothesis chooses. I1, I2, I3 and
I6 are checked after every protocol step, every crash and every rule; I4 and I5 once it is
all swept and reconciled.

`make test` runs INTERLEAVING_EXAMPLES examples; `make soak` sets SAFETYNET_SOAK_EXAMPLES.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.crash import (
    DELETE_STEPS,
    PUT_STEPS,
    REPLACE_STEPS,
    SimulatedCrash,
    crash_after,
)
from blob_safetynet.embedded.invariants import DeleteLog, InvariantWatch, check_invariants
from blob_safetynet.protocol.upload import ProtocolError, UploadProtocol, no_checkpoint
from blob_safetynet.reconcile.listing import reconcile
from blob_safetynet.settings.parsed import SweepSettings
from blob_safetynet.store.documents import DocumentStore, NameConflictError
from blob_safetynet.store.tables import Status
from blob_safetynet.sweeper.lease import SweepLeaseHeldError
from blob_safetynet.sweeper.sweep import Sweeper, SweepReport
from tests.sweeper.conftest import CUTOFF

pytestmark = pytest.mark.e2e  # every interleaving of writers and sweeps: minutes

SOAK_EXAMPLES = int(os.environ.get("SAFETYNET_SOAK_EXAMPLES", "0"))
INTERLEAVING_EXAMPLES = SOAK_EXAMPLES or 200
STEPS = int(os.environ.get("SAFETYNET_SOAK_STEPS", "0")) or 5

NAMES = ("a.txt", "b.txt", "c.txt")
NO_CRASH = "none"


class Clock:
    """A clock the machine moves forward; the protocol, sweepers and reconcile all read it."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


class SweptInterruption(Exception):
    """A sweeper 'dies' after its first chunk."""


def make_machine(service: BlobServiceClient, workdir: Path) -> type[RuleBasedStateMachine]:
    class Interleavings(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.container = create_unique_container(service, "i")
            self.store = DocumentStore.from_url(f"sqlite:///{workdir / uuid.uuid4().hex}.db")
            self.store.init_schema()
            self.clock = Clock()
            self.log = DeleteLog(self.container.container_name)
            self.client = ContainerClient.from_container_url(
                self.container.url, credential=self.container.credential, raw_request_hook=self.log
            )
            self.watch = InvariantWatch(self.store, self.client, self.log)
            """Replaced by `published`: the watch starts once the initial documents exist."""
            self.uploads = 0
            self.changed = False
            """Whether the last rule may have changed a row or blob (else its check is skipped)."""

        def protocol(self, crash: str) -> UploadProtocol:
            checkpoint = no_checkpoint if crash == NO_CRASH else crash_after(crash)
            return UploadProtocol(
                self.store, self.client, clock=self.clock, checkpoint=self.watch.then(checkpoint)
            )

        def payload(self) -> bytes:
            self.uploads += 1
            return f"bytes of upload {self.uploads}".encode()

        def pick(self, status: Status, index: int) -> str | None:
            ids = sorted(d.id for d in self.store.all() if d.status is status)
            return ids[index % len(ids)] if ids else None

        def attempt(self, action: Callable[[], object]) -> None:
            """Run one writer's action; a simulated crash or an expected refusal ends it.

            The watch already checked after the action's last durable step (a crash is raised
            right after that check), so only a refusal mid-step needs another look.
            """
            try:
                action()
            except (NameConflictError, ProtocolError):
                self.changed = True
            except SimulatedCrash:
                pass

        def sweeper(
            self, on_progress: Callable[[SweepReport], None] | None = None, lease: bool = False
        ) -> Sweeper:
            self.changed = True
            settings = SweepSettings(cutoff=CUTOFF, chunk_size=1, use_lease=lease)
            return Sweeper(
                self.store, self.client, settings, clock=self.clock, on_progress=on_progress
            )

        @initialize(names=st.lists(st.sampled_from(NAMES), min_size=1, max_size=2, unique=True))
        def published(self, names: list[str]) -> None:
            """Start with published documents, so replacements and deletions have work."""
            plain = UploadProtocol(self.store, self.client, clock=self.clock)
            for name in names:
                plain.put(name, self.payload(), ".txt")
            self.sweeper().run()  # binds the container to this database, as a first sweep does
            self.watch = InvariantWatch(self.store, self.client, self.log)

        @rule(name=st.sampled_from(NAMES), crash=st.sampled_from((*PUT_STEPS, NO_CRASH)))
        def put(self, name: str, crash: str) -> None:
            self.attempt(lambda: self.protocol(crash).put(name, self.payload(), ".txt"))

        @rule(index=st.integers(0, 5), crash=st.sampled_from((*PUT_STEPS[1:], NO_CRASH)))
        def retry(self, index: int, crash: str) -> None:
            """A writer that crashed resumes its upload (same id, same bytes or new ones)."""
            document_id = self.pick(Status.PENDING, index)
            if document_id is not None:
                self.attempt(lambda: self.protocol(crash).complete(document_id, self.payload()))

        @rule(index=st.integers(0, 5), crash=st.sampled_from((*REPLACE_STEPS, NO_CRASH)))
        def replace(self, index: int, crash: str) -> None:
            document_id = self.pick(Status.READY, index)
            if document_id is not None:
                self.attempt(
                    lambda: self.protocol(crash).replace(document_id, self.payload(), ".txt")
                )

        @rule(index=st.integers(0, 5), crash=st.sampled_from((*DELETE_STEPS, NO_CRASH)))
        def delete(self, index: int, crash: str) -> None:
            document_id = self.pick(Status.READY, index)
            if document_id is not None:
                self.attempt(lambda: self.protocol(crash).delete(document_id))

        @rule(minutes=st.sampled_from((1, 20)))
        def time_passes(self, minutes: int) -> None:
            self.clock.now += timedelta(minutes=minutes)

        @rule(kind=st.sampled_from(("one", "dies after first chunk", "two racing")))
        def sweep(self, kind: str) -> None:
            if kind == "one":
                self.sweeper().run()
            elif kind == "two racing":
                self.two_sweepers_race()
            else:
                self.sweep_dies_after_first_chunk()

        def sweep_dies_after_first_chunk(self) -> None:
            def die(report: SweepReport) -> None:
                raise SweptInterruption

            with contextlib.suppress(SweptInterruption):
                self.sweeper(on_progress=die).run()

        def two_sweepers_race(self) -> None:
            """Two sweepers at once: the lease lets one in, the other stands down."""

            def run(_: int) -> str:
                try:
                    self.sweeper(lease=True).run()
                except SweepLeaseHeldError:
                    return "held"
                return "swept"

            with ThreadPoolExecutor(2) as pool:
                outcomes = list(pool.map(run, range(2)))
            assert "swept" in outcomes

        @rule()
        def reconcile_pass(self) -> None:
            self.changed = True
            result = reconcile(self.store, self.client, self.clock() - CUTOFF, repair=True)
            assert result.errors == []

        @invariant()
        def invariants_hold_now(self) -> None:
            if self.changed:
                self.watch.check("rule")
                self.changed = False
            assert [
                f"{v.moment}: {v.result.id} {v.result.detail}" for v in self.watch.violations
            ] == []

        def teardown(self) -> None:
            try:
                self.finish()
            finally:
                self.store.engine.dispose()
                self.container.delete_container()

        def finish(self) -> None:
            """Time passes, sweep, reconcile, sweep: nothing stale, nothing orphaned, idle."""
            self.clock.now += CUTOFF * 2
            self.sweeper().run()
            reconcile(self.store, self.client, self.clock() - CUTOFF, repair=True)
            second = self.sweeper().run()
            final = check_invariants(
                self.store,
                self.client,
                self.watch.previous,
                self.clock() - CUTOFF,
                second,
                self.log.take(),
            )
            assert [f"{r.id}: {r.detail}" for r in final if not r.holds] == []
            assert self.watch.violations == []

    return Interleavings


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="interleavings-") as path:
        yield Path(path)


def test_invariants_hold_under_any_interleaving(
    service_client: BlobServiceClient, workdir: Path
) -> None:
    """Whatever order writers, crashes, retries, sweepers, reconcile and time take, I1-I6 hold."""
    run_state_machine_as_test(
        make_machine(service_client, workdir),
        settings=settings(
            max_examples=INTERLEAVING_EXAMPLES,
            stateful_step_count=STEPS,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
