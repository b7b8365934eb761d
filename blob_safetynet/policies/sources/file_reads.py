"""What the offline audit's files hold about one account (`Pieces`), and the live audit's reads
made of them (`reads_of`): what no file holds stays UNKNOWN with a reason naming the file to add,
and what no file of the known shapes can hold at all is `not_held` (NOT_IN_FILES).

Split from `files.py`, which reads the files' shapes into `Pieces`, so that neither passes 500
lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from blob_safetynet.policies.adapters import arm
from blob_safetynet.policies.adapters.arm_json import enum
from blob_safetynet.policies.adapters.common import KINDS
from blob_safetynet.policies.rules.base import BLOB_FACETS, NO_BLOB_KINDS
from blob_safetynet.policies.rules.model import (
    CONTAINER_WORM_POLICY,
    LEGAL_HOLD,
    SHARED_KEY_SWITCH,
    UNKNOWN,
    Facet,
)
from blob_safetynet.policies.sources import files_nets
from blob_safetynet.policies.sources.results import SourceLine

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
READ_ONLY_FLAGS: Final = frozenset({LEGAL_HOLD, CONTAINER_WORM_POLICY})
"""A container's read-only immutability flags: `az storage container-rm list` prints them, an ARM
template (an export included) never holds them, so a container read from a template leaves the
rules that need them NOT_IN_FILES."""


@dataclass
class Pieces:
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


def reads_of(piece: Pieces) -> arm.ArmReads:
    """The live audit's reads, from the files: what no file holds stays UNKNOWN, with why."""
    body = piece.account or {"name": piece.name, "properties": UNKNOWN}
    reads = arm.ArmReads(account=body, api_version=piece.api_version)
    reads.reasons.update(NOT_IN_FILES)
    reads.not_held.update(NOT_IN_FILES)
    reads.not_held.update(READ_ONLY_FLAGS)
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
