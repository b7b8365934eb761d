"""Settings parsing: out-of-range values name the setting (durations and booleans:
test_appsettings.py, where the one grammar and the one boolean parser are tested)."""

from __future__ import annotations

import pytest

from blob_safetynet.settings.parsed import SettingsError, SweepSettings


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
