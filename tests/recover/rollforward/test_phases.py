"""A roll-forward that dies between two of its phases (the re-seals, the moves, ...) is finished
by the next run, every promise holding as if it had run once: in particular the retired blob a
restored row names is never re-sealed before the row moves, so a rerun still reads that the
newer blob's replace happened."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from blob_safetynet.recover.rollforward_apply import roll_forward
from blob_safetynet.recover.rollforward_plan import ACTIONS, RETIRE
from tests.recover.rollforward.conftest import Case
from tests.recover.rollforward.history import roll_forward_and_check, run_history

KILL_SEED = 109
"""Its history has steps of every action but retire (no writer runs after the restore)."""


class Killed(Exception):
    """Stands for the process dying between two phases."""


@pytest.mark.parametrize("phase", [action for action in ACTIONS if action != RETIRE])
def test_stopped_after_any_phase_a_rerun_finishes(case: Case, tmp_path: Path, phase: str) -> None:
    """A run that dies right after one phase's steps (seed 109) is
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
