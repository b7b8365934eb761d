"""Behaviour probes: prove, by acting on the data plane, that an account enforces its nets.

The rules (blob_safetynet/policies/rules) judge settings and import no SDK; the probes act with the Blob SDK
and say which rules' effect they show. `safetynet verify` and tests/verification run them.
"""

from __future__ import annotations

from typing import Final

from blob_safetynet.policies.probes.access import (
    HTTPS_ONLY,
    NO_PUBLIC_ACCESS,
    PRIVATE_CONTAINER,
    SAS_TAG_PERMISSION,
    SHARED_KEY_OFF,
    TAG_WRITE_ROLE,
)
from blob_safetynet.policies.probes.base import (
    Observation,
    Probe,
    ProbeOutcome,
    ProbeSettings,
    RequestCounter,
    Target,
)
from blob_safetynet.policies.probes.drill import RECOVERY_DRILL
from blob_safetynet.policies.probes.liveness import PENDING_LIFECYCLE, SWEEPER_HEARTBEAT
from blob_safetynet.policies.probes.recovery import PERMANENT_DELETE, SOFT_DELETE
from blob_safetynet.policies.probes.runner import ProbeResult, VerificationRun, run_probes
from blob_safetynet.policies.probes.writes import (
    CONCURRENT_CREATE,
    CONDITIONAL_SEAL,
    CREATE_ONLY,
    TAG_GUARDED_DELETE,
)

PROBES: Final[tuple[Probe, ...]] = (
    CREATE_ONLY,
    CONCURRENT_CREATE,
    TAG_GUARDED_DELETE,
    CONDITIONAL_SEAL,
    SOFT_DELETE,
    PERMANENT_DELETE,
    RECOVERY_DRILL,
    SHARED_KEY_OFF,
    PRIVATE_CONTAINER,
    NO_PUBLIC_ACCESS,
    HTTPS_ONLY,
    TAG_WRITE_ROLE,
    SAS_TAG_PERMISSION,
    PENDING_LIFECYCLE,
    SWEEPER_HEARTBEAT,
)

PROBES_BY_ID: Final[dict[str, Probe]] = {probe.id: probe for probe in PROBES}

__all__ = [
    "PROBES",
    "PROBES_BY_ID",
    "Observation",
    "Probe",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeSettings",
    "RequestCounter",
    "Target",
    "VerificationRun",
    "run_probes",
]
