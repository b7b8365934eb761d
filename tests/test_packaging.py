"""What `pip install blob-safetynet` installs: one import name, no test doubles, no Pulumi."""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tomllib
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from setuptools import find_packages

from blob_safetynet.embedded import azurite

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
UV = ROOT / ".venv" / "bin" / "uv"


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
    assert PROJECT["project"]["scripts"] == {"safetynet": "blob_safetynet.cli.main:console_main"}


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


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The wheel and the sdist as `uv build` makes them from this checkout."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [str(UV), "build", "--quiet", "--out-dir", str(out), str(ROOT)], cwd=ROOT, check=True
    )
    [wheel] = out.glob("*.whl")
    [sdist] = out.glob("*.tar.gz")
    return wheel, sdist


def _wheel_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _sdist_files(sdist: Path) -> dict[str, bytes]:
    with tarfile.open(sdist) as archive:
        return {
            member.name.split("/", 1)[1]: archive.extractfile(member).read()  # type: ignore[union-attr]
            for member in archive.getmembers()
            if member.isfile() and "/" in member.name
        }


def _metadata(text: bytes) -> Message:
    return Parser().parsestr(text.decode("utf-8"))


def _checked_metadata(metadata: Message) -> None:
    """What an index page and a resolver read: license, authors, classifiers, URLs, extras."""
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Author"] or metadata["Author-email"]
    classifiers = set(metadata.get_all("Classifier") or [])
    assert {f"Programming Language :: Python :: 3.{minor}" for minor in (11, 12, 13)} <= classifiers
    assert "Typing :: Typed" in classifiers
    urls = {line.split(",", 1)[0] for line in metadata.get_all("Project-URL") or []}
    assert {"Homepage", "Source", "Issues", "Changelog", "Documentation"} <= urls
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    base = [r for r in requirements if r.marker is None]
    [psycopg] = [r for r in base if r.name == "psycopg"]
    assert psycopg.extras == set(), "a library leaves psycopg's binary to the application"
    binary = [r for r in requirements if r.marker and r.marker.evaluate({"extra": "binary"})]
    assert [(r.name, r.extras) for r in binary] == [("psycopg", {"binary"})]
    for requirement in base + binary:
        assert not _caps_below_next_major(requirement), str(requirement)


def _caps_below_next_major(requirement: Requirement) -> bool:
    """An upper bound below the next major of its lower bound (`~=26.0.1`, `<26.5`)."""
    lower = [Version(s.version) for s in requirement.specifier if s.operator in (">=", "~=")]
    for spec in requirement.specifier:
        version = Version(spec.version)
        if spec.operator == "~=" and len(version.release) > 2:
            return True
        if spec.operator in ("<", "<=") and lower and version < Version(f"{lower[0].major + 1}"):
            return True
    return False


def test_the_wheel_ships_the_license_its_metadata_names_and_its_types(
    artifacts: tuple[Path, Path],
) -> None:
    """The built wheel holds LICENSE (the repository's, byte for byte) and py.typed, and its
    METADATA has the license, authors, classifiers, URLs and the psycopg split."""
    wheel, _ = artifacts
    files = _wheel_files(wheel)
    [metadata] = [name for name in files if name.endswith(".dist-info/METADATA")]
    [license_file] = [name for name in files if name.endswith(".dist-info/licenses/LICENSE")]
    assert files[license_file] == (ROOT / "LICENSE").read_bytes()
    assert "MIT License" in files[license_file].decode()
    assert "blob_safetynet/py.typed" in files
    _checked_metadata(_metadata(files[metadata]))


def test_the_sdist_ships_the_license_and_no_tests_it_could_not_run(
    artifacts: tuple[Path, Path],
) -> None:
    """The sdist holds LICENSE and the same metadata; it holds no tests (they need the
    repository's test kit, Azurite and PostgreSQL), so none is shipped half-runnable."""
    _, sdist = artifacts
    files = _sdist_files(sdist)
    assert files["LICENSE"] == (ROOT / "LICENSE").read_bytes()
    assert not [name for name in files if name.startswith(("tests/", "testkit/"))]
    _checked_metadata(_metadata(files["PKG-INFO"]))


def test_the_repository_venv_still_gets_the_binary() -> None:
    """The dev extra (the Makefile's venv, CI) pulls in psycopg's binary: no libpq needed."""
    dev = [Requirement(line) for line in PROJECT["project"]["optional-dependencies"]["dev"]]
    [itself] = [r for r in dev if r.name == PROJECT["project"]["name"]]
    assert "binary" in itself.extras


def test_the_readmes_install_lines_name_this_version_and_its_repository() -> None:
    """The README's install lines without a clone are PEP 508 direct references with the
    [infra] extra: the release asset named as `make dist` names the wheel, and the tag, both of
    this version in the project's Source repository. `make adoption` runs the first line, with a
    clone; these two need the published release, so their form is what is checked here."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Use it in your own repository") :]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    version, source = PROJECT["project"]["version"], PROJECT["project"]["urls"]["Source"]
    assert f"dist/blob_safetynet-{version}-py3-none-any.whl" in blocks[0]
    lines = [line for line in blocks[1].splitlines() if line.startswith("pip install ")]
    requirements = [Requirement(line.removeprefix("pip install ").strip('"')) for line in lines]
    assert {(r.name, frozenset(r.extras)) for r in requirements} == {
        ("blob-safetynet", frozenset({"infra"}))
    }
    assert [r.url for r in requirements] == [
        f"{source}/releases/download/v{version}/blob_safetynet-{version}-py3-none-any.whl",
        f"git+{source}@v{version}",
    ]
