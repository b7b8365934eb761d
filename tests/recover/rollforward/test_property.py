"""The roll-forward's property: after a random history of puts, replaces and deletes, the table
restored to a random instant T (SQLite: a file copy; PostgreSQL: the tables copied aside and
back) and the history written on, one roll-forward leaves every document acknowledged after T
readable with its bytes, every document acknowledged before T and not deleted readable, no
committed blob deleted, and the table and the container agreeing (reconcile reports nothing).
The same with the lifecycle rule deleting every retired and pending blob mid-run."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.recover.rollforward_apply import roll_forward
from blob_safetynet.recover.rollforward_plan import ACTIONS, RETIRE
from blob_safetynet.store.documents import DocumentStore
from testkit.restore_point import RestorePoint
from tests.recover.rollforward.conftest import bind
from tests.recover.rollforward.history import roll_forward_and_check, run_history

SQLITE_SEEDS = range(int(os.environ.get("SAFETYNET_ROLLFORWARD_SEEDS", "20")))
"""~1 s each on Azurite; set SAFETYNET_ROLLFORWARD_SEEDS=500 to search wider."""
POSTGRES_SEEDS = (3, 4, 11, 17)
OPERATIONS = 10
KILL_SEED = 109

Case = Callable[[str], tuple[DocumentStore, ContainerClient, RestorePoint]]


@pytest.fixture
def case(container_factory: Callable[[], ContainerClient], tmp_path: Path) -> Iterator[Case]:
    """A fresh table at `url` and a fresh container bound to each other, and a restore point."""
    stores: list[DocumentStore] = []

    def make(url: str) -> tuple[DocumentStore, ContainerClient, RestorePoint]:
        store = DocumentStore.from_url(url)
        store.init_schema()
        stores.append(store)
        container = container_factory()
        bind(store, container)
        return store, container, RestorePoint(store, tmp_path / "restore-point.db")

    yield make
    for store in stores:
        store.engine.dispose()


def check(case: Case, url: str, seed: int) -> None:
    """Odd seeds run the lifecycle rule mid-run; every third applies the deletes again."""
    rng = random.Random(seed)
    store, container, point = case(url)
    history = run_history(rng, store, container, point, OPERATIONS)
    point.restore()
    roll_forward_and_check(
        store, container, history, reapply_deletes=seed % 3 == 2, lifecycle=seed % 2 == 1
    )


@pytest.mark.parametrize("seed", SQLITE_SEEDS)
def test_sqlite_restored_to_a_random_instant_is_rolled_forward(
    case: Case, tmp_path: Path, seed: int
) -> None:
    """Seeded histories on SQLite: every promise of the roll-forward holds, with and without
    the lifecycle rule running mid-run, deletes kept and applied again."""
    check(case, f"sqlite:///{tmp_path / 'documents.db'}", seed)


@pytest.mark.postgres
@pytest.mark.parametrize("seed", POSTGRES_SEEDS)
def test_postgresql_restored_to_a_random_instant_is_rolled_forward(
    case: Case, postgres_url: str, seed: int
) -> None:
    """A fixed set of the same histories on PostgreSQL (both lifecycle cases, both choices)."""
    check(case, postgres_url, seed)


class Killed(Exception):
    """Stands for the process dying between two phases."""


@pytest.mark.parametrize("phase", [action for action in ACTIONS if action != RETIRE])
def test_stopped_after_any_phase_a_rerun_finishes(case: Case, tmp_path: Path, phase: str) -> None:
    """A run that dies right after one phase's steps (seed 109 has steps of every action but retire) is
    finished by the next run: every promise holds as if it had run once."""
    rng = random.Random(KILL_SEED)
    store, container, point = case(f"sqlite:///{tmp_path / 'documents.db'}")
    history = run_history(rng, store, container, point, 24)
    point.restore()

    def die(action: str) -> None:
        if action == phase:
            raise Killed(action)

    with pytest.raises(Killed):
        roll_forward(store, container, phase_done=die)
    roll_forward_and_check(store, container, history)
