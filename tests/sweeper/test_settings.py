"""Settings parsing: durations and booleans are exact, out-of-range values name the setting."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sweeper.settings import SettingsError, SweepSettings, parse_bool, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("15m", timedelta(minutes=15)),
        ("2h", timedelta(hours=2)),
        ("1d", timedelta(days=1)),
    ],
)
def test_durations_parse(text: str, expected: timedelta) -> None:
    """Each unit s, m, h and d gives the duration it names."""
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "15", "m15", "1.5h", "-5m", "15 minutes", "0s", "366d"])
def test_bad_durations_name_the_setting(text: str) -> None:
    """Malformed, unitless, zero or over-a-year durations are refused with the setting's name."""
    with pytest.raises(SettingsError, match=r"^--cutoff: "):
        parse_duration(text, "--cutoff")


@pytest.mark.parametrize("text", ["yes", "1", "", "banana"])
def test_booleans_are_strict(text: str) -> None:
    """Only true or false are booleans; a typo is an error, not a silent false."""
    with pytest.raises(SettingsError, match="SAFETYNET_LEASE"):
        parse_bool(text, "SAFETYNET_LEASE")


@pytest.mark.parametrize(
    "overrides",
    [
        {"batch_size": 257},
        {"batch_size": 0},
        {"concurrency": 0},
        {"chunk_size": 0},
        {"container": ""},
    ],
)
def test_out_of_range_sweep_settings_are_refused(overrides: dict[str, object]) -> None:
    """A Blob Batch over 256, zero workers or an empty container name never reach a sweep."""
    with pytest.raises(SettingsError):
        SweepSettings(**overrides)  # type: ignore[arg-type]
