"""Exact versions from uv.lock, read with tomllib: no uv, no network, the same answer every time.

uv.lock is universal (one resolution for every platform and Python the project allows), so a
package's dependencies carry environment markers. `locked_requirements` walks the lock from a few
root requirements and keeps only what the markers select on one target platform, which is how
the function zip gets the same versions `make test` ran against, for Linux x86-64 rather than
for the machine that builds it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCKFILE: Final = Path(__file__).resolve().parents[2] / "uv.lock"
"""The repository's lockfile, next to pyproject.toml (present in a clone or an editable install)."""


class LockError(RuntimeError):
    """uv.lock is missing, unreadable, or does not satisfy the requirements asked of it."""


@dataclass(frozen=True)
class TargetPlatform:
    """The environment the packages will run on, for evaluating the lock's markers."""

    python_version: str
    sys_platform: str = "linux"
    platform_system: str = "Linux"
    platform_machine: str = "x86_64"
    os_name: str = "posix"
    implementation_name: str = "cpython"
    platform_python_implementation: str = "CPython"

    def environment(self) -> dict[str, str]:
        # A wheel is built for a minor version; its first patch release stands for the series.
        full_version = f"{self.python_version}.0"
        return {
            "python_version": self.python_version,
            "python_full_version": full_version,
            "implementation_version": full_version,
            "sys_platform": self.sys_platform,
            "platform_system": self.platform_system,
            "platform_machine": self.platform_machine,
            "os_name": self.os_name,
            "implementation_name": self.implementation_name,
            "platform_python_implementation": self.platform_python_implementation,
            "extra": "",
        }


def locked_versions(lockfile: Path = LOCKFILE) -> dict[str, list[Mapping[str, Any]]]:
    """The lock's packages by canonical name (a name has several entries if the lock forked)."""
    try:
        lock = tomllib.loads(lockfile.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LockError(
            f"{lockfile} not found: build from a clone of the repository (the lock sits beside "
            "pyproject.toml)"
        ) from None
    except tomllib.TOMLDecodeError as error:
        raise LockError(f"{lockfile} is not valid TOML: {error}") from None
    packages: dict[str, list[Mapping[str, Any]]] = {}
    for package in lock.get("package", []):
        packages.setdefault(canonicalize_name(package["name"]), []).append(package)
    return packages


def locked_requirements(
    roots: Iterable[str], target: TargetPlatform, lockfile: Path = LOCKFILE
) -> list[str]:
    """`name==version` for each root and everything it needs on `target`, sorted by name.

    A root whose specifier the locked version does not satisfy means pyproject.toml moved on
    without `uv lock`; that is a LockError rather than a silently different build.
    """
    packages = locked_versions(lockfile)
    environment = target.environment()
    pinned: dict[str, str] = {}
    wanted: list[tuple[str, str | None, frozenset[str]]] = []
    for root in roots:
        requirement = Requirement(root)
        root_name = canonicalize_name(requirement.name)
        root_version = _only_version(packages, root_name, None, lockfile)
        if not requirement.specifier.contains(Version(root_version), prereleases=True):
            raise LockError(
                f"uv.lock has {root_name} {root_version}, outside {root!r}: run `uv lock` and "
                "commit uv.lock"
            )
        wanted.append((root_name, root_version, frozenset(requirement.extras)))
    seen: set[tuple[str, str, frozenset[str]]] = set()
    while wanted:
        name, asked_version, extras = wanted.pop()
        version = _only_version(packages, name, asked_version, lockfile)
        if (name, version, extras) in seen:
            continue
        seen.add((name, version, extras))
        pinned[name] = version
        package = next(p for p in packages[name] if p["version"] == version)
        dependencies = list(package.get("dependencies", []))
        for extra in sorted(extras):
            dependencies += package.get("optional-dependencies", {}).get(extra, [])
        for dependency in dependencies:
            marker = dependency.get("marker")
            if marker is not None and not Marker(marker).evaluate(environment):
                continue
            wanted.append(
                (
                    canonicalize_name(dependency["name"]),
                    dependency.get("version"),
                    frozenset(dependency.get("extra", [])),
                )
            )
    return [f"{name}=={pinned[name]}" for name in sorted(pinned)]


def _only_version(
    packages: Mapping[str, list[Mapping[str, Any]]], name: str, version: str | None, lockfile: Path
) -> str:
    """The locked version of `name`: the one asked for, or the only one the lock holds."""
    entries = packages.get(name, [])
    versions = [str(entry["version"]) for entry in entries]
    if version is not None and version in versions:
        return version
    if version is None and len(versions) == 1:
        return versions[0]
    if not versions:
        raise LockError(f"{name} is not in {lockfile}: run `uv lock` and commit uv.lock")
    raise LockError(
        f"{lockfile} holds {name} at {', '.join(versions)}; cannot tell which one is meant"
    )
