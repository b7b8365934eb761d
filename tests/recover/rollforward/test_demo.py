"""`safetynet demo --scenario restore` on the tests' Azurite: every row measures what it
expects, and the command runs it (exit 0)."""

from __future__ import annotations

import pytest
from azure.storage.blob import BlobServiceClient

from blob_safetynet.cli.demo_restore import render_restore, run_restore_demo
from blob_safetynet.cli.exitcodes import ExitCode
from tests.conftest import RunCli


def test_the_restore_story_measures_what_it_expects(service_client: BlobServiceClient) -> None:
    """T1-T5 all match: nothing planned for deletion after the restore, the dry run's steps,
    the forged blob left, every acknowledged document read back, reconcile clean."""
    report = run_restore_demo(service_client)

    assert [(s.id, s.measured) for s in report.scenarios if not s.ok] == []
    assert render_restore(report).endswith("nothing acknowledged was lost")


@pytest.mark.e2e
def test_the_command_runs_it_on_an_azurite_of_its_own(run_cli: RunCli) -> None:
    """`safetynet demo --scenario restore` starts its own Azurite and exits 0."""
    code, out, _ = run_cli("demo", "--scenario", "restore")

    assert code == ExitCode.OK, out
    assert "T5 | reconcile after the roll-forward" in out
