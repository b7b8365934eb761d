"""Names ARM accepts: explicit names for the globally unique resources, and the rules per type.

azure-native auto-names a resource as its logical name plus 8 random hex characters and does
not adapt the result to the type's rules: `sweeper-runtime` became an account name with a
hyphen, which ARM refuses with `AccountNameInvalid` (pulumi/pulumi-azure-native issues 3665
and 4294). Storage accounts, the key vault and the function app have global DNS names, so
they get explicit names here: a prefix, the stack name reduced to what the type allows, and a
stable hash of subscription, project and stack (the same stack keeps its names; two
subscriptions or stacks do not collide).

`NAME_RULES` holds each registered type's rule from Microsoft's "Naming rules and restrictions
for Azure resources" (https://learn.microsoft.com/azure/azure-resource-manager/management/
resource-name-rules; MicrosoftDocs/azure-docs articles/azure-resource-manager/management/
resource-name-rules.md). The mock tests check every name the program registers against it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

_ALNUM_HYPHEN_ENDS: Final = r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"


def _printable_name(forbidden: str) -> re.Pattern[str]:
    """1-260 characters, none of `forbidden` nor a control character, not ending in a space or
    period: the rule Azure Monitor and Application Insights names share."""
    excluded = f"[^{forbidden}\\x00-\\x1f"
    return re.compile(rf"(?=.{{1,260}}$){excluded}]*{excluded} .]")


NAME_RULES: Final[dict[str, tuple[str, re.Pattern[str]]]] = {
    "azure-native:resources:ResourceGroup": (
        "1-90 letters, digits, underscores, hyphens, periods and parentheses; not ending in a "
        "period",
        re.compile(r"(?=.{1,90}$)[\w\-.()]*[\w\-()]"),
    ),
    "azure-native:storage:StorageAccount": (
        "3-24 lowercase letters and digits (globally unique)",
        re.compile(r"[a-z0-9]{3,24}"),
    ),
    "azure-native:storage:BlobContainer": (
        "3-63 lowercase letters, digits and single hyphens, starting and ending with a letter "
        "or digit",
        re.compile(r"(?=.{3,63}$)[a-z0-9]+(?:-[a-z0-9]+)*"),
    ),
    "azure-native:storage:BlobServiceProperties": ("exactly `default`", re.compile("default")),
    "azure-native:storage:ManagementPolicy": ("exactly `default`", re.compile("default")),
    "azure-native:storage:BlobInventoryPolicy": ("exactly `default`", re.compile("default")),
    "azure-native:web:AppServicePlan": (
        "1-60 letters, digits and hyphens",
        re.compile(r"[A-Za-z0-9-]{1,60}"),
    ),
    "azure-native:web:WebApp": (
        "2-60 letters, digits and hyphens, not starting or ending with a hyphen (globally "
        "unique: <name>.azurewebsites.net)",
        re.compile(rf"(?=.{{2,60}}$){_ALNUM_HYPHEN_ENDS}"),
    ),
    "azure-native:keyvault:Vault": (
        "3-24 letters, digits and single hyphens, starting with a letter and ending with a "
        "letter or digit (globally unique: <name>.vault.azure.net)",
        re.compile(r"(?=.{3,24}$)[A-Za-z](?:-?[A-Za-z0-9])*"),
    ),
    "azure-native:keyvault:Secret": (
        "1-127 letters, digits and hyphens",
        re.compile(r"[A-Za-z0-9-]{1,127}"),
    ),
    "azure-native:managedidentity:UserAssignedIdentity": (
        "3-128 letters, digits, hyphens and underscores, starting with a letter or digit",
        re.compile(r"(?=.{3,128}$)[A-Za-z0-9][A-Za-z0-9_-]*"),
    ),
    "azure-native:operationalinsights:Workspace": (
        "4-63 letters, digits and hyphens, starting and ending with a letter or digit",
        re.compile(rf"(?=.{{4,63}}$){_ALNUM_HYPHEN_ENDS}"),
    ),
    "azure-native:applicationinsights:Component": (
        "1-260 characters without % & \\ ? / or control characters, not ending in a space or "
        "period",
        _printable_name(r"%&\\?/"),
    ),
    "azure-native:monitor:DiagnosticSetting": (
        "1-260 characters without * < > % & : \\ ? + /",
        re.compile(r"[^*<>%&:\\?+/]{1,260}"),
    ),
    "azure-native:monitor:ActionGroup": (
        "1-260 characters without : < > + / & % \\ ? or control characters, not ending in a "
        "space or period",
        _printable_name(r":<>+/&%\\?"),
    ),
    "azure-native:monitor:ScheduledQueryRule": (
        "1-260 characters without * < > % { } & : \\ ? / # | or control characters, not ending "
        "in a space or period",
        _printable_name(r"*<>%{}&:\\?/#|"),
    ),
    # "Management Locks - Create Or Update At Resource Level": "at most 260 characters. It
    # cannot contain <, > %, &, :, \\, ?, /, or any control characters"
    # (https://learn.microsoft.com/rest/api/resources/management-locks/create-or-update-at-resource-level).
    "azure-native:authorization:ManagementLockByScope": (
        "1-260 characters without < > % & : \\ ? / or control characters",
        re.compile(r"[^<>%&:\\?/\x00-\x1f\x7f]{1,260}"),
    ),
}
"""Registered type -> (rule in words, pattern the whole name must match)."""

NAME_INPUTS: Final[dict[str, str]] = {
    "azure-native:resources:ResourceGroup": "resourceGroupName",
    "azure-native:storage:StorageAccount": "accountName",
    "azure-native:storage:BlobContainer": "containerName",
    "azure-native:storage:BlobServiceProperties": "blobServicesName",
    "azure-native:storage:ManagementPolicy": "managementPolicyName",
    "azure-native:storage:BlobInventoryPolicy": "blobInventoryPolicyName",
    "azure-native:web:AppServicePlan": "name",
    "azure-native:web:WebApp": "name",
    "azure-native:keyvault:Vault": "vaultName",
    "azure-native:keyvault:Secret": "secretName",
    "azure-native:managedidentity:UserAssignedIdentity": "resourceName",
    "azure-native:operationalinsights:Workspace": "workspaceName",
    "azure-native:applicationinsights:Component": "resourceName",
    "azure-native:monitor:DiagnosticSetting": "name",
    "azure-native:monitor:ActionGroup": "actionGroupName",
    "azure-native:monitor:ScheduledQueryRule": "ruleName",
    "azure-native:authorization:ManagementLockByScope": "lockName",
}
"""The input that carries each type's ARM name; absent means azure-native auto-names it."""

AUTONAME_SUFFIX_LENGTH: Final = 8
"""azure-native appends this many random hex characters to the logical name (issue 3665)."""


def conforms(type_: str, name: str) -> bool:
    """Whether `name` is a valid ARM name for resources of `type_` (unknown types: False)."""
    rule = NAME_RULES.get(type_)
    return rule is not None and rule[1].fullmatch(name) is not None


@dataclass(frozen=True)
class StackNames:
    """The explicit names of the resources whose names are global DNS labels."""

    data_account: str
    runtime_account: str
    key_vault: str
    function_app: str


def stack_names(project: str, stack: str, subscription_id: str) -> StackNames:
    """Deterministic, valid names for one stack in one subscription."""
    token = hashlib.sha256(f"{subscription_id}/{project}/{stack}".encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]", "", stack.lower())[:8]
    dashed = "-".join(part for part in ("snkv", slug, token) if part)
    return StackNames(
        data_account=f"snd{slug}{token}",
        runtime_account=f"snr{slug}{token}",
        key_vault=dashed,
        function_app="-".join(part for part in ("safetynet-sweeper", slug, token) if part),
    )
