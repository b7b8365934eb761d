"""The one redaction path: what a message may show of a database URL, an account URL, a token."""

from __future__ import annotations

import logging

import pytest

from blob_safetynet.settings.redaction import (
    HIDDEN,
    RedactingFilter,
    Redactor,
    display_connection_string,
    display_db_url,
    display_url,
    printable,
    secrets_in,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://bob:pw@db.example:5432/docs?sslmode=require&password=q",
            "postgresql+psycopg://db.example:5432/docs",
        ),
        ("postgresql://bob:r2@secret@db.example/docs", "postgresql://db.example/docs"),
        ("postgresql://bob:a/b@db.example/docs", "postgresql://db.example/docs"),
        ("sqlite:////var/lib/docs.db", "sqlite:////var/lib/docs.db"),
        ("sqlite:///relative.db?mode=ro", "sqlite:///relative.db"),
        ("postgresql://db/docs?user=a@b&password=leak", "postgresql://<host hidden>"),
        ("not a url", "<unparsable database URL>"),
    ],
)
def test_database_urls_show_scheme_host_and_database_only(url: str, shown: str) -> None:
    """No user info, no password (even with an unencoded '@' or '/'), no query value."""
    assert display_db_url(url) == shown


def test_account_url_loses_its_query_string() -> None:
    """A SAS in an account URL is dropped whole, the endpoint kept."""
    assert display_url("https://acct.blob.core.windows.net/?sv=1&sig=abc%2F") == (
        "https://acct.blob.core.windows.net/"
    )


def test_connection_string_shows_its_endpoint_only() -> None:
    """Neither the account key nor a SAS of a connection string is shown."""
    text = "AccountName=dev;AccountKey=S3cr3tKey==;BlobEndpoint=http://127.0.0.1:10000/dev;"
    assert display_connection_string(text) == "connection string for http://127.0.0.1:10000/dev"


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("could not connect to postgresql://bob:hunter2@db/x", "hunter2"),
        ("GET https://a.blob.core.windows.net/c?sv=1&sig=AbCd%2Bef== failed", "AbCd%2Bef=="),
        ("AccountName=a;AccountKey=c2VjcmV0a2V5;EndpointSuffix=core.windows.net", "c2VjcmV0a2V5"),
        ("Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123", "abcdefghijklmnopqrstuvwxyz0123"),
        ("token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl here", "eyJhbGciOiJSUzI1NiJ9"),
        ("password=hunter2 in a message", "hunter2"),
    ],
)
def test_scrub_removes_credential_shaped_text_it_was_not_told_about(text: str, secret: str) -> None:
    """Patterns catch passwords, SAS signatures, keys, bearer tokens and JWTs in any text."""
    scrubbed = Redactor().scrub(text)
    assert secret not in scrubbed
    assert HIDDEN in scrubbed or "://db/x" in scrubbed


def test_known_secrets_are_removed_in_every_spelling() -> None:
    """A known secret is removed raw, percent-encoded, decoded and with its whitespace stripped."""
    redactor = Redactor(["p@ss/word", " tok-en-value\r\n"])
    text = "a p@ss/word b p%40ss%2Fword c tok-en-value d"
    assert redactor.scrub(text) == f"a {HIDDEN} b {HIDDEN} c {HIDDEN} d"


def test_secrets_in_takes_every_parser_s_reading_of_a_url() -> None:
    """With an unencoded '@', both the whole user info and SQLAlchemy's shorter password count."""
    found = secrets_in(["--db=postgresql://bob:r2@secret@host/db?password=q1q1q1"])
    assert {"bob:r2@secret", "r2@secret", "r2", "q1q1q1"} <= set(found)


def test_scrub_keeps_ordinary_words() -> None:
    """Help text about bearer tokens and keys is not mangled."""
    text = "the bearer token in $SAFETYNET_ARM_TOKEN; key: value; see https://learn.microsoft.com/x"
    assert Redactor().scrub(text) == text


def test_printable_escapes_what_could_forge_a_line_or_hide_text() -> None:
    """Newlines, carriage returns, escape sequences, bidi overrides and backslashes are escaped."""
    assert printable("a\nb\rc\x1b[2J\u202ed\\") == "a\\nb\\rc\\x1b[2J\\u202ed\\\\"
    assert printable("caf\u00e9 \u6587\u66f8") == "caf\u00e9 \u6587\u66f8"


def test_logging_filter_scrubs_message_arguments_and_exceptions() -> None:
    """A record's formatted message and its exception text are scrubbed; the traceback is gone."""
    redactor = Redactor(["hunter2-secret"])
    try:
        raise ValueError("connect failed for hunter2-secret")
    except ValueError as error:
        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "db %s", ("hunter2-secret",), (ValueError, error, None)
        )
    RedactingFilter(redactor).filter(record)
    assert "hunter2-secret" not in logging.Formatter().format(record)


def test_printable_can_leave_backslashes_of_escaped_names_alone() -> None:
    """A message holding an escaped name is escaped once more without doubling its backslashes."""
    assert printable("name 'a\\nb'\n", backslashes=False) == "name 'a\\nb'\\n"


def test_a_secret_holding_lone_surrogates_is_masked_without_an_error() -> None:
    """An environment value may hold lone surrogates (undecodable bytes): its spellings are
    built without UnicodeEncodeError, and the value is still masked."""
    secret = "tok\udc80\udcffen-canary"
    assert secret not in Redactor([secret]).scrub(f"token {secret} leaked")
