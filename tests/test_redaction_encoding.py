"""Query values of a database URL never come back, however a driver spells them.

Each canary holds a '+' (a space once form-decoded), a '%22' (a '"', which JSON escapes) and
capitals (SQLAlchemy lower-cases booleans before it quotes them), so an exact-text scrubber
misses every spelling a driver shows. Every channel is checked: stdout (the JSON object),
stderr (messages and log records) and the Function's error.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from types import ModuleType

import pytest

from blob_safetynet.settings.appsettings import SettingsError
from blob_safetynet.settings.redaction import Redactor, secrets_in
from tests.conftest import RunCli

POSTGRES = "postgresql+psycopg://127.0.0.1:5432/safetynet_no_such_database"
"""A database that does not exist: should libpq take a value, nothing is created anywhere."""


def canary() -> str:
    return f"Canary{secrets.token_hex(3)}+Q%22Z"


def assert_no_canary(text: str) -> None:
    assert "canary" not in text.lower(), text


@pytest.mark.parametrize("key", ["timeout", "check_same_thread", "cached_statements"])
def test_a_sqlite_query_value_the_driver_refuses_is_bad_usage_naming_the_key(
    run_cli: RunCli, tmp_path: Path, key: str
) -> None:
    """`db init` exits 2 naming the key; the value is in no output, in any spelling."""
    url = f"sqlite:///{tmp_path / 'x.db'}?{key}={canary()}"
    code, out, err = run_cli("db", "init", "--json", "--db", url)
    assert code == 2, err
    assert f"keys: {key}" in err
    assert json.loads(out)["error"]["exit_code"] == 2
    assert_no_canary(out + err)


@pytest.mark.postgres
@pytest.mark.parametrize("key", ["keepalives", "sslmode"])
def test_a_postgres_query_value_libpq_quotes_is_never_shown(run_cli: RunCli, key: str) -> None:
    """libpq quotes the decoded value in its error; stdout, stderr and the JSON show none of it."""
    code, out, err = run_cli("db", "init", "--json", "--db", f"{POSTGRES}?{key}={canary()}")
    assert code in (2, 3), err
    assert_no_canary(out + err)


def test_an_entra_sslmode_libpq_does_not_know_is_not_echoed(run_cli: RunCli) -> None:
    """The Entra rule refuses a weak or unknown sslmode without repeating an unknown value."""
    url = f"postgresql+psycopg://app@db.example.com/d?sslmode={canary()}"
    code, out, err = run_cli("db", "init", "--json", "--db-auth", "entra", "--db", url)
    assert code == 2, err
    assert "an sslmode libpq does not know" in err
    assert_no_canary(out + err)


def test_the_function_reports_a_refused_database_url_by_setting_name(
    function_app: ModuleType, tmp_path: Path, run_cli: RunCli
) -> None:
    """SAFETYNET_DB_URL with a value the driver refuses fails naming the setting, not the value."""
    database = tmp_path / "x.db"
    assert run_cli("db", "init", "--db", f"sqlite:///{database}")[0] == 0
    env = {
        "SAFETYNET_DB_URL": f"sqlite:///{database}?timeout={canary()}",
        "SAFETYNET_CONNECTION_STRING": "UseDevelopmentStorage=true",
    }
    with pytest.raises(SettingsError) as refused:
        function_app.sweep_once(env)
    assert "SAFETYNET_DB_URL" in str(refused.value)
    assert_no_canary(str(refused.value))


def test_scrub_matches_a_known_secret_decoded_lower_cased_and_json_escaped() -> None:
    """A query value is found form-decoded, percent-decoded, lower-cased and JSON-escaped."""
    redactor = Redactor(secrets_in(["--db=sqlite:///x.db?timeout=CanaryAb+Q%22Z%5C"]))
    for shown in ('CanaryAb Q"Z\\', 'canaryab q"z\\', json.dumps({"m": 'canaryab q"z\\'})):
        assert_no_canary(redactor.scrub(shown))


def test_scrub_matches_a_known_secret_escaped_for_xml() -> None:
    """A JUnit report escapes '&', '<' and quotes: the secret is found in that spelling too."""
    redactor = Redactor(secrets_in(["--db=sqlite:///x.db?timeout=Canary%26%3C%27Q%22"]))
    for shown in ("Canary&amp;&lt;&apos;Q&quot;", "Canary&amp;&lt;&#x27;Q&quot;"):
        assert_no_canary(redactor.scrub(f"<failure message='{shown}'/>"))
