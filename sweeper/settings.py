"""Sweeper settings: parsed and range-checked once, shared by the CLI and the Azure Function."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta

from safetynet.constants import DEFAULT_CONTAINER

_DURATION = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
MIN_CUTOFF = timedelta(seconds=1)
MAX_CUTOFF = timedelta(days=365)
MAX_BLOB_BATCH = 256
"""Blob Batch accepts at most 256 sub-requests (257 -> 400 ExceedsMaxBatchRequestCount)."""


class SettingsError(ValueError):
    """A setting is missing, malformed or out of range; the message names it."""


def parse_duration(text: str, setting: str = "cutoff") -> timedelta:
    """`90s`, `15m`, `2h` or `1d`, between 1 second and 365 days."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise SettingsError(
            f"{setting}: {text!r} is not a duration; use a whole number and a unit s, m, h or d "
            "(e.g. 90s, 15m, 2h, 1d)"
        )
    value = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if not MIN_CUTOFF <= value <= MAX_CUTOFF:
        raise SettingsError(f"{setting}: {text!r} is out of range; allowed 1s to 365d")
    return value


def parse_bool(text: str, setting: str) -> bool:
    """`true` or `false` (any case); anything else is an error, never a silent false."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise SettingsError(f"{setting}: {text!r} is not a boolean; use true or false")
    return value == "true"


def _bounded_int(raw: str | int, setting: str, low: int, high: int) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{setting}: {raw!r} is not a whole number") from None
    if not low <= value <= high:
        raise SettingsError(f"{setting}: {value} is out of range; allowed {low} to {high}")
    return value


@dataclass(frozen=True)
class SweepSettings:
    cutoff: timedelta = timedelta(minutes=15)
    container: str = DEFAULT_CONTAINER
    batch_size: int = MAX_BLOB_BATCH
    concurrency: int = 4
    chunk_size: int = 1024
    """Rows claimed per database transaction; batches within a chunk run concurrently."""
    max_attempts: int = 5
    dry_run: bool = False
    use_lease: bool = False
    retired_grace: timedelta = timedelta(hours=1)
    """How long a replaced or deleted document's old blob stays readable before it is deleted."""
    claim_ttl: timedelta = timedelta(minutes=10)
    """A claim older than this belongs to a sweeper that died; its rows may be claimed again."""

    def __post_init__(self) -> None:
        _bounded_int(self.batch_size, "batch size", 1, MAX_BLOB_BATCH)
        _bounded_int(self.concurrency, "concurrency", 1, 64)
        _bounded_int(self.chunk_size, "chunk size", 1, 100_000)
        _bounded_int(self.max_attempts, "max attempts", 1, 20)
        if not self.container:
            raise SettingsError("container: must not be empty")


@dataclass(frozen=True)
class FunctionSettings:
    """The Azure Function's app settings (names documented in the README)."""

    db_url: str
    account_url: str | None
    sweep: SweepSettings
    connection_string: str | None = None
    """Azurite only (tests); on Azure the account URL and the app's identity are used."""

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> FunctionSettings:
        if not env.get("SAFETYNET_DB_URL"):
            raise SettingsError("missing app setting(s): SAFETYNET_DB_URL")
        if bool(env.get("SAFETYNET_ACCOUNT_URL")) == bool(env.get("SAFETYNET_CONNECTION_STRING")):
            raise SettingsError(
                "set exactly one of SAFETYNET_ACCOUNT_URL (Azure) or "
                "SAFETYNET_CONNECTION_STRING (Azurite only)"
            )
        sweep = SweepSettings(
            cutoff=parse_duration(env.get("SAFETYNET_CUTOFF", "15m"), "SAFETYNET_CUTOFF"),
            container=env.get("SAFETYNET_CONTAINER", DEFAULT_CONTAINER),
            use_lease=parse_bool(env.get("SAFETYNET_LEASE", "false"), "SAFETYNET_LEASE"),
            retired_grace=parse_duration(
                env.get("SAFETYNET_RETIRED_GRACE", "1h"), "SAFETYNET_RETIRED_GRACE"
            ),
        )
        return cls(
            env["SAFETYNET_DB_URL"],
            env.get("SAFETYNET_ACCOUNT_URL") or None,
            sweep,
            env.get("SAFETYNET_CONNECTION_STRING") or None,
        )
