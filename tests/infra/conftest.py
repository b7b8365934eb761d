"""Fixtures for the Pulumi mock tests: one shared default run and a factory for variants."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pytest

from tests.infra.harness import Mutate, StackRun, run_stack

UPLOADER_ID = "11111111-2222-3333-4444-555555555555"
READER_ID = "66666666-7777-8888-9999-000000000000"
WITH_PRINCIPALS: Mapping[str, object] = {
    "uploaderPrincipalIds": [UPLOADER_ID],
    "readerPrincipalIds": [READER_ID],
}

RunFactory = Callable[..., StackRun]


@pytest.fixture(scope="session")
def stack() -> StackRun:
    """The defaults plus one uploader and one reader, so every resource kind appears once."""
    return run_stack(WITH_PRINCIPALS)


@pytest.fixture
def run() -> RunFactory:
    """Runs the program with `WITH_PRINCIPALS` updated by the given overrides."""

    def make(
        overrides: Mapping[str, object] | None = None, mutate: Mutate | None = None
    ) -> StackRun:
        return run_stack({**WITH_PRINCIPALS, **(overrides or {})}, mutate)

    return make
