"""`safetynet recover --after-restore`: a dry run that saves a plan and changes nothing, the plan
applied, the plan refused for another container, options that mean nothing refused, and an
apply killed at random instants that a rerun finishes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.reconcile.listing import list_blobs
from blob_safetynet.recover.rollforward import View, judge
from blob_safetynet.store.documents import DocumentStore
from testkit.restore_point import RestorePoint
from tests.conftest import RunCli
from tests.recover.conftest import KilledThenRerun


def options(db_url: str, azurite: Azurite, container: ContainerClient) -> list[str]:
    return [
        "recover",
        "--after-restore",
        "--db",
        db_url,
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
    ]


def restored(
    store: DocumentStore, container: ContainerClient, point: RestorePoint, count: int
) -> dict[str, bytes]:
    """`count` documents before the restore point, then as many put, a third of the first
    replaced and a third deleted after it; the restore made. Name -> bytes expected after."""
    protocol = UploadProtocol(store, container)
    before = [protocol.put(f"before-{n}.txt", f"before {n}".encode(), ".txt") for n in range(count)]
    point.take()
    expected = {f"before-{n}.txt": f"before {n}".encode() for n in range(count)}
    for number in range(count):
        data = f"after {number}".encode() * 50
        protocol.put(f"after-{number}.txt", data, ".txt")
        expected[f"after-{number}.txt"] = data
    for document in before[::3]:
        protocol.replace(document.id, b"replaced " + document.name.encode(), ".txt")
        expected[document.name] = b"replaced " + document.name.encode()
    for document in before[1::3]:
        protocol.delete(document.id)
    point.restore()
    return expected


def test_dry_run_plans_and_changes_nothing_then_the_plan_is_applied(
    run_cli: RunCli,
    db_url: str,
    azurite: Azurite,
    store: DocumentStore,
    bound: ContainerClient,
    point: RestorePoint,
    tmp_path: Path,
) -> None:
    """The dry run exits 1 listing each document with what it gets (the deleted one kept, said
    per document) and leaves the table and the container as they were; --apply-plan exits 0
    with the table and the container agreeing; a second dry run exits 0."""
    expected = restored(store, bound, point, 3)
    plan = tmp_path / "plan.json"
    argv = options(db_url, azurite, bound)
    rows, listing = store.all(), list_blobs(bound)

    code, out, _ = run_cli(*argv, "--write-plan", str(plan))

    assert code == ExitCode.FINDINGS, out
    assert "reseal: before-1.txt" in out
    assert "deleted after the restore point; kept (the default)" in out
    assert "rebuild: after-2.txt" in out
    assert "move: before-0.txt" in out
    assert (store.all(), list_blobs(bound)) == (rows, listing)
    assert json.loads(plan.read_text())["summary"]["rebuild"] == 3
    code, out, _ = run_cli(*argv, "--apply-plan", str(plan))
    assert code == ExitCode.OK, out
    assert "the table and the container agree" in out
    protocol = UploadProtocol(store, bound)
    assert {name: protocol.read(name) for name in expected} == expected
    assert run_cli(*argv)[0] == ExitCode.OK


def test_a_plan_is_refused_elsewhere_and_nothing_is_written(
    run_cli: RunCli,
    db_url: str,
    azurite: Azurite,
    store: DocumentStore,
    bound: ContainerClient,
    point: RestorePoint,
    container_factory: Callable[[], ContainerClient],
    tmp_path: Path,
) -> None:
    """A plan whose target names another container, and the plan applied to a container the
    database is not bound to, each exit 2 naming why; the table is unchanged."""
    restored(store, bound, point, 2)
    plan = tmp_path / "plan.json"
    run_cli(*options(db_url, azurite, bound), "--write-plan", str(plan))
    edited = json.loads(plan.read_text())
    edited["target"]["container"] = "another"
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    rows = store.all()

    code, _, err = run_cli(
        *options(db_url, azurite, bound), "--apply-plan", str(tmp_path / "edited.json")
    )
    other_code, _, other_err = run_cli(
        *options(db_url, azurite, container_factory()), "--apply-plan", str(plan)
    )

    assert (code, other_code) == (ExitCode.USAGE, ExitCode.USAGE)
    assert "refused: the plan was made against container 'another'" in err
    assert "belongs to container" in other_err
    assert store.all() == rows


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--verify-bytes"], "--verify-bytes is recover's without --after-restore"),
        (["--expiry-horizon", "3"], "--expiry-horizon is recover's without --after-restore"),
        (["--apply", "--apply-plan", "p.json"], "--apply and --apply-plan exclude each other"),
        (["--reapply-deletes", "--apply-plan", "p.json"], "the plan holds the choice"),
    ],
)
def test_options_that_mean_nothing_here_exit_2(
    run_cli: RunCli, azurite: Azurite, extra: list[str], message: str, tmp_path: Path
) -> None:
    """Each is refused with exit 2 and its reason before anything is read."""
    argv = ["recover", "--after-restore", "--db", f"sqlite:///{tmp_path / 'none.db'}"]
    code, _, err = run_cli(*argv, "--connection-string", azurite.connection_string, *extra)

    assert code == ExitCode.USAGE
    assert message in err


def test_reapply_deletes_needs_after_restore(run_cli: RunCli) -> None:
    """`recover --reapply-deletes` alone exits 2."""
    code, _, err = run_cli("recover", "--reapply-deletes")

    assert code == ExitCode.USAGE
    assert "--reapply-deletes needs --after-restore" in err


def test_killed_at_random_instants_and_rerun_it_finishes(
    db_url: str,
    azurite: Azurite,
    store: DocumentStore,
    bound: ContainerClient,
    point: RestorePoint,
    killed_then_rerun: KilledThenRerun,
) -> None:
    """`recover --after-restore --apply` killed (SIGKILL) at random instants, then run to the
    end: every document reads its expected bytes, no committed blob was deleted, and a fresh
    judgement finds nothing."""
    expected = restored(store, bound, point, 36)
    committed = {b.name for b in list_blobs(bound).values() if b.state == "committed"}

    finished = killed_then_rerun([*options(db_url, azurite, bound), "--apply"], 45, 0.4, 2.0)

    assert finished.returncode == ExitCode.OK, finished.stdout + finished.stderr
    protocol = UploadProtocol(store, bound)
    assert {name: protocol.read(name) for name in expected} == expected
    assert committed <= set(list_blobs(bound))
    after = judge(View.read(store, bound))
    assert (after.steps, after.findings) == ([], [])
