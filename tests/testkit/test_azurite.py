"""The managed Azurite: clear errors when it cannot run, and no process left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, LinearRetry

from blob_safetynet.embedded.azurite import (
    AZURITE_BIN_ENV,
    Azurite,
    AzuriteError,
    create_unique_container,
)
from testkit.fault_proxy import Fault, LatencyProxy


def test_missing_override_binary_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """An override pointing at nothing names the variable and the path."""
    monkeypatch.setenv(AZURITE_BIN_ENV, str(tmp_path / "nope"))
    with pytest.raises(AzuriteError, match=AZURITE_BIN_ENV):
        Azurite().start()


def test_missing_node_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without `node` on PATH the error says Node.js is required."""
    monkeypatch.delenv(AZURITE_BIN_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(AzuriteError, match=r"Node\.js"):
        Azurite().start()


def test_emulator_that_dies_at_start_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A binary that exits at once is reported with its output, not waited on until a timeout."""
    fake = tmp_path / "azurite-blob"
    fake.write_text("#!/bin/sh\necho 'cannot bind'\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv(AZURITE_BIN_ENV, str(fake))
    with pytest.raises(AzuriteError, match="cannot bind"):
        Azurite(start_timeout_s=10).start()


def test_stop_leaves_no_process() -> None:
    """After the `with` block the emulator's process is gone."""
    with Azurite() as emulator:
        pid = emulator.pid
        assert pid is not None
    assert emulator.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_container_create_whose_answer_was_lost_is_created(azurite: Azurite) -> None:
    """The client's retry of a create it never heard back from meets 409: the container (a
    random name only this call uses) is made, and is what the helper returns."""
    with LatencyProxy(azurite.port, delay_s=0.0) as proxy:
        proxy.inject("PUT", Fault(reset="after"))
        # The SDK's own retry, without its 15 s back-off.
        retry = LinearRetry(backoff=0, random_jitter_range=0)
        service = BlobServiceClient.from_connection_string(
            proxy.connection_string, retry_policy=retry
        )
        container = create_unique_container(service, "lost")
        assert proxy.counts()["PUT"] == 2
    assert container.container_name.startswith("lost")
    assert container.exists()
