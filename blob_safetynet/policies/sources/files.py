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
at an api-version before it; a container's read-only immutability flags, which a
template never holds; locks, blob diagnostic settings and backup instances when no file shows
them: `files_nets.py`) is `not_held`, and a rule short of only that is NOT_IN_FILES; any
other facet no file holds stays UNKNOWN with a reason naming the file to add, never a default. A file that cannot be read, or holds none of these shapes, is an OfflineError
naming it. Reading is bounded: at most MAX_FILES files of MAX_FILE_BYTES each (`saved.py`, which
also keeps each file's digest and the line each resource starts on).

What the pieces of one account make of the live audit's reads, and what no file can hold, is in
`file_reads.py`.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.adapters.arm_json import ArmObject, SpellingError, enum
from blob_safetynet.policies.rules import evaluate
from blob_safetynet.policies.rules.model import (
    ARM_IGNORECASE,
    Thresholds,
    arm_fold,
)
from blob_safetynet.policies.sources import files_nets
from blob_safetynet.policies.sources.file_reads import Pieces, reads_of
from blob_safetynet.policies.sources.results import AccountResult, AuditReport, Scope, SourceLine
from blob_safetynet.policies.sources.saved import MAX_FILE_BYTES, Saved, SavedFileError
from blob_safetynet.policies.sources.saved import load as load_saved
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
_PARAMETER: Final = re.compile(r"parameters\('([^']+)'\)", ARM_IGNORECASE)
_EXPRESSION: Final = re.compile(
    r"\[(?:parameters\('[^']+'\)|concat\((?:parameters\('[^']+'\)|'[^']*')"
    r"(?:\s*,\s*(?:parameters\('[^']+'\)|'[^']*'))*\))\]",
    ARM_IGNORECASE,
)


class OfflineError(ValueError):
    """A file cannot be read or holds no shape the offline audit knows; the message names it."""


@dataclass(frozen=True)
class _Passed:
    """A nested template's parameter value given as an expression: evaluated, when a name
    needs it, in the scope of the template that holds the deployment."""

    expression: str
    scope: Mapping[str, object]


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


def group(files: Iterable[tuple[Saved, str]], api_version: str | None = None) -> list[Pieces]:
    """The resources of read files (each with its name as given), by account, in name order."""
    accounts: dict[str, Pieces] = {}
    pool: list[Mapping[str, Any]] = []
    for file, name in files:
        for resource in resources(file.document, printable(name), api_version or ""):
            if not resource.account:
                pool += [resource.body] if resource.kind == files_nets.LOCK else []
                continue
            key = arm_fold(resource.account)
            piece = accounts.setdefault(key, Pieces(resource.account))
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
            text = _resolve(text, parameters, source)
        if parent is not None:
            text = f"{parent[1]}/{text}"
        if kind in files_nets.TYPES:
            resolver = functools.partial(_resolve, parameters=parameters, source=source)
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
                passed = _Passed(passed, outer)
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


def _resolve(expression: str, parameters: Mapping[str, object], source: str) -> str:
    """`[parameters('p')]` or `[concat(parameters('p'), '/default')]` with the parameters'
    default values (`parameters` keyed in lower case: template functions and their arguments
    are case-insensitive); any other expression cannot be judged offline."""
    if not _EXPRESSION.fullmatch(expression):
        raise OfflineError(
            f"{source}: cannot resolve the name '{printable(expression)}' offline; only "
            "parameters('...') and concat(...) of them and literals are read"
        )
    inner = expression[1:-1]
    parts = re.findall(r"parameters\('[^']+'\)|'[^']*'", inner, ARM_IGNORECASE)
    text = ""
    for part in parts:
        if part.startswith("'"):
            text += part[1:-1]
            continue
        key = _PARAMETER.fullmatch(part)
        value = parameters.get(arm_fold(key.group(1))) if key else None
        if isinstance(value, _Passed):
            value = _resolve(value.expression, value.scope, source)
        if not isinstance(value, str):
            raise OfflineError(
                f"{source}: the parameter in '{printable(expression)}' has no string default value"
            )
        text += value
    return text


def _add(piece: Pieces, resource: _Resource) -> None:
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


def _second(piece: Pieces, resource: _Resource, what: str) -> None:
    raise OfflineError(
        f"{resource.source}: a second {what} document for account "
        f"'{printable(piece.name)}' (the first in {', '.join(piece.sources)})"
    )
