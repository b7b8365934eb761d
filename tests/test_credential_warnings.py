"""A failed credential chain is reported in a line, not in several KB of azure-identity text."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from blob_safetynet.cli.commands.common import CREDENTIAL_LINE_LIMIT, install_logging
from blob_safetynet.settings.redaction import Redactor

CHAIN_FAILURE = (
    "DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
    "Attempted credentials:\n"
    "\tEnvironmentCredential: EnvironmentCredential authentication unavailable. Environment "
    "variables are not fully configured.\nVisit https://aka.ms/azsdk/python/identity/"
    "environmentcredential/troubleshoot to troubleshoot this issue.\n"
    "\tManagedIdentityCredential: ManagedIdentityCredential authentication unavailable, no "
    "response from the IMDS endpoint.\n"
    "\tAzureCliCredential: Azure CLI not found on path\n" + "\tdetail: " + "x" * 1500 + "\n"
)


@pytest.fixture
def stderr(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    captured = io.StringIO()
    monkeypatch.setattr("sys.stderr", captured)
    handler = install_logging(Redactor())
    try:
        yield captured
    finally:
        logging.getLogger().removeHandler(handler)


def test_a_failed_chain_is_one_short_line_naming_what_was_tried(stderr: io.StringIO) -> None:
    """The chain's multi-KB WARNING keeps its first line and the credentials it tried."""
    logging.getLogger("azure.identity._credentials.chained").warning(CHAIN_FAILURE)
    shown = stderr.getvalue()
    assert len(shown) < CREDENTIAL_LINE_LIMIT + 200
    assert "DefaultAzureCredential failed to retrieve a token" in shown
    assert "EnvironmentCredential, ManagedIdentityCredential, AzureCliCredential" in shown
    assert "x" * 100 not in shown


def test_other_loggers_keep_their_whole_message(stderr: io.StringIO) -> None:
    """Only azure-identity's long warnings are cut: the project's own lines are kept whole."""
    logging.getLogger("safetynet.test").warning("y" * 1000)
    assert "y" * 1000 in stderr.getvalue()
