"""Every command that opens the table through `open_target` disposes its engine before `main`
returns: the console script ends with `os._exit`, which would drop a pooled connection without
PostgreSQL's Terminate message (tests/test_console_exit.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.commands import target
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.store.documents import DocumentStore
from tests.conftest import RunCli
from tests.sweeper.conftest import target_options


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[DocumentStore]:
    """Every store the command opens through `open_target`, in order."""
    stores: list[DocumentStore] = []
    open_store = target.open_store

    def recorded(*args: object, **kwargs: object) -> DocumentStore:
        stores.append(open_store(*args, **kwargs))  # type: ignore[arg-type]
        return stores[-1]

    monkeypatch.setattr(target, "open_store", recorded)
    return stores


@pytest.mark.parametrize(
    "command",
    [["sweep"], ["reconcile"], ["adopt"], ["binding", "show"]],
    ids=lambda words: " ".join(words),
)
@pytest.mark.usefixtures("store")
def test_the_commands_engine_holds_no_connection_after_main(
    command: list[str],
    db_url: str,
    azurite: Azurite,
    container: ContainerClient,
    run_cli: RunCli,
    opened: list[DocumentStore],
) -> None:
    """Once `main` returns, the store the command opened keeps no pooled connection."""
    code, _, err = run_cli(*command, *target_options(db_url, azurite, container))

    assert code in (0, 1), err
    assert len(opened) == 1
    assert opened[0].engine.pool.checkedin() == 0


def test_a_table_that_fails_its_check_is_disposed_too(
    tmp_path: Path,
    azurite: Azurite,
    container: ContainerClient,
    run_cli: RunCli,
    opened: list[DocumentStore],
) -> None:
    """A table refused by its schema check (exit 2) leaves no pooled connection either."""
    (tmp_path / "empty.db").touch()
    empty = f"sqlite:///{tmp_path / 'empty.db'}"

    code, _, err = run_cli("sweep", *target_options(empty, azurite, container))

    assert code == 2, err
    assert opened[0].engine.pool.checkedin() == 0
