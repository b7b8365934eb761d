"""The roll-forward's property: after a random history of puts, replaces and deletes, the table
restored to a random instant T (SQLite: a file copy; PostgreSQL: the tables copied aside and
back) and the history written on, one roll-forward leaves every document acknowledged after T
readable with its bytes, every document acknowledged before T and not deleted readable, no
committed blob deleted, and the table and the container agreeing (reconcile reports nothing).
The same with the lifecycle rule deleting every retired and pending blob mid-run."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from tests.recover.rollforward.conftest import Case
from tests.recover.rollforward.history import roll_forward_and_check, run_history

SQLITE_SEEDS = range(int(os.environ.get("SAFETYNET_ROLLFORWARD_SEEDS", "20")))
"""~1 s each on Azurite; set SAFETYNET_ROLLFORWARD_SEEDS=500 to search wider."""
POSTGRES_SEEDS = (3, 4, 11, 17)
OPERATIONS = 10


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
