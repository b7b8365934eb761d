"""What `pip install blob-safetynet` installs: one import name, no test doubles, no Pulumi."""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from setuptools import find_packages

from blob_safetynet.embedded import azurite

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_wheel_claims_one_top_level_import_name() -> None:
    """The packages setuptools puts in the wheel all sit under blob_safetynet, beside a user's
    own infra/ and policies/ folders, and none of them is the test kit."""
    find = PROJECT["tool"]["setuptools"]["packages"]["find"]
    packages = find_packages(str(ROOT), include=find["include"])
    assert {name.split(".")[0] for name in packages} == {"blob_safetynet"}
    assert not [name for name in packages if "testkit" in name or name.startswith("tests")]


def test_the_protocol_library_alone_pulls_in_no_pulumi() -> None:
    """The base dependencies name no Pulumi package; Pulumi comes with the [infra] extra."""
    base = {Requirement(line).name for line in PROJECT["project"]["dependencies"]}
    infra = {
        Requirement(line).name for line in PROJECT["project"]["optional-dependencies"]["infra"]
    }
    assert not {name for name in base if name.startswith("pulumi")}
    assert {"pulumi", "pulumi-azure-native", "pulumi-policy"} <= infra


def test_the_console_script_lives_in_the_package() -> None:
    """`safetynet` is an entry point into blob_safetynet, not into a top-level module."""
    assert PROJECT["project"]["scripts"] == {"safetynet": "blob_safetynet.cli.main:main"}


def test_an_installed_wheel_without_azurite_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outside a checkout (no package.json beside the package), the missing emulator's message
    names `npm install azurite` and the setting that points at it, not a folder to run npm in."""
    monkeypatch.setattr(azurite, "PROJECT_ROOT", tmp_path)
    monkeypatch.delenv(azurite.AZURITE_BIN_ENV, raising=False)
    if shutil.which("node") is None:
        pytest.skip("node is not on PATH: the Node.js message comes first")
    with pytest.raises(azurite.AzuriteError, match=r"npm install azurite.*SAFETYNET_AZURITE_BIN"):
        azurite.find_azurite_bin()
