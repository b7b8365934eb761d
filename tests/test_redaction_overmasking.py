"""Secrets are masked, not every piece of text that equals a non-secret part of a URL."""

from __future__ import annotations

import secrets

import pytest

from blob_safetynet.settings.redaction import HIDDEN, Redactor, secrets_in
from tests.conftest import RunCli


def redactor_for(*argv: str) -> Redactor:
    return Redactor(secrets_in(argv))


def test_a_user_name_without_a_password_stays_visible_in_scheme_table_and_role() -> None:
    """User `postgres` (no password) leaves the scheme, a table of that name and the role whole."""
    redactor = redactor_for("--db=postgresql+psycopg://postgres@db.example/postgres")
    text = 'postgresql+psycopg://db.example/postgres: table "postgres"; role "postgres" is missing'
    assert redactor.scrub(text) == text


def test_the_password_is_masked_while_the_user_name_beside_it_stays() -> None:
    """With `alice:hunter2`, hunter2 goes in every spelling; alice stays readable."""
    redactor = redactor_for("--db=postgresql://alice:hunter2@db.example/app")
    assert redactor.scrub('role "alice" password hunter2 HUNTER2') == (
        f'role "alice" password {HIDDEN} {HIDDEN}'
    )


@pytest.mark.parametrize(
    "query", ["sslmode=require", "mode=memory", "uri=true", "timeout=30", "cache=shared"]
)
def test_keyword_and_number_query_values_are_not_secrets(query: str) -> None:
    """Knowledge-free values (libpq and SQLite keywords, booleans, numbers) do not mask the
    words they equal in every message."""
    value = query.partition("=")[2]
    redactor = redactor_for(f"--db=sqlite:///x.db?{query}")
    text = f"use {query}; an in-{value} database"
    assert redactor.scrub(text) == text


def test_a_credential_named_key_is_masked_even_with_a_keyword_value() -> None:
    """`?password=require` is a password, whatever word it is."""
    redactor = redactor_for("--db=postgresql://db.example/app?password=require")
    assert "require" not in redactor.scrub("the password require was refused")


@pytest.mark.postgres
def test_a_missing_role_is_named_so_the_user_can_fix_it(run_cli: RunCli) -> None:
    """`role "<user>" does not exist` shows the user: it is what the operator must fix."""
    user = f"nobody_{secrets.token_hex(3)}"
    url = f"postgresql+psycopg://{user}@127.0.0.1:5432/test"
    code, out, err = run_cli("db", "init", "--json", "--db", url)
    assert code in (2, 3), err
    assert f'role \\"{user}\\" does not exist' in out
    assert f'role "{user}" does not exist' in err
    assert "postgresql+psycopg://127.0.0.1:5432/test" in err
