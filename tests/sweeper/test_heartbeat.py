"""The sweeper's heartbeat: written after every run by the CLI and the Function, read by verify."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, HEARTBEAT_FINISHED_FIELD, STATE_TAG
from blob_safetynet.sweeper.heartbeat import write_heartbeat


def heartbeat(container: ContainerClient) -> dict[str, object]:
    body: dict[str, object] = json.loads(container.download_blob(HEARTBEAT_BLOB).readall())
    return body


def test_first_write_creates_and_later_ones_replace(container: ContainerClient) -> None:
    """The heartbeat holds the latest run's time and counts (lists become their length)."""
    assert write_heartbeat(container, {"examined": 1, "errors": ["x"]}, source="cli")
    first = heartbeat(container)
    assert write_heartbeat(container, {"examined": 7, "errors": []}, source="function")
    second = heartbeat(container)
    assert (first["examined"], first["errors"], second["examined"], second["errors"]) == (
        1,
        1,
        7,
        0,
    )
    assert second["source"] == "function"
    assert datetime.fromisoformat(str(second[HEARTBEAT_FINISHED_FIELD])).tzinfo is not None
    assert STATE_TAG not in container.get_blob_client(HEARTBEAT_BLOB).get_blob_tags()


def test_concurrent_writers_all_succeed_and_leave_one_readable_heartbeat(
    container: ContainerClient,
) -> None:
    """Sweepers finishing together race on the condition; the losers' 409/412 is not an error."""
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda n: write_heartbeat(container, {"examined": n}, source="cli"), range(8))
        )
    assert all(results)
    assert heartbeat(container)["examined"] in range(8)


def test_a_failed_write_warns_and_never_raises(
    service_client: BlobServiceClient, caplog: pytest.LogCaptureFixture
) -> None:
    """No container to write to: False and a warning, so the sweep's own result stands."""
    missing = service_client.get_container_client("no-such-container")
    with caplog.at_level(logging.WARNING, logger="safetynet.sweeper"):
        assert write_heartbeat(missing, {"examined": 0}, source="cli") is False
    assert "heartbeat not written" in caplog.text


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'documents.db'}"
    assert main(["db", "init", "--db", url]) == 0
    return url


def test_sweep_command_writes_a_heartbeat_unless_dry_run(
    azurite: Azurite, container: ContainerClient, sqlite_url: str
) -> None:
    """`safetynet sweep` leaves a heartbeat; `--dry-run`, which changes nothing, does not."""
    args = ["sweep", "--db", sqlite_url, "--connection-string", azurite.connection_string]
    args += ["--container", container.container_name]
    assert main([*args, "--dry-run"]) == 0
    assert not container.get_blob_client(HEARTBEAT_BLOB).exists()
    assert main(args) == 0
    assert heartbeat(container)["source"] == "cli"


def test_function_writes_a_heartbeat(
    azurite: Azurite, container: ContainerClient, sqlite_url: str, function_app: ModuleType
) -> None:
    """Each timer run of the Function leaves a heartbeat saying so."""
    before = datetime.now(UTC)
    function_app.sweep_once(
        {
            "SAFETYNET_DB_URL": sqlite_url,
            "SAFETYNET_CONNECTION_STRING": azurite.connection_string,
            "SAFETYNET_CONTAINER": container.container_name,
        }
    )
    body = heartbeat(container)
    assert body["source"] == "function"
    assert datetime.fromisoformat(str(body[HEARTBEAT_FINISHED_FIELD])) >= before
