"""The lock's pre-flight: the deployer's permissions on the resource group, read from a fake ARM
over loopback HTTPS, and judged as ARM judges actions and notActions."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from blob_safetynet.infra.config import ConfigError
from blob_safetynet.infra.preflight import (
    LOCK_WRITE,
    LockPreflight,
    PermissionsUnread,
    allows,
    permissions_url,
    refuse_unless_lock_allowed,
)
from blob_safetynet.settings.vocabulary import arm_action_matches
from testkit.arm_fake import MALFORMED, SUBSCRIPTION, Failure, FakeArm, NetworkFault
from tests.infra.arm_permissions import (
    CONTRIBUTOR,
    OWNER,
    READER,
    STORAGE_ACCOUNT_CONTRIBUTOR,
    USER_ACCESS_ADMINISTRATOR,
)

GROUP = "rg-docs"


@pytest.fixture(scope="module")
def arm() -> Iterator[FakeArm]:
    with FakeArm(page_size=1) as fake:
        yield fake


def preflight(arm: FakeArm) -> LockPreflight:
    return LockPreflight(endpoint=arm.endpoint, ca_file=arm.ca_file, timeout_seconds=5)


@pytest.mark.parametrize(
    ("pattern", "action", "expected"),
    [
        ("*", LOCK_WRITE, True),
        ("Microsoft.Authorization/*", LOCK_WRITE, True),
        ("microsoft.authorization/locks/*", LOCK_WRITE, True),
        ("Microsoft.Authorization/*/Write", LOCK_WRITE, True),
        ("*/read", LOCK_WRITE, False),
        ("Microsoft.Authorization/*/read", LOCK_WRITE, False),
        ("Microsoft.Authorization/locks/write", "Microsoft.Authorization/locks/writeX", False),
        ("Microsoft.Authorization/lock\u017f/write", LOCK_WRITE, False),
        ("Microsoft.Authorization/locks/write", "Microsoft.Authorization/locks/WRITE", True),
    ],
)
def test_an_action_pattern_matches_as_arm_matches_it(
    pattern: str, action: str, expected: bool
) -> None:
    """`*` stands for any run of characters and ASCII case does not count (the long s is not an s);
    nothing else is a wildcard."""
    assert arm_action_matches(pattern, action) is expected


@pytest.mark.parametrize(
    ("permissions", "expected"),
    [
        ([OWNER], True),
        ([USER_ACCESS_ADMINISTRATOR], True),
        ([CONTRIBUTOR], False),
        ([READER], False),
        ([STORAGE_ACCOUNT_CONTRIBUTOR], False),
        ([CONTRIBUTOR, USER_ACCESS_ADMINISTRATOR], True),
        ([], False),
    ],
    ids=["owner", "uaa", "contributor", "reader", "storage-contributor", "contrib+uaa", "none"],
)
def test_only_owner_or_user_access_administrator_may_write_locks(
    permissions: list[dict[str, Any]], expected: bool
) -> None:
    """Locks/write is granted by Owner and User Access Administrator, not by Contributor, whose
    notActions take it away, nor by a role's notActions reaching into another role's grant."""
    assert allows(permissions, LOCK_WRITE) is expected


def test_the_refusal_names_the_roles_to_ask_for() -> None:
    """Without locks/write the ConfigError names the key, the action, the group and the roles."""
    with pytest.raises(ConfigError) as caught:
        refuse_unless_lock_allowed([CONTRIBUTOR], GROUP)
    message = str(caught.value)
    assert caught.value.key == "lock"
    for part in (LOCK_WRITE, GROUP, "Owner or User Access Administrator", "Contributor"):
        assert part in message


def test_the_url_is_the_documented_list_for_resource_group() -> None:
    """The read is Permissions - List For Resource Group at api-version 2022-04-01."""
    assert permissions_url("https://management.azure.com/", SUBSCRIPTION, GROUP) == (
        f"https://management.azure.com/subscriptions/{SUBSCRIPTION}/resourceGroups/{GROUP}"
        "/providers/Microsoft.Authorization/permissions?api-version=2022-04-01"
    )


def test_every_page_is_read_over_https_with_the_token(arm: FakeArm) -> None:
    """The entries of every page (nextLink followed) come back, read with the bearer token."""
    arm.group_permissions[GROUP] = [READER, CONTRIBUTOR, USER_ACCESS_ADMINISTRATOR]
    entries = preflight(arm).read(arm.token, SUBSCRIPTION, GROUP)
    assert entries == [READER, CONTRIBUTOR, USER_ACCESS_ADMINISTRATOR]
    assert preflight(arm).check(arm.token, SUBSCRIPTION, GROUP) == "allowed"


def test_a_contributor_is_refused_through_the_wire(arm: FakeArm) -> None:
    """A Contributor's recorded answer, read over HTTPS, fails the check with the role needed."""
    arm.group_permissions[GROUP] = [CONTRIBUTOR]
    with pytest.raises(ConfigError, match="Owner or User Access Administrator"):
        preflight(arm).check(arm.token, SUBSCRIPTION, GROUP)


@pytest.mark.parametrize(
    ("answer", "token", "reason"),
    [
        (None, None, "404"),
        (Failure(403), None, "403"),
        (Failure(200, MALFORMED), None, "not valid JSON"),
        ([CONTRIBUTOR], "wrong-token", "401"),
    ],
    ids=["group-not-found", "forbidden", "malformed", "bad-token"],
)
def test_an_unreadable_list_is_reported_not_refused(
    arm: FakeArm, answer: object, token: str | None, reason: str
) -> None:
    """A group not created yet, a refused read, a malformed body or a rejected token leave the
    check to ARM: a note, never a refusal of a deployment that might succeed."""
    arm.group_permissions.pop(GROUP, None)
    if answer is not None:
        arm.group_permissions[GROUP] = answer
    with pytest.raises(PermissionsUnread, match=reason):
        preflight(arm).read(token or arm.token, SUBSCRIPTION, GROUP)
    assert preflight(arm).check(token or arm.token, SUBSCRIPTION, GROUP).startswith("not checked: ")


def test_a_missing_group_is_told_apart(arm: FakeArm) -> None:
    """A 404 (the group this deployment will create) is marked as a missing group."""
    arm.group_permissions.pop(GROUP, None)
    with pytest.raises(PermissionsUnread) as caught:
        preflight(arm).read(arm.token, SUBSCRIPTION, GROUP)
    assert caught.value.missing_group


def test_the_token_never_follows_a_next_link_to_another_host(arm: FakeArm) -> None:
    """A nextLink to another host is refused before the bearer token is sent there."""
    arm.group_permissions[GROUP] = Failure(
        200, {"value": [READER], "nextLink": "https://attacker.example/steal"}
    )
    with pytest.raises(PermissionsUnread, match="nextLink leaves"):
        preflight(arm).read(arm.token, SUBSCRIPTION, GROUP)


def test_an_unreachable_endpoint_is_reported() -> None:
    """No server on the endpoint: the read reports it rather than hanging or raising."""
    idle = LockPreflight(endpoint="https://127.0.0.1:9", timeout_seconds=2)
    assert idle.check("token", SUBSCRIPTION, GROUP).startswith("not checked: ARM could not")


@pytest.mark.parametrize("kind", ["drop", "stall"])
def test_a_dropped_or_stalled_connection_is_reported_not_raised(arm: FakeArm, kind: str) -> None:
    """A connection reset with no answer, or an answer held past the read timeout, is an
    unread list: a note, never an exception out of the preview."""
    arm.network_faults.append(NetworkFault(kind, lambda method, path: True, seconds=2.0))
    impatient = LockPreflight(endpoint=arm.endpoint, ca_file=arm.ca_file, timeout_seconds=0.5)
    assert impatient.check(arm.token, SUBSCRIPTION, GROUP).startswith(
        "not checked: ARM could not be reached"
    )
