"""Pulumi entry point (`main: infra/` in Pulumi.yaml): load the config, build, export."""

import pulumi

from blob_safetynet.infra.config import load
from blob_safetynet.infra.program import provision

for _name, _value in provision(load()).items():
    pulumi.export(_name, _value)
