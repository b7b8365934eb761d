"""The PostgreSQL fixtures: every connection a test makes from its URL gives up on a lock and on
a statement (tests/conftest.py `TEST_TIMEOUTS`), so a test fails instead of hanging."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from testkit.scratch_db import with_settings
from tests.conftest import TEST_TIMEOUTS


def test_settings_are_added_after_the_options_a_url_holds() -> None:
    """`with_settings` keeps the `options` a URL holds and adds `-c name=value` after them."""
    url = with_settings("postgresql+psycopg://h/db?options=-csearch_path%3Ds", {"a": "1"})
    assert sa.make_url(url).query["options"] == "-csearch_path=s -c a=1"


@pytest.mark.postgres
def test_a_test_schema_connection_has_the_timeouts_and_its_search_path(postgres_url: str) -> None:
    """A connection from a test's schema URL runs with the tests' lock and statement timeouts
    and the schema's search_path."""
    engine = sa.create_engine(postgres_url)
    with engine.connect() as conn:
        shown = {
            name: conn.exec_driver_sql(f"SELECT current_setting('{name}')").scalar_one()
            for name in [*TEST_TIMEOUTS, "search_path"]
        }
    engine.dispose()
    assert shown["lock_timeout"] == "20s"
    assert shown["statement_timeout"] == "1min"
    assert shown["search_path"].startswith("t")
