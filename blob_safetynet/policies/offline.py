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
  (https://learn.microsoft.com/azure/azure-resource-manager/templates/export-template-cli).

Every file is grouped by the account its resource id or name names, normalised to the REST
shape, and handed to `blob_safetynet.policies.adapters.arm.account` like a live read. A facet no file holds
(role assignments, Defender, anything not given) stays UNKNOWN with a reason that says so,
never a default. A file that cannot be read, or holds none of these shapes, is an OfflineError
naming it. Reading is bounded: at most MAX_FILES files of MAX_FILE_BYTES each.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.audit import AccountResult, AuditReport, Scope
from blob_safetynet.policies.model import UNKNOWN, Facet, Thresholds
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.rules.base import BLOB_FACETS, NO_BLOB_KINDS
from blob_safetynet.policies.suppressions import read_capped
from blob_safetynet.settings.redaction import printable

MAX_FILES: Final = 256
MAX_FILE_BYTES: Final = 16 * 1024 * 1024
"""A whole subscription's template export is a few MB; anything larger is not an export."""
_PROVIDER: Final = "microsoft.storage/storageaccounts"
ACCOUNT: Final = _PROVIDER
BLOB_SERVICE: Final = f"{_PROVIDER}/blobservices"
CONTAINER: Final = f"{_PROVIDER}/blobservices/containers"
POLICY: Final = f"{_PROVIDER}/managementpolicies"
LOCAL_USER: Final = f"{_PROVIDER}/localusers"
ENDPOINT_CONNECTION: Final = f"{_PROVIDER}/privateendpointconnections"
KNOWN_TYPES: Final = (ACCOUNT, BLOB_SERVICE, CONTAINER, POLICY, LOCAL_USER, ENDPOINT_CONNECTION)
_RESOURCE_KEYS: Final = frozenset(
    {"id", "name", "type", "kind", "sku", "location", "tags", "identity", "extendedLocation"}
)
"""Top-level keys of a resource, whatever the shape; the CLI flattens everything else."""
_CLI_NAMES: Final = {
    "enableHttpsTrafficOnly": "supportsHttpsTrafficOnly",
    "networkRuleSet": "networkAcls",
}
"""The two account properties the SDK (and so the CLI's output) names otherwise than REST."""
_ACCOUNT_IN_ID: Final = re.compile(r"/providers/Microsoft\.Storage/storageAccounts/([^/]+)", re.I)
_PARAMETER: Final = re.compile(r"parameters\('([^']+)'\)")
_EXPRESSION: Final = re.compile(
    r"\[(?:parameters\('[^']+'\)|concat\((?:parameters\('[^']+'\)|'[^']*')"
    r"(?:\s*,\s*(?:parameters\('[^']+'\)|'[^']*'))*\))\]"
)
NOT_IN_FILES: Final = {
    Facet.ROLES: "role assignments are read only from Azure (not judged from files)",
    Facet.DEFENDER: "Defender for Storage is read only from Azure (not judged from files)",
}


class OfflineError(ValueError):
    """A file cannot be read or holds no shape the offline audit knows; the message names it."""


@dataclass
class _Pieces:
    """What the files hold about one account, in the REST shape."""

    name: str
    sources: list[str] = field(default_factory=list)
    account: dict[str, Any] | None = None
    api_version: str = ""
    blob_service: dict[str, Any] | None = None
    containers: dict[str, dict[str, Any]] | None = None
    policy: dict[str, Any] | None = None
    local_users: list[dict[str, Any]] | None = None
    connections: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class _Resource:
    kind: str
    account: str
    body: dict[str, Any]
    api_version: str
    source: str


def run_offline_audit(
    paths: Sequence[Path], thresholds: Thresholds, api_version: str | None = None
) -> AuditReport:
    """Judge the accounts the files describe. `api_version`: the Microsoft.Storage version the
    CLI outputs were read with, when known (a template export names its own per resource)."""
    started = time.perf_counter()
    pieces = collect(paths, api_version)
    scope = Scope("", files=tuple(str(path) for path in paths))
    results = []
    for account in (arm.account(reads_of(piece)) for piece in pieces):
        findings = evaluate(account, thresholds, every_rule=True)
        results.append(AccountResult(account=account, findings=findings))
    report = AuditReport(scope=scope, thresholds=thresholds, results=results)
    report.seconds = time.perf_counter() - started
    return report


def collect(paths: Sequence[Path], api_version: str | None = None) -> list[_Pieces]:
    """The files' resources grouped by account, in name order."""
    if len(paths) > MAX_FILES:
        raise OfflineError(f"--from-file: {len(paths)} files; at most {MAX_FILES}")
    accounts: dict[str, _Pieces] = {}
    for path in paths:
        shown = printable(str(path))
        for resource in resources(load(path), shown, api_version or ""):
            key = resource.account.lower()
            piece = accounts.setdefault(key, _Pieces(resource.account))
            _add(piece, resource)
    return [accounts[key] for key in sorted(accounts)]


def load(path: Path) -> object:
    """The JSON in `path`: at most MAX_FILE_BYTES, UTF-8 (a BOM allowed) or UTF-16 with a BOM
    (what PowerShell's `>` writes)."""
    shown = printable(str(path))
    try:
        data = read_capped(path, MAX_FILE_BYTES)
    except ValueError as error:
        raise OfflineError(f"{shown}: {error}") from None
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return json.loads(data.decode(encoding))
    except UnicodeDecodeError:
        raise OfflineError(f"{shown}: not UTF-8 or UTF-16 text") from None
    except RecursionError:
        raise OfflineError(f"{shown}: nested too deeply to be ARM JSON") from None
    except json.JSONDecodeError as error:
        raise OfflineError(f"{shown}: not JSON ({error.msg} at line {error.lineno})") from None


def resources(document: object, source: str, api_version: str) -> list[_Resource]:
    """The storage resources of one file's JSON, whichever of the known shapes it has."""
    if isinstance(document, Mapping) and isinstance(document.get("resources"), list):
        return _template(document, source)
    items = document if isinstance(document, list) else [document]
    found = [_resource(item, source, api_version, None) for item in items]
    if not found and isinstance(document, list):
        raise OfflineError(f"{source}: an empty list: nothing to judge")
    return found


def _template(document: Mapping[str, Any], source: str) -> list[_Resource]:
    parameters = document.get("parameters")
    defaults = {
        str(key): value.get("defaultValue")
        for key, value in (parameters.items() if isinstance(parameters, Mapping) else ())
        if isinstance(value, Mapping)
    }
    found = [
        _resource(item, source, "", defaults)
        for item in document["resources"]
        if isinstance(item, Mapping) and str(item.get("type", "")).lower() in KNOWN_TYPES
    ]
    if not found:
        raise OfflineError(f"{source}: the template holds no Microsoft.Storage account resource")
    return found


def _resource(
    item: object, source: str, api_version: str, parameters: Mapping[str, object] | None
) -> _Resource:
    if not isinstance(item, Mapping):
        raise OfflineError(f"{source}: {_SHAPES}")
    kind = str(item.get("type", "")).lower()
    if kind not in KNOWN_TYPES:
        raise OfflineError(f"{source}: type '{printable(str(item.get('type')))}': {_SHAPES}")
    body = _rest_shape(dict(item), kind)
    name = _account_name(body, source, parameters)
    if kind == ACCOUNT:
        body["name"] = name
    version = item.get("apiVersion") if parameters is not None else api_version
    return _Resource(kind, name, body, version if isinstance(version, str) else "", source)


_SHAPES: Final = (
    "not a storage account, blob service properties, management policy, container list, "
    "local users, private endpoint connection or ARM template export (see docs/policies.md)"
)


def _rest_shape(item: dict[str, Any], kind: str) -> dict[str, Any]:
    """`item` with `properties` nested, as ARM's REST API returns it."""
    if isinstance(item.get("properties"), Mapping):
        return item
    top = {key: value for key, value in item.items() if key in _RESOURCE_KEYS}
    flat = {key: value for key, value in item.items() if key not in _RESOURCE_KEYS}
    if kind == ACCOUNT:
        flat = {_CLI_NAMES.get(key, key): value for key, value in flat.items()}
        connections = flat.get("privateEndpointConnections")
        if isinstance(connections, list):
            flat["privateEndpointConnections"] = [
                _rest_shape(dict(c), ENDPOINT_CONNECTION) if isinstance(c, Mapping) else c
                for c in connections
            ]
    return {**top, "properties": flat}


def _account_name(
    body: Mapping[str, Any], source: str, parameters: Mapping[str, object] | None
) -> str:
    """The account a resource belongs to: from its resource id, else its (template) name."""
    resource_id = body.get("id")
    if isinstance(resource_id, str) and not resource_id.startswith("["):
        match = _ACCOUNT_IN_ID.search(resource_id)
        if match:
            return match.group(1)
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise OfflineError(f"{source}: a resource with neither a resource id nor a name")
    if parameters is not None and name.startswith("["):
        name = _resolve(name, parameters, source)
    return name.split("/")[0]


def _resolve(expression: str, parameters: Mapping[str, object], source: str) -> str:
    """`[parameters('p')]` or `[concat(parameters('p'), '/default')]` with the parameters'
    default values; any other expression cannot be judged offline."""
    if not _EXPRESSION.fullmatch(expression):
        raise OfflineError(
            f"{source}: cannot resolve the name '{printable(expression)}' offline; only "
            "parameters('...') and concat(...) of them and literals are read"
        )
    inner = expression[1:-1]
    parts = re.findall(r"parameters\('[^']+'\)|'[^']*'", inner)
    text = ""
    for part in parts:
        if part.startswith("'"):
            text += part[1:-1]
            continue
        key = _PARAMETER.fullmatch(part)
        value = parameters.get(key.group(1)) if key else None
        if not isinstance(value, str):
            raise OfflineError(
                f"{source}: the parameter in '{printable(expression)}' has no string default value"
            )
        text += value
    return text


def _add(piece: _Pieces, resource: _Resource) -> None:
    """One resource into its account's pieces; a second document of a single piece is refused
    (which one is the truth cannot be told)."""
    body, kind = resource.body, resource.kind
    if resource.source not in piece.sources:
        piece.sources.append(resource.source)
    if kind == CONTAINER:
        piece.containers = piece.containers or {}
        piece.containers[str(body.get("name", "")).split("/")[-1]] = body
        return
    if kind in (LOCAL_USER, ENDPOINT_CONNECTION):
        attribute = "local_users" if kind == LOCAL_USER else "connections"
        listed = getattr(piece, attribute) or []
        setattr(piece, attribute, [*listed, body])
        return
    attribute = {ACCOUNT: "account", BLOB_SERVICE: "blob_service", POLICY: "policy"}[kind]
    if getattr(piece, attribute) is not None:
        raise OfflineError(
            f"{resource.source}: a second {kind.rsplit('/', 1)[-1]} document for account "
            f"'{printable(piece.name)}' (the first in {', '.join(piece.sources)})"
        )
    setattr(piece, attribute, body)
    if kind == ACCOUNT:
        piece.api_version = resource.api_version


def reads_of(piece: _Pieces) -> arm.ArmReads:
    """The live audit's reads, from the files: what no file holds stays UNKNOWN, with why."""
    body = piece.account or {"name": piece.name, "properties": UNKNOWN}
    reads = arm.ArmReads(account=body, api_version=piece.api_version)
    reads.reasons.update(NOT_IN_FILES)
    connections = piece.connections or _connections_of(piece.account)
    given: dict[Facet, object] = {
        Facet.SETTINGS: piece.account,
        Facet.BLOB_SERVICE: piece.blob_service,
        Facet.CONTAINERS: piece.containers,
        Facet.LIFECYCLE: piece.policy,
        Facet.LOCAL_USERS: piece.local_users,
        Facet.PRIVATE_ENDPOINTS: connections,
    }
    for facet, value in given.items():
        if value is None:
            reads.reasons[facet] = f"{facet.value} not in the files"
    if piece.blob_service is not None:
        reads.blob_service_properties = piece.blob_service
    if piece.containers is not None:
        reads.containers = list(piece.containers.values())
    if piece.policy is not None:
        reads.management_policy = piece.policy
    if piece.local_users is not None:
        reads.local_users = piece.local_users
    if connections is not None:
        reads.private_endpoint_connections = connections
    if body.get("kind") in NO_BLOB_KINDS:
        for facet in BLOB_FACETS:
            reads.reasons[facet] = f"{facet.value} not read (a {body['kind']} account)"
    return reads


def _connections_of(account: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The account's own `privateEndpointConnections` (both shapes carry the list)."""
    props = account.get("properties") if account is not None else None
    listed = props.get("privateEndpointConnections") if isinstance(props, Mapping) else None
    return list(listed) if isinstance(listed, list) else None
