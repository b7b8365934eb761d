"""A crash after every protocol step, then sweep and reconcile: I1-I6 hold on every database."""

from __future__ import annotations

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.embedded.crash import CRASH_STEPS, RACES, Race, run_crash_case, run_race_case
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document


@pytest.mark.parametrize("step", CRASH_STEPS)
def test_invariants_hold_after_crash(
    step: str, store: DocumentStore, container: ContainerClient
) -> None:
    """Whatever step the process died after, sweeping and reconciling restores every invariant."""
    case = run_crash_case(store, container, step)
    assert case.crashed, f"the protocol never reached step {step}"
    broken = [f"{i.id}: {i.detail}" for i in case.invariants if not i.holds]
    assert broken == []
    assert len(case.invariants) == 6


@pytest.mark.parametrize("race", RACES, ids=[r.name for r in RACES])
def test_invariants_hold_when_a_reservation_vanishes_mid_upload(
    race: Race, store: DocumentStore, container: ContainerClient
) -> None:
    """A reservation swept or abandoned while its upload runs: publish is refused, the sealed
    blob is recorded at once (I5 right after the refusal), and repair restores every invariant."""
    case = run_race_case(store, container, race)
    assert case.crashed, f"the race {race.name!r} did not happen"
    assert [f"{i.id}: {i.detail}" for i in case.invariants if not i.holds] == []


class LeavesSealedOrphans(UploadProtocol):
    """The protocol before issue 17: a refused publish leaves its sealed blob unrecorded."""

    def _retire_orphan(self, document: Document) -> None:
        return None


def test_the_race_matrix_catches_a_publish_that_leaves_a_sealed_orphan(
    store: DocumentStore, container: ContainerClient
) -> None:
    """Run over a protocol that forgets the sealed blob, the race case reports I5 broken."""
    case = run_race_case(store, container, RACES[0], protocol_type=LeavesSealedOrphans)
    assert case.crashed
    assert [i.id for i in case.invariants if not i.holds] == ["I5"]
