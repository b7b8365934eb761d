"""`safetynet db init`, `sweep` and `demo` as a user runs them: output, exit codes, errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol import blobs
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.store.documents import DocumentStore
from blob_safetynet.store.tables import Document

Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """Runs the console script in-process and returns (exit code, stdout, stderr)."""

    def invoke(*argv: str) -> tuple[int, str, str]:
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    return invoke


@pytest.fixture
def sweep_args(azurite: Azurite, container: ContainerClient, db_url: str) -> list[str]:
    return [
        "sweep",
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
    ]


def test_db_init_twice(run: Run, tmp_path: Path) -> None:
    """`db init` creates the schema and a second run succeeds too."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    assert run("db", "init", "--db", url)[0] == ExitCode.OK
    assert run("db", "init", "--db", url)[0] == ExitCode.OK
    DocumentStore.from_url(url).check_schema()


def test_db_init_bad_scheme_exits_2(run: Run) -> None:
    """An unsupported database scheme is a usage error naming the supported ones."""
    code, _, err = run("db", "init", "--db", "mongodb://localhost/x")
    assert code == ExitCode.USAGE
    assert "sqlite" in err


def test_sweep_json_reports_counts(
    run: Run, sweep_args: list[str], store: DocumentStore, stale_rows: Callable[..., list[Document]]
) -> None:
    """`--json` prints one object with the documented keys and the sweep's counts."""
    stale_rows(3)
    stale_rows(1, with_blobs=False, prefix="never")
    code, out, _ = run(*sweep_args, "--json")
    assert code == ExitCode.OK
    report = json.loads(out)
    assert {k: report[k] for k in ("examined", "deleted_blobs", "missing_blobs")} == {
        "examined": 4,
        "deleted_blobs": 3,
        "missing_blobs": 1,
    }
    assert (report["rolled_forward"], report["deleted_rows"], report["errors"]) == (0, 4, [])
    assert store.count() == 0


def test_sweep_dry_run_changes_nothing(
    run: Run,
    sweep_args: list[str],
    store: DocumentStore,
    container: ContainerClient,
    stale_rows: Callable[..., list[Document]],
) -> None:
    """`--dry-run` reports what it would delete and leaves rows and blobs in place."""
    stale_rows(2)
    code, out, _ = run(*sweep_args, "--dry-run", "--json")
    assert code == ExitCode.OK
    assert json.loads(out)["deleted_blobs"] == 2
    assert store.count() == 2
    assert len(list_blobs(container)) == 2


def test_sweep_failed_row_exits_1(
    run: Run,
    sweep_args: list[str],
    container: ContainerClient,
    stale_rows: Callable[..., list[Document]],
) -> None:
    """A row whose blob cannot be deleted makes the run exit 1 and names the document."""
    (stuck,) = stale_rows(1)
    lease = container.get_blob_client(stuck.blob_name).acquire_lease(lease_duration=60)
    try:
        code, out, _ = run(*sweep_args)
    finally:
        lease.release()
    assert code == ExitCode.FINDINGS
    assert stuck.id in out


@pytest.mark.parametrize(
    ("option", "value", "named"),
    [
        ("--cutoff", "soon", "--cutoff"),
        ("--cutoff", "0s", "--cutoff"),
        ("--db", "ftp://x/y", "database URL scheme"),
        ("--container", "no-such-container", "does not exist"),
        ("--concurrency", "0", "concurrency"),
        ("--concurrency", "four", "--concurrency"),
    ],
)
def test_sweep_bad_input_exits_2(
    run: Run, sweep_args: list[str], store: DocumentStore, option: str, value: str, named: str
) -> None:
    """A bad cutoff, database URL, container or concurrency is a usage error that says which."""
    code, _, err = run(*sweep_args, option, value)
    assert code == ExitCode.USAGE
    assert named in err


def test_sweep_bad_lease_setting_exits_2(
    run: Run, sweep_args: list[str], store: DocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SAFETYNET_LEASE that is neither true nor false is refused, not read as false."""
    monkeypatch.setenv("SAFETYNET_LEASE", "yes please")
    code, _, err = run(*sweep_args)
    assert code == ExitCode.USAGE
    assert "SAFETYNET_LEASE" in err


def test_sweep_missing_table_exits_2(run: Run, azurite: Azurite, tmp_path: Path) -> None:
    """A database without the documents table exits 2 and points at `db init`."""
    code, _, err = run(
        "sweep",
        "--db",
        f"sqlite:///{tmp_path / 'empty.db'}",
        "--connection-string",
        azurite.connection_string,
    )
    assert code == ExitCode.USAGE
    assert "safetynet db init" in err


@pytest.mark.parametrize(
    ("target", "named"),
    [
        (["--account-url", "http://acct.blob.core.windows.net"], "https"),
        (["--connection-string", "not a connection string"], "--connection-string"),
        ([], "exactly one"),
    ],
)
def test_sweep_bad_blob_target_exits_2(
    run: Run, store: DocumentStore, db_url: str, target: list[str], named: str
) -> None:
    """Plain-HTTP account URLs, malformed connection strings and no target are usage errors."""
    code, _, err = run("sweep", "--db", db_url, *target)
    assert code == ExitCode.USAGE
    assert named in err


def test_sweep_unreachable_endpoint_exits_3(run: Run, tmp_path: Path) -> None:
    """An emulator that is not running is reported as an unusable endpoint, exit 3 (incomplete)."""
    db_url = f"sqlite:///{tmp_path / 'x.db'}"
    DocumentStore.from_url(db_url).init_schema()
    dead = Azurite()
    dead.port = 1
    code, _, err = run("sweep", "--db", db_url, "--connection-string", dead.connection_string)
    assert code == ExitCode.INCOMPLETE
    assert "endpoint" in err


@pytest.mark.e2e
def test_demo_runs_green(run: Run) -> None:
    """The README's first command reports every scenario as expected and exits 0."""
    code, out, _ = run("demo")
    assert code == ExitCode.OK
    assert "MISMATCH" not in out
    assert "VIOLATED" not in out


def test_sweep_of_a_container_bound_to_another_database_exits_2(
    run: Run,
    sweep_args: list[str],
    container: ContainerClient,
    stale_rows: Callable[..., list[Document]],
    store: DocumentStore,
) -> None:
    """A container bound to another database is refused before any row or blob changes."""
    stale_rows(2)
    blobs.bind(container, "another-database")
    code, _, err = run(*sweep_args)
    assert code == ExitCode.USAGE
    assert "bound to database another-database" in err
    assert store.count() == 2


def test_first_sweep_binds_the_container(
    run: Run, sweep_args: list[str], container: ContainerClient, store: DocumentStore
) -> None:
    """The first sweep writes the binding marker with this database's id; a dry run does not."""
    assert run(*sweep_args, "--dry-run")[0] == ExitCode.OK
    assert blobs.bound_database(container) is None
    assert run(*sweep_args)[0] == ExitCode.OK
    assert blobs.bound_database(container) == store.database_id()
