"""The CrossGuard pack's entry point: `pulumi preview --policy-pack policies`.

The Pulumi CLI runs `python -u -m pulumi.policy <engine address> .` in this folder (inside the
virtualenv PulumiPolicy.yaml names), which executes this file as `__main__`. Constructing
`PolicyPack(...)` starts the analyzer's gRPC server, prints its port and blocks, so nothing
imports this file: the policies themselves live in the installed library (`blob_safetynet.policies.pack.crossguard`).
"""

from pulumi_policy import EnforcementLevel, PolicyPack

from blob_safetynet.policies.pack.crossguard import PACK_NAME, POLICIES

PolicyPack(
    name=PACK_NAME,
    policies=POLICIES,
    # Each policy sets its own level (mandatory for critical rules); this is the fallback.
    enforcement_level=EnforcementLevel.ADVISORY,
)
