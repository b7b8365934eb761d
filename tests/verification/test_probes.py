"""The pytest face of `safetynet verify`: one test per probe.

`make test` runs them on the embedded Azurite (account key over HTTP, and a bearer token over
HTTPS with `--oauth basic`); `pytest -m verification --account-url URL` runs them against a live
account. NOT_VERIFIABLE is a skip with the reason, never a pass.
"""

from __future__ import annotations

import pytest

from blob_safetynet.policies.probes import PROBES, Probe
from tests.verification.conftest import ProbeTarget, as_test_outcome

pytestmark = pytest.mark.verification


@pytest.mark.parametrize("probe", PROBES, ids=[p.id for p in PROBES])
def test_probe(probe: Probe, probe_target: ProbeTarget) -> None:
    """The probe holds on the target (skipped with the reason when the target cannot show it)."""
    as_test_outcome(probe_target.verify(probe))
