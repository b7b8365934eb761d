"""Files the toolkit writes (reconcile plans, the function zip) are checked before any work,
never written onto an input, and never written through a planted symlink."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.infra import function_zip
from blob_safetynet.protocol import blobs
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG
from blob_safetynet.store.documents import DocumentStore
from tests.conftest import RunCli


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    """SQLite only, here: the database file itself is one of the outputs refused."""
    return f"sqlite:///{tmp_path / 'state.db'}"


@pytest.fixture
def reconcile_cli(
    run_cli: RunCli, azurite: Azurite, store: DocumentStore, container: ContainerClient
) -> RunCli:
    """`safetynet reconcile` against a bound container holding one committed orphan."""
    blobs.bind(container, store.database_id())
    container.upload_blob("orphan.bin", b"o", tags={STATE_TAG: COMMITTED})
    container.upload_blob("pending-orphan.bin", b"p", tags={STATE_TAG: PENDING})
    time.sleep(1.1)

    options = {
        "--db": str(store.engine.url),
        "--connection-string": azurite.connection_string,
        "--container": container.container_name,
        "--older-than": "1s",
    }

    def invoke(*extra: str) -> tuple[int, str, str]:
        return run_cli("reconcile", *(f"{o}={v}" for o, v in options.items()), *extra)

    return invoke


def test_the_database_file_is_refused_as_the_plan(
    reconcile_cli: RunCli, store: DocumentStore
) -> None:
    """`--write-plan <the --db SQLite file>` exits 2 and leaves the database as it was."""
    database = Path(str(store.engine.url.database))
    before = database.read_bytes()
    code, _, err = reconcile_cli("--write-plan", str(database))
    assert code == ExitCode.USAGE
    assert "also an input" in err
    assert database.read_bytes() == before


def test_the_plan_applied_is_refused_as_the_plan_written(
    reconcile_cli: RunCli, tmp_path: Path
) -> None:
    """A --write-plan that is the --apply-plan file is refused before anything is deleted."""
    plan = tmp_path / "plan.json"
    assert reconcile_cli("--write-plan", str(plan))[0] == ExitCode.FINDINGS
    written = plan.read_bytes()
    code, _, err = reconcile_cli(
        "--apply-plan",
        str(plan),
        "--max-delete",
        "1",
        "--write-plan",
        str(tmp_path / "." / "plan.json"),
    )
    assert code == ExitCode.USAGE
    assert "also an input" in err
    assert plan.read_bytes() == written


@pytest.mark.parametrize("where", ["missing/plan.json", "afile/plan.json", "adir"])
def test_an_unwritable_plan_path_fails_before_repairing(
    reconcile_cli: RunCli, container: ContainerClient, tmp_path: Path, where: str
) -> None:
    """`--repair --write-plan` into a missing folder, under a file or onto a folder exits 2
    before any repair: the pending orphan is still there."""
    (tmp_path / "afile").write_text("x", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    code, out, err = reconcile_cli("--repair", "--write-plan", str(tmp_path / where))
    assert code == ExitCode.USAGE, out + err
    assert "--write-plan" in err
    assert "pending-orphan.bin" in list_blobs(container)


def test_a_symlink_at_the_plan_path_is_replaced_not_followed(
    reconcile_cli: RunCli, tmp_path: Path
) -> None:
    """A symlink planted at the plan path is replaced by the plan; its target is untouched."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    plan = tmp_path / "plan.json"
    plan.symlink_to(victim)
    assert reconcile_cli("--write-plan", str(plan))[0] == ExitCode.FINDINGS
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert not plan.is_symlink()
    assert "orphan.bin" in plan.read_text(encoding="utf-8")


def test_a_symlink_planted_beside_the_zip_is_never_written_through(
    run_cli: RunCli, tmp_path: Path
) -> None:
    """A symlink at the zip's old temporary name (`out.zip.partial`) is left pointing at an
    untouched file: the zip is written through an unpredictable exclusive name."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me", encoding="utf-8")
    (tmp_path / "out.zip.partial").symlink_to(victim)
    output = tmp_path / "out.zip"
    code, _, err = run_cli("build-function", "--skip-dependencies", "--output", str(output))
    assert code == ExitCode.OK, err
    assert victim.read_text(encoding="utf-8") == "keep me"
    assert output.read_bytes()[:2] == b"PK"
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "out.zip",
        "out.zip.partial",
        "victim.txt",
    ]


def test_a_zip_input_is_refused_as_the_output(run_cli: RunCli, tmp_path: Path) -> None:
    """`--output` naming a file the zip is built from (through a hard link too) exits 2 and
    leaves it as it was."""
    source = function_zip.FUNCTION_DIR / "host.json"
    before = source.read_bytes()
    outputs = [source]
    alias = tmp_path / "alias.json"
    try:
        os.link(source, alias)
        outputs.append(alias)
    except OSError:
        pass  # another file system: the path itself is the case that matters
    for output in outputs:
        code, _, err = run_cli("build-function", "--skip-dependencies", "--output", str(output))
        assert code == ExitCode.USAGE
        assert "also an input" in err
    assert source.read_bytes() == before


@pytest.mark.parametrize("name", ["n" * 300, "a\x00b"])
def test_an_output_name_the_system_refuses_exits_2(
    run_cli: RunCli, tmp_path: Path, name: str
) -> None:
    """A --output name too long for the file system, or holding a NUL, is a usage error."""
    code, _, err = run_cli(
        "build-function", "--skip-dependencies", "--output", str(tmp_path / name)
    )
    assert code == ExitCode.USAGE, err
    assert list(tmp_path.iterdir()) == []


def test_a_plan_entry_dated_without_a_utc_offset_is_refused(
    reconcile_cli: RunCli, container: ContainerClient, tmp_path: Path
) -> None:
    """A plan whose entry's last_modified has no UTC offset is malformed: exit 2, and the
    committed orphan it lists is not deleted."""
    plan = tmp_path / "plan.json"
    assert reconcile_cli("--write-plan", str(plan))[0] == ExitCode.FINDINGS
    document = json.loads(plan.read_text(encoding="utf-8"))
    document["delete"][0]["last_modified"] = "2020-01-01T00:00:00"
    plan.write_text(json.dumps(document), encoding="utf-8")
    code, _, err = reconcile_cli("--apply-plan", str(plan), "--max-delete", "1")
    assert code == ExitCode.USAGE, err
    assert "no UTC offset" in err
    assert "orphan.bin" in list_blobs(container)
