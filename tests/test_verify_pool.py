"""`safetynet verify` on the embedded Azurite discards no connection for a full pool."""

from __future__ import annotations

import logging

import pytest

from tests.conftest import RunCli


def test_the_concurrent_create_probe_fits_the_connection_pool(
    run_cli: RunCli, caplog: pytest.LogCaptureFixture
) -> None:
    """Its 20 racing writers share a pool of 20 connections: urllib3 never warns of a full one."""
    with caplog.at_level(logging.WARNING, logger="urllib3"):
        code, _, _ = run_cli("verify")
    assert code == 0
    assert [r for r in caplog.records if "Connection pool is full" in r.getMessage()] == []
