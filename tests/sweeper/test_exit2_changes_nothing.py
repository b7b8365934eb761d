"""Exit 2 means "nothing was changed": `db upgrade` and `db init` check a table before they
touch it, so a refused run leaves the database exactly as it was."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from blob_safetynet.cli.exitcodes import ExitCode
from tests.conftest import RunCli

COLUMNS = "id=invoice_id,name=number,blob_name=pdf"
"""The application's names for three of the columns; `status` and `created_utc` it lacks."""


def snapshot(url: str) -> object:
    """SQLite: the file's bytes. PostgreSQL: every table, column, index and row of the schema,
    read through information_schema and pg_indexes."""
    if url.startswith("sqlite"):
        return Path(url.removeprefix("sqlite:///")).read_bytes()
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            columns = conn.execute(
                sa.text(
                    "SELECT table_name, column_name, data_type, is_nullable, column_default "
                    "FROM information_schema.columns WHERE table_schema = current_schema() "
                    "ORDER BY table_name, ordinal_position"
                )
            ).all()
            tables = conn.execute(
                sa.text(
                    "SELECT table_name, table_type FROM information_schema.tables "
                    "WHERE table_schema = current_schema() ORDER BY table_name"
                )
            ).all()
            indexes = conn.execute(
                sa.text(
                    "SELECT tablename, indexdef FROM pg_indexes "
                    "WHERE schemaname = current_schema() ORDER BY indexname"
                )
            ).all()
            rows = conn.execute(sa.text("SELECT * FROM invoices ORDER BY invoice_id")).all()
    finally:
        engine.dispose()
    return columns, tables, indexes, rows


@pytest.fixture
def invoices(db_url: str) -> str:
    """An application's own table with one row, lacking the protocol's `status` and
    `created_utc`."""
    engine = sa.create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE invoices (invoice_id VARCHAR(36) PRIMARY KEY, "
                "number VARCHAR(1024) NOT NULL UNIQUE, pdf VARCHAR(1024) NOT NULL, amount INTEGER)"
            )
        )
        conn.execute(sa.text("INSERT INTO invoices VALUES ('i-1', 'INV-1', 'inv-1.pdf', 42)"))
    engine.dispose()
    return db_url


@pytest.mark.parametrize("action", ["upgrade", "init"])
def test_a_table_lacking_columns_is_refused_with_nothing_changed(
    invoices: str, run_cli: RunCli, action: str
) -> None:
    """`db upgrade` / `db init --table invoices --columns ...` on a table without `status` and
    `created_utc`: exit 2 naming both, and the database byte for byte (SQLite) or table for
    table, column for column, row for row (PostgreSQL) as it was."""
    before = snapshot(invoices)
    code, _, err = run_cli(
        "db", action, "--db", invoices, "--table", "invoices", "--columns", COLUMNS
    )
    assert code == ExitCode.USAGE, err
    assert "lacks column(s): status, created_utc" in err
    assert "nothing was changed" in err
    assert snapshot(invoices) == before


def test_init_on_an_older_table_points_at_upgrade_with_nothing_changed(
    invoices: str, run_cli: RunCli
) -> None:
    """`db init` on a table with the first release's columns but not the later ones: exit 2
    naming `db upgrade`, and nothing created beside it."""
    engine = sa.create_engine(invoices)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE invoices ADD COLUMN status VARCHAR(16)"))
        conn.execute(sa.text("ALTER TABLE invoices ADD COLUMN created_utc TIMESTAMP"))
    engine.dispose()
    before = snapshot(invoices)
    code, _, err = run_cli(
        "db", "init", "--db", invoices, "--table", "invoices", "--columns", COLUMNS
    )
    assert code == ExitCode.USAGE, err
    assert "safetynet db upgrade" in err
    assert snapshot(invoices) == before
    code, out, err = run_cli(
        "db", "upgrade", "--db", invoices, "--table", "invoices", "--columns", COLUMNS
    )
    assert code == ExitCode.OK, err
    assert "added table invoices_meta" in out
