"""The deployment zip: layout, reproducibility, pip failures, and the version the infra program sets."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import tomllib
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from blob_safetynet.cli import main as cli
from blob_safetynet.cli.exitcodes import ExitCode
from blob_safetynet.infra import function_zip
from blob_safetynet.infra.function_zip import (
    DEFAULT_PYTHON_VERSION,
    RUNTIME_REQUIREMENTS,
    SITE_PACKAGES,
    BuildError,
    build_zip,
)

REPO = Path(__file__).resolve().parents[2]
FULL_BUILD = os.environ.get("SAFETYNET_TEST_FULL_BUILD") == "1"


class FakePip:
    """Stands in for pip: records the command and installs one module plus build litter."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    def __call__(self, argv: Sequence[str]) -> None:
        self.commands.append(list(argv))
        target = Path(argv[argv.index("--target") + 1])
        (target / "fakedep").mkdir()
        (target / "fakedep" / "__init__.py").write_text("VALUE = 1\n")
        (target / "fakedep" / "__pycache__").mkdir()
        (target / "fakedep" / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0")
        (target / "bin").mkdir()
        (target / "bin" / "fake-script").write_text("#!/home/someone/.venv/bin/python\n")


def failing_pip(argv: Sequence[str]) -> None:
    raise BuildError("pip could not install the function's dependencies: no network")


def names_in(path: Path) -> set[str]:
    with zipfile.ZipFile(path) as archive:
        return set(archive.namelist())


def run_isolated(root: Path, code: str, *, with_venv_packages: bool) -> str:
    """Runs `code` with `root` first on sys.path; -S also hides this venv's site-packages."""
    flags = ["-I"] if with_venv_packages else ["-I", "-S"]
    prelude = f"import sys; sys.path[:0] = [{str(root)!r}, {str(root / SITE_PACKAGES)!r}]\n"
    result = subprocess.run(
        [sys.executable, *flags, "-c", prelude + code],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


IMPORT_CHECK = """
import json, pathlib, function_app
from blob_safetynet import sweeper
names = [f.get_function_name() for f in function_app.app.get_functions()]
leaked = sorted(
    m for m in sys.modules
    if m.split(".")[0] in {"pulumi", "tests", "testkit", "safetynet", "sweeper", "policies"}
    or m.split(".")[:2] in (["blob_safetynet", p] for p in ("infra", "policies", "cli", "embedded"))
)
homes = [pathlib.Path(p).resolve() for p in (sys.path[0], sys.prefix, sys.base_prefix)]
outside_zip = sorted(
    m for m, module in list(sys.modules.items())
    if getattr(module, "__file__", None)
    and not any(pathlib.Path(module.__file__).resolve().is_relative_to(h) for h in homes)
)
print(json.dumps(
    {"sweeper": sweeper.__file__, "functions": names, "leaked": leaked, "outside_zip": outside_zip}
))
"""
"""Imports the unpacked zip's entry (first on sys.path); `outside_zip` names any module that came
from neither the zip nor the Python installation, such as one the venv's editable install served
from a working copy because the zip lacks it."""


RUNTIME_MODULES = (
    "settings/__init__.py",
    "settings/appsettings.py",
    "settings/atomicfile.py",
    "settings/endpoints.py",
    "settings/parsed.py",
    "settings/redaction.py",
    "settings/signals.py",
    "settings/untrusted.py",
    "settings/vocabulary.py",
    "store/__init__.py",
    "store/documents.py",
    "store/engine.py",
    "store/tables.py",
    "protocol/__init__.py",
    "protocol/blobs.py",
    "protocol/clients.py",
    "protocol/identity.py",
    "protocol/pooling.py",
    "protocol/upload.py",
    "sweeper/__init__.py",
    "sweeper/binding.py",
    "sweeper/heartbeat.py",
    "sweeper/lease.py",
    "sweeper/sweep.py",
    "reconcile/__init__.py",
    "reconcile/adopt.py",
    "reconcile/inventory.py",
    "reconcile/inventory_report.py",
    "reconcile/listing.py",
    "recover/__init__.py",
    "recover/apply.py",
    "recover/containers.py",
    "recover/inventory.py",
    "recover/nets.py",
    "recover/plan.py",
    "recover/reads.py",
    "recover/rollforward.py",
    "recover/rollforward_apply.py",
    "recover/rollforward_bytes.py",
    "recover/rollforward_plan.py",
    "recover/sample.py",
    "function/__init__.py",
    "function/drill.py",
    "function/invocation.py",
    "function/sweep.py",
    "function/verify.py",
)
"""The runtime packages as they ship; a module added to one of them must be added here on
purpose."""


def test_zip_holds_exactly_the_entry_and_the_runtime_packages(tmp_path: Path) -> None:
    """The code-only zip is function/ at its root, the sweeper package, the policies package
    (the verification timer's probes and rules) and requirements.txt: no CLI, no test kit, no
    tests, no infra."""
    result = build_zip(tmp_path / "f.zip", with_dependencies=False)

    names = names_in(result.path)

    assert names == {
        "function_app.py",
        "host.json",
        "requirements.txt",
        "blob_safetynet/__init__.py",
        *(f"blob_safetynet/{module}" for module in RUNTIME_MODULES),
        *(
            path.relative_to(REPO).as_posix()
            for path in (REPO / "blob_safetynet" / "policies").rglob("*.py")
            if "__pycache__" not in path.parts
        ),
    }
    assert {
        path.relative_to(REPO / "blob_safetynet").as_posix()
        for package in function_zip.RUNTIME_PACKAGES
        for path in (REPO / "blob_safetynet" / package).rglob("*.py")
        if "__pycache__" not in path.parts
    } == set(RUNTIME_MODULES)
    assert not {n.split("/")[0] for n in names} & {"testkit", "tests", "infra", "benchmarks"}
    assert not {"/".join(n.split("/")[:2]) for n in names} & {
        "blob_safetynet/cli",
        "blob_safetynet/infra",
        "blob_safetynet/embedded",
    }


def requirements_in(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as archive:
        lines = archive.read("requirements.txt").decode().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def test_requirements_pin_the_runtime_dependencies_and_theirs(tmp_path: Path) -> None:
    """requirements.txt pins each runtime dependency and its own dependencies with ==, sorted, no
    pulumi, and of the management SDKs only the two the verification timer's audit reads with."""
    result = build_zip(tmp_path / "f.zip", pip=FakePip())

    listed = requirements_in(result.path)

    names = [line.split("==")[0] for line in listed]
    assert all(len(line.split("==")) == 2 for line in listed)
    assert names == sorted(names)
    assert {Requirement(root).name for root in RUNTIME_REQUIREMENTS} | {
        "azure-core",
        "psycopg-binary",
    } <= set(names)
    assert not [line for line in listed if "pulumi" in line]
    assert {name for name in names if "mgmt" in name} == {
        "azure-mgmt-authorization",
        "azure-mgmt-core",
        "azure-mgmt-storage",
    }


def test_requirements_versions_are_uv_lock_versions(tmp_path: Path) -> None:
    """Every pin in the zip's requirements.txt is the version uv.lock holds, so the zip runs what the tests ran."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    locked = {package["name"]: package["version"] for package in lock["package"]}

    result = build_zip(tmp_path / "f.zip", pip=FakePip())

    pins = dict(line.split("==") for line in requirements_in(result.path))
    assert pins == {name: locked[name] for name in pins}


def test_requirements_leave_out_what_linux_does_not_install(tmp_path: Path) -> None:
    """Dependencies uv.lock marks for Windows only (psycopg's tzdata) are not in the Linux zip."""
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    [psycopg] = [package for package in lock["package"] if package["name"] == "psycopg"]
    assert {"name": "tzdata", "marker": "sys_platform == 'win32'"} in psycopg["dependencies"]

    result = build_zip(tmp_path / "f.zip", pip=FakePip())

    assert "tzdata" not in {line.split("==")[0] for line in requirements_in(result.path)}


def test_a_stale_lock_fails_the_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A runtime requirement the locked version does not satisfy fails the build and names `uv lock`."""
    monkeypatch.setattr(function_zip, "RUNTIME_REQUIREMENTS", ("sqlalchemy~=9.0",))

    with pytest.raises(BuildError, match="uv lock"):
        build_zip(tmp_path / "f.zip", pip=FakePip())

    assert not (tmp_path / "f.zip").exists()


def test_runtime_requirements_match_the_project_pins() -> None:
    """Each runtime requirement carries the same specifier as pyproject.toml, so the two cannot
    drift; the zip is an application, so it takes psycopg's binary from the [binary] extra."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = set(project["dependencies"]) | set(extras["function"]) | set(extras["binary"])

    assert set(RUNTIME_REQUIREMENTS) <= declared


def test_dependencies_are_installed_for_linux_x86_64_under_python_packages(
    tmp_path: Path,
) -> None:
    """pip installs binary wheels for Linux x86-64 and the chosen Python under .python_packages."""
    pip = FakePip()

    result = build_zip(tmp_path / "f.zip", python_version="3.12", pip=pip)

    [command] = pip.commands
    assert command[command.index("--target") + 1].endswith(SITE_PACKAGES)
    assert command[command.index("--python-version") + 1] == "3.12"
    assert {"manylinux2014_x86_64", "manylinux_2_17_x86_64"} <= set(command)
    assert "--only-binary=:all:" in command
    assert "--no-deps" in command
    assert f"{SITE_PACKAGES}/fakedep/__init__.py" in names_in(result.path)


def test_bytecode_and_console_scripts_stay_out_of_the_zip(tmp_path: Path) -> None:
    """Machine-specific files pip leaves behind (bytecode, bin/ scripts) are not shipped."""
    result = build_zip(tmp_path / "f.zip", pip=FakePip())

    names = names_in(result.path)

    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(f"{SITE_PACKAGES}/bin/")]


def test_two_builds_are_byte_identical(tmp_path: Path) -> None:
    """The same sources give the same zip bytes: sorted entries, fixed timestamps and modes."""
    first = build_zip(tmp_path / "a" / "f.zip", pip=FakePip())
    time.sleep(1.1)  # a build that leaked mtimes into the zip would now differ
    second = build_zip(tmp_path / "b" / "f.zip", pip=FakePip())

    assert first.path.read_bytes() == second.path.read_bytes()
    with zipfile.ZipFile(first.path) as archive:
        names = archive.namelist()
        assert names == sorted(names)
        assert {info.date_time for info in archive.infolist()} == {function_zip.ZIP_EPOCH}


def test_pip_failure_keeps_any_previous_zip(tmp_path: Path) -> None:
    """When pip fails the build raises and an earlier zip at the output path is left intact."""
    output = tmp_path / "f.zip"
    output.write_bytes(b"previous build")

    with pytest.raises(BuildError, match="pip"):
        build_zip(output, pip=failing_pip)

    assert output.read_bytes() == b"previous build"
    assert [p.name for p in tmp_path.iterdir()] == ["f.zip"]


def test_command_exits_2_with_pips_reason_when_pip_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`safetynet build-function` exits 2 and prints why when the wheels cannot be installed."""
    monkeypatch.setattr(function_zip, "run_pip", failing_pip)

    code = cli.main(["build-function", "--output", str(tmp_path / "f.zip")])

    assert code == ExitCode.USAGE
    assert "no network" in capsys.readouterr().err
    assert not (tmp_path / "f.zip").exists()


def test_command_rejects_a_malformed_python_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --python-version that is not 3.N is refused with exit 2 before anything is installed."""
    code = cli.main(
        ["build-function", "--output", str(tmp_path / "f.zip"), "--python-version", "eleven"]
    )

    assert code == ExitCode.USAGE
    assert "--python-version" in capsys.readouterr().err


def test_command_defaults_match_the_infra_program() -> None:
    """By default the command targets the Python version the infra program deploys, at its path."""
    from blob_safetynet.infra.config import DEFAULTS
    from blob_safetynet.infra.sweeper_app import PYTHON_VERSION

    args = cli.build_parser().parse_args(["build-function"])

    assert args.python_version == DEFAULT_PYTHON_VERSION == PYTHON_VERSION
    assert args.output == Path(str(DEFAULTS["sweeperPackagePath"]))


def test_host_json_targets_functions_v4_with_a_bounded_timeout() -> None:
    """host.json is schema 2.0, uses the v4 extension bundle, caps runs and never samples requests."""
    host = json.loads((REPO / "sweeper" / "host.json").read_text())

    assert host["version"] == "2.0"
    assert host["extensionBundle"]["version"] == "[4.*, 5.0.0)"
    assert host["functionTimeout"] == "00:30:00"
    excluded = host["logging"]["applicationInsights"]["samplingSettings"]["excludedTypes"]
    assert "Request" in excluded.split(";")


def test_code_only_zip_imports_its_own_sweeper_and_nothing_of_infra(tmp_path: Path) -> None:
    """Unpacked, the zip's function_app imports the zipped sweeper and indexes its two timers,
    without loading the verifier's policies package (it is imported per invocation)."""
    result = build_zip(tmp_path / "f.zip", with_dependencies=False)
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(result.path) as archive:
        archive.extractall(root)

    report = json.loads(run_isolated(root, IMPORT_CHECK, with_venv_packages=True))

    assert report["sweeper"] == str(root / "blob_safetynet" / "sweeper" / "__init__.py")
    assert report["functions"] == ["sweep_timer", "verify_timer"]
    assert report["leaked"] == []
    assert report["outside_zip"] == []


def test_the_import_check_sees_a_module_the_zip_lacks(tmp_path: Path) -> None:
    """A zip without one sweeper module fails the import check, even though the venv's editable
    install could still serve that module from this working copy."""
    result = build_zip(tmp_path / "f.zip", with_dependencies=False)
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(result.path) as archive:
        archive.extractall(root)
    (root / "blob_safetynet" / "settings" / "appsettings.py").unlink()

    outcome = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path[:0] = [{str(root)!r}]\n" + IMPORT_CHECK,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )

    # Without an editable install the import itself fails; with one, the report names the module.
    if outcome.returncode != 0:
        assert "appsettings" in outcome.stderr
        assert "blob_safetynet.settings" in outcome.stderr
    else:
        assert "blob_safetynet.settings.appsettings" in json.loads(outcome.stdout)["outside_zip"]


@pytest.mark.skipif(
    not FULL_BUILD, reason="full build downloads wheels; set SAFETYNET_TEST_FULL_BUILD=1"
)
def test_full_build_runs_on_its_own_wheels(tmp_path: Path) -> None:
    """A real build carries every dependency: the unpacked zip imports without this venv's packages."""
    started = time.monotonic()
    result = build_zip(tmp_path / "f.zip")
    elapsed = time.monotonic() - started
    root = tmp_path / "unpacked"
    with zipfile.ZipFile(result.path) as archive:
        archive.extractall(root)

    report = json.loads(
        run_isolated(
            root,
            IMPORT_CHECK.replace("import json,", "import json, psycopg, azure.identity,"),
            with_venv_packages=False,
        )
    )

    assert report["functions"] == ["sweep_timer", "verify_timer"]
    assert report["leaked"] == []
    assert report["outside_zip"] == []
    assert list((root / SITE_PACKAGES).glob("psycopg_binary/*x86_64-linux-gnu.so"))
    print(
        f"full build: {elapsed:.1f} s, {result.size / 2**20:.1f} MiB, sha256 "
        f"{hashlib.sha256(result.path.read_bytes()).hexdigest()}"
    )
