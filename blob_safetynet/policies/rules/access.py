"""RBAC: somebody can write the state tag; no application identity is an owner or holds an
action that undoes a net."""

from __future__ import annotations

from blob_safetynet.policies.rules.base import (
    Remediation,
    Rule,
    RuleScope,
    Severity,
    Verdict,
    failed,
    passed,
    unknown,
)
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    Facet,
    RoleAssignment,
    Thresholds,
    arm_fold,
)
from blob_safetynet.policies.rules.roles import (
    CONDITIONABLE,
    DATA_ACTIONS,
    NEVER_GRANTED,
    OWNER_LIKE,
    RESERVED_PREFIX,
    TAG_WRITE,
    grants,
    is_management_group,
    normalize_scope,
    parse_condition,
    scope_covers,
)

APPLICATION_PRINCIPALS = ("ServicePrincipal",)
"""Managed identities and app registrations are both service principals."""


def _applies(assignment: RoleAssignment, account: Account, container: str) -> bool | None:
    """Whether the assignment's scope reaches blobs of `container` in this account."""
    scope = assignment.scope
    if scope is UNKNOWN:
        return None
    if is_management_group(scope):
        # Ids do not show which management groups hold the account's subscription, but ARM
        # lists an assignment for the account only when it applies there ("List all role
        # assignments that apply to a scope",
        # https://learn.microsoft.com/rest/api/authorization/role-assignments/list-for-scope).
        return True
    if account.resource_id is None:
        # Deploy time: the adapter only attached assignments scoped to this account or below.
        marker = "/containers/"
        lowered = normalize_scope(scope)
        return marker not in lowered or lowered.endswith(f"{marker}{arm_fold(container)}")
    # Any ancestor resource counts, `blobServices/default` included: roles can be assigned at
    # any resource and "lower levels inherit role permissions from higher levels"
    # (https://learn.microsoft.com/azure/role-based-access-control/scope-overview).
    container_id = f"{account.resource_id}/blobServices/default/containers/{container}"
    return scope_covers(scope, container_id)


def _grants_tag_write(assignment: RoleAssignment) -> bool | None:
    """Whether the assignment lets its principal write tags on every blob of the container.

    A tag write an ABAC condition limits to some paths is a narrower grant, not the seal's;
    a condition this module cannot parse leaves the answer open.
    """
    data, not_data = assignment.data_actions, assignment.not_data_actions
    if data is UNKNOWN or not_data is UNKNOWN or assignment.condition is UNKNOWN:
        return None
    if not grants(data, not_data, TAG_WRITE):
        return False
    if assignment.condition is None:
        return True
    condition = parse_condition(assignment.condition)
    if condition is None:
        return None
    return not condition.restricts(TAG_WRITE)


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
        return unknown(
            "a role assignment's scope, permissions or ABAC condition is not known yet "
            "(or its condition is not one this project writes)"
        )
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
    remediation=Remediation(
        account="give the application identity a role that holds Microsoft.Storage/storageAccounts/blobServices/containers/blobs/tags/write on the container, with no ABAC condition fencing it to some paths (`az role assignment create --assignee <object id> --role <role> --scope <container id>`); Storage Blob Data Owner holds it too but fails SN-NEVER-GRANTED",
        pulumi=(
            "list the application identity in Pulumi config `uploaderPrincipalIds`: blob_safetynet/infra/access.py "
            f"assigns it the uploader role, which holds {TAG_WRITE} on the container (Storage Blob "
            "Data Owner holds it too, but fails SN-NEVER-GRANTED: its blobs/* includes permanent "
            "delete); a tag write an ABAC condition fences to some paths does not count"
        ),
    ),
    facets=frozenset({Facet.ROLES}),
    check=_check_tag_write,
    scope=RuleScope.PROTOCOL,
    references=(
        "https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage",
    ),
)


def _is_broad(assignment: RoleAssignment) -> bool | None:
    actions, not_actions = assignment.actions, assignment.not_actions
    if actions is UNKNOWN or not_actions is UNKNOWN:
        return None
    return "*" in actions or any(grants(actions, not_actions, op) for op in OWNER_LIKE)


def _is_application(assignment: RoleAssignment, thresholds: Thresholds) -> bool | None:
    """An application identity (not a person, not a named deployment identity); None: unknown."""
    exempt = {arm_fold(principal) for principal in thresholds.deployment_principal_ids}
    if isinstance(assignment.principal_id, str) and arm_fold(assignment.principal_id) in exempt:
        return False  # object ids are GUIDs: the same id in any case
    principal_type = assignment.principal_type
    if principal_type is UNKNOWN or principal_type is None:
        return None
    return principal_type in APPLICATION_PRINCIPALS


def _check_broad_roles(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.role_assignments is not UNKNOWN
    broad: list[str] = []
    undecided = False
    for assignment in account.role_assignments:
        is_broad = _is_broad(assignment)
        if is_broad is False:
            continue
        application = _is_application(assignment, thresholds)
        if application is False:
            continue
        if is_broad is None or application is None:
            undecided = True
        else:
            broad.append(f"{assignment.principal_id} ({assignment.role} at {assignment.scope})")
    if broad:
        return failed("application identities with owner-like roles: " + ", ".join(broad))
    if undecided:
        return unknown("a broad role's principal type or a role's permissions is not known yet")
    return passed(_exempt("no application identity holds an owner-like role", thresholds))


def _exempt(detail: str, thresholds: Thresholds) -> str:
    if not thresholds.deployment_principal_ids:
        return detail
    return (
        f"{detail} (deployment identities exempt: {', '.join(thresholds.deployment_principal_ids)})"
    )


NO_BROAD_APP_ROLES = Rule(
    id="SN-NO-BROAD-APP-ROLES",
    title="No owner-like roles for application identities",
    severity=Severity.MEDIUM,
    rationale=(
        "An application identity with Owner, Contributor, Storage Account Contributor or any "
        "role holding storageAccounts/write, listKeys, regenerateKey or roleAssignments/write "
        "can turn off "
        "every net this project checks, read account keys, or grant itself anything."
    ),
    remediation=Remediation(
        account="remove Owner, Contributor and Storage Account Contributor from application identities on the account (`az role assignment delete --assignee <object id> --role <role> --scope <account id>`) and grant a data role instead; name deployment identities with --deployment-principal",
        pulumi=(
            "give the application only the project's data roles (Pulumi config "
            "`uploaderPrincipalIds` / `readerPrincipalIds`, blob_safetynet/infra/access.py); keep Owner and "
            "Contributor for people and the deployment identity, and name that identity in the "
            "pack config `deploymentPrincipalIds` (audit: --deployment-principal)"
        ),
    ),
    facets=frozenset({Facet.ROLES}),
    check=_check_broad_roles,
    advisory=True,
    references=(
        "https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage",
    ),
)


def _never_granted(assignment: RoleAssignment) -> tuple[list[str], list[str], bool] | None:
    """(actions granted outright, actions granted only under the reserved prefix, whether a
    condition not known or not understood may limit some other one); None when the
    permissions are not known."""
    actions, not_actions = assignment.actions, assignment.not_actions
    data_actions, not_data_actions = assignment.data_actions, assignment.not_data_actions
    if (
        actions is UNKNOWN
        or not_actions is UNKNOWN
        or data_actions is UNKNOWN
        or not_data_actions is UNKNOWN
    ):
        return None
    held = [
        op
        for op in NEVER_GRANTED
        if (
            grants(data_actions, not_data_actions, op)
            if op in DATA_ACTIONS
            else grants(actions, not_actions, op)
        )
    ]
    if not held or assignment.condition is None:
        return held, [], False
    # Whatever the condition says, it cannot limit an action conditions do not apply to.
    outright = [op for op in held if op not in CONDITIONABLE]
    limitable = [op for op in held if op in CONDITIONABLE]
    condition = None if assignment.condition is UNKNOWN else parse_condition(assignment.condition)
    if condition is None:
        return outright, [], bool(limitable)
    # A blob path condition limits data actions only; a control-plane action it names is
    # still granted everywhere the assignment reaches.
    fenced = [op for op in limitable if op in DATA_ACTIONS and condition.reserved_only(op)]
    return [op for op in held if op not in fenced], fenced, False


def _short(action: str) -> str:
    """`listKeys`, `storageAccounts/write`: an action's last meaningful part."""
    parts = action.removesuffix("/action").split("/")
    return "/".join(parts[-2:]) if parts[-1] == "write" else parts[-1]


def _check_never_granted(account: Account, thresholds: Thresholds) -> Verdict:
    assert account.role_assignments is not UNKNOWN
    found: list[str] = []
    fenced: list[str] = []
    undecided = False
    for assignment in account.role_assignments:
        if _applies(assignment, account, thresholds.container) is False:
            continue
        held = _never_granted(assignment)
        if held == ([], [], False):
            continue
        application = _is_application(assignment, thresholds)
        if application is False:
            continue
        if held is None or application is None:
            undecided = True
            continue
        outright, reserved, open_condition = held
        undecided = undecided or open_condition
        who = f"{assignment.principal_id} ({assignment.role})"
        if outright:
            found.append(f"{who}: {', '.join(outright)}")
        if reserved:
            fenced.append(who)
    if found:
        return failed("application identities hold never-granted actions: " + "; ".join(found))
    if undecided:
        return unknown(
            "a role's permissions, its principal type or its ABAC condition is not known yet "
            "(or the condition is not one this project writes)"
        )
    detail = "no application identity holds " + ", ".join(map(_short, NEVER_GRANTED))
    if fenced:
        detail += f" (only under {RESERVED_PREFIX} by ABAC condition: {', '.join(fenced)})"
    return passed(_exempt(detail, thresholds))


NEVER_GRANTED_ACTIONS = Rule(
    id="SN-NEVER-GRANTED",
    title="No application identity holds a never-granted action",
    severity=Severity.CRITICAL,
    rationale=(
        "Each of these undoes a net: listKeys and regenerateKey hand out keys that bypass RBAC, "
        "blobs/permanentDelete purges soft-deleted blobs, storageAccounts/write turns soft "
        "delete, shared key or public access back on, roleAssignments/write grants any of them."
    ),
    remediation=Remediation(
        account="remove the assignment whose role grants a never-granted action (listKeys, permanent delete, ...) from the application identity (`az role assignment delete --assignee <object id> --role <role> --scope <scope>`), or fence it with an ABAC condition to the reserved prefix; name deployment identities with --deployment-principal",
        pulumi=(
            "grant application identities only the project's custom data roles (blob_safetynet/infra/access.py); "
            "never Owner, Contributor, Storage Account Contributor or Storage Blob Data Owner on "
            "the data account. A grant an ABAC condition keeps under the reserved prefix "
            f"{RESERVED_PREFIX} is allowed; deployment identities go in `deploymentPrincipalIds`"
        ),
    ),
    facets=frozenset({Facet.ROLES}),
    check=_check_never_granted,
    scope=RuleScope.PROTOCOL,
    references=(
        "https://learn.microsoft.com/azure/role-based-access-control/built-in-roles/storage",
    ),
)
