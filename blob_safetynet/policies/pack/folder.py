"""The CrossGuard pack as a folder `pulumi preview --policy-pack DIR` loads, written from the
installed package (`safetynet policy pack DIR`), so a team's own repository needs no clone of
this one for its preview.

Pulumi runs a Python pack with `<virtualenv>/bin/python -u -m pulumi.policy <engine> .` in the
folder, the virtual environment named by `runtime.options.virtualenv` in `PulumiPolicy.yaml`,
relative to the folder or absolute (pulumi/pulumi `sdk/python/cmd/pulumi-language-python`,
`resolveVirtualEnvironmentPath`: "if !filepath.IsAbs(virtualenv) { return filepath.Join(root,
virtualenv) }"; the project file:
https://www.pulumi.com/docs/insights/policy/policy-packs/project-file/).
Pointed at the environment the package is installed in, the pack runs what is installed and
nothing is installed when Pulumi starts it; `requirements.txt` records what that environment
held, for a reader and for an environment made from it elsewhere.
"""

from __future__ import annotations

import json
from typing import Final

from blob_safetynet.policies.pack.crossguard import PACK_NAME

MAIN: Final = '''"""The blob-safetynet CrossGuard pack, written by `safetynet policy pack`.

Pulumi runs this file as `__main__`; constructing PolicyPack starts the analyzer's gRPC server
and blocks. The policies are the installed package's."""

from pulumi_policy import EnforcementLevel, PolicyPack

from blob_safetynet.policies.pack.crossguard import PACK_NAME, POLICIES

PolicyPack(name=PACK_NAME, policies=POLICIES, enforcement_level=EnforcementLevel.ADVISORY)
'''
DESCRIPTION: Final = (
    "Blob safety nets for apps that keep a DB row and a blob in step (soft delete, "
    "pending-blob lifecycle rule, tag-write RBAC, account hardening)."
)


def files(version: str, policy_version: str, virtualenv: str | None) -> dict[str, str]:
    """The pack's files by name: `PulumiPolicy.yaml` naming `virtualenv` (None: Pulumi's
    default, the `python3` on its PATH), `__main__.py` and `requirements.txt`."""
    runtime = (
        f"runtime:\n  name: python\n  options:\n    virtualenv: {json.dumps(virtualenv)}\n"
        if virtualenv is not None
        else "runtime: python\n"
    )
    project = (
        f"# The {PACK_NAME} CrossGuard pack, written by `safetynet policy pack` from "
        f"blob-safetynet {version}: `pulumi preview --policy-pack <this folder>`.\n"
        f"description: {json.dumps(DESCRIPTION)}\n"
        f"version: {version}\n"
        f"{runtime}"
    )
    requirements = (
        "# What the environment this pack runs in held when it was written; nothing is\n"
        "# installed from here while that environment exists.\n"
        f"blob-safetynet=={version}\n"
        f"pulumi-policy=={policy_version}\n"
    )
    return {"PulumiPolicy.yaml": project, "__main__.py": MAIN, "requirements.txt": requirements}
