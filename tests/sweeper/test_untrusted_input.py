"""JSON and times from outside (plans, heartbeats, lease metadata, stack config) are refused
cleanly when too deep, too big or naive: a usage error or a log line, never a crash."""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.infra.config import ConfigError, parse
from blob_safetynet.infra.package import DeployerIdentityError, token_object_id
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.untrusted import UntrustedInputError
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document
from blob_safetynet.sweeper.lease import (
    ACQUIRED,
    HOLDER,
    LEASE_BLOB,
    SweepLease,
    SweepLeaseHeldError,
)
from tests.conftest import RunCli
from tests.infra.harness import RAW_DEFAULTS

DEEP = "[" * 200_000 + "]" * 200_000
DEEP_OBJECT = '{"a":' * 200_000 + "1" + "}" * 200_000
NAIVE = "2020-01-01T00:00:00"


@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT])
def test_deep_json_is_refused_before_parsing(text: str) -> None:
    """A document nested 200,000 levels is an input error, not a RecursionError."""
    with pytest.raises(UntrustedInputError, match="nests deeper than"):
        untrusted.load_json(text, "the plan", max_bytes=len(text))


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    """Only structure nests: a string full of brackets is read as it is."""
    assert untrusted.load_json('["[[[[{{{{\\"]"]', "x", max_bytes=100, max_depth=1) == [
        '[[[[{{{{"]'
    ]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[1]" * 10, "larger than"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1,]", "not valid JSON"),
        (b"1" * 5000, "number too long"),
    ],
)
def test_malformed_json_names_the_reason_not_the_content(data: bytes, reason: str) -> None:
    """Oversized, non-UTF-8, broken and over-long-number documents each say why, without content."""
    with pytest.raises(UntrustedInputError, match=reason) as caught:
        untrusted.load_json(
            data, "the heartbeat", max_bytes=20 if reason == "larger than" else 10**4
        )
    assert data.decode("utf-8", "replace")[:8] not in str(caught.value)


@pytest.mark.parametrize("value", [NAIVE, "yesterday", None, 12])
def test_a_time_without_an_offset_is_malformed(value: object) -> None:
    """A naive, unparsable or non-text time is refused."""
    with pytest.raises(UntrustedInputError):
        untrusted.utc_time(value, "acquired_utc")


def test_a_time_with_an_offset_becomes_utc() -> None:
    """An aware time is returned in UTC."""
    assert untrusted.utc_time("2020-01-01T02:00:00+02:00", "t") == datetime(2020, 1, 1, tzinfo=UTC)


def test_a_deep_plan_file_is_a_usage_error(run_cli: RunCli, tmp_path: Path) -> None:
    """`reconcile --apply-plan` with a plan nested 200,000 levels exits 2, not 5."""
    plan = tmp_path / "plan.json"
    plan.write_text(DEEP, encoding="utf-8")
    db = tmp_path / "d.db"
    db.write_bytes(b"")
    code, _, err = run_cli(
        "reconcile",
        "--db",
        f"sqlite:///{db}",
        "--account-url",
        "https://example.blob.core.windows.net",
        "--apply-plan",
        str(plan),
        "--max-delete",
        "1",
    )
    assert code == ExitCode.USAGE, err
    assert "nests deeper" in err


@pytest.mark.parametrize("text", [DEEP, "[" * 40 + "]" * 40])
def test_deep_stack_config_list_is_a_config_error(text: str) -> None:
    """A principal-id list nested 200,000 levels in the stack config is a ConfigError naming
    the key."""
    with pytest.raises(ConfigError, match=r"readerPrincipalIds: the value (nests|is larger)"):
        parse({**RAW_DEFAULTS, "readerPrincipalIds": text})


def plant_foreign_lease(container: ContainerClient, acquired: str) -> None:
    """Another sweeper's lease whose metadata carries `acquired` as its acquisition time."""
    blob = container.get_blob_client(LEASE_BLOB)
    blob.upload_blob(b"")
    lease = blob.acquire_lease(lease_duration=60)
    blob.set_blob_metadata({HOLDER: "elsewhere", ACQUIRED: acquired}, lease=lease)


def test_a_naive_lease_time_is_reported_not_a_type_error(container: ContainerClient) -> None:
    """Lease metadata with a time lacking its UTC offset: held elsewhere, and the message says
    the time is unreadable (no TypeError)."""
    plant_foreign_lease(container, NAIVE)
    with pytest.raises(SweepLeaseHeldError, match="no UTC offset"):
        SweepLease(container).acquire()


def test_the_function_logs_a_naive_lease_time_and_skips(
    azurite: Azurite,
    container: ContainerClient,
    db_url: str,
    store: DocumentStore,
    stale_rows: Callable[..., list[Document]],
    function_app: ModuleType,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The Function skips the tick with one log line naming the unreadable metadata."""
    stale_rows(1)
    plant_foreign_lease(container, NAIVE)
    settings = {
        "SAFETYNET_DB_URL": db_url,
        "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
        "SAFETYNET_CONTAINER": container.container_name,
        "SAFETYNET_LEASE": "true",
    }
    with caplog.at_level(logging.INFO):
        assert function_app.sweep_once(settings) is None
    assert f"its {ACQUIRED} metadata has no UTC offset" in caplog.text


def test_a_token_with_deeply_nested_claims_is_not_the_deployers() -> None:
    """An access token whose claims nest 200,000 levels is refused as unreadable, no crash."""
    payload = base64.urlsafe_b64encode(DEEP.encode()).decode().rstrip("=")
    with pytest.raises(DeployerIdentityError, match="not a JWT"):
        token_object_id(f"e30.{payload}.sig")
