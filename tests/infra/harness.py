"""Runs the Pulumi program under mocks and returns what it registered, as a policy pack sees it.

The mocks themselves are the package's (`blob_safetynet.infra.mocks`, which `safetynet config
check` runs too); this module sets them before importing the program, and every run sets fresh
mocks and a fresh root stack, so one pytest process can run the program many times with
different configuration.

API
---
`run_program(overrides=None, mutate=None) -> list[RegisteredResource]`
    Builds the stack from `RAW_DEFAULTS` updated with `overrides` (raw config values keyed by
    the Pulumi config key, e.g. `{"blobSoftDeleteDays": 3}`; validated by `blob_safetynet.infra.config.parse`,
    so a bad value raises `ConfigError`) and returns every registered resource, components
    included, in registration order. A bare GUID in `uploaderPrincipalIds`,
    `readerPrincipalIds` or `verifierPrincipalIds` is shorthand for a ServicePrincipal
    (`typed_principals`); the program itself refuses bare ids.
`run_stack(overrides=None, mutate=None) -> StackRun`
    The same, plus the resolved stack outputs (`StackRun.outputs`); `StackRun.one(type_, name)`
    and `StackRun.of_type(type_)` look resources up.
`run_function(program) -> StackRun`
    Runs a program given as a function (returning its outputs) under fresh mocks.
`run_main(stack_config, secret_keys=()) -> StackRun`
    Runs `infra/__main__.py` itself, reading raw string values through `pulumi.Config` (the
    path `pulumi up` takes); outputs are what it exported.
`run_stack(..., subnets={subnet id: answer})`
    What the `getSubnet` invoke answers for a subnet (camelCase, as ARM: `serviceEndpoints`,
    `delegations`); a subnet not listed answers `FIT_SUBNET`, which has the Microsoft.Storage
    and Microsoft.KeyVault service endpoints and the Microsoft.App/environments delegation; `UNREADABLE` has the read
    refused. `StackRun.subnet_reads`
    lists the subnets the program read; `StackRun.invokes` every invoke's token, in order.
`mutate(type_, name, inputs)`
    Optional callback invoked for each resource before its inputs are captured; edit `inputs`
    in place to break one setting (the edited value is also what the mock returns as state).
    `set_input(type_, path, value, name=None)` builds such a callback: `path` is dotted, list
    indices are numbers (`"policy.rules.0.enabled"`), a missing key is created, and the value
    `DELETE` removes the key.
`RegisteredResource`
    `type` (e.g. `azure-native:storage:StorageAccount`), `name` (logical name), `inputs` (the
    camelCase property dict CrossGuard would see, secrets unwrapped), `parent_type` and
    `parent_name` (`pulumi:pulumi:Stack` for top-level resources), `secret_inputs` (top-level
    input keys that were secret), `custom` (False for components), `depends_on` (logical names
    of the resources it depends on, as the engine receives them), `protect`, `deleted_with`
    (logical name of the resource it is deleted with, or empty). Numbers arrive as floats
    (`1.0`), as they do over Pulumi's wire format.
`RAW_DEFAULTS`
    The raw configuration a run starts from: `blob_safetynet.infra.config.DEFAULTS`, a test database URL, the
    sweeper's subnet (`SWEEPER_SUBNET_ID`, which the default firewall needs), and
    a throwaway zip as the sweeper package. Copy it to build "one setting broken" variants.
"""

from __future__ import annotations

import atexit
import runpy
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import pulumi
from pulumi.runtime import settings as pulumi_settings

from blob_safetynet.infra.mocks import (
    DEPLOYER_OBJECT_ID,
    FIT_SUBNET,
    STACK_TYPE,
    SUBSCRIPTION_ID,
    TENANT_ID,
    UNREADABLE,
    ArmMocks,
    Mutate,
    RegisteredResource,
    StackRun,
    policy_identity_principal,
    run_under_mocks,
)

__all__ = [
    "DEPLOYER_OBJECT_ID",
    "FIT_SUBNET",
    "STACK_TYPE",
    "SUBSCRIPTION_ID",
    "TENANT_ID",
    "UNREADABLE",
    "Mutate",
    "RegisteredResource",
    "StackRun",
    "policy_identity_principal",
]

TEST_DATABASE_URL: Final = "postgresql+psycopg://sweeper@db.example.test:5432/documents"
NETWORK_GROUP: Final = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/network-rg"
SWEEPER_SUBNET_ID: Final = (
    f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/apps-vnet/subnets/sweeper"
)
"""The subnet the sweeper's app joins in every run, as the default `networkDefaultAction`
Deny needs one."""
PRINCIPAL_KEYS: Final = ("uploaderPrincipalIds", "readerPrincipalIds", "verifierPrincipalIds")
DELETE: Final = object()
"""Pass as the value of `set_input` to remove a key."""


def _fake_package() -> Path:
    directory = Path(tempfile.mkdtemp(prefix="safetynet-infra-"))
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    path = directory / "sweeper-function.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("function_app.py", "# stands in for the sweeper's build output\n")
    return path


def set_input(type_: str, path: str, value: object, name: str | None = None) -> Mutate:
    """A `mutate` callback that sets `path` in the inputs of resources of `type_` (and `name`)."""
    keys = path.split(".")

    def mutate(res_type: str, res_name: str, inputs: dict[str, Any]) -> None:
        if res_type != type_ or (name is not None and res_name != name):
            return
        node: Any = inputs
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        elif value is DELETE:
            node.pop(last, None)
        else:
            node[last] = value

    return mutate


# Mocks first, then the program: pulumi_azure_native and infra are imported only now.
pulumi.runtime.set_mocks(ArmMocks(), project="blob-safetynet", stack="test", preview=False)

from blob_safetynet.infra import config as infra_config  # noqa: E402
from blob_safetynet.infra.program import provision  # noqa: E402

PROGRAM = Path(__file__).resolve().parents[2] / "infra" / "__main__.py"
"""The repository's Pulumi program (`main: infra/` in Pulumi.yaml), a thin stack over the package."""
DATA_BLOB_SERVICE = "safetynet-blob-service"
"""The data account's blob service (the runtime account has one of its own)."""
RAW_DEFAULTS: Final[Mapping[str, object]] = {
    **infra_config.DEFAULTS,
    infra_config.DATABASE_URL_KEY: TEST_DATABASE_URL,
    "sweeperPackagePath": str(_fake_package()),
    "sweeperSubnetId": SWEEPER_SUBNET_ID,
}


def typed_principals(overrides: Mapping[str, object]) -> dict[str, object]:
    """Test shorthand: a bare GUID in a principal list stands for a ServicePrincipal.

    The program itself refuses a bare id (blob_safetynet/infra/config.py); this spares every test that needs
    "some principal" the object form.
    """
    typed = dict(overrides)
    for key in PRINCIPAL_KEYS:
        value = typed.get(key)
        if isinstance(value, list | tuple):
            typed[key] = [
                {"id": item, "type": "ServicePrincipal"} if isinstance(item, str) else item
                for item in value
            ]
    return typed


def run_stack(
    overrides: Mapping[str, object] | None = None,
    mutate: Mutate | None = None,
    subnets: Mapping[str, Mapping[str, Any]] | None = None,
) -> StackRun:
    """Runs the program once under fresh mocks; see the module docstring."""
    stack_config = infra_config.parse(typed_principals({**RAW_DEFAULTS, **(overrides or {})}))
    return _run(lambda: provision(stack_config), mutate, subnets)


def run_main(stack_config: Mapping[str, str], secret_keys: Iterable[str] = ()) -> StackRun:
    """Runs `infra/__main__.py` as `pulumi up` would, reading `stack_config` via pulumi.Config.

    Keys are given without the namespace (`{"sweeperDatabaseUrl": "..."}`); `secret_keys`
    lists those that `pulumi config set --secret` would mark. Outputs are the exported values.
    """
    full = {f"{infra_config.NAMESPACE}:{key}": value for key, value in stack_config.items()}
    secrets = [f"{infra_config.NAMESPACE}:{key}" for key in secret_keys]
    pulumi.runtime.set_all_config(full, secrets)
    try:

        def main() -> Mapping[str, pulumi.Output[Any]]:
            runpy.run_path(str(PROGRAM), run_name="__main__")
            root = pulumi_settings.get_root_resource()
            return dict(getattr(root, "outputs", {}))

        return _run(main, None)
    finally:
        pulumi.runtime.set_all_config({}, [])


def _run(
    program: Callable[[], Mapping[str, pulumi.Output[Any]]],
    mutate: Mutate | None,
    subnets: Mapping[str, Mapping[str, Any]] | None = None,
) -> StackRun:
    return run_under_mocks(
        program, project=infra_config.NAMESPACE, stack="test", mutate=mutate, subnets=subnets
    )


def run_function(program: Callable[[], Mapping[str, pulumi.Output[Any]]]) -> StackRun:
    """Runs `program`, a Pulumi program as a function returning its outputs, under fresh mocks."""
    return _run(program, None)


def run_program(
    overrides: Mapping[str, object] | None = None, mutate: Mutate | None = None
) -> list[RegisteredResource]:
    """Every resource the program registers with this configuration; see the module docstring."""
    return run_stack(overrides, mutate).resources
