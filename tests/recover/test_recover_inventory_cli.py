"""`safetynet recover --inventory`: a dry run from the recover rule's report that an apply
finishes, and the runs it refuses with the exit code and message that say why."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import create_unique_container
from blob_safetynet.embedded.recovery import RecoveryDouble
from blob_safetynet.protocol.upload import UploadProtocol
from blob_safetynet.settings.vocabulary import RECOVER_INVENTORY_RULE
from testkit.inventory import RunSpec, write_recover_run, write_run
from tests.conftest import RunCli
from tests.recover.test_recover_cli import lose, options


@pytest.fixture
def destination(service: BlobServiceClient) -> Iterator[ContainerClient]:
    container = create_unique_container(service, "inv")
    yield container
    container.delete_container()


@pytest.fixture
def target(
    db_url: str, nets: RecoveryDouble, bound: ContainerClient, destination: ContainerClient
) -> list[str]:
    """The target options and --inventory naming the destination."""
    return [*options(db_url, nets, bound), "--inventory", destination.container_name]


@dataclass(frozen=True)
class Estate:
    """The nets, the protocol writing into the bound container, and the inventory's destination."""

    nets: RecoveryDouble
    protocol: UploadProtocol
    bound: ContainerClient
    destination: ContainerClient

    def lose(self, count: int) -> list[bytes]:
        return lose(self.protocol, self.bound, count)

    def report(self, spec: RunSpec | None = None) -> str:
        """A run of the recover rule over `bound` as it is now (with versions when they are on)."""
        versions = bool(self.nets.nets.versioning)
        return write_recover_run(self.bound, self.destination, spec, versions=versions)


@pytest.fixture
def estate(
    nets: RecoveryDouble,
    protocol: UploadProtocol,
    bound: ContainerClient,
    destination: ContainerClient,
) -> Estate:
    return Estate(nets, protocol, bound, destination)


def test_a_dry_run_from_the_report_saves_a_plan_that_apply_plan_restores(
    run_cli: RunCli, estate: Estate, target: list[str], tmp_path: Path
) -> None:
    """The dry run names the run its candidates came from and exits 1 with the plan saved;
    --apply-plan (without --inventory) restores every document; a second dry run from the same,
    now stale, report finds nothing lost (exit 0)."""
    estate.lose(4)
    estate.report()
    plan = tmp_path / "plan.json"

    code, out, _ = run_cli("recover", *target, "--write-plan", str(plan), "--expiry-horizon", "0")
    assert code == ExitCode.FINDINGS, out
    assert "candidates from inventory run" in out
    assert "4 recoverable, 0 not" in out
    code, out, _ = run_cli("recover", *target[:-2], "--apply-plan", str(plan))
    assert code == ExitCode.OK, out
    assert "4 restored, 0 left for a person" in out
    assert run_cli("recover", *target)[0] == ExitCode.OK


def test_a_copy_gone_since_the_run_is_printed_on_its_row(
    run_cli: RunCli, estate: Estate, target: list[str]
) -> None:
    """A deleted document whose only copy the service dropped after the run: exit 1, the row
    says no kept copy and prints the report's copy as no longer kept."""
    document = estate.protocol.put("doc.txt", b"right", ".txt")
    estate.bound.delete_blob(document.blob_name)
    estate.report()
    estate.nets.nets.copies[(estate.bound.container_name, document.blob_name)] = []

    code, out, _ = run_cli("recover", *target)

    assert code == ExitCode.FINDINGS, out
    assert "no kept copy" in out
    assert "in the report, no longer kept:" in out


def test_a_run_of_another_rule_is_refused_with_exit_2(
    run_cli: RunCli, estate: Estate, target: list[str]
) -> None:
    """Reading reconcile's rule (its run has no kept copies) exits 2 with what the rule lacks."""
    estate.lose(2)
    write_run(estate.bound, estate.destination)

    code, _, err = run_cli("recover", *target, "--inventory-rule", "safetynet")

    assert code == ExitCode.USAGE
    assert "cannot serve recover" in err
    assert "includeDeleted is not true" in err


def test_a_report_that_is_not_parquet_exits_2(
    run_cli: RunCli, estate: Estate, target: list[str]
) -> None:
    """A complete run whose report file is not Parquet exits 2 naming the run; nothing is
    planned from it."""
    estate.lose(2)
    prefix = estate.report(RunSpec(rule=RECOVER_INVENTORY_RULE, corrupt=True, files=1))

    code, out, err = run_cli("recover", *target)

    assert code == ExitCode.USAGE, out
    assert "cannot be read as the rule's Parquet report" in err
    assert prefix in err


def test_no_run_of_the_rule_exits_3(
    run_cli: RunCli, protocol: UploadProtocol, bound: ContainerClient, target: list[str]
) -> None:
    """An inventory container without a run of the recover rule exits 3 (wait for the run, or
    plan from a listing)."""
    lose(protocol, bound, 1)

    code, _, err = run_cli("recover", *target)

    assert code == ExitCode.INCOMPLETE
    assert f"no completed inventory run of rule {RECOVER_INVENTORY_RULE!r}" in err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--apply-plan", "plan.json"], "drop --inventory"),
        (["--after-restore"], "--after-restore"),
        (["--inventory-rule", "safetynet-recover"], "letters and digits"),
    ],
)
def test_options_that_exclude_inventory_exit_2(
    run_cli: RunCli, target: list[str], extra: list[str], says: str
) -> None:
    """--inventory with --apply-plan or --after-restore, or a rule name ARM could not hold,
    exits 2 before anything is read."""
    code, _, err = run_cli("recover", *target, *extra)

    assert code == ExitCode.USAGE
    assert says in err


def test_help_says_the_report_is_only_a_candidate_list(capsys: pytest.CaptureFixture[str]) -> None:
    """`recover --help` says each candidate is listed live and each blob read before writing."""
    with pytest.raises(SystemExit):
        main(["recover", "--help"])
    text = " ".join(capsys.readouterr().out.split())

    assert "the report is only a candidate list" in text
    assert "each candidate is still listed live" in text
    assert "the apply reads each blob again before writing" in text
    assert f"(default {RECOVER_INVENTORY_RULE})" in text
