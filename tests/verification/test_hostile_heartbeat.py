"""A heartbeat blob anyone with write access may have planted: too deep, not an object or
dated without a UTC offset, it fails the probe with a reason, never crashes it."""

from __future__ import annotations

import pytest

from blob_safetynet.policies.probes import ProbeOutcome
from blob_safetynet.policies.probes.liveness import SWEEPER_HEARTBEAT
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB, HEARTBEAT_FINISHED_FIELD
from tests.verification.conftest import ProbeTarget, _fresh_container

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]


@pytest.fixture
def planted(key_target: ProbeTarget) -> ProbeTarget:
    """The shared-key Azurite with a container of this test's own for the planted heartbeat."""
    return ProbeTarget("hostile", key_target.service, _fresh_container(key_target.service), {})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "larger than"),
        (b"[" * 1000 + b"]" * 1000, "nests deeper"),
        (b"[]", "not a JSON object"),
        (b"", "not valid JSON"),
        (f'{{"{HEARTBEAT_FINISHED_FIELD}": "2020-01-01T00:00:00"}}'.encode(), "no UTC offset"),
    ],
)
def test_a_hostile_heartbeat_fails_with_its_reason(
    planted: ProbeTarget, body: bytes, reason: str
) -> None:
    """The probe FAILs and names why the heartbeat cannot be read."""
    container = planted.service.get_container_client(planted.container)
    container.upload_blob(HEARTBEAT_BLOB, body, overwrite=True)
    result = planted.run(SWEEPER_HEARTBEAT)
    assert result.outcome is ProbeOutcome.FAIL, result.detail
    assert reason in result.detail
