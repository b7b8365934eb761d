"""Rule logic the outcome fixtures leave open, each case found by a mutant that survived them:
deploy-time scopes, several role assignments in one account, partly unknown permissions,
lists of more than one in a message, and the exact thresholds."""

from __future__ import annotations

import dataclasses

import pytest

from blob_safetynet.policies.rules import RULES_BY_ID, Outcome
from blob_safetynet.policies.rules.base import Finding
from blob_safetynet.policies.rules.model import (
    UNKNOWN,
    Account,
    Container,
    Facet,
    RoleAssignment,
    TagFilter,
    Thresholds,
)
from blob_safetynet.policies.rules.roles import OWNER_LIKE, PERMANENT_DELETE
from blob_safetynet.settings.vocabulary import DEFAULT_CONTAINER, PENDING, STATE_TAG
from tests.policies import models as m
from tests.policies.test_rules import THRESHOLDS, fenced

CONTAINER = DEFAULT_CONTAINER
OTHER_CONTAINER = f"{m.ACCOUNT_ID}/blobServices/default/containers/other"


def judge(rule_id: str, account: Account, thresholds: Thresholds = THRESHOLDS) -> Finding:
    return RULES_BY_ID[rule_id].evaluate(account, thresholds)


def detail(rule_id: str, account: Account, thresholds: Thresholds = THRESHOLDS) -> str | None:
    """The verdict's own fact, without the title and remediation the message wraps it in."""
    return RULES_BY_ID[rule_id].check(account, thresholds).detail


def roles(*assignments: RoleAssignment) -> Account:
    return m.account(role_assignments=assignments)


# Deploy time (no resource id yet): scopes are compared as text.


def test_deploy_time_grant_on_another_container_does_not_reach_the_protocol_container() -> None:
    """Before deployment, tags/write scoped to another container does not count as the seal's grant."""
    model = dataclasses.replace(roles(m.assignment(scope=OTHER_CONTAINER)), resource_id=None)
    assert judge("SN-TAG-WRITE-ROLE", model).outcome is Outcome.FAIL


def test_deploy_time_grant_on_the_account_reaches_every_container() -> None:
    """Before deployment, tags/write scoped to the account itself reaches the protocol container."""
    model = dataclasses.replace(roles(m.assignment(scope=m.ACCOUNT_ID)), resource_id=None)
    assert judge("SN-TAG-WRITE-ROLE", model).outcome is Outcome.PASS


def test_deploy_time_container_scope_matches_whatever_its_case_and_trailing_slash() -> None:
    """Before deployment, `.../Containers/<NAME>/` is the same scope as `.../containers/<name>`."""
    scope = f"{m.ACCOUNT_ID}/blobServices/default/Containers/{CONTAINER.upper()}/"
    model = dataclasses.replace(roles(m.assignment(scope=scope)), resource_id=None)
    assert judge("SN-TAG-WRITE-ROLE", model).outcome is Outcome.PASS


# Several role assignments: each one is judged, not only the first.


def test_tag_write_found_after_an_assignment_that_does_not_apply() -> None:
    """A grant on another container listed first does not hide the uploader's grant after it."""
    model = roles(m.assignment(scope=OTHER_CONTAINER), m.assignment())
    assert judge("SN-TAG-WRITE-ROLE", model).outcome is Outcome.PASS


def test_tag_write_found_after_an_assignment_of_unknown_scope() -> None:
    """An assignment of unknown scope listed first does not make a known grant after it UNKNOWN."""
    model = roles(m.assignment(scope=UNKNOWN), m.assignment())
    assert judge("SN-TAG-WRITE-ROLE", model).outcome is Outcome.PASS


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(m.assignment(), id="narrow"),
        pytest.param(m.assignment(m.OWNER, principal_type="User"), id="person"),
    ],
)
def test_broad_role_found_after_another_assignment(first: RoleAssignment) -> None:
    """An application's Owner listed after a narrow role or a person's Owner still fails the rule."""
    model = roles(first, m.assignment(m.OWNER, principal_id="app2", scope=m.ACCOUNT_ID))
    assert judge("SN-NO-BROAD-APP-ROLES", model).outcome is Outcome.FAIL


def test_star_action_is_broad_even_when_every_named_owner_action_is_excluded() -> None:
    """A role granting `*` is owner-like although its NotActions remove the four named actions."""
    star = m.assignment(actions=("*",), not_actions=OWNER_LIKE, scope=m.ACCOUNT_ID)
    assert judge("SN-NO-BROAD-APP-ROLES", roles(star)).outcome is Outcome.FAIL


def test_not_actions_spelt_with_non_ascii_case_twins_remove_nothing() -> None:
    """NotActions that name the owner-like actions with a long s (U+017F) for an `s` remove
    nothing: ARM matches actions by ordinal ignore-case, which never takes it for `s`."""
    twins = tuple(action.replace("s", "\u017f") for action in OWNER_LIKE)
    wide = m.assignment(
        actions=("Microsoft.Storage/*", "Microsoft.Authorization/*"),
        not_actions=twins,
        scope=m.ACCOUNT_ID,
    )
    assert judge("SN-NO-BROAD-APP-ROLES", roles(wide)).outcome is Outcome.FAIL


@pytest.mark.parametrize(
    "first",
    [
        pytest.param(m.assignment(m.OWNER, scope=OTHER_CONTAINER), id="not-applying"),
        pytest.param(m.assignment(), id="holding-nothing"),
        pytest.param(m.assignment(m.OWNER, principal_id="ci"), id="deployment-identity"),
        pytest.param(m.assignment(actions=UNKNOWN), id="unknown-permissions"),
    ],
)
def test_never_granted_action_found_after_another_assignment(first: RoleAssignment) -> None:
    """An application's Owner on the account fails the rule whatever assignment is listed before it."""
    model = roles(first, m.assignment(m.OWNER, scope=m.ACCOUNT_ID))
    finding = judge("SN-NEVER-GRANTED", model, Thresholds(deployment_principal_ids=("ci",)))
    assert finding.outcome is Outcome.FAIL, finding.message


@pytest.mark.parametrize("field", ["actions", "not_actions", "data_actions", "not_data_actions"])
def test_never_granted_is_unknown_when_any_one_permission_list_is_unknown(field: str) -> None:
    """One of the four permission lists not known yet leaves the never-granted verdict open."""
    model = roles(m.assignment(**{field: UNKNOWN}))
    assert judge("SN-NEVER-GRANTED", model).outcome is Outcome.UNKNOWN


# Lists of more than one in a message: every item, separated.


def test_broad_roles_message_lists_every_application() -> None:
    """Two applications with Owner are both named in the broad-role failure, comma-separated."""
    model = roles(
        m.assignment(m.OWNER, principal_id="a", scope=m.ACCOUNT_ID),
        m.assignment(m.OWNER, principal_id="b", scope=m.ACCOUNT_ID),
    )
    assert detail("SN-NO-BROAD-APP-ROLES", model) == (
        f"application identities with owner-like roles: a (Owner at {m.ACCOUNT_ID}), "
        f"b (Owner at {m.ACCOUNT_ID})"
    )


def test_never_granted_message_lists_every_application() -> None:
    """Two applications with Owner are both named in the never-granted failure, `;`-separated."""
    model = roles(
        m.assignment(m.OWNER, principal_id="a", scope=m.ACCOUNT_ID),
        m.assignment(m.OWNER, principal_id="b", scope=m.ACCOUNT_ID),
    )
    message = detail("SN-NEVER-GRANTED", model)
    assert message is not None
    assert "; b (Owner): " in message
    assert message.startswith("application identities hold never-granted actions: a (Owner): ")


def test_fenced_grants_are_all_named_in_the_pass() -> None:
    """Two grants kept under the reserved prefix by ABAC are both named, comma-separated."""
    owner = m.BLOB_OWNER.name
    model = roles(
        m.assignment(m.BLOB_OWNER, principal_id="a", condition=fenced(PERMANENT_DELETE)),
        m.assignment(m.BLOB_OWNER, principal_id="b", condition=fenced(PERMANENT_DELETE)),
    )
    message = detail("SN-NEVER-GRANTED", model)
    assert message is not None
    assert message.endswith(f"by ABAC condition: a ({owner}), b ({owner}))")


def test_every_exempt_deployment_identity_is_named() -> None:
    """Two deployment identities are both named in the exemption note, comma-separated."""
    exempt = Thresholds(deployment_principal_ids=("ci", "cd"))
    message = detail("SN-NO-BROAD-APP-ROLES", m.account(), exempt)
    assert message is not None
    assert message.endswith("(deployment identities exempt: ci, cd)")


def test_both_transport_problems_are_named() -> None:
    """Plain HTTP and an old TLS version are both reported, comma-separated."""
    model = m.account(settings=m.settings(https_only=False, minimum_tls_version="TLS1_0"))
    assert detail("SN-HTTPS-TLS", model) == (
        "plain HTTP is accepted, minimum TLS version is TLS1_0 (absent means TLS1_0)"
    )


def test_every_public_container_is_named() -> None:
    """Two public containers are both named with their access level, comma-separated."""
    model = m.account(containers=(Container("a", "Blob"), Container("b", "Container")))
    assert detail("SN-CONTAINERS-PRIVATE", model) == "public containers: a (Blob), b (Container)"


def test_lifecycle_failure_names_every_problem_of_every_rule() -> None:
    """Each rule's problems are comma-separated and the rules `;`-separated in the failure."""
    model = m.account(
        lifecycle_rules=(
            m.pending_rule(name="r1", enabled=False, blob_types=("appendBlob",)),
            m.pending_rule(name="r2", enabled=False),
        )
    )
    assert detail("SN-PENDING-LIFECYCLE", model) == (
        "no lifecycle rule deletes pending blobs (r1: disabled, not for block blobs; r2: disabled)"
    )


def test_lifecycle_names_every_narrower_prefix_and_every_extra_tag_filter() -> None:
    """Two narrower prefixes and two extra tag conditions are each listed in the failure."""
    rule = m.pending_rule(
        prefixes=(f"{CONTAINER}/a/", f"{CONTAINER}/b/"),
        tag_filters=(
            TagFilter(STATE_TAG, "==", PENDING),
            TagFilter("team", "==", "x"),
            TagFilter("tier", "==", "hot"),
        ),
    )
    message = detail("SN-PENDING-LIFECYCLE", m.account(lifecycle_rules=(rule,)))
    assert message is not None
    assert f"covers only {CONTAINER}/a/, {CONTAINER}/b/ of container" in message
    assert "also requires team == x and tier == hot (filters" in message


def test_unread_facets_are_all_named() -> None:
    """A rule reading two unread facets names both reasons, `;`-separated, in Facet order."""
    model = m.account(
        blob_service_properties=UNKNOWN,
        lifecycle_rules=UNKNOWN,
        unknown_reasons={Facet.BLOB_SERVICE: "no blob service", Facet.LIFECYCLE: "no policy"},
    )
    finding = judge("SN-VERSION-EXPIRY", model)
    assert finding.outcome is Outcome.UNKNOWN
    assert "cannot be judged: no blob service; no policy." in finding.message


# Messages of branches the fixtures do not reach.


def test_shared_key_allowed_and_blob_setting_unread_names_the_default() -> None:
    """Shared key allowed with the blob service's own switch unread fails with the documented default."""
    model = m.account(
        settings=m.settings(allow_shared_key_access=True, blob_shared_key_access=UNKNOWN)
    )
    assert detail("SN-SHARED-KEY-OFF", model) == (
        "shared key access is allowed (absent means allowed)"
    )


def test_soft_delete_of_unknown_state_says_so() -> None:
    """Blob soft delete whose enabled flag is not known yet is UNKNOWN with that reason."""
    model = m.account(
        blob_service_properties=m.blob_service_properties(delete={"enabled": UNKNOWN})
    )
    assert detail("SN-BLOB-SOFT-DELETE", model) == (
        "whether blob soft delete is enabled is not known yet"
    )


# Exact thresholds and the finding's identity.


def test_soft_delete_of_exactly_the_minimum_days_passes() -> None:
    """A retention of exactly min_blob_soft_delete_days is enough ("fewer than" fails)."""
    model = m.account(blob_service_properties=m.blob_service_properties(delete={"days": 7}))
    assert judge("SN-BLOB-SOFT-DELETE", model, Thresholds(min_blob_soft_delete_days=7)).outcome is (
        Outcome.PASS
    )


def test_pending_expiry_of_exactly_the_maximum_days_passes() -> None:
    """Deleting pending blobs after exactly max_pending_days is within the limit ("more than" fails)."""
    model = m.account(lifecycle_rules=(m.pending_rule(delete_after_days=7),))
    finding = judge("SN-PENDING-LIFECYCLE", model, Thresholds(max_pending_days=7))
    assert finding.outcome is Outcome.PASS


def test_protocol_container_known_by_name_is_judged_beside_an_unnamed_one() -> None:
    """An account that surely holds the protocol's container is judged even if another container's name is unknown."""
    model = m.account(containers=(Container(CONTAINER, None), Container(UNKNOWN, None)))
    assert judge("SN-PENDING-LIFECYCLE", model).outcome is Outcome.PASS


def test_finding_names_the_account_and_its_resource_id() -> None:
    """A finding carries the judged account's name and resource id."""
    finding = judge("SN-SHARED-KEY-OFF", m.account())
    assert (finding.account, finding.resource_id) == ("docs", m.ACCOUNT_ID)
