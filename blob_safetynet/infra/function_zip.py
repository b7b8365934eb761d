"""Builds the sweeper function's deployment zip: code at the root, Linux wheels pre-installed.

The zip is `sweeper/` (function_app.py and host.json, at the root where the Functions host
looks for them), the runtime packages (`settings`, `store`, `protocol`, `sweeper`, `reconcile`, `recover` (the sweep tick's sample of lost documents, the verifier's recovery drill) and `function` of `blob_safetynet/`) beside them, the `blob_safetynet/policies/` package (the
probes, rules and audit of the verification timer), a requirements.txt, and the dependencies.
Nothing else of the project: no CLI, no test kit, no tests. It is built from a
source checkout, because `sweeper/` is a folder, not an installed package.

The infra program uploads the zip as is (Flex Consumption's blob-container deployment, no remote
build), so the dependencies must already be inside it, built for the platform the app runs on
(Linux x86-64, CPython of the infra program's version) rather than for this machine. pip's
`--platform/--python-version/--only-binary=:all:` downloads exactly those wheels and installs them
under `.python_packages/lib/site-packages`, the folder the Python worker adds to `sys.path`.

The zip is reproducible: entries sorted, timestamps fixed, no bytecode or machine-specific
scripts, so the same sources and wheels give the same bytes (and the same hash, which the infra
program uses to decide whether to redeploy).
"""

from __future__ import annotations

import re
import stat
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from blob_safetynet.infra.lockfile import LockError, TargetPlatform, locked_requirements
from blob_safetynet.settings import atomicfile

DEFAULT_PYTHON_VERSION: Final = "3.11"
"""Must equal the runtime version the infra program sets (a test compares the two)."""
DEFAULT_OUTPUT: Final = Path("build/sweeper-function.zip")
SITE_PACKAGES: Final = ".python_packages/lib/site-packages"
PLATFORMS: Final = ("manylinux2014_x86_64", "manylinux_2_17_x86_64")
RUNTIME_REQUIREMENTS: Final = (
    "azure-functions~=1.26",
    "azure-identity~=1.27",
    "azure-storage-blob~=12.31",
    "psycopg[binary]~=3.3",
    "sqlalchemy~=2.1",
    # The verification timer: the settings audit reads ARM, the telemetry goes to Azure Monitor.
    "azure-mgmt-storage~=25.3",
    "azure-mgmt-authorization~=4.0",
    "opentelemetry-sdk~=1.45",
    "azure-monitor-opentelemetry-exporter>=1.0.0b58,<1.1",
)
"""What `sweeper`, `policies` and function_app.py import at run time; not pulumi."""
PROJECT_ROOT: Final = Path(__file__).resolve().parents[2]
FUNCTION_DIR: Final = PROJECT_ROOT / "sweeper"
"""Exactly what sits at the zip root: the entry module and the host configuration."""
PACKAGE_DIR: Final = PROJECT_ROOT / "blob_safetynet"
"""The import package; the zip holds its `__init__` and the two parts below, nothing else."""
RUNTIME_PACKAGES: Final = (
    "settings",
    "store",
    "protocol",
    "sweeper",
    "reconcile",
    "recover",
    "function",
)
"""The runtime packages, each shipped whole (they hold no build or test code)."""
VERIFICATION_PACKAGE_DIR: Final = PACKAGE_DIR / "policies"
"""The probes, rules and audit the verification timer runs, shipped whole with its subpackages;
function_app imports it per invocation only, so the sweep timer never loads it."""
ROOT_FILES: Final = ("function_app.py", "host.json")
ZIP_EPOCH: Final = (1980, 1, 1, 0, 0, 0)
"""The earliest time a zip entry can hold; any fixed value makes builds byte-identical."""
_SKIPPED_PARTS: Final = frozenset({"__pycache__", "bin"})
"""Bytecode depends on the build machine; `bin/` holds console scripts with local shebangs."""
ZIP_MODE: Final = 0o644
"""The zip is no secret (code and public wheels); readable by the tools that upload it."""
_PYTHON_VERSION = re.compile(r"3\.\d{1,2}")

PipRunner = Callable[[Sequence[str]], None]
"""Runs a pip command line; raises BuildError when pip fails."""


class BuildError(RuntimeError):
    """The zip could not be built; the message says why and what to check."""


@dataclass(frozen=True)
class BuildResult:
    path: Path
    entries: int
    size: int
    with_dependencies: bool


def pip_command(target: Path, python_version: str, requirements: Path) -> list[str]:
    """The pip invocation that installs Linux x86-64 wheels for `python_version` into `target`."""
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-input",
        "--no-compile",
        "--target",
        str(target),
        *platforms,
        "--implementation",
        "cp",
        "--python-version",
        python_version,
        "--only-binary=:all:",
        # The requirements are uv.lock's closure for this platform; pip adds nothing of its own.
        "--no-deps",
        "--requirement",
        str(requirements),
    ]


def run_pip(argv: Sequence[str]) -> None:
    """Runs pip; a failure becomes a BuildError carrying pip's last words."""
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)  # noqa: S603
    if result.returncode != 0:
        tail = "\n".join(result.stderr.strip().splitlines()[-5:]) or f"exit {result.returncode}"
        raise BuildError(
            "pip could not install the function's dependencies as Linux x86-64 wheels "
            f"(is the package index reachable?):\n{tail}"
        )


def build_zip(
    output: Path = DEFAULT_OUTPUT,
    *,
    python_version: str = DEFAULT_PYTHON_VERSION,
    with_dependencies: bool = True,
    pip: PipRunner | None = None,
) -> BuildResult:
    """Writes the deployment zip to `output`, replacing it only once the build succeeded.

    `pip` defaults to `run_pip`, looked up at call time so tests can substitute it.
    """
    if not _PYTHON_VERSION.fullmatch(python_version):
        raise BuildError(f"--python-version {python_version!r} is not of the form 3.N (e.g. 3.11)")
    runtime = [PACKAGE_DIR / name for name in RUNTIME_PACKAGES]
    for folder in (FUNCTION_DIR, *runtime, VERIFICATION_PACKAGE_DIR):
        if not folder.is_dir():
            raise BuildError(f"{folder} is missing: build the function zip from a source checkout")
    check_output(output)
    with tempfile.TemporaryDirectory(prefix="sweeper-function-") as scratch:
        stage = atomicfile.make_folders(Path(scratch) / "stage")
        for name in ROOT_FILES:
            _copy(FUNCTION_DIR / name, stage / name)
        package = stage / PACKAGE_DIR.name
        for name in RUNTIME_PACKAGES:
            _copy_package(PACKAGE_DIR / name, package / name)
        _copy(PACKAGE_DIR / "__init__.py", package / "__init__.py")
        _copy_package(VERIFICATION_PACKAGE_DIR, package / "policies")
        requirements = stage / "requirements.txt"
        write_requirements(requirements, python_version)
        if with_dependencies:
            site = atomicfile.make_folders(stage / SITE_PACKAGES)
            (pip or run_pip)(pip_command(site, python_version, requirements))
        # An exclusive temporary file renamed into place: a failed write (disk full) leaves
        # nothing half-written, and a file or symlink planted beside the output is never opened.
        with atomicfile.replacing(output, mode=ZIP_MODE) as stream:
            entries = _write_zip(stage, stream)
    return BuildResult(output, entries, output.stat().st_size, with_dependencies)


def check_output(output: Path) -> None:
    """Refuse, before anything is built, an output that cannot be written (its folder, made if
    missing, is not a writable folder; it is a folder) or that is one of the zip's inputs."""
    try:
        atomicfile.make_folders(output.parent)
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise BuildError(
            f"cannot create the folder of {atomicfile.shown(output)}: {reason}"
        ) from None
    try:
        atomicfile.check_output_path(output)
        atomicfile.refuse_same(output, *zip_inputs())
    except atomicfile.OutputPathError as error:
        raise BuildError(str(error)) from None


def zip_inputs() -> list[Path]:
    """The source files the zip is built from (and the lock file its pins come from)."""
    modules = sorted(module for name in RUNTIME_PACKAGES for module in _package_modules(name))
    return [*(FUNCTION_DIR / name for name in ROOT_FILES), *modules, PROJECT_ROOT / "uv.lock"]


def write_requirements(path: Path, python_version: str) -> None:
    """Writes the zip's requirements.txt: what `sweeper` and function_app.py need at run time,
    and what those need on Linux x86-64, each pinned to its uv.lock version (what `make test` ran).
    """
    try:
        pins = locked_requirements(RUNTIME_REQUIREMENTS, TargetPlatform(python_version))
    except LockError as error:
        raise BuildError(str(error)) from None
    atomicfile.write_text(
        path,
        "# Pre-installed under .python_packages by `safetynet build-function`;\n"
        "# the zip is deployed without a remote build. Versions from uv.lock.\n"
        + "".join(f"{line}\n" for line in pins),
        mode=ZIP_MODE,
    )


def _package_modules(name: str) -> list[Path]:
    source = PACKAGE_DIR / name
    return [
        path
        for path in source.rglob("*.py")
        if not _SKIPPED_PARTS.intersection(path.relative_to(source).parts)
    ]


def _copy_package(source: Path, target: Path) -> None:
    """Every module of `source` and of its subpackages."""
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.suffix == ".py" and not _SKIPPED_PARTS.intersection(relative.parts):
            atomicfile.make_folders((target / relative).parent)
            _copy(path, target / relative)


def _copy(source: Path, target: Path) -> None:
    """`source`'s bytes to `target`, its permission bits kept (the zip keeps the executable one)."""
    atomicfile.write_bytes(target, source.read_bytes(), mode=stat.S_IMODE(source.stat().st_mode))


def _write_zip(stage: Path, output: BinaryIO) -> int:
    files = sorted(
        (path.relative_to(stage).as_posix(), path)
        for path in stage.rglob("*")
        if path.is_file()
        and path.suffix != ".pyc"
        and not _SKIPPED_PARTS.intersection(path.relative_to(stage).parts)
    )
    with zipfile.ZipFile(output, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, path in files:
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            # Keep only the executable bit; owner, umask and mtime differ between machines.
            mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, path.read_bytes())
    return len(files)
