"""Shared fixtures: one Azurite per test folder, a fresh container per test, SQLite and PostgreSQL."""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite, create_unique_container
from testkit.scratch_db import (
    admin_url_from_environment,
    scratch_database,
    scratch_schema,
    unreachable_reason,
    with_settings,
)

POSTGRES_ADMIN_URL = admin_url_from_environment()
TEST_TIMEOUTS = {"lock_timeout": "20s", "statement_timeout": "60s"}
"""Every connection of a PostgreSQL test (in-process or a CLI it starts with the URL) gives up
on a lock after 20 s and on a statement after 60 s: a test whose code waits on a lock its own
other session holds (a `DROP INDEX CONCURRENTLY` behind the test's open transaction) fails with
the server's error instead of hanging. The longest wait a test means is 3 s
(tests/sweeper/test_byte_order_index.py holds a build that long)."""
REQUIRE_POSTGRES = os.environ.get("SAFETYNET_REQUIRE_POSTGRES") == "1"


REPO = Path(__file__).resolve().parents[1]
FUNCTION_APP_PATH = REPO / "sweeper" / "function_app.py"
"""The Function's entry module: at the zip root, so it is a file, not part of a package."""

RUNNING_AZURITE_PORT = os.environ.get("SAFETYNET_TEST_AZURITE_PORT")
"""Set by `make mutation`: one emulator serves every mutant's test run instead of one each."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("verification", "behaviour probes (tests/verification)")
    group.addoption(
        "--account-url",
        default=None,
        help="run the verification probes against this live blob endpoint "
        "(DefaultAzureCredential) instead of the embedded Azurite",
    )
    group.addoption(
        "--verify-container",
        default="documents",
        help="the live container the probes act in (default documents)",
    )


class AzuritePerFolder:
    """One embedded Azurite per top-level test folder (tests/sweeper, tests/verification, ...),
    the previous folder's stopped when the next one's starts.

    Azurite's blob garbage collector runs every 10 minutes (DEFAULT_GC_INTERVAL_MS in its
    blob/utils/constants.js). In an emulator that had held a whole suite's blobs, the second
    pass took 74 s (its `--debug` log, 2026-12-01) while requests waited: the SDK's retries then
    turned a create into 409 and a setup or teardown into 75-80 s. No folder's tests run for 10
    minutes, so no emulator here lives to see that pass.
    """

    def __init__(self) -> None:
        self._folder: str | None = None
        self._emulator: Azurite | None = None

    def get(self, folder: str) -> Azurite:
        if RUNNING_AZURITE_PORT:
            running = Azurite()
            running.port = int(RUNNING_AZURITE_PORT)
            return running
        if self._emulator is None or self._folder != folder:
            self.close()
            self._emulator, self._folder = Azurite().start(), folder
        return self._emulator

    def close(self) -> None:
        if self._emulator is not None:
            self._emulator.stop()
        self._emulator = self._folder = None


def _test_folder(path: Path) -> str:
    """`sweeper` for tests/sweeper/..., the empty name for the modules directly in tests/."""
    parts = path.resolve().relative_to(REPO / "tests").parts
    return parts[0] if len(parts) > 1 else ""


@pytest.fixture(autouse=True)
def _logger_levels_restored() -> Iterator[None]:
    """Each test starts with the log levels a fresh process has: a test that runs the Function's
    timers leaves the `safetynet` logger at INFO (`let_info_through`), and on a worker that ran
    one first a CLI test would see progress records a terminal never shows by default."""
    loggers = [logging.getLogger(), logging.getLogger("safetynet"), logging.getLogger("azure")]
    levels = [logger.level for logger in loggers]
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


@pytest.fixture(scope="session")
def azurites() -> Iterator[AzuritePerFolder]:
    emulators = AzuritePerFolder()
    yield emulators
    emulators.close()


@pytest.fixture(scope="module")
def azurite(azurites: AzuritePerFolder, request: pytest.FixtureRequest) -> Azurite:
    """The emulator of the requesting module's test folder."""
    return azurites.get(_test_folder(request.path))


@pytest.fixture(scope="module")
def service_client(azurite: Azurite) -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(azurite.connection_string)


@pytest.fixture
def container_factory(service_client: BlobServiceClient) -> Iterator[Callable[[], ContainerClient]]:
    """Makes empty containers with unique names and deletes them after the test."""
    made: list[ContainerClient] = []

    def make() -> ContainerClient:
        container = create_unique_container(service_client, "t")
        made.append(container)
        return container

    yield make
    for container in made:
        container.delete_container()


@pytest.fixture
def container(container_factory: Callable[[], ContainerClient]) -> ContainerClient:
    return container_factory()


@pytest.fixture(scope="session")
def postgres_database() -> Iterator[str]:
    """A database of its own for this test session, dropped at the end; its URL carries
    `TEST_TIMEOUTS`."""
    reason = unreachable_reason(POSTGRES_ADMIN_URL)
    if reason is not None:
        message = f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable: {reason}"
        if REQUIRE_POSTGRES:
            pytest.fail(message)
        pytest.skip(message)
    with scratch_database(POSTGRES_ADMIN_URL, prefix="safetynet_test") as url:
        yield with_settings(url, TEST_TIMEOUTS)


@pytest.fixture
def postgres_url(postgres_database: str) -> Iterator[str]:
    """An empty PostgreSQL schema of this test's own."""
    with scratch_schema(postgres_database) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL: a SQLite file, or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'documents.db'}"
    else:
        yield request.getfixturevalue("postgres_url")


RunCli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run_cli(capsys: pytest.CaptureFixture[str]) -> RunCli:
    """Runs the console script in-process: (exit code, stdout, stderr). A traceback fails."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        assert "Traceback" not in err
        return code, out, err

    return invoke


def load_function_app() -> ModuleType:
    """sweeper/function_app.py imported under the name the Functions host gives it."""
    loaded = sys.modules.get("function_app")
    if loaded is not None and loaded.__file__ == str(FUNCTION_APP_PATH):
        return loaded
    spec = importlib.util.spec_from_file_location("function_app", FUNCTION_APP_PATH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["function_app"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def function_app() -> ModuleType:
    """The Function's entry module, loaded once per session from sweeper/function_app.py."""
    return load_function_app()
