"""The CrossGuard pack's entry point, run by the Pulumi CLI (`--policy-pack policies`).

This is the only module that constructs `PolicyPack(...)`: doing so starts the analyzer's gRPC
server and blocks, so nothing imports this module (tests use `policies.pack.POLICIES`).
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    policies=POLICIES,
    # Each policy sets its own level (mandatory for critical rules); this is the fallback.
    enforcement_level=EnforcementLevel.ADVISORY,
)
