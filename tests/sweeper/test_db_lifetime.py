"""`db init` says "ready" only in a database that outlives the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import RunCli

GONE_WITH_THE_COMMAND = [
    "sqlite://",
    "sqlite:///:memory:",
    "sqlite:///file::memory:?uri=true",
    "sqlite:///file::memory:?cache=shared&uri=true",
    "sqlite:///file:documents.db?mode=memory&uri=true",
    "sqlite:///file:documents.db?vfs=memdb&uri=true",
    "sqlite:///file:?uri=true",
    "sqlite:///file:%3Amemory%3A?uri=1",
]


@pytest.mark.parametrize("url", GONE_WITH_THE_COMMAND)
def test_db_init_refuses_a_database_that_ends_with_the_connection(
    run_cli: RunCli, url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-memory, memdb and temporary SQLite databases are bad usage (exit 2), and nothing is
    created on disk."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli("db", "init", "--db", url)
    assert (code, out) == (2, ""), err
    assert "in-memory or temporary SQLite database" in err
    assert list(tmp_path.iterdir()) == []


def test_db_init_accepts_a_sqlite_uri_naming_a_file_and_sweep_finds_it(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """A `file:` URI (uri=true) naming a file is a database on disk, found by later commands."""
    url = f"sqlite:///file:{tmp_path / 'documents.db'}?uri=true"
    code, _, err = run_cli("db", "init", "--db", url)
    assert code == 0, err
    assert (tmp_path / "documents.db").is_file()
    code, _, err = run_cli("db", "upgrade", "--db", url)
    assert code == 0, err


def test_a_uri_flag_that_is_not_a_boolean_is_named_without_its_value(run_cli: RunCli) -> None:
    """`uri=<junk>` is bad usage naming the key, never echoing the value."""
    code, _, err = run_cli("db", "init", "--db", "sqlite:///x.db?uri=canary-uri-value")
    assert code == 2, err
    assert "the query key uri is not true or false" in err
    assert "canary-uri-value" not in err
