"""The nets beside an account in saved files (`files.py`): management locks, the blob service's
diagnostic settings and Azure Backup instances, as saved REST bodies or CLI output (`az lock
list`, `az monitor diagnostic-settings list --resource <account>/blobServices/default`, `az
dataprotection backup-instance list`) or as template resources.

A template names them in one of ARM's forms
(https://learn.microsoft.com/azure/azure-resource-manager/templates/scope-extension-resources):
an extension resource with `scope` (`Microsoft.Authorization/locks`,
`Microsoft.Insights/diagnosticSettings`), or the older nested name form
(`Microsoft.Storage/storageAccounts/providers/locks` named `acct/Microsoft.Authorization/x`,
`Microsoft.Storage/storageAccounts/blobServices/providers/diagnosticSettings` named
`acct/default/Microsoft.Insights/x`); a backup instance
(`Microsoft.DataProtection/backupVaults/backupInstances`) names the account in
`dataSourceInfo.resourceID`. A lock at a resource group or subscription is judged only against
saved accounts whose ids lie under it; a template's own lock without `scope` (its deployment's
group) is not judged. What the files do not show is `not_held`: a lock, a diagnostic setting or
a backup instance can always exist outside them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from blob_safetynet.policies.adapters import nets
from blob_safetynet.policies.adapters.arm import ArmReads
from blob_safetynet.policies.rules.model import ARM_IGNORECASE, Facet, LockScope, arm_fold
from blob_safetynet.policies.rules.nets import PROTECTING_LEVELS

LOCK: Final = "microsoft.authorization/locks"
ACCOUNT_LOCK: Final = "microsoft.storage/storageaccounts/providers/locks"
DIAGNOSTIC: Final = "microsoft.insights/diagnosticsettings"
BLOB_DIAGNOSTIC: Final = (
    "microsoft.storage/storageaccounts/blobservices/providers/diagnosticsettings"
)
BACKUP: Final = "microsoft.dataprotection/backupvaults/backupinstances"
TYPES: Final = (LOCK, ACCOUNT_LOCK, DIAGNOSTIC, BLOB_DIAGNOSTIC, BACKUP)
_ACCOUNT_AT_END: Final = re.compile(
    r"(?:^|/)Microsoft\.Storage/storageAccounts/([^/]+)$", ARM_IGNORECASE
)
_BLOB_SERVICE_AT_END: Final = re.compile(
    r"(?:^|/)Microsoft\.Storage/storageAccounts/([^/]+)/blobServices/default$", ARM_IGNORECASE
)
_BLOB_SETTING_ID: Final = re.compile(
    r"/Microsoft\.Storage/storageAccounts/([^/]+)/blobServices/default/providers/"
    r"Microsoft\.Insights/diagnosticSettings/[^/]+$",
    ARM_IGNORECASE,
)
_RESOURCE_ID: Final = re.compile(
    r"\[resourceId\('Microsoft\.Storage/storageAccounts',\s*(parameters\('[^']+'\)|'[^']*')\)\]",
    ARM_IGNORECASE,
)
NOT_IN_FILES: Final = {
    Facet.LOCKS: "no delete lock at the account in the files; a lock at its resource group or "
    "subscription lies outside a template or an account's documents (`az lock list` shows them)",
    Facet.DIAGNOSTICS: "no file holds the blob service's diagnostic settings (`az monitor "
    "diagnostic-settings list --resource <account id>/blobServices/default`)",
    Facet.BACKUP: "no file holds a backup instance of the account (they live in a Backup vault: "
    "`az dataprotection backup-instance list`)",
}


def declared_name(
    kind: str, item: Mapping[str, Any], name: str, resolve: Callable[[str], str]
) -> str | None:
    """A template resource of TYPES as `account/own-name`; None when no account of the file
    is its target (a lock of the deployment's group, an account-level diagnostic setting)."""
    own = name.rsplit("/", 1)[-1]
    if kind in (ACCOUNT_LOCK, BLOB_DIAGNOSTIC):
        parts = name.split("/")
        if kind == BLOB_DIAGNOSTIC and (len(parts) < 2 or arm_fold(parts[1]) != "default"):
            return None
        return f"{parts[0]}/{own}"
    if kind == BACKUP:
        props = item.get("properties")
        info = props.get("dataSourceInfo") if isinstance(props, Mapping) else None
        source = info.get("resourceID") if isinstance(info, Mapping) else None
        account = _account_in(source, resolve, _ACCOUNT_AT_END)
        return None if account is None else f"{account}/{own}"
    pattern = _ACCOUNT_AT_END if kind == LOCK else _BLOB_SERVICE_AT_END
    account = _account_in(item.get("scope"), resolve, pattern)
    return None if account is None else f"{account}/{own}"


def _account_in(
    value: object, resolve: Callable[[str], str], pattern: re.Pattern[str]
) -> str | None:
    if not isinstance(value, str):
        return None
    named = _RESOURCE_ID.fullmatch(value)
    if named is not None:
        argument = named.group(1)
        return argument[1:-1] if argument.startswith("'") else _safe(resolve, f"[{argument}]")
    text = _safe(resolve, value) if value.startswith("[") else value
    match = pattern.search(text.rstrip("/")) if text else None
    return match.group(1) if match else None


def _safe(resolve: Callable[[str], str], expression: str) -> str:
    """The expression's value, '' when it cannot be resolved offline (the resource is then
    left out: what it protects cannot be told)."""
    try:
        return resolve(expression)
    except ValueError:
        return ""


def saved_account(kind: str, body: Mapping[str, Any]) -> str:
    """The account a saved body of TYPES belongs to, by its id (a backup instance: by its data
    source); '' when it is no account's (a lock at a group or subscription, kept for the
    accounts under it)."""
    resource_id = body.get("id")
    resource_id = resource_id if isinstance(resource_id, str) else ""
    if kind == BACKUP:
        props = body.get("properties")
        info = props.get("dataSourceInfo") if isinstance(props, Mapping) else None
        source = info.get("resourceID") if isinstance(info, Mapping) else None
        match = _ACCOUNT_AT_END.search(source.rstrip("/")) if isinstance(source, str) else None
        return match.group(1) if match else ""
    if kind in (DIAGNOSTIC, BLOB_DIAGNOSTIC):
        match = _BLOB_SETTING_ID.search(resource_id)
        return match.group(1) if match else ""
    scope = nets.scope_of_lock_id(resource_id) or ""
    match = _ACCOUNT_AT_END.search(scope)
    return match.group(1) if match else ""


def fill(reads: ArmReads, account: Mapping[str, Any] | None, pieces: Any) -> None:
    """The nets of one account into its reads; a facet no file shows is not_held."""
    account_id = account.get("id") if account is not None else None
    account_id = account_id if isinstance(account_id, str) else None
    reads.account_locks = list(pieces.locks)
    listed = list(pieces.scope_locks) if account_id else []
    found = [nets.lock(body, LockScope.ACCOUNT) for body in pieces.locks]
    found += nets.locks_at(listed, account_id) if account_id else []
    levels = {arm_fold(level) for level in PROTECTING_LEVELS}
    if any(isinstance(lock.level, str) and arm_fold(lock.level) in levels for lock in found):
        reads.locks = listed
    if pieces.diagnostics:
        reads.diagnostic_settings = list(pieces.diagnostics)
    if pieces.backups:
        target = account_id or f"/providers/Microsoft.Storage/storageAccounts/{pieces.name}"
        reads.backup_instances = [_backup(body, target) for body in pieces.backups]
    given = {
        Facet.LOCKS: reads.locks,
        Facet.DIAGNOSTICS: reads.diagnostic_settings,
        Facet.BACKUP: reads.backup_instances,
    }
    for facet, value in given.items():
        if not isinstance(value, list):
            reads.reasons[facet] = NOT_IN_FILES[facet]
            reads.not_held.add(facet)


def _backup(body: Mapping[str, Any], target: str) -> dict[str, Any]:
    """A backup instance the files attribute to the account, its data source as the account's
    id (a template names it with an expression)."""
    props = body.get("properties")
    state = props.get("currentProtectionState") if isinstance(props, Mapping) else None
    return {
        "name": body.get("name"),
        "properties": {
            "dataSourceInfo": {"resourceID": target},
            "currentProtectionState": state,
        },
    }
