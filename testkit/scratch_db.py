"""Scratch PostgreSQL databases and schemas: made for one run or one test, dropped afterwards.

The tests and the benchmarks need a PostgreSQL they may fill and throw away. Given an admin URL
(a role allowed to CREATE DATABASE), `scratch_database` makes a database with a random name and
drops it, connections and all, however the block ends; `scratch_schema` does the same for one
schema inside a database, reached through `search_path`, which is much cheaper per test.
`with_settings` gives a URL whose every connection starts with run-time parameters (the tests'
lock and statement timeouts), which a scratch schema's URL keeps.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

import sqlalchemy as sa

ADMIN_URL_VARIABLE: Final = "SAFETYNET_TEST_POSTGRES_URL"
DEFAULT_ADMIN_URL: Final = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
"""The CI server: trust auth on loopback, database `test`."""


def admin_url_from_environment() -> str:
    """The admin URL the tests and benchmarks use: $SAFETYNET_TEST_POSTGRES_URL or the default."""
    return os.environ.get(ADMIN_URL_VARIABLE, DEFAULT_ADMIN_URL)


def unreachable_reason(url: str) -> str | None:
    """None when the server at `url` answers, else the first line of why it does not."""
    engine = sa.create_engine(url)
    try:
        with engine.connect():
            return None
    except sa.exc.OperationalError as error:
        return str(error.orig).strip().splitlines()[0]
    finally:
        engine.dispose()


def with_settings(url: str, settings: Mapping[str, str]) -> str:
    """`url` whose connections set these run-time parameters as they start: libpq's `options`
    connection parameter, `-c name=value` each, after those it held
    (https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-CONNECT-OPTIONS)."""
    parsed = sa.make_url(url)
    held = parsed.query.get("options", "")
    words = [*([held] if isinstance(held, str) else held)]
    words += [f"-c {name}={value}" for name, value in settings.items()]
    options = " ".join(word for word in words if word)
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


@contextmanager
def scratch_database(admin_url: str, prefix: str = "safetynet_scratch") -> Iterator[str]:
    """The URL of a database made now on `admin_url`'s server, dropped at the end whatever happens."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        try:
            yield sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@contextmanager
def scratch_schema(database_url: str) -> Iterator[str]:
    """A URL whose search_path is a schema made now in `database_url`, dropped afterwards; the
    settings `database_url` holds (`with_settings`) are kept."""
    schema = f"t{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(database_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        try:
            yield with_settings(database_url, {"search_path": schema})
        finally:
            with engine.connect() as conn:
                conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        engine.dispose()
