"""Runs the Pulumi program under mocks and returns what it registered, as a policy pack sees it.

This is the only module that calls `pulumi.runtime.set_mocks`; it does so before importing the
program, and again (fresh mocks, fresh root stack) at the start of every run, so one pytest
process can run the program many times with different configuration.

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
    lists the subnets the program read.
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
    of the resources it depends on, as the engine receives them), `protect`. Numbers arrive as floats
    (`1.0`), as they do over Pulumi's wire format.
`RAW_DEFAULTS`
    The raw configuration a run starts from: `blob_safetynet.infra.config.DEFAULTS`, a test database URL, the
    sweeper's subnet (`SWEEPER_SUBNET_ID`, which the default firewall needs), and
    a throwaway zip as the sweeper package. Copy it to build "one setting broken" variants.
"""

from __future__ import annotations

import atexit
import copy
import runpy
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

SUBSCRIPTION_ID: Final = "00000000-0000-0000-0000-0000000000aa"
TENANT_ID: Final = "00000000-0000-0000-0000-0000000000bb"
DEPLOYER_OBJECT_ID: Final = "00000000-0000-0000-0000-0000000000cc"
TEST_DATABASE_URL: Final = "postgresql+psycopg://sweeper@db.example.test:5432/documents"
NETWORK_GROUP: Final = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/network-rg"
SWEEPER_SUBNET_ID: Final = (
    f"{NETWORK_GROUP}/providers/Microsoft.Network/virtualNetworks/apps-vnet/subnets/sweeper"
)
"""The subnet the sweeper's app joins in every run, as the default `networkDefaultAction`
Deny needs one."""
PRINCIPAL_KEYS: Final = ("uploaderPrincipalIds", "readerPrincipalIds", "verifierPrincipalIds")
STACK_TYPE: Final = "pulumi:pulumi:Stack"
DELETE: Final = object()
"""Pass as the value of `set_input` to remove a key."""

_SECRET_SIG: Final = "4dabf18193072939515e22adb298388d"
_NAMESPACE: Final = uuid.UUID("6f1c2f4e-8a51-4d0e-9d6e-2b7b1b0c5a10")

Mutate = Callable[[str, str, dict[str, Any]], None]
FIT_SUBNET: Final[Mapping[str, Any]] = {
    "serviceEndpoints": [
        {"service": "Microsoft.Storage", "locations": ["westeurope"]},
        {"service": "Microsoft.KeyVault", "locations": ["*"]},
    ],
    "delegations": [{"name": "flex", "serviceName": "Microsoft.App/environments"}],
}
"""A subnet with everything the stack needs of it (blob_safetynet/infra/subnets.py)."""
UNREADABLE: Final[Mapping[str, Any]] = {"unreadable": True}
"""Pass as a subnet's answer to have its getSubnet refused, as ARM refuses a read without a role."""


@dataclass(frozen=True)
class RegisteredResource:
    type: str
    name: str
    inputs: dict[str, Any]
    parent_type: str
    parent_name: str
    secret_inputs: frozenset[str] = frozenset()
    custom: bool = True
    depends_on: frozenset[str] = frozenset()
    """Logical names of the resources it waits for, as the engine receives them: those named in
    `depends_on` and those whose outputs its inputs use (the dependency graph the engine orders
    creation and deletion by)."""
    protect: bool = False
    urn: str = ""
    """The URN the engine would give it: the parents' type chain (the root stack's type left
    out) and its name."""
    aliases: frozenset[str] = frozenset()
    """The URNs it declares it had before (the `aliases` option, given as URNs)."""


@dataclass
class StackRun:
    resources: list[RegisteredResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    subnet_reads: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[RegisteredResource]:
        return [res for res in self.resources if res.type == type_]

    def one(self, type_: str, name: str | None = None) -> RegisteredResource:
        found = [res for res in self.of_type(type_) if name is None or res.name == name]
        if len(found) != 1:
            raise LookupError(f"{len(found)} resources of type {type_} named {name}")
        return found[0]


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


def _unwrap(value: Any) -> tuple[Any, bool]:
    """Secret values arrive wrapped in a signature dict: unwrap and say whether any was secret."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) is not None and "value" in value:
            inner, _ = _unwrap(value["value"])
            return inner, True
        secret = False
        out = {}
        for key, item in value.items():
            out[key], item_secret = _unwrap(item)
            secret = secret or item_secret
        return out, secret
    if isinstance(value, list):
        pairs = [_unwrap(item) for item in value]
        return [item for item, _ in pairs], any(flag for _, flag in pairs)
    return value, False


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


def policy_identity_principal(logical: str) -> str:
    """The principal id the mocks give the system-assigned identity of policy assignment
    `logical` (what ARM returns as `identity.principalId`)."""
    return _uuid("policy-identity", logical)


def _storage_name(logical: str) -> str:
    return "".join(ch for ch in logical.lower() if ch.isalnum())[:18] + "mock"


class _Mocks(pulumi.runtime.Mocks):
    """Answers like ARM would: ids, names, endpoints and identities for the outputs we read."""

    def __init__(
        self, mutate: Mutate | None, subnets: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        self.mutate = mutate
        self.subnets = {key.lower(): value for key, value in (subnets or {}).items()}
        self.subnet_reads: list[str] = []
        self.captured: dict[tuple[str, str], tuple[dict[str, Any], frozenset[str]]] = {}

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        secret_keys: set[str] = set()
        inputs: dict[str, Any] = {}
        for key, value in args.inputs.items():
            inputs[key], is_secret = _unwrap(value)
            if is_secret:
                secret_keys.add(key)
        if self.mutate is not None:
            self.mutate(args.typ, args.name, inputs)
        self.captured[(args.typ, args.name)] = (copy.deepcopy(inputs), frozenset(secret_keys))
        return self._state(args.typ, args.name, inputs)

    def _state(self, typ: str, name: str, inputs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        group = f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{inputs.get('resourceGroupName', 'rg')}"
        state = dict(inputs)
        state.setdefault("name", name)
        if typ == "azure-native:resources:ResourceGroup":
            state["name"] = f"{name}-rg"
            return f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{name}-rg", state
        if typ == "azure-native:storage:StorageAccount":
            account = inputs.get("accountName") or _storage_name(name)
            state["name"] = account
            state["primaryEndpoints"] = {"blob": f"https://{account}.blob.core.windows.net/"}
            return f"{group}/providers/Microsoft.Storage/storageAccounts/{account}", state
        if typ == "azure-native:storage:BlobContainer":
            state["name"] = inputs.get("containerName", name)
            account_id = (
                f"{group}/providers/Microsoft.Storage/storageAccounts/{inputs['accountName']}"
            )
            return f"{account_id}/blobServices/default/containers/{state['name']}", state
        if typ == "azure-native:authorization:RoleDefinition":
            # ARM names a role definition by its GUID; its id carries the definition's scope.
            role = inputs.get("roleDefinitionId") or _uuid("role", name)
            state["name"] = role
            return (
                f"{inputs['scope']}/providers/Microsoft.Authorization/roleDefinitions/{role}",
                state,
            )
        if typ.startswith("azure-native:authorization:Policy"):
            return self._policy_state(typ, name, inputs, state)
        if typ == "azure-native:managedidentity:UserAssignedIdentity":
            state["principalId"] = _uuid("principal", name)
            state["clientId"] = _uuid("client", name)
            state["tenantId"] = TENANT_ID
            identity_name = inputs.get("resourceName") or name
            return (
                f"{group}/providers/Microsoft.ManagedIdentity/userAssignedIdentities/{identity_name}",
                state,
            )
        if typ == "azure-native:keyvault:Vault":
            vault = inputs.get("vaultName") or name
            state["name"] = vault
            state["properties"] = {
                **inputs.get("properties", {}),
                "vaultUri": f"https://{vault}.vault.azure.net/",
            }
            return f"{group}/providers/Microsoft.KeyVault/vaults/{vault}", state
        if typ == "azure-native:keyvault:Secret":
            secret = inputs.get("secretName") or name
            vault = inputs["vaultName"]
            state["name"] = secret
            state["properties"] = {
                "secretUri": f"https://{vault}.vault.azure.net/secrets/{secret}",
                "secretUriWithVersion": f"https://{vault}.vault.azure.net/secrets/{secret}/v1",
            }
            return f"{group}/providers/Microsoft.KeyVault/vaults/{vault}/secrets/{secret}", state
        if typ == "azure-native:web:WebApp":
            site = inputs.get("name") or name
            state["name"] = site
            identity = dict(inputs.get("identity") or {})
            identity.update(tenantId=TENANT_ID)
            # Inputs list the identity ids; ARM answers with a map keyed by them.
            assigned = identity.get("userAssignedIdentities") or []
            if isinstance(assigned, list):
                identity["userAssignedIdentities"] = {key: {} for key in assigned}
            state["identity"] = identity
            state["hostNameSslStates"] = [
                {"name": f"{site}.azurewebsites.net", "hostType": "Standard"},
                {"name": f"{site}.scm.azurewebsites.net", "hostType": "Repository"},
            ]
            return f"{group}/providers/Microsoft.Web/sites/{site}", state
        if typ == "azure-native:applicationinsights:Component":
            key = _uuid("instrumentation", name)
            state["connectionString"] = (
                f"InstrumentationKey={key};IngestionEndpoint=https://ingest.example.test/"
            )
            return f"{group}/providers/Microsoft.Insights/components/{name}", state
        return f"{group}/providers/{typ.replace(':', '/')}/{name}", state

    @staticmethod
    def _policy_state(
        typ: str, name: str, inputs: dict[str, Any], state: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """Azure Policy ids as ARM forms them: definitions under their management group or
        subscription, an assignment under its scope; an assignment's system-assigned identity
        gets a principal id."""
        group = inputs.get("managementGroupId")
        scope = (
            f"/providers/Microsoft.Management/managementGroups/{group}"
            if group
            else f"/subscriptions/{SUBSCRIPTION_ID}"
        )
        kinds = {
            "PolicyDefinition": ("policyDefinitions", "policyDefinitionName"),
            "PolicySetDefinition": ("policySetDefinitions", "policySetDefinitionName"),
        }
        short = typ.rsplit(":", 1)[1].removesuffix("AtManagementGroup")
        if short == "PolicyAssignment":
            identity = inputs.get("identity")
            if identity:
                state["identity"] = {**identity, "principalId": policy_identity_principal(name)}
            assigned = inputs.get("policyAssignmentName") or name
            return (
                f"{inputs['scope']}/providers/Microsoft.Authorization/policyAssignments/{assigned}",
                state,
            )
        collection, key = kinds[short]
        defined = inputs.get(key) or name
        return f"{scope}/providers/Microsoft.Authorization/{collection}/{defined}", state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> dict[str, Any] | tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == "azure-native:authorization:getClientConfig":
            return {
                "clientId": _uuid("client"),
                "objectId": DEPLOYER_OBJECT_ID,
                "subscriptionId": SUBSCRIPTION_ID,
                "tenantId": TENANT_ID,
            }
        if args.token == "azure-native:network:getSubnet":
            subnet = (
                f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{args.args['resourceGroupName']}"
                f"/providers/Microsoft.Network/virtualNetworks/{args.args['virtualNetworkName']}"
                f"/subnets/{args.args['subnetName']}"
            )
            self.subnet_reads.append(subnet)
            answer = self.subnets.get(subnet.lower(), FIT_SUBNET)
            if answer is UNREADABLE:  # the engine's answer to a failed invoke: its failures
                return {}, [("subnetName", f"AuthorizationFailed: no read on {subnet}")]
            return {"id": subnet, **answer}
        raise NotImplementedError(f"the program made an unexpected call: {args.token}")


class _Monitor(pulumi_mocks.MockMonitor):
    """Records each registration's parent and aliases, which MockResourceArgs does not carry,
    and names resources by the engine's URN rule."""

    def __init__(self, mocks: _Mocks) -> None:
        super().__init__(mocks)
        self.order: list[tuple[str, str, str, bool]] = []
        self.by_urn: dict[str, tuple[str, str]] = {}
        self.parents: dict[str, str] = {}
        self.dependencies: dict[str, list[str]] = {}
        self.protected: dict[str, bool] = {}
        self.aliases: dict[str, frozenset[str]] = {}

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        # The engine's rule (pulumi/pulumi sdk/go/common/resource/urn.go, NewURN): the parent's
        # whole qualified type, unless the parent is the root stack. The mock monitor keeps only
        # the parent's last type, so a resource moved under a component would keep its URN.
        parent_type = parent.split("::")[2] if parent else ""
        if parent_type and parent_type != STACK_TYPE:
            type_ = f"{parent_type}${type_}"
        return f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::{type_}::{name}"

    def _spec_urn(self, spec: Any, request: Any) -> str:
        """An alias spec as the URN it stands for: each field given replaces the resource's own,
        `noParent` meaning the root stack (what the engine resolves; azure-native gives each
        resource specs for its earlier API-version types)."""
        parent = "" if spec.noParent else (spec.parentUrn or request.parent)
        return self.make_urn(parent, spec.type or request.type, spec.name or request.name)

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        self.aliases[response.urn] = frozenset(
            alias.urn if alias.HasField("urn") else self._spec_urn(alias.spec, request)
            for alias in request.aliases
        )
        self.by_urn[response.urn] = (request.type, request.name)
        self.parents[response.urn] = request.parent
        self.dependencies[response.urn] = list(request.dependencies)
        self.protected[response.urn] = bool(request.protect)
        if request.type != STACK_TYPE:
            self.order.append((response.urn, request.type, request.name, bool(request.custom)))
        return response


# Mocks first, then the program: pulumi_azure_native and infra are imported only now.
pulumi.runtime.set_mocks(_Mocks(None), project="blob-safetynet", stack="test", preview=False)

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
    mocks = _Mocks(mutate, subnets)
    monitor = _Monitor(mocks)
    # A fresh root stack per run: set_mocks creates one only when none exists.
    pulumi_settings.ROOT.set(None)
    pulumi.runtime.set_mocks(
        mocks, project=infra_config.NAMESPACE, stack="test", preview=False, monitor=monitor
    )
    outputs: dict[str, Any] = {}

    async def body() -> None:
        declared = program()
        resolved = await pulumi.Output.all(**declared).future()
        outputs.update(resolved or {})

    _sync_await(run_pulumi_func(body))

    registered = []
    for urn, typ, name, custom in monitor.order:
        parent_urn = monitor.parents.get(urn, "")
        parent_type, parent_name = monitor.by_urn.get(parent_urn, (STACK_TYPE, ""))
        inputs, secret_keys = mocks.captured.get((typ, name), ({}, frozenset()))
        depends_on = frozenset(
            monitor.by_urn[dep][1]
            for dep in monitor.dependencies.get(urn, [])
            if dep in monitor.by_urn
        )
        registered.append(
            RegisteredResource(
                type=typ,
                name=name,
                inputs=inputs,
                parent_type=parent_type,
                parent_name=parent_name,
                secret_inputs=secret_keys,
                custom=custom,
                depends_on=depends_on,
                protect=monitor.protected.get(urn, False),
                urn=urn,
                aliases=monitor.aliases.get(urn, frozenset()),
            )
        )
    return StackRun(resources=registered, outputs=outputs, subnet_reads=mocks.subnet_reads)


def run_function(program: Callable[[], Mapping[str, pulumi.Output[Any]]]) -> StackRun:
    """Runs `program`, a Pulumi program as a function returning its outputs, under fresh mocks."""
    return _run(program, None)


def run_program(
    overrides: Mapping[str, object] | None = None, mutate: Mutate | None = None
) -> list[RegisteredResource]:
    """Every resource the program registers with this configuration; see the module docstring."""
    return run_stack(overrides, mutate).resources
