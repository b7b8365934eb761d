"""What `safetynet audit` (and `verify`, for its settings audit) is asked to judge: one
subscription, a resource group or an account of it, or a fleet of subscriptions and management
groups. Every name is checked against Azure's naming rules before it becomes part of an ARM
request path."""

from __future__ import annotations

import argparse
import os
import re

from blob_safetynet.cli.commands.common import UsageError
from blob_safetynet.policies.sources.results import Scope
from blob_safetynet.settings import appsettings
from blob_safetynet.settings.redaction import printable

_ACCOUNT_ID = re.compile(
    r"/subscriptions/(?P<sub>[^/]+)/resourceGroups/(?P<rg>[^/]+)"
    r"/providers/Microsoft\.Storage/storageAccounts/(?P<name>[^/]+)/?",
    re.IGNORECASE,
)
_SUBSCRIPTION = re.compile(r"[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
# Resource group and management group: 1-90 letters, digits, underscores, hyphens, periods,
# parentheses; no trailing period. Storage account: 3-24 lowercase letters and digits. Both from
# https://learn.microsoft.com/en-us/azure/azure-resource-manager/management/resource-name-rules
_RESOURCE_GROUP = re.compile(r"[\w\-.()]{0,89}[\w\-()]")
_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}", re.ASCII)


def scope_from(args: argparse.Namespace) -> Scope:
    """The audit's scope from the options; raises UsageError when they do not name one."""
    given: str | list[str] | None = args.subscription
    named = [given] if isinstance(given, str) else given or []
    # `safetynet verify` shares this with one --subscription and no fleet options.
    if len(named) > 1 or getattr(args, "management_group", None) or _all(args):
        return _fleet(args, named)
    account, group = args.account, args.resource_group
    subscription = named[0] if named else os.environ.get(appsettings.AZURE_SUBSCRIPTION_ID.name)
    if account and account.startswith("/"):
        match = _ACCOUNT_ID.fullmatch(account)
        if match is None:
            raise UsageError(
                f"--account '{printable(account)}' is not a storage account resource id"
            )
        if subscription and subscription.lower() != match["sub"].lower():
            raise UsageError("--account names another subscription than --subscription")
        return _checked(Scope(match["sub"], match["rg"], match["name"]))
    if not subscription:
        raise UsageError(
            f"--subscription (or {appsettings.AZURE_SUBSCRIPTION_ID.name}) is required"
        )
    if account and not group:
        raise UsageError("--account NAME needs --resource-group (or pass the full resource id)")
    return _checked(Scope(subscription, group, account))


def _all(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "all_subscriptions", False))


def _fleet(args: argparse.Namespace, subscriptions: list[str]) -> Scope:
    """A fleet scope; it names whole subscriptions and groups, never one group or account."""
    if args.account or args.resource_group:
        raise UsageError(
            "--account and --resource-group select within one subscription; a fleet "
            "(--management-group, --all-subscriptions, several --subscription) takes neither"
        )
    if args.all_subscriptions and (subscriptions or args.management_group):
        raise UsageError("--all-subscriptions already names every subscription; drop the others")
    for subscription in subscriptions:
        _checked(Scope(subscription))
    for group in args.management_group:
        if not _RESOURCE_GROUP.fullmatch(group):
            raise UsageError(
                f"management group '{printable(group)}' is not a management group id "
                "(1-90 letters, digits, -_.(), not ending in a period)"
            )
    return Scope(
        "",
        subscriptions=tuple(subscriptions),
        management_groups=tuple(args.management_group),
        all_subscriptions=args.all_subscriptions,
    )


def _checked(scope: Scope) -> Scope:
    """`scope` if each name is one Azure accepts; they become parts of ARM request paths."""
    checks = [
        ("subscription", scope.subscription_id, _SUBSCRIPTION, "a subscription id (a GUID)"),
        ("resource group", scope.resource_group, _RESOURCE_GROUP, "a resource group name"),
        ("account", scope.account, _ACCOUNT_NAME, "3-24 lowercase letters and digits"),
    ]
    for what, value, pattern, expected in checks:
        if value is not None and not pattern.fullmatch(value):
            raise UsageError(f"{what} '{printable(value)}' is not {expected}")
    return scope
