"""The offline audit: judge saved ARM JSON with the live audit's adapter and rules.

Files a compliance team holds, each one of:

- `az storage account show`, `az storage account blob-service-properties show`,
  `az storage account management-policy show`, `az storage container-rm list`: the Azure CLI
  prints the SDK's models with their properties flattened to the top (`enableHttpsTrafficOnly`,
  `networkRuleSet`, `deleteRetentionPolicy`, `policy`, `publicAccess` beside `id` and `name`);
  https://learn.microsoft.com/cli/azure/storage/account#az-storage-account-show,
  https://learn.microsoft.com/cli/azure/storage/account/blob-service-properties#az-storage-account-blob-service-properties-show,
  https://learn.microsoft.com/cli/azure/storage/account/management-policy#az-storage-account-management-policy-show,
  https://learn.microsoft.com/cli/azure/storage/container-rm#az-storage-container-rm-list;
- the REST bodies themselves (`az resource show`, a saved GET), `properties` nested;
- an ARM template export (`az group export`, the portal's Export template): a `resources` list
  of REST-shaped resources named `acct`, `acct/default`, `acct/default/<container>`, or by
  `[parameters('p')]` expressions whose `defaultValue` the export fills in
  (https://learn.microsoft.com/azure/azure-resource-manager/templates/export-template-cli);
  resources a template deploys through a nested deployment's inline template are read too
  (`_nested`), and a linked one, which is not in the file, is refused.

Every file is grouped by the account its resource id or name names, normalised to the REST
shape, and handed to `blob_safetynet.policies.adapters.arm.account` like a live read. What no
file of these shapes can hold (role assignments, Defender for Storage; local users and private
endpoint connections when no file of their own is given; the blob service's shared key switch
at an api-version before it; locks, blob diagnostic settings and backup instances when no file
shows them: `files_nets.py`) is `not_held`, and a rule short of only that is NOT_IN_FILES; any
other facet no file holds stays UNKNOWN with a reason naming the file to add, never a default.
A file that cannot be read, or holds none of these shapes, is an OfflineError naming it
(template expressions: `template_expressions.py`). Reading is bounded: at most MAX_FILES files
of MAX_FILE_BYTES each (`saved.py`, which also keeps each file's digest and the line each
resource starts on).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.adapters.arm_json import ArmObject, SpellingError, enum
from blob_safetynet.policies.adapters.common import KINDS
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.rules.base import BLOB_FACETS, NO_BLOB_KINDS
from blob_safetynet.policies.rules.model import (
    ARM_IGNORECASE,
    SHARED_KEY_SWITCH,
    UNKNOWN,
    Facet,
    Thresholds,
    arm_fold,
)
from blob_safetynet.policies.sources import files_nets
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, Scope, SourceLine
from blob_safetynet.policies.sources.saved import MAX_FILE_BYTES, Saved, SavedFileError
from blob_safetynet.policies.sources.saved import load as load_saved
from blob_safetynet.policies.sources.template_expressions import OfflineError, Passed, resolve
from blob_safetynet.settings.redaction import printable

__all__ = ["MAX_FILE_BYTES", "OfflineError", "run_offline_audit"]

MAX_FILES: Final = 256
_PROVIDER: Final = "microsoft.storage/storageaccounts"
ACCOUNT: Final = _PROVIDER
BLOB_SERVICE: Final = f"{_PROVIDER}/blobservices"
CONTAINER: Final = f"{_PROVIDER}/blobservices/containers"
POLICY: Final = f"{_PROVIDER}/managementpolicies"
LOCAL_USER: Final = f"{_PROVIDER}/localusers"
ENDPOINT_CONNECTION: Final = f"{_PROVIDER}/privateendpointconnections"
KNOWN_TYPES: Final = (
    *(ACCOUNT, BLOB_SERVICE, CONTAINER, POLICY, LOCAL_USER, ENDPOINT_CONNECTION),
    *files_nets.TYPES,
)
DEPLOYMENT: Final = "microsoft.resources/deployments"
_EVALUATION_SCOPES: Final = ("NotSpecified", "Outer", "Inner")
"""`expressionEvaluationOptions.scope` (ExpressionEvaluationOptionsScopeType in the
Microsoft.Resources REST spec); absent and NotSpecified mean Outer."""
_RESOURCE_KEYS: Final = frozenset(
    {"id", "name", "type", "kind", "sku", "location", "tags", "identity", "extendedlocation"}
    | {"apiversion", "dependson", "resources", "condition", "comments", "copy"}
)
"""Top-level keys of a resource (lower case), whatever the shape; the CLI flattens everything
else."""
_CLI_NAMES: Final = {
    "enablehttpstrafficonly": "supportsHttpsTrafficOnly",
    "networkruleset": "networkAcls",
}
"""The two account properties the SDK (and so the CLI's output) names otherwise than REST."""
_ACCOUNT_IN_ID: Final = re.compile(
    r"/providers/Microsoft\.Storage/storageAccounts/([^/]+)", ARM_IGNORECASE
)
NOT_IN_FILES: Final = {
    Facet.ROLES: "role assignments are read only from Azure (not judged from files)",
    Facet.DEFENDER: "Defender for Storage is read only from Azure (not judged from files)",
}
"""Facets no file of these shapes holds: Microsoft.Authorization and Microsoft.Security
resources, not the account's."""
NOT_IN_ACCOUNT_FILES: Final = {
    Facet.LOCAL_USERS: "no file lists the account's local users (`az storage account local-user "
    "list`; an account document and a template export do not)",
    Facet.PRIVATE_ENDPOINTS: "no file lists the account's private endpoint connections (`az "
    "storage account show` does; a template export's account resource does not)",
}
"""Facets the account's own documents do not carry: when no file of their own is given, the
rules that need them are NOT_IN_FILES."""
GIVE: Final = {
    Facet.SETTINGS: "`az storage account show`",
    Facet.BLOB_SERVICE: "`az storage account blob-service-properties show`",
    Facet.CONTAINERS: "`az storage container-rm list`",
    Facet.LIFECYCLE: "`az storage account management-policy show`",
}
"""The file that holds each facet a template export also holds: left out, it is UNKNOWN."""


@dataclass
class _Pieces:
    """What the files hold about one account, in the REST shape."""

    name: str
    sources: list[str] = field(default_factory=list)
    where: SourceLine | None = None
    """The account's resource in its file, else the first resource of it read."""
    account: Mapping[str, Any] | None = None
    api_version: str = ""
    blob_service: Mapping[str, Any] | None = None
    containers: dict[str, Any] | None = None
    policy: Mapping[str, Any] | None = None
    local_users: dict[str, Any] | None = None
    connections: dict[str, Any] | None = None
    locks: list[Mapping[str, Any]] = field(default_factory=list)
    diagnostics: list[Mapping[str, Any]] = field(default_factory=list)
    backups: list[Mapping[str, Any]] = field(default_factory=list)
    scope_locks: list[Mapping[str, Any]] = field(default_factory=list)
    """Locks at a resource group or subscription, of every file (`files_nets`)."""


@dataclass(frozen=True)
class _Resource:
    kind: str
    account: str
    body: ArmObject
    api_version: str
    source: str
    item: object = None
    """The object of the file the resource was read from (for its line)."""


def run_offline_audit(
    paths: Sequence[Path], thresholds: Thresholds, api_version: str | None = None
) -> AuditReport:
    """Judge the accounts the files describe. `api_version`: the Microsoft.Storage version the
    CLI outputs were read with, when known (a template export names its own per resource)."""
    started = time.perf_counter()
    if len(paths) > MAX_FILES:
        raise OfflineError(f"--from-file: {len(paths)} files; at most {MAX_FILES}")
    saved = [load(path) for path in paths]
    pieces = group(
        ((file, str(path)) for file, path in zip(saved, paths, strict=True)), api_version
    )
    scope = Scope("", files=tuple(str(path) for path in paths))
    results = []
    for piece in pieces:
        account = arm.account(reads_of(piece))
        findings = evaluate(account, thresholds, every_rule=True)
        results.append(AccountResult(account=account, findings=findings, source=piece.where))
    report = AuditReport(scope, thresholds, results, inputs=[file.file for file in saved])
    report.seconds = time.perf_counter() - started
    return report


def load(path: Path) -> Saved:
    """`saved.load`, its refusal an OfflineError."""
    try:
        return load_saved(path)
    except SavedFileError as error:
        raise OfflineError(str(error)) from None


def group(files: Iterable[tuple[Saved, str]], api_version: str | None = None) -> list[_Pieces]:
    """The resources of read files (each with its name as given), by account, in name order."""
    accounts: dict[str, _Pieces] = {}
    pool: list[Mapping[str, Any]] = []
    for file, name in files:
        for resource in resources(file.document, printable(name), api_version or ""):
            if not resource.account:
                pool += [resource.body] if resource.kind == files_nets.LOCK else []
                continue
            key = arm_fold(resource.account)
            piece = accounts.setdefault(key, _Pieces(resource.account))
            _add(piece, resource)
            line = SourceLine(name, file.line_of(resource.item))
            if piece.where is None or resource.kind == ACCOUNT:
                piece.where = line
    for piece in accounts.values():
        piece.scope_locks = pool
    return [accounts[key] for key in sorted(accounts)]


def resources(document: object, source: str, api_version: str) -> list[_Resource]:
    """The storage resources of one file's JSON, whichever of the known shapes it has."""
    if isinstance(document, Mapping) and isinstance(document.get("resources"), list):
        return _template(document, source)
    items = document if isinstance(document, list) else [document]
    found = [_resource(item, source, api_version) for item in items]
    if not found and isinstance(document, list):
        raise OfflineError(f"{source}: an empty list: nothing to judge")
    return found


def _defaults(template: Mapping[str, Any]) -> dict[str, object]:
    """A template's parameters with their default values, keyed by `arm_fold`ed name."""
    parameters = template.get("parameters")
    return {
        arm_fold(str(key)): value.get("defaultValue")
        for key, value in (parameters.items() if isinstance(parameters, Mapping) else ())
        if isinstance(value, Mapping)
    }


def _template(document: Mapping[str, Any], source: str) -> list[_Resource]:
    defaults = _defaults(document)
    found = [
        resource
        for item, kind, name in _declared(document["resources"], source, defaults, None)
        if kind in KNOWN_TYPES
        for resource in [_resource(item, source, "", (kind, name))]
    ]
    if not found:
        raise OfflineError(f"{source}: the template holds no Microsoft.Storage account resource")
    return found


def _declared(
    items: list[Any],
    source: str,
    parameters: Mapping[str, object],
    parent: tuple[str, str] | None,
    where: str = "resources",
) -> list[tuple[Mapping[str, Any], str, str]]:
    """Every resource a template declares, each with its full type (lower case) and full
    name, children included wherever ARM accepts them: in a parent's `resources` a child's
    type and name are relative to the parent's
    (https://learn.microsoft.com/azure/azure-resource-manager/templates/child-resource-name-type),
    and a nested deployment's resources are the template's too (`_nested`)."""
    declared: list[tuple[Mapping[str, Any], str, str]] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            continue
        kind, name = str(item.get("type", "")), item.get("name")
        if parent is None and arm_fold(kind) == DEPLOYMENT:
            declared += _nested(item, source, parameters, f"{where}[{index}]")
            continue
        if parent is not None:
            if arm_fold(kind).startswith("microsoft."):
                raise OfflineError(
                    f"{source}: the nested resource type '{printable(kind)}' is fully "
                    "qualified; inside a parent's `resources` ARM takes a type relative to "
                    "the parent's (see docs/policies.md)"
                )
            kind = f"{parent[0]}/{kind}"
        kind = arm_fold(kind)
        if not kind.startswith(_PROVIDER) and kind not in files_nets.TYPES:
            continue
        text = name if isinstance(name, str) else ""
        if text.startswith("["):
            text = resolve(text, parameters, source)
        if parent is not None:
            text = f"{parent[1]}/{text}"
        if kind in files_nets.TYPES:
            resolver = functools.partial(resolve, parameters=parameters, source=source)
            named = files_nets.declared_name(kind, item, text, resolver)
            declared += [] if named is None else [(item, kind, named)]
            continue
        declared.append((item, kind, text))
        children = item.get("resources")
        if isinstance(children, list):
            declared += _declared(children, source, parameters, (kind, text))
    return declared


def _nested(
    deployment: Mapping[str, Any], source: str, outer: Mapping[str, object], where: str
) -> list[tuple[Mapping[str, Any], str, str]]:
    """The resources a nested deployment's inline template declares. Its expressions are
    evaluated in the parent's scope unless `expressionEvaluationOptions.scope` is `inner`,
    where the nested template's own parameters apply, valued by the deployment's `parameters`
    (https://learn.microsoft.com/azure/azure-resource-manager/templates/linked-templates).
    What lives outside the file (`templateLink`, `parametersLink`) is refused, never skipped."""
    props = deployment.get("properties")
    props = props if isinstance(props, Mapping) else {}
    for link in ("templateLink", "parametersLink"):
        if props.get(link) is not None:
            raise OfflineError(
                f"{source}: {where}.properties.{link}: a nested deployment's linked "
                f"{link.removesuffix('Link')} is not in the file and cannot be read offline; "
                "audit a template with it inlined (see docs/policies.md)"
            )
    template = props.get("template")
    resources = template.get("resources") if isinstance(template, Mapping) else None
    if not isinstance(template, Mapping) or not isinstance(resources, list):
        raise OfflineError(
            f"{source}: {where}.properties.template.resources: a nested deployment whose "
            "inline template holds no `resources` list cannot be read (see docs/policies.md)"
        )
    options = props.get("expressionEvaluationOptions")
    scope = enum(options.get("scope"), _EVALUATION_SCOPES) if isinstance(options, Mapping) else None
    if scope not in (None, *_EVALUATION_SCOPES):
        raise OfflineError(
            f"{source}: {where}.properties.expressionEvaluationOptions.scope "
            f"'{printable(str(scope))}' is none of {', '.join(_EVALUATION_SCOPES)}"
        )
    parameters = outer
    if scope == "Inner":
        given = props.get("parameters")
        parameters = _defaults(template)
        for key, value in given.items() if isinstance(given, Mapping) else ():
            passed = value.get("value") if isinstance(value, Mapping) else None
            if isinstance(passed, str) and passed.startswith("["):
                passed = Passed(passed, outer)
            parameters[arm_fold(str(key))] = passed
    return _declared(resources, source, parameters, None, f"{where}.properties.template.resources")


def _resource(
    item: object, source: str, api_version: str, declared: tuple[str, str] | None = None
) -> _Resource:
    """One resource: of a saved REST body or CLI output (`declared` None), or of a template
    with its full type and resolved full name (`declared`); its body named as ARM's GET names
    it (the last segment: `documents`, not `acct/default/documents`)."""
    if not isinstance(item, Mapping):
        raise OfflineError(f"{source}: {_SHAPES}")
    kind = declared[0] if declared else arm_fold(str(item.get("type", "")))
    if kind not in KNOWN_TYPES:
        raise OfflineError(f"{source}: type '{printable(str(item.get('type')))}': {_SHAPES}")
    body = _rest_shape(item, kind)
    if declared is None and kind in files_nets.TYPES:
        name = files_nets.saved_account(kind, body)
    elif declared is None:
        name = _account_name(body, source)
    else:
        if not declared[1]:
            raise OfflineError(f"{source}: a resource with neither a resource id nor a name")
        name = declared[1].split("/")[0]
        body = body.replaced("name", declared[1].rsplit("/", 1)[-1])
    if kind == ACCOUNT:
        body = body.replaced("name", name)
    version = item.get("apiVersion") if declared is not None else api_version
    version = version if isinstance(version, str) else ""
    return _Resource(kind, name, body, version, source, item)


_SHAPES: Final = (
    "not a storage account, blob service properties, management policy, container list, "
    "local users, private endpoint connection, lock, diagnostic setting, backup instance or "
    "ARM template export (see docs/policies.md)"
)


def _rest_shape(item: Mapping[str, Any], kind: str) -> ArmObject:
    """`item` with `properties` nested, as ARM's REST API returns it."""
    if isinstance(item.get("properties"), Mapping):
        return item if isinstance(item, ArmObject) else ArmObject(item)
    top = [(key, value) for key, value in item.items() if arm_fold(key) in _RESOURCE_KEYS]
    flat = [(key, value) for key, value in item.items() if arm_fold(key) not in _RESOURCE_KEYS]
    if kind == ACCOUNT:
        flat = [(_CLI_NAMES.get(arm_fold(key), key), value) for key, value in flat]
        flat = [
            (key, _connections(value) if arm_fold(key) == "privateendpointconnections" else value)
            for key, value in flat
        ]
    try:
        return ArmObject([*top, ("properties", ArmObject(flat))])
    except SpellingError as error:
        raise OfflineError(f"the CLI output's flattened properties: {error}") from None


def _connections(value: object) -> object:
    if not isinstance(value, list):
        return value
    return [_rest_shape(c, ENDPOINT_CONNECTION) if isinstance(c, Mapping) else c for c in value]


def _account_name(body: Mapping[str, Any], source: str) -> str:
    """The account a resource belongs to: from its resource id, else its (template) name."""
    resource_id = body.get("id")
    if isinstance(resource_id, str) and not resource_id.startswith("["):
        match = _ACCOUNT_IN_ID.search(resource_id)
        if match:
            return match.group(1)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise OfflineError(f"{source}: a resource with neither a resource id nor a name")
    return name.split("/")[0]


def _add(piece: _Pieces, resource: _Resource) -> None:
    """One resource into its account's pieces; a second document for one resource, of any
    kind, is refused (which one is the truth cannot be told)."""
    body, kind = resource.body, resource.kind
    if resource.source not in piece.sources:
        piece.sources.append(resource.source)
    if kind in files_nets.TYPES:
        attribute = {files_nets.BACKUP: "backups", files_nets.LOCK: "locks"}.get(kind)
        attribute = attribute or ("locks" if "locks" in kind else "diagnostics")
        getattr(piece, attribute).append(body)
        return
    if kind in (CONTAINER, LOCAL_USER, ENDPOINT_CONNECTION):
        attribute = {CONTAINER: "containers", LOCAL_USER: "local_users"}.get(kind, "connections")
        listed: dict[str, Any] = getattr(piece, attribute) or {}
        name = _child_name(body)
        if name in listed:
            _second(piece, resource, f"{kind.rsplit('/', 1)[-1][:-1]} '{printable(name)}'")
        listed[name] = body
        setattr(piece, attribute, listed)
        return
    attribute = {ACCOUNT: "account", BLOB_SERVICE: "blob_service", POLICY: "policy"}[kind]
    if getattr(piece, attribute) is not None:
        _second(piece, resource, kind.rsplit("/", 1)[-1])
    setattr(piece, attribute, body)
    if kind == ACCOUNT:
        piece.api_version = resource.api_version


def _child_name(body: Mapping[str, Any]) -> str:
    """A child's own name, in lower case (ARM's names are case-insensitive): the last segment
    of its name, else of its resource id."""
    name = body.get("name") or body.get("id")
    return arm_fold(str(name or "").rstrip("/").rsplit("/", 1)[-1])


def _second(piece: _Pieces, resource: _Resource, what: str) -> None:
    raise OfflineError(
        f"{resource.source}: a second {what} document for account "
        f"'{printable(piece.name)}' (the first in {', '.join(piece.sources)})"
    )


def reads_of(piece: _Pieces) -> arm.ArmReads:
    """The live audit's reads, from the files: what no file holds stays UNKNOWN, with why."""
    body = piece.account or {"name": piece.name, "properties": UNKNOWN}
    reads = arm.ArmReads(account=body, api_version=piece.api_version)
    reads.reasons.update(NOT_IN_FILES)
    reads.not_held.update(NOT_IN_FILES)
    if piece.api_version < arm.STORAGE_API_VERSION:
        reads.not_held.add(SHARED_KEY_SWITCH)
    connections = (
        list(piece.connections.values()) if piece.connections else _connections_of(piece.account)
    )
    given: dict[Facet, object] = {
        Facet.SETTINGS: piece.account,
        Facet.BLOB_SERVICE: piece.blob_service,
        Facet.CONTAINERS: piece.containers,
        Facet.LIFECYCLE: piece.policy,
        Facet.LOCAL_USERS: piece.local_users,
        Facet.PRIVATE_ENDPOINTS: connections,
    }
    for facet, value in given.items():
        if value is None and facet in NOT_IN_ACCOUNT_FILES:
            reads.reasons[facet] = NOT_IN_ACCOUNT_FILES[facet]
            reads.not_held.add(facet)
        elif value is None:
            reads.reasons[facet] = f"{facet.value} not in the files (add {GIVE[facet]})"
    if piece.blob_service is not None:
        reads.blob_service_properties = piece.blob_service
    if piece.containers is not None:
        reads.containers = list(piece.containers.values())
    if piece.policy is not None:
        reads.management_policy = piece.policy
    if piece.local_users is not None:
        reads.local_users = list(piece.local_users.values())
    if connections is not None:
        reads.private_endpoint_connections = connections
    files_nets.fill(reads, piece.account, piece)
    if enum(body.get("kind"), KINDS) in NO_BLOB_KINDS:
        for facet in (*BLOB_FACETS, Facet.DIAGNOSTICS, Facet.BACKUP):
            reads.reasons[facet] = f"{facet.value} not read (a {body['kind']} account)"
    return reads


def _connections_of(account: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The account's own `privateEndpointConnections` (both shapes carry the list)."""
    props = account.get("properties") if account is not None else None
    listed = props.get("privateEndpointConnections") if isinstance(props, Mapping) else None
    return list(listed) if isinstance(listed, list) else None
