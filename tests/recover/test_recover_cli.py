"""`safetynet recover`: a dry run that saves a plan, an apply that finishes after being killed at
random instants, the plan refused elsewhere, and the exit code for copies about to expire."""

from __future__ import annotations

from pathlib import Path

from azure.storage.blob import ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.recover.plan import make_plan
from blob_safetynet.store.documents import DocumentStore
from tests.conftest import RunCli
from tests.recover.conftest import KilledThenRerun, bound_container


def options(db_url: str, nets: RecoveryDouble, container: ContainerClient) -> list[str]:
    return [
        "--db",
        db_url,
        "--connection-string",
        nets.connection_string,
        "--container",
        container.container_name,
    ]


def lose(protocol: UploadProtocol, container: ContainerClient, count: int) -> list[bytes]:
    """`count` documents, half deleted and half overwritten behind the protocol."""
    data = []
    for number in range(count):
        content = f"document {number}".encode() * 3
        document = protocol.put(f"doc-{number}.txt", content, ".txt")
        if number % 2:
            container.upload_blob(document.blob_name, b"wrong", overwrite=True)
        else:
            container.delete_blob(document.blob_name)
        data.append(content)
    return data


def test_dry_run_saves_a_plan_and_apply_plan_restores_it(
    run_cli: RunCli,
    db_url: str,
    nets: RecoveryDouble,
    protocol: UploadProtocol,
    bound: ContainerClient,
    tmp_path: Path,
) -> None:
    """The dry run exits 1 with the plan saved and nothing restored; --apply-plan restores
    every document (exit 0); a second dry run finds nothing (exit 0)."""
    lose(protocol, bound, 6)
    plan = tmp_path / "plan.json"
    target = options(db_url, nets, bound)

    code, out, _ = run_cli("recover", *target, "--write-plan", str(plan), "--expiry-horizon", "0")
    assert code == ExitCode.FINDINGS, out
    assert "6 recoverable, 0 not" in out
    code, out, _ = run_cli("recover", *target, "--apply-plan", str(plan))
    assert code == ExitCode.OK, out
    assert "6 restored, 0 left for a person" in out
    assert run_cli("recover", *target)[0] == ExitCode.OK


def test_copies_expiring_within_the_horizon_exit_6(
    run_cli: RunCli, db_url: str, soft_delete_only: RecoveryDouble, store: DocumentStore
) -> None:
    """Five of seven retention days gone: the dry run says so and exits 6 with a 2-day horizon,
    1 with a 1-day one."""
    container = bound_container(soft_delete_only, store)
    document = UploadProtocol(store, container).put("doc.txt", b"right", ".txt")
    container.delete_blob(document.blob_name)
    soft_delete_only.nets.age(5)
    target = options(db_url, soft_delete_only, container)

    code, out, err = run_cli("recover", *target, "--expiry-horizon", "2")
    assert code == ExitCode.EXPIRING, out + err
    assert "2 day(s) left" in out
    assert run_cli("recover", *target, "--expiry-horizon", "1")[0] == ExitCode.FINDINGS


def test_killed_at_random_instants_and_rerun_it_finishes(
    db_url: str,
    nets: RecoveryDouble,
    protocol: UploadProtocol,
    store: DocumentStore,
    bound: ContainerClient,
    killed_then_rerun: KilledThenRerun,
) -> None:
    """`recover --apply` killed (SIGKILL) at random instants, then run again to the end:
    every document holds its bytes and a last plan lists nothing."""
    data = lose(protocol, bound, 24)

    finished = killed_then_rerun(
        ["recover", *options(db_url, nets, bound), "--apply"], 44, 0.5, 2.5
    )

    assert finished.returncode == ExitCode.OK, finished.stdout + finished.stderr
    documents = sorted(store.all(), key=lambda d: int(d.name.split("-")[1].split(".")[0]))
    for document, content in zip(documents, data, strict=True):
        assert bound.get_blob_client(document.blob_name).download_blob().readall() == content
    assert make_plan(store, bound)["rows"] == []
