"""The plan files `reconcile` and `recover` write for review and apply later: checked before
anything runs, written atomically, read back as untrusted JSON of bounded size."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from blob_safetynet.cli.commands.common import UsageError
from blob_safetynet.settings import atomicfile, untrusted
from blob_safetynet.settings.parsed import SettingsError
from blob_safetynet.settings.redaction import printable

MAX_PLAN_BYTES = 64 * 2**20
"""A plan lists one blob per ~150-500 bytes: this is over a hundred thousand entries."""


def check_output(path: Path | None, option: str, *inputs: str | Path | None) -> None:
    """SettingsError for an unwritable plan path, or one that is one of `inputs` (the database,
    the plan applied), before anything is read or changed."""
    if path is None:
        return
    try:
        atomicfile.check_output_path(path)
        atomicfile.refuse_same(path, *inputs)
    except atomicfile.OutputPathError as error:
        raise SettingsError(f"{option}: {error}") from None


def write(path: Path, plan: dict[str, Any], option: str) -> None:
    try:
        atomicfile.write_text(path, json.dumps(plan, indent=2) + "\n")
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise UsageError(f"cannot write {option} '{printable(str(path))}': {reason}") from None


def read(path: Path, option: str, kind: str) -> dict[str, Any]:
    """The JSON object in `path`; SettingsError naming `option` when it is not one."""
    shown = printable(str(path))
    try:
        plan = untrusted.read_json_file(path, f"'{shown}'", max_bytes=MAX_PLAN_BYTES)
    except untrusted.UntrustedInputError as error:
        raise SettingsError(f"{option}: {error}") from None
    if not isinstance(plan, dict):
        raise SettingsError(f"{option}: '{shown}' is not a {kind} plan")
    return plan
