"""What a figure was measured on: every benchmark section states its machine and date."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path

from blob_safetynet.embedded.azurite import PROJECT_ROOT


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def azurite_version() -> str:
    package = PROJECT_ROOT / "node_modules" / "azurite" / "package.json"
    try:
        version: str = json.loads(package.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "not installed"
    return version


def describe() -> str:
    """One line: cores, CPU model, Python, Azurite, and today's date (UTC)."""
    return (
        f"{os.cpu_count()} cores ({cpu_model()}), Python {platform.python_version()}, "
        f"Azurite {azurite_version()}, {datetime.now(UTC):%Y-%m-%d}"
    )
