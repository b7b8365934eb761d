"""SNV-RECOVERY-DRILL: a probe document written through the protocol and deleted behind it is
given back by `safetynet recover`'s code, its bytes checked and its time to recover kept; each
outcome through a double that answers as an account would."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite, create_unique_container
from blob_safetynet.embedded.proxy import LatencyProxy
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.function.drill import THROWAWAY, recovery_drill
from blob_safetynet.policies.continuous.run import verify_continuously
from blob_safetynet.policies.probes import ProbeOutcome, Target, run_probes
from blob_safetynet.policies.probes.drill import DRILL_BLOB, RECOVERY_DRILL
from blob_safetynet.policies.probes.runner import ProbeResult, VerificationRun
from blob_safetynet.settings.vocabulary import VERIFY_PREFIX
from testkit.service_doubles import (
    answers_undelete_without_restoring,
    keeps_other_bytes,
    misbehaving_service,
    soft_deleting_service,
)

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]

PASS, FAIL, NOT_VERIFIABLE = ProbeOutcome.PASS, ProbeOutcome.FAIL, ProbeOutcome.NOT_VERIFIABLE


def drill(endpoint: str) -> VerificationRun:
    """The drill alone, through `endpoint`'s connection string, in a fresh container."""
    service = BlobServiceClient.from_connection_string(endpoint)
    container = create_unique_container(service, "drill")
    with recovery_drill() as acts:
        return run_probes(
            Target(service, container.container_name, recovery=acts), [RECOVERY_DRILL]
        )


def result_of(run: VerificationRun) -> ProbeResult:
    assert not run.incomplete, run.incomplete
    (result,) = run.results
    return result


@pytest.mark.parametrize("versioning", [False, True], ids=["soft-delete", "versioning"])
def test_the_drill_passes_where_the_nets_keep_the_document(
    azurite: Azurite, versioning: bool
) -> None:
    """With blob soft delete (the deleted base blob undeleted) or versioning (the previous
    version copied back), the document comes back with its bytes, the time is reported, the
    row lived in a throwaway store that the detail names, and nothing of the run is left."""
    with RecoveryDouble(azurite.port, versioning=versioning) as nets:
        run = drill(nets.connection_string)
    result = result_of(run)

    assert result.outcome is PASS, result.detail
    assert ("from version" if versioning else "from deleted") in result.detail
    assert result.seconds is not None
    assert f" in {result.seconds:.2f} s" in result.detail
    assert THROWAWAY in result.detail
    assert result.requests <= RECOVERY_DRILL.requests
    assert run.leftovers == []


def test_plain_azurite_is_not_verifiable_because_undelete_answers_501(azurite: Azurite) -> None:
    """Azurite keeps no deleted blob: the recovery finds no copy and Undelete Blob answers 501,
    so the drill cannot tell, and says why; no time to recover is reported."""
    result = result_of(drill(azurite.connection_string))

    assert result.outcome is NOT_VERIFIABLE
    assert "no kept copy" in result.detail
    assert "501" in result.detail
    assert result.seconds is None


def test_without_the_recovery_code_the_drill_says_so(azurite: Azurite) -> None:
    """A run handed no recovery code (the probes cannot import it) is NOT_VERIFIABLE, never a
    guess."""
    service = BlobServiceClient.from_connection_string(azurite.connection_string)
    container = create_unique_container(service, "drill")

    run = run_probes(Target(service, container.container_name), [RECOVERY_DRILL])

    assert run.results[0].outcome is NOT_VERIFIABLE
    assert "no recovery code was handed to this run" in run.results[0].detail


Prepare = Callable[[RecoveryDouble, BlobServiceClient], None]
Front = Callable[[int], LatencyProxy]


def purge_before_listing(nets: RecoveryDouble, admin: BlobServiceClient) -> None:
    """The nets lose every kept copy just before the recovery lists them (retention ran out)."""
    nets.once("GET comp=list", nets.nets.copies.clear)


def rewrite_after_undelete(nets: RecoveryDouble, admin: BlobServiceClient) -> None:
    """Right after Undelete Blob and the recovery's one read of the restored blob, before the
    drill reads it, its bytes are replaced behind the nets: the restore reports success over
    other bytes."""

    def replace_bytes() -> None:
        for container in admin.list_containers(name_starts_with="drill"):
            client = admin.get_container_client(container.name)
            for item in client.list_blobs(name_starts_with=VERIFY_PREFIX):
                if item.name.endswith(f"/{DRILL_BLOB}"):
                    client.upload_blob(item.name, b"bytes the probe never wrote", overwrite=True)

    nets.once(
        "PUT comp=undelete", lambda: nets.once("GET", lambda: nets.once("GET", replace_bytes))
    )


@pytest.fixture
def on_nets(azurite: Azurite) -> Iterator[Callable[..., ProbeResult]]:
    """Runs the drill on the recovery double (soft delete on), after `prepare` sets a trigger
    on it, or through `front`, a misbehaving double in front of it."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with RecoveryDouble(azurite.port) as nets:

        def run(front: Front | None = None, prepare: Prepare | None = None) -> ProbeResult:
            if prepare is not None:
                prepare(nets, admin)
            endpoint = front(nets.port) if front is not None else nullcontext(nets)
            with endpoint as proxy:
                return result_of(drill(proxy.connection_string))

        yield run


def test_restored_bytes_that_differ_fail(on_nets: Callable[..., ProbeResult]) -> None:
    """The recovery says it restored the document, but the blob then holds other bytes: FAIL."""
    result = on_nets(prepare=rewrite_after_undelete)

    assert result.outcome is FAIL, result.detail
    assert "does not hold the bytes written" in result.detail


def test_nothing_kept_although_soft_delete_is_on_fails(on_nets: Callable[..., ProbeResult]) -> None:
    """Soft delete is on but the nets kept nothing by the time the recovery looked: the
    recovery finds no copy and Undelete Blob answers 404, so nothing came back: FAIL."""
    result = on_nets(prepare=purge_before_listing)

    assert result.outcome is FAIL, result.detail
    assert result.detail.startswith("nothing came back: the recovery said unrecoverable")
    assert "Undelete Blob answered 404" in result.detail


def test_an_undelete_that_restores_nothing_fails(on_nets: Callable[..., ProbeResult]) -> None:
    """A service that answers 200 to Undelete Blob and brings nothing back: FAIL."""
    result = on_nets(lambda port: misbehaving_service(port, answers_undelete_without_restoring))

    assert result.outcome is FAIL, result.detail
    assert "although Undelete Blob answered OK (the blob stayed missing)" in result.detail


def test_a_net_that_kept_other_bytes_fails(
    azurite: Azurite, on_nets: Callable[..., ProbeResult]
) -> None:
    """The nets kept bytes the probe never wrote (changed just before the delete): the
    recovery refuses them (copies differ), Undelete Blob brings them back: FAIL."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)

    result = on_nets(lambda port: misbehaving_service(port, keeps_other_bytes, admin))

    assert result.outcome is FAIL, result.detail
    assert "copies differ" in result.detail
    assert "(other bytes came back)" in result.detail


def test_a_kept_copy_the_recovery_missed_fails(azurite: Azurite) -> None:
    """A service that keeps the deleted blob but does not list it: the recovery finds no copy
    while Undelete Blob restores the bytes, so the recovery code missed it: FAIL."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with soft_deleting_service(azurite.port, admin, lists_deleted=False) as hidden:
        result = result_of(drill(hidden.connection_string))

    assert result.outcome is FAIL, result.detail
    assert "the recovery code missed a kept copy" in result.detail


def test_the_continuous_history_records_the_time_to_recover(azurite: Azurite) -> None:
    """A continuous run with the drill keeps its seconds on the check and as the run's
    time_to_recover_s."""
    with RecoveryDouble(azurite.port) as nets, recovery_drill() as acts:
        service = BlobServiceClient.from_connection_string(nets.connection_string)
        container = create_unique_container(service, "drill")
        record = verify_continuously(
            Target(service, container.container_name, recovery=acts), probes=[RECOVERY_DRILL]
        )

    (check,) = record["checks"]
    assert check["outcome"] == "PASS"
    assert record["time_to_recover_s"] == check["seconds"]
    assert 0 < record["time_to_recover_s"] < 60


def test_safetynet_verify_runs_the_drill_and_its_json_gives_the_seconds(
    azurite: Azurite, tmp_path: Path
) -> None:
    """The command hands the recovery code to the probes: on an account with soft delete its
    drill passes, and the JSON check carries the time to recover."""
    output = tmp_path / "verify.json"
    with RecoveryDouble(azurite.port) as nets:
        service = BlobServiceClient.from_connection_string(nets.connection_string)
        container = create_unique_container(service, "drill")
        main(
            [
                "verify",
                "--connection-string",
                nets.connection_string,
                "--container",
                container.container_name,
                "--format",
                "json",
                "--output",
                str(output),
            ]
        )

    checks = {c["check"]: c for c in json.loads(output.read_text())["checks"]}
    drill_check = checks[RECOVERY_DRILL.id]
    assert drill_check["outcome"] == "PASS", drill_check["detail"]
    assert 0 < drill_check["seconds"] < 60
