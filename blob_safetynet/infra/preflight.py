"""Before the delete lock is declared: may the identity running `pulumi preview` create it?

Creating a management lock needs `Microsoft.Authorization/locks/write` (or a wildcard over it),
which of the built-in roles only Owner and User Access Administrator grant; Contributor's
`notActions` take away `Microsoft.Authorization/*/Write` ("Lock your resources to protect your
infrastructure", https://learn.microsoft.com/azure/azure-resource-manager/management/lock-resources;
"Management Locks - Create Or Update At Resource Level",
https://learn.microsoft.com/rest/api/resources/management-locks/create-or-update-at-resource-level).
Without it ARM refuses the lock with AuthorizationFailed at the end of `pulumi up`, after
everything else was created. So the preview reads the caller's permissions on the resource group
("Permissions - List For Resource Group",
https://learn.microsoft.com/rest/api/authorization/permissions/list-for-resource-group) with the
token azure-native itself deploys with (its `getClientToken` invoke: the same identity that would
create the lock) and refuses the preview with the role to ask for.

What it cannot see: deny assignments (the list holds role permissions only), a role granted
after the preview, and a resource group that does not exist yet (its first preview); in those
cases ARM's own refusal at `up` remains the check. A permission list that cannot be read (no
network, another cloud's endpoint) is reported and left to ARM too: the check must never be the
reason a deployment that would succeed cannot run.
"""

from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlsplit

from blob_safetynet.infra.config import ConfigError
from blob_safetynet.settings import untrusted
from blob_safetynet.settings.vocabulary import arm_action_matches

PUBLIC_ARM: Final = "https://management.azure.com"
PERMISSIONS_API_VERSION: Final = "2022-04-01"
LOCK_WRITE: Final = "Microsoft.Authorization/locks/write"
LOCK_ROLES: Final = "Owner or User Access Administrator"
"""The built-in roles that grant LOCK_WRITE (a custom role with it serves as well)."""
MAX_BODY_BYTES: Final = 4 * 2**20
MAX_PAGES: Final = 50


class PermissionsUnread(Exception):
    """The permission list could not be read; `reason` says why, for the preview's note."""

    def __init__(self, reason: str, *, missing_group: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.missing_group = missing_group


def permissions_url(endpoint: str, subscription_id: str, resource_group: str) -> str:
    """`GET .../resourceGroups/{rg}/providers/Microsoft.Authorization/permissions`."""
    return (
        f"{endpoint.rstrip('/')}/subscriptions/{quote(subscription_id, safe='')}"
        f"/resourceGroups/{quote(resource_group, safe='')}"
        f"/providers/Microsoft.Authorization/permissions?api-version={PERMISSIONS_API_VERSION}"
    )


def allows(permissions: Sequence[Mapping[str, Any]], action: str) -> bool:
    """Whether any one permission entry (one role assignment's) has `action` in its `actions`
    and not in its `notActions`: a role's notActions subtract from that role only."""
    for entry in permissions:
        granted = [str(p) for p in entry.get("actions") or []]
        taken = [str(p) for p in entry.get("notActions") or []]
        if any(arm_action_matches(p, action) for p in granted) and not any(
            arm_action_matches(p, action) for p in taken
        ):
            return True
    return False


def refuse_unless_lock_allowed(
    permissions: Sequence[Mapping[str, Any]], resource_group: str
) -> None:
    """ConfigError naming the role needed when the permissions do not allow creating a lock."""
    if allows(permissions, LOCK_WRITE):
        return
    raise ConfigError(
        "lock",
        f"CanNotDelete needs {LOCK_WRITE} on resource group {resource_group}, which the identity "
        f"running pulumi does not have: ask for {LOCK_ROLES} on the resource group (Contributor "
        "does not grant it), or set lock to none and lock the account another way",
    )


@dataclass(frozen=True)
class LockPreflight:
    """Reads the deploying identity's permissions on a resource group over HTTPS.

    `endpoint` is Resource Manager's (another cloud's for a sovereign cloud); `ca_file` a CA
    bundle to trust instead of the system's (tests serve ARM from loopback)."""

    endpoint: str = PUBLIC_ARM
    ca_file: str | None = None
    timeout_seconds: float = 30.0

    def read(self, token: str, subscription_id: str, resource_group: str) -> list[dict[str, Any]]:
        """Every permission entry, following `nextLink` on the same host; PermissionsUnread
        for an answer that is not a 200 list."""
        url: str | None = permissions_url(self.endpoint, subscription_id, resource_group)
        host = urlsplit(self.endpoint).netloc
        context = ssl.create_default_context(cafile=self.ca_file)
        entries: list[dict[str, Any]] = []
        for _ in range(MAX_PAGES):
            if url is None:
                return entries
            parts = urlsplit(url)
            if parts.scheme != "https" or parts.netloc != host:
                # The bearer token goes only to the endpoint it was asked for.
                raise PermissionsUnread(f"a nextLink leaves {host}: {parts.netloc}")
            body = self._get(url, token, context)
            if not isinstance(body, dict) or not isinstance(body.get("value"), list):
                raise PermissionsUnread("the answer is not a permission list")
            entries.extend(item for item in body["value"] if isinstance(item, dict))
            link = body.get("nextLink")
            url = link if isinstance(link, str) and link else None
        raise PermissionsUnread(f"more than {MAX_PAGES} pages")

    def _get(self, url: str, token: str, context: ssl.SSLContext) -> object:
        request = urllib.request.Request(  # noqa: S310 (https only, checked by the caller)
            url, headers={"Authorization": f"Bearer {token}", "Accept": "application/json"}
        )
        try:
            with urllib.request.urlopen(  # noqa: S310
                request, timeout=self.timeout_seconds, context=context
            ) as answer:
                data = answer.read(MAX_BODY_BYTES + 1)
        except urllib.error.HTTPError as error:
            missing = error.code == 404
            raise PermissionsUnread(
                f"ARM answered {error.code}"
                + (" (the resource group does not exist yet)" if missing else ""),
                missing_group=missing,
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as error:
            # Every transport failure is an unread list: a refused or reset connection and a
            # timeout (OSError, URLError), a connection closed before or inside the answer
            # (RemoteDisconnected, IncompleteRead, BadStatusLine: HTTPException).
            raise PermissionsUnread(f"ARM could not be reached ({error})") from None
        try:
            return untrusted.load_json(data, "the permission list", max_bytes=MAX_BODY_BYTES)
        except untrusted.UntrustedInputError as error:
            raise PermissionsUnread(str(error)) from None

    def check(self, token: str, subscription_id: str, resource_group: str) -> str:
        """Raises ConfigError when the lock could not be created; otherwise a note of what was
        found ("allowed", or why nothing could be read), for the preview's log."""
        try:
            permissions = self.read(token, subscription_id, resource_group)
        except PermissionsUnread as unread:
            return f"not checked: {unread.reason}"
        refuse_unless_lock_allowed(permissions, resource_group)
        return "allowed"
