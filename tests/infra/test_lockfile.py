"""uv.lock: in step with pyproject.toml, and read for one platform without uv."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from blob_safetynet.infra.lockfile import LockError, TargetPlatform, locked_requirements

REPO = Path(__file__).resolve().parents[2]
MAKEFILE = (REPO / "Makefile").read_text()

SMALL_LOCK = """
version = 1
requires-python = ">=3.11"

[[package]]
name = "app-lib"
version = "2.0.0"
source = { registry = "https://pypi.org/simple" }
dependencies = [
    { name = "colour-terminal", marker = "sys_platform == 'win32'" },
    { name = "Typing_Extensions", marker = "python_full_version < '3.13'" },
]

[package.optional-dependencies]
fast = [
    { name = "speedups", marker = "implementation_name != 'pypy'" },
]

[[package]]
name = "colour-terminal"
version = "0.4.6"
source = { registry = "https://pypi.org/simple" }

[[package]]
name = "speedups"
version = "1.1.0"
source = { registry = "https://pypi.org/simple" }
dependencies = [{ name = "typing-extensions" }]

[[package]]
name = "typing-extensions"
version = "4.16.0"
source = { registry = "https://pypi.org/simple" }
"""


def declared_requirements(project: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """(name, extras, specifier, extra group) for each requirement pyproject.toml declares."""
    groups: dict[str, list[str]] = {"": list(project["dependencies"])}
    groups.update(project["optional-dependencies"])
    declared = set()
    for group, lines in groups.items():
        for line in lines:
            requirement = Requirement(line)
            extras = ",".join(sorted(requirement.extras))
            declared.add((requirement.name, extras, str(requirement.specifier), group))
    return declared


def locked_metadata(lock: dict[str, Any]) -> set[tuple[str, str, str, str]]:
    """The same tuples from the requires-dist uv recorded for this project when it last locked."""
    [project] = [p for p in lock["package"] if p["name"] == "blob-safetynet"]
    locked = set()
    for entry in project["metadata"]["requires-dist"]:
        group = re.fullmatch(r"extra == '([a-z-]*)'", entry.get("marker", "extra == ''"))
        assert group is not None, entry
        specifier = str(Requirement(f"x{entry.get('specifier', '')}").specifier)
        extras = ",".join(sorted(entry.get("extras", [])))
        locked.add((entry["name"], extras, specifier, group[1]))
    return locked


def write_lock(tmp_path: Path) -> Path:
    lockfile = tmp_path / "uv.lock"
    lockfile.write_text(SMALL_LOCK)
    return lockfile


def test_lock_records_exactly_what_pyproject_declares() -> None:
    """uv.lock was made from this pyproject.toml: a requirement changed without `uv lock` fails here."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lock = tomllib.loads((REPO / "uv.lock").read_text())

    assert locked_metadata(lock) == declared_requirements(project)


def test_makefile_installs_only_from_the_lock() -> None:
    """The venv is synced with --locked (a stale lock stops the build) and rebuilt when uv.lock changes."""
    assert re.search(r"^\$\(PY_STAMP\): pyproject\.toml uv\.lock$", MAKEFILE, re.MULTILINE)
    syncs = re.findall(r"\$\(UV\) sync\b.*", MAKEFILE)
    assert syncs
    assert all("--locked" in line for line in syncs)
    assert "pip install --quiet -e" not in MAKEFILE


def test_linux_closure_follows_markers_and_extras(tmp_path: Path) -> None:
    """On Linux CPython 3.11 the Windows-only dependency is left out and the extra's is kept."""
    pins = locked_requirements(["app-lib[fast]~=2.0"], TargetPlatform("3.11"), write_lock(tmp_path))

    assert pins == ["app-lib==2.0.0", "speedups==1.1.0", "typing-extensions==4.16.0"]


def test_python_version_markers_use_the_target_version(tmp_path: Path) -> None:
    """A dependency only older Pythons need is dropped when the target is 3.13."""
    lockfile = write_lock(tmp_path)

    assert locked_requirements(["app-lib"], TargetPlatform("3.13"), lockfile) == ["app-lib==2.0.0"]
    assert locked_requirements(["app-lib"], TargetPlatform("3.12"), lockfile) == [
        "app-lib==2.0.0",
        "typing-extensions==4.16.0",
    ]


def test_windows_target_keeps_the_windows_dependency(tmp_path: Path) -> None:
    """The platform decides: a win32 target gets the dependency Linux does not."""
    windows = TargetPlatform("3.13", sys_platform="win32", platform_system="Windows", os_name="nt")

    assert "colour-terminal==0.4.6" in locked_requirements(
        ["app-lib"], windows, write_lock(tmp_path)
    )


def test_a_root_outside_the_locked_version_is_refused(tmp_path: Path) -> None:
    """A specifier the lock does not satisfy means a stale lock; the error says to run `uv lock`."""
    with pytest.raises(LockError, match=r"app-lib 2\.0\.0.*run `uv lock`"):
        locked_requirements(["app-lib~=3.0"], TargetPlatform("3.11"), write_lock(tmp_path))


def test_a_package_missing_from_the_lock_is_refused(tmp_path: Path) -> None:
    """A root the lock does not hold fails with its name rather than an unpinned install."""
    with pytest.raises(LockError, match="left-pad is not in"):
        locked_requirements(["left-pad"], TargetPlatform("3.11"), write_lock(tmp_path))


def test_a_missing_lockfile_is_a_clear_error(tmp_path: Path) -> None:
    """Building outside a clone (no uv.lock) fails with the path it looked for."""
    with pytest.raises(LockError, match=r"uv\.lock not found"):
        locked_requirements(["app-lib"], TargetPlatform("3.11"), tmp_path / "uv.lock")
