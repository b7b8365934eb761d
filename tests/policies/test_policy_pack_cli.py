"""`safetynet policy pack DIR`: the CrossGuard pack written from the installed package, bound to
the environment it runs in (tests/test_examples_own_repository.py starts it as Pulumi does)."""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

import pytest
import yaml

from blob_safetynet import package_version
from blob_safetynet.cli.exitcodes import ExitCode
from tests.conftest import RunCli


def test_the_pack_names_this_environment_and_what_it_holds(tmp_path: Path, run_cli: RunCli) -> None:
    """PulumiPolicy.yaml's virtualenv is this environment, absolute; requirements.txt names
    the versions installed in it; the entry point constructs the package's pack."""
    code, out, _ = run_cli("policy", "pack", str(tmp_path / "pack"))
    assert code == ExitCode.OK
    project = yaml.safe_load((tmp_path / "pack" / "PulumiPolicy.yaml").read_text())
    assert project["runtime"] == {"name": "python", "options": {"virtualenv": sys.prefix}}
    assert project["version"] == package_version()
    requirements = (tmp_path / "pack" / "requirements.txt").read_text().splitlines()
    assert f"blob-safetynet=={package_version()}" in requirements
    assert f"pulumi-policy=={metadata.version('pulumi-policy')}" in requirements
    main = (tmp_path / "pack" / "__main__.py").read_text()
    assert "PolicyPack(name=PACK_NAME, policies=POLICIES" in main
    assert f"runs it with the virtual environment {sys.prefix}" in out


def test_without_pulumi_policy_the_pack_is_refused(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An environment without pulumi-policy gets exit 2 naming the infra extra, and no pack."""
    monkeypatch.setitem(sys.modules, "pulumi_policy", None)
    code, _, err = run_cli("policy", "pack", str(tmp_path / "pack"))
    assert code == ExitCode.USAGE
    assert "blob-safetynet[infra]" in err
    assert not (tmp_path / "pack").exists()


def test_a_folder_that_cannot_hold_the_pack_is_bad_usage(tmp_path: Path, run_cli: RunCli) -> None:
    """DIR naming a file: exit 2 naming it, nothing written."""
    (tmp_path / "taken").write_text("x")
    code, _, err = run_cli("policy", "pack", str(tmp_path / "taken"))
    assert code == ExitCode.USAGE
    assert "is not a folder" in err
    assert (tmp_path / "taken").read_text() == "x"
