"""RBAC: somebody can write the state tag, and no application identity is an owner."""

from __future__ import annotations

from policies.model import UNKNOWN, Account, Facet, RoleAssignment, Thresholds
from policies.roles import ROLE_ASSIGNMENT_WRITE, TAG_WRITE, grants, normalize_scope, scope_covers
from policies.rules.base import Rule, Severity, Verdict, failed, passed, unknown

APPLICATION_PRINCIPALS = ("ServicePrincipal",)
"""Managed identities and app registrations are both service principals."""


def _applies(assignment: RoleAssignment, account: Account, container: str) -> bool | None:
    """Whether the assignment's scope reaches blobs of `container` in this account."""
    scope = assignment.scope
    if scope is UNKNOWN:
        return None
    if account.resource_id is None:
        # Deploy time: the adapter only attached assignments scoped to this account or below.
        marker = "/containers/"
        return marker not in scope.lower() or scope.lower().rstrip("/").endswith(
            f"{marker}{container.lower()}"
        )
    container_id = f"{account.resource_id}/blobServices/default/containers/{container}"
    return scope_covers(scope, container_id) and (
        scope_covers(scope, account.resource_id)
        or normalize_scope(scope) == normalize_scope(container_id)
    )


def _grants_tag_write(assignment: RoleAssignment) -> bool | None:
    data, not_data = assignment.data_actions, assignment.not_data_actions
    if data is UNKNOWN or not_data is UNKNOWN:
        return None
    return grants(data, not_data, TAG_WRITE)


def _check_tag_write(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.role_assignments is not UNKNOWN
    undecided = False
    for assignment in account.role_assignments:
        applies = _applies(assignment, account, thresholds.container)
        can_write = _grants_tag_write(assignment)
        if applies is False or can_write is False:
            continue
        if applies is None or can_write is None:
            undecided = True
            continue
        return passed(f"{assignment.principal_id} holds tags/write through {assignment.role}")
    if undecided:
        return unknown("a role assignment's scope or permissions are not known yet")
    where = f"the account or container {thresholds.container!r}"
    return failed(f"no principal holds {TAG_WRITE} on {where}")


TAG_WRITE_ROLE = Rule(
    id="SN-TAG-WRITE-ROLE",
    title="Some principal may write blob index tags",
    severity=Severity.CRITICAL,
    rationale=(
        "The protocol seals an upload by flipping its state tag; without tags/write (Storage "
        "Blob Data Contributor has none) the application cannot, and every upload stays "
        "pending until the lifecycle rule deletes it."
    ),
    remediation=(
        "list the application identity in Pulumi config `uploaderPrincipalIds`: infra/access.py "
        f"assigns it the uploader role, which holds {TAG_WRITE} on the container (Storage Blob "
        "Data Owner would also work, but grants far more than the protocol needs)"
    ),
    facets=frozenset({Facet.ROLES}),
    check=_check_tag_write,
    protocol=True,
)


def _is_broad(assignment: RoleAssignment) -> bool | None:
    actions, not_actions = assignment.actions, assignment.not_actions
    if actions is UNKNOWN or not_actions is UNKNOWN:
        return None
    return "*" in actions or grants(actions, not_actions, ROLE_ASSIGNMENT_WRITE)


def _check_broad_roles(account: Account, _: Thresholds) -> Verdict:
    assert account.role_assignments is not UNKNOWN
    broad: list[str] = []
    undecided = False
    for assignment in account.role_assignments:
        is_broad = _is_broad(assignment)
        if is_broad is False:
            continue
        principal_type = assignment.principal_type
        if is_broad is None or principal_type is UNKNOWN or principal_type is None:
            undecided = True
        elif principal_type in APPLICATION_PRINCIPALS:
            broad.append(f"{assignment.principal_id} ({assignment.role} at {assignment.scope})")
    if broad:
        return failed("application identities with owner-like roles: " + ", ".join(broad))
    if undecided:
        return unknown("a broad role's principal type or a role's permissions is not known yet")
    return passed("no application identity holds an owner-like role")


NO_BROAD_APP_ROLES = Rule(
    id="SN-NO-BROAD-APP-ROLES",
    title="No owner-like roles for application identities",
    severity=Severity.MEDIUM,
    rationale=(
        "An application identity with Owner, Contributor or role-assignment rights can turn "
        "off every net this project checks, read account keys, or grant itself anything."
    ),
    remediation=(
        "give the application only the project's data roles (Pulumi config "
        "`uploaderPrincipalIds` / `readerPrincipalIds`, infra/access.py); keep Owner and "
        "Contributor for people and the deployment identity"
    ),
    facets=frozenset({Facet.ROLES}),
    check=_check_broad_roles,
    advisory=True,
)
