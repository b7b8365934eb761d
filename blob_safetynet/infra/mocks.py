"""A Pulumi program run under mocks that answer as ARM would: what `safetynet config check`
runs offline, and what the tests run the program with (tests/infra/harness.py).

No Pulumi CLI, no backend, no credential: `pulumi.runtime.set_mocks` replaces the engine
(https://www.pulumi.com/docs/iac/guides/testing/unit/), and `ArmMocks` answers each resource
with the ids, names, endpoints and identities the program reads back, and the invokes it
makes (`getClientConfig`, `getSubnet`; `getClientToken` in preview only). `run_under_mocks` records every registration: type,
logical name, inputs (secrets unwrapped), what the mock answered, parent, dependencies,
protection, URN and aliases.

`set_mocks` must precede the program's first resource, so callers import the program (and
pulumi_azure_native) inside the function they pass, never before this module has run once.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

SUBSCRIPTION_ID: Final = "00000000-0000-0000-0000-0000000000aa"
TENANT_ID: Final = "00000000-0000-0000-0000-0000000000bb"
DEPLOYER_OBJECT_ID: Final = "00000000-0000-0000-0000-0000000000cc"
STACK_TYPE: Final = "pulumi:pulumi:Stack"
CLIENT_CONFIG: Final = "azure-native:authorization:getClientConfig"
GET_SUBNET: Final = "azure-native:network:getSubnet"
CLIENT_TOKEN: Final = "azure-native:authorization:getClientToken"  # noqa: S105 (a token name)
MOCK_ARM_TOKEN: Final = "mock-arm-token"  # noqa: S105 (what the mocks' getClientToken answers)

_SECRET_SIG: Final = "4dabf18193072939515e22adb298388d"  # noqa: S105 (a marker, not a secret)
"""The key Pulumi's wire format marks a secret value with (pulumi.runtime.rpc)."""
_NAMESPACE: Final = uuid.UUID("6f1c2f4e-8a51-4d0e-9d6e-2b7b1b0c5a10")

Mutate = Callable[[str, str, dict[str, Any]], None]
"""Called with (type, name, inputs) before a resource's inputs are recorded; edits in place."""
Program = Callable[[], Mapping[str, pulumi.Output[Any]]]
"""A Pulumi program as a function: declares resources, returns the stack outputs."""

FIT_SUBNET: Final[Mapping[str, Any]] = {
    "serviceEndpoints": [
        {"service": "Microsoft.Storage", "locations": ["westeurope"]},
        {"service": "Microsoft.KeyVault", "locations": ["*"]},
    ],
    "delegations": [{"name": "flex", "serviceName": "Microsoft.App/environments"}],
}
"""A subnet with everything the stack needs of it (blob_safetynet/infra/subnets.py)."""
UNREADABLE: Final[Mapping[str, Any]] = {"unreadable": True}
"""A subnet answer that has the getSubnet invoke refused, as ARM refuses a read without a role."""


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
    `depends_on` and those whose outputs its inputs use."""
    protect: bool = False
    urn: str = ""
    """The URN the engine would give it: the parents' type chain (the root stack's type left
    out) and its name."""
    aliases: frozenset[str] = frozenset()
    """The URNs it declares it had before (the `aliases` option, given as URNs)."""
    id: str | None = None
    """The id the mock answered (None for components)."""
    state: dict[str, Any] = field(default_factory=dict)
    """What the mock answered as the resource's outputs: its inputs, plus what ARM adds."""
    parent_urn: str = ""
    deleted_with: str = ""
    """Logical name of the resource whose delete deletes it (`deleted_with`), or empty."""


@dataclass
class StackRun:
    resources: list[RegisteredResource]
    outputs: dict[str, Any] = field(default_factory=dict)
    subnet_reads: list[str] = field(default_factory=list)
    invokes: list[str] = field(default_factory=list)
    """The token of every invoke the program made, in order."""

    def of_type(self, type_: str) -> list[RegisteredResource]:
        return [res for res in self.resources if res.type == type_]

    def one(self, type_: str, name: str | None = None) -> RegisteredResource:
        found = [res for res in self.of_type(type_) if name is None or res.name == name]
        if len(found) != 1:
            raise LookupError(f"{len(found)} resources of type {type_} named {name}")
        return found[0]


def unwrap(value: Any) -> tuple[Any, bool]:
    """A value with Pulumi's secret wrappers removed, and whether any part was secret."""
    if isinstance(value, dict):
        if value.get(_SECRET_SIG) is not None and "value" in value:
            inner, _ = unwrap(value["value"])
            return inner, True
        secret = False
        out = {}
        for key, item in value.items():
            out[key], item_secret = unwrap(item)
            secret = secret or item_secret
        return out, secret
    if isinstance(value, list):
        pairs = [unwrap(item) for item in value]
        return [item for item, _ in pairs], any(flag for _, flag in pairs)
    return value, False


def _uuid(*parts: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, "/".join(parts)))


def policy_identity_principal(logical: str) -> str:
    """The principal id the mocks give the system-assigned identity of policy assignment
    `logical` (what ARM returns as `identity.principalId`)."""
    return _uuid("policy-identity", logical)


def _answered_identity(given: dict[str, Any], system_name: str | None = None) -> dict[str, Any]:
    """An identity as ARM answers it: inputs list the user-assigned identity ids, ARM answers
    with a map keyed by them; a system-assigned one gets a principal id."""
    identity = dict(given)
    identity.update(tenantId=TENANT_ID)
    assigned = identity.get("userAssignedIdentities") or []
    if isinstance(assigned, list):
        identity["userAssignedIdentities"] = {key: {} for key in assigned}
    if system_name is not None and "SystemAssigned" in str(identity.get("type", "")):
        identity["principalId"] = _uuid("principal", system_name)
    return identity


def _storage_name(logical: str) -> str:
    return "".join(ch for ch in logical.lower() if ch.isalnum())[:18] + "mock"


class ArmMocks(pulumi.runtime.Mocks):
    """Answers like ARM would: ids, names, endpoints and identities for the outputs read back."""

    def __init__(
        self, mutate: Mutate | None = None, subnets: Mapping[str, Mapping[str, Any]] | None = None
    ) -> None:
        self.mutate = mutate
        self.subnets = {key.lower(): value for key, value in (subnets or {}).items()}
        self.subnet_reads: list[str] = []
        self.invokes: list[str] = []
        self.captured: dict[tuple[str, str], tuple[dict[str, Any], frozenset[str]]] = {}
        self.answered: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}

    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        secret_keys: set[str] = set()
        inputs: dict[str, Any] = {}
        for key, value in args.inputs.items():
            inputs[key], is_secret = unwrap(value)
            if is_secret:
                secret_keys.add(key)
        if self.mutate is not None:
            self.mutate(args.typ, args.name, inputs)
        self.captured[(args.typ, args.name)] = (copy.deepcopy(inputs), frozenset(secret_keys))
        resource_id, state = self._state(args.typ, args.name, inputs)
        self.answered[(args.typ, args.name)] = (resource_id, copy.deepcopy(state))
        return resource_id, state

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
            if isinstance(inputs.get("identity"), dict):
                state["identity"] = _answered_identity(inputs["identity"], name)
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
            state["identity"] = _answered_identity(inputs.get("identity") or {})
            state["hostNameSslStates"] = [
                {"name": f"{site}.azurewebsites.net", "hostType": "Standard"},
                {"name": f"{site}.scm.azurewebsites.net", "hostType": "Repository"},
            ]
            return f"{group}/providers/Microsoft.Web/sites/{site}", state
        if typ.startswith("azure-native:dataprotection:"):
            return self._backup_state(typ, name, inputs, state, group)
        if typ == "azure-native:applicationinsights:Component":
            key = _uuid("instrumentation", name)
            state["connectionString"] = (
                f"InstrumentationKey={key};IngestionEndpoint=https://ingest.example.test/"
            )
            return f"{group}/providers/Microsoft.Insights/components/{name}", state
        return f"{group}/providers/{typ.replace(':', '/')}/{name}", state

    @staticmethod
    def _backup_state(
        typ: str, name: str, inputs: dict[str, Any], state: dict[str, Any], group: str
    ) -> tuple[str, dict[str, Any]]:
        """A Backup vault's id and system-assigned identity (what its role assignment names);
        its policies and backup instances under it."""
        if typ.endswith(":BackupVault"):
            vault = inputs.get("vaultName") or name
            state["name"] = vault
            state["identity"] = {
                **(inputs.get("identity") or {}),
                "principalId": _uuid("principal", name),
                "tenantId": TENANT_ID,
            }
            return f"{group}/providers/Microsoft.DataProtection/backupVaults/{vault}", state
        collection = "backupPolicies" if typ.endswith(":BackupPolicy") else "backupInstances"
        vault_id = f"{group}/providers/Microsoft.DataProtection/backupVaults/{inputs['vaultName']}"
        return f"{vault_id}/{collection}/{name}", state

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
    ) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        """An invoke's result and its failures (none: the invoke succeeded; pulumi's mock monitor
        iterates them, so never None)."""
        self.invokes.append(args.token)
        if args.token == CLIENT_CONFIG:
            config = {
                "clientId": _uuid("client"),
                "objectId": DEPLOYER_OBJECT_ID,
                "subscriptionId": SUBSCRIPTION_ID,
                "tenantId": TENANT_ID,
            }
            return config, []
        if args.token == CLIENT_TOKEN:
            # Asked only in preview (the lock's pre-flight, blob_safetynet/infra/lock.py).
            return {"token": MOCK_ARM_TOKEN}, []
        if args.token == GET_SUBNET:
            subnet = (
                f"/subscriptions/{SUBSCRIPTION_ID}/resourceGroups/{args.args['resourceGroupName']}"
                f"/providers/Microsoft.Network/virtualNetworks/{args.args['virtualNetworkName']}"
                f"/subnets/{args.args['subnetName']}"
            )
            self.subnet_reads.append(subnet)
            answer = self.subnets.get(subnet.lower(), FIT_SUBNET)
            if answer is UNREADABLE:
                return {}, [("subnetName", f"AuthorizationFailed: no read on {subnet}")]
            return {"id": subnet, **answer}, []
        raise NotImplementedError(f"the program made an unexpected call: {args.token}")


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """Records each registration's parent and aliases, which MockResourceArgs does not carry,
    and names resources by the engine's URN rule."""

    def __init__(self, mocks: ArmMocks) -> None:
        super().__init__(mocks)
        self.order: list[tuple[str, str, str, bool]] = []
        self.by_urn: dict[str, tuple[str, str]] = {}
        self.parents: dict[str, str] = {}
        self.dependencies: dict[str, list[str]] = {}
        self.protected: dict[str, bool] = {}
        self.aliases: dict[str, frozenset[str]] = {}
        self.deleted_with: dict[str, str] = {}

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
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        self.aliases[response.urn] = frozenset(
            alias.urn if alias.HasField("urn") else self._spec_urn(alias.spec, request)
            for alias in request.aliases
        )
        self.by_urn[response.urn] = (request.type, request.name)
        self.parents[response.urn] = request.parent
        self.dependencies[response.urn] = list(request.dependencies)
        self.protected[response.urn] = bool(request.protect)
        self.deleted_with[response.urn] = request.deletedWith
        if request.type != STACK_TYPE:
            self.order.append((response.urn, request.type, request.name, bool(request.custom)))
        return response


def run_under_mocks(
    program: Program,
    *,
    project: str,
    stack: str,
    mutate: Mutate | None = None,
    subnets: Mapping[str, Mapping[str, Any]] | None = None,
    preview: bool = False,
) -> StackRun:
    """Runs `program` once under fresh mocks and a fresh root stack; every registration and the
    resolved stack outputs. `preview`: run it as `pulumi preview` does (`is_dry_run()` true)."""
    mocks = ArmMocks(mutate, subnets)
    monitor = RecordingMonitor(mocks)
    # A fresh root stack per run: set_mocks creates one only when none exists.
    pulumi_settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    outputs: dict[str, Any] = {}

    async def body() -> None:
        declared = program()
        resolved = await pulumi.Output.all(**declared).future()
        outputs.update(resolved or {})

    try:
        _sync_await(run_pulumi_func(body))
    except BaseException:
        # A failed run (a preview refused by the lock's pre-flight) leaves its outstanding
        # outputs and its RPC error in the process-wide settings, where the next run in the same
        # process would await them and raise them again.
        for task in list(pulumi_settings.SETTINGS.outputs):
            task.cancel()
        pulumi_settings.SETTINGS.outputs.clear()
        pulumi_settings.SETTINGS.rpc_manager.clear()
        raise
    return StackRun(
        resources=[
            _registered(urn, typ, name, custom, mocks, monitor)
            for urn, typ, name, custom in monitor.order
        ],
        outputs=outputs,
        subnet_reads=mocks.subnet_reads,
        invokes=mocks.invokes,
    )


def _registered(
    urn: str, typ: str, name: str, custom: bool, mocks: ArmMocks, monitor: RecordingMonitor
) -> RegisteredResource:
    parent_urn = monitor.parents.get(urn, "")
    parent_type, parent_name = monitor.by_urn.get(parent_urn, (STACK_TYPE, ""))
    inputs, secret_keys = mocks.captured.get((typ, name), ({}, frozenset()))
    resource_id, state = mocks.answered.get((typ, name), (None, {}))
    depends_on = frozenset(
        monitor.by_urn[dep][1] for dep in monitor.dependencies.get(urn, []) if dep in monitor.by_urn
    )
    return RegisteredResource(
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
        id=resource_id,
        state=state,
        parent_urn=parent_urn,
        deleted_with=monitor.by_urn.get(monitor.deleted_with.get(urn, ""), ("", ""))[1],
    )
