"""Doubles of targets that break a net make the matching probe FAIL; one that enforces it, PASS."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote, urlsplit

import pytest
from azure.storage.blob import BlobServiceClient, ExponentialRetry

from blob_safetynet.embedded.azurite import DEV_ACCOUNT, DEV_KEY, Azurite, dev_blob_endpoint
from blob_safetynet.policies.probes import (
    Probe,
    ProbeOutcome,
    ProbeResult,
    ProbeSettings,
    Target,
    run_probes,
)
from blob_safetynet.policies.probes.access import (
    HTTPS_ONLY,
    NO_PUBLIC_ACCESS,
    PRIVATE_CONTAINER,
    SAS_TAG_PERMISSION,
    SHARED_KEY_OFF,
    TAG_WRITE_ROLE,
)
from blob_safetynet.policies.probes.liveness import PENDING_LIFECYCLE, SWEEPER_HEARTBEAT
from blob_safetynet.policies.probes.recovery import PERMANENT_DELETE, SOFT_DELETE
from blob_safetynet.policies.probes.writes import (
    CONCURRENT_CREATE,
    CONDITIONAL_SEAL,
    CREATE_ONLY,
    TAG_GUARDED_DELETE,
)
from blob_safetynet.settings.vocabulary import HEARTBEAT_BLOB
from blob_safetynet.sweeper.heartbeat import heartbeat_body, write_heartbeat
from testkit.service_doubles import (
    Misbehaviour,
    Refusal,
    ServiceDouble,
    accepts_tag_writes_unwritten,
    answers_undelete_without_restoring,
    deletes_then_refuses,
    ignores_delete_condition,
    ignores_tag_writes,
    keeps_other_bytes,
    lost_answer_service,
    misbehaving_service,
    non_conforming_service,
    public_access_allowed,
    public_access_off,
    reads_with_any_key,
    refuses_guarded_delete,
    refuses_undelete,
    refusing_service,
    rewrites_then_refuses,
    seals_then_refuses,
    shared_key_allowed,
    shared_key_off,
    snapshot_soft_deleting_service,
    soft_delete_off,
    soft_deleting_service,
    stores_then_refuses_existing,
    tag_guarding_service,
    versioning_service,
)
from tests.verification.conftest import ProbeTarget

pytestmark = [pytest.mark.verification, pytest.mark.usefixtures("emulator_only")]

FAIL, PASS = ProbeOutcome.FAIL, ProbeOutcome.PASS


class LiveLooking(Target):
    """Azurite presented as if it were not a local emulator: then a condition it ignores is
    what it is, a service that does not enforce the net."""

    @property
    def emulator_host(self) -> str | None:
        return None


@pytest.fixture
def fresh(key_target: ProbeTarget) -> Iterator[ProbeTarget]:
    """A container of this test's own on the shared-key Azurite."""
    name = f"broken{datetime.now(UTC):%H%M%S%f}"
    key_target.service.create_container(name)
    yield ProbeTarget("broken", key_target.service, name, {})
    key_target.service.delete_container(name)


def test_public_container_fails_the_private_container_probe(fresh: ProbeTarget) -> None:
    """A container opened to anonymous readers: the probe reads a blob without credentials."""
    fresh.service.get_container_client(fresh.container).set_container_access_policy(
        signed_identifiers={}, public_access="container"
    )
    result = fresh.run(PRIVATE_CONTAINER)
    assert result.outcome is FAIL
    assert "served" in result.detail


def test_service_ignoring_if_none_match_fails_create_only(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """A service that lets a create-only upload overwrite: the bytes change and the probe says so."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with non_conforming_service(azurite.port, admin) as service:
        broken = BlobServiceClient.from_connection_string(service.connection_string)
        create_only = _single(Target(broken, fresh.container), CREATE_ONLY)
        concurrent = _single(Target(broken, fresh.container), CONCURRENT_CREATE)
    assert create_only.outcome is FAIL
    assert "If-None-Match: * is not enforced" in create_only.detail
    assert concurrent.outcome is FAIL
    assert "uploads of one name won" in concurrent.detail


def test_seal_ignored_by_a_non_emulator_fails(fresh: ProbeTarget) -> None:
    """Azurite ignores x-ms-if-tags on Set Blob Tags: presented as a live service, the seal
    probe fails instead of excusing it."""
    result = _single(LiveLooking(fresh.service, fresh.container), CONDITIONAL_SEAL)
    assert result.outcome is FAIL
    assert "went through on a retired blob" in result.detail


def test_stale_heartbeat_fails_and_a_fresh_one_passes(fresh: ProbeTarget) -> None:
    """The last sweeper run must be within three schedule periods."""
    container = fresh.service.get_container_client(fresh.container)
    long_ago = datetime.now(UTC) - timedelta(hours=1)
    container.upload_blob(HEARTBEAT_BLOB, heartbeat_body({"examined": 3}, "function", long_ago))
    stale = fresh.run(
        SWEEPER_HEARTBEAT, settings=ProbeSettings(sweeper_period=timedelta(minutes=5))
    )
    assert stale.outcome is FAIL
    assert write_heartbeat(container, {"examined": 4, "errors": []}, source="cli")
    fresh_run = fresh.run(SWEEPER_HEARTBEAT)
    assert fresh_run.outcome is PASS
    assert "examined 4" in fresh_run.detail
    assert json.loads(container.download_blob(HEARTBEAT_BLOB).readall())["source"] == "cli"


def test_canary_past_the_rule_fails_the_lifecycle_probe(fresh: ProbeTarget) -> None:
    """A pending canary still there after the rule's days + 2 means the backstop does not act."""
    assert fresh.run(PENDING_LIFECYCLE).outcome is ProbeOutcome.NOT_VERIFIABLE
    ten_days_on = datetime.now(UTC) + timedelta(days=10)
    result = fresh.run(
        PENDING_LIFECYCLE, settings=ProbeSettings(pending_days=7), now=lambda: ten_days_on
    )
    assert result.outcome is FAIL
    assert "still exists after" in result.detail


def _single(target: Target, probe: Probe) -> ProbeResult:
    """One probe's judgement; some targets' own endpoints are doubles that answer only what
    that probe asks (an https URL served by a plain-HTTP double), so no connection check."""
    return run_probes(target, [probe], check_connection=False).results[0]


def test_seal_refused_by_a_service_that_enforces_the_tag_condition_passes(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """The same probe on a service that answers 412 to the seal of a retired blob: PASS."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with tag_guarding_service(azurite.port, admin) as service:
        guarded = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(guarded, fresh.container), CONDITIONAL_SEAL)
    assert result.outcome is PASS
    assert "412 ConditionNotMet" in result.detail


def test_a_second_identity_that_writes_tags_fails_the_role_probe(token_target: ProbeTarget) -> None:
    """Presented as live, Azurite lets the second identity (no uploader role) write tags: the
    role is not what grants it, and the probe fails."""
    target = LiveLooking(
        token_target.service,
        token_target.container,
        second=token_target.service,
        client_options=dict(token_target.options),
    )
    result = _single(target, TAG_WRITE_ROLE)
    assert result.outcome is FAIL
    assert "lacks the uploader role" in result.detail


@pytest.mark.parametrize(
    ("refuse", "probe", "outcome", "fact"),
    [
        (shared_key_off, SHARED_KEY_OFF, PASS, "403 KeyBasedAuthenticationNotPermitted"),
        (shared_key_allowed, SHARED_KEY_OFF, FAIL, "shared key access is allowed"),
        (public_access_off, NO_PUBLIC_ACCESS, PASS, "409 PublicAccessNotPermitted"),
        (public_access_allowed, NO_PUBLIC_ACCESS, FAIL, "the account allows public access"),
    ],
    ids=["shared-key-off", "shared-key-allowed", "public-access-off", "public-access-allowed"],
)
def test_account_settings_azurite_lacks(
    azurite: Azurite,
    fresh: ProbeTarget,
    refuse: Refusal,
    probe: Probe,
    outcome: ProbeOutcome,
    fact: str,
) -> None:
    """A double answering as Azure does for a setting Azurite has not: the probe reads the
    answer, not the emulator's absence of the setting."""
    with refusing_service(azurite.port, refuse) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), probe)
    assert result.outcome is outcome
    assert fact in result.detail


def test_soft_delete_passes_where_the_service_keeps_deleted_blobs(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """With soft delete implemented in front of Azurite, the deleted probe blob is listed as
    deleted and comes back with identical bytes: PASS."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with soft_deleting_service(azurite.port, admin) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), SOFT_DELETE)
    assert result.outcome is PASS, result.detail
    assert "identical bytes" in result.detail


def test_soft_delete_off_fails(azurite: Azurite, fresh: ProbeTarget) -> None:
    """Without soft delete the deleted blob is not listed and undelete finds nothing: FAIL."""
    with refusing_service(azurite.port, soft_delete_off) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), SOFT_DELETE)
    assert result.outcome is FAIL
    assert "was not kept" in result.detail


@pytest.mark.parametrize(
    ("deleted_after", "outcome"),
    [(timedelta(days=8), PASS), (None, ProbeOutcome.NOT_VERIFIABLE)],
    ids=["deleted-after-the-rule-days", "deleted-right-away"],
)
def test_canary_collected_by_the_lifecycle_rule_passes(
    azurite: Azurite, fresh: ProbeTarget, deleted_after: timedelta | None, outcome: ProbeOutcome
) -> None:
    """A canary found soft-deleted, deleted no sooner than the rule's days after it was planted
    (the rule acted on it), and none alive past the deadline: the backstop holds. One deleted
    right away was deleted by something else and proves nothing."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with soft_deleting_service(azurite.port, admin, deleted_after) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        first = Target(account, fresh.container)
        _single(first, PENDING_LIFECYCLE)
        account.get_blob_client(fresh.container, f"{first.prefix}canary").delete_blob()
        eight_days_on = datetime.now(UTC) + timedelta(days=8)
        later = Target(
            account,
            fresh.container,
            settings=ProbeSettings(pending_days=7),
            now=lambda: eight_days_on,
        )
        result = _single(later, PENDING_LIFECYCLE)
    assert result.outcome is outcome, result.detail
    assert ("was deleted" if outcome is PASS else "deleted by something else") in result.detail


def _refuse_overwrites(status: int, code: str) -> Refusal:
    """After the probe's own create of `create-only`, every create-only write of that name is
    refused with (status, code): a refusal that is not the If-None-Match condition's."""
    created: set[str] = set()

    def refuse(method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        name = urlsplit(path).path
        if method != "PUT" or not name.endswith("/create-only") or "comp=block&" in path + "&":
            return None
        if name not in created:
            created.add(name)
            return None
        return status, code

    return refuse


@pytest.mark.parametrize(
    ("status", "code"),
    [(409, "BlobImmutableDueToPolicy"), (412, "LeaseIdMissing")],
    ids=["immutable-409", "leased-412"],
)
def test_create_only_refused_for_another_reason_is_not_a_pass(
    azurite: Azurite, fresh: ProbeTarget, status: int, code: str
) -> None:
    """An overwrite refused by an immutability policy or a lease, not by If-None-Match, proves
    nothing about create-only: NOT_VERIFIABLE naming the service's own error code."""
    with refusing_service(azurite.port, _refuse_overwrites(status, code)) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), CREATE_ONLY)
    assert result.outcome is ProbeOutcome.NOT_VERIFIABLE, result.detail
    assert f"{status} {code}" in result.detail


def _refuse_after(
    forwarded: int, verb: str, suffix: str, query: str, status: int, code: str
) -> Refusal:
    """Forwards the first `forwarded` `verb` requests for `<prefix>/<suffix>` with `query` in
    their URL, refuses the later ones with (status, code)."""
    seen: list[str] = []

    def refuse(method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
        if method != verb or not urlsplit(path).path.endswith(f"/{suffix}") or query not in path:
            return None
        seen.append(path)
        return None if len(seen) <= forwarded else (status, code)

    return refuse


@pytest.mark.parametrize(
    ("probe", "refuse"),
    [
        (
            TAG_GUARDED_DELETE,
            _refuse_after(0, "DELETE", "guard-committed", "", 412, "LeaseIdMissing"),
        ),
        (CONDITIONAL_SEAL, _refuse_after(1, "PUT", "seal", "comp=tags", 412, "LeaseIdMissing")),
    ],
    ids=["guarded-delete", "seal"],
)
def test_a_412_that_is_not_the_tag_condition_is_not_a_pass(
    azurite: Azurite, fresh: ProbeTarget, probe: Probe, refuse: Refusal
) -> None:
    """A 412 for a lease, not for x-ms-if-tags, does not show the tag guard: NOT_VERIFIABLE."""
    with refusing_service(azurite.port, refuse) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), probe)
    assert result.outcome is ProbeOutcome.NOT_VERIFIABLE, result.detail
    assert "412 LeaseIdMissing" in result.detail


def anonymous_bad_request(
    method: str, path: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """Anonymous requests answered with an error that is no refusal of access (a 400)."""
    if "Authorization" not in headers and "sig=" not in path:
        return 400, "InvalidQueryParameterValue"
    return None


def test_an_anonymous_read_that_fails_otherwise_is_not_a_private_container(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """Only a refusal of access (401, 403, 404, 409) shows the container private; an anonymous
    read failing with a 400 shows nothing: NOT_VERIFIABLE."""
    with refusing_service(azurite.port, anonymous_bad_request) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(Target(account, fresh.container), PRIVATE_CONTAINER)
    assert result.outcome is ProbeOutcome.NOT_VERIFIABLE, result.detail
    assert "400 InvalidQueryParameterValue" in result.detail


def test_a_create_whose_answer_is_lost_is_still_cleaned_up(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """The connection drops after the service created a probe blob: the retry meets the blob,
    the probe cannot judge, and the blob the run never heard created is deleted at the end."""
    with lost_answer_service(azurite.port, "create-only") as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        # Retry at once: the default back-off (with up to 3 s of jitter) only slows the test.
        retry = ExponentialRetry(initial_backoff=0, increment_base=1, random_jitter_range=0)
        target = Target(account, fresh.container, client_options={"retry_policy": retry})
        run = run_probes(target, [CREATE_ONLY])
    container = fresh.service.get_container_client(fresh.container)
    assert run.results[0].outcome is ProbeOutcome.NOT_VERIFIABLE, run.results[0].detail
    assert not run.leftovers
    assert [b.name for b in container.list_blobs(name_starts_with=target.prefix)] == []


def test_a_heartbeat_from_the_future_fails(fresh: ProbeTarget) -> None:
    """A heartbeat dated a day ahead (a wrong clock, a hand-written blob) cannot show a recent
    run: FAIL, not PASS."""
    container = fresh.service.get_container_client(fresh.container)
    tomorrow = datetime.now(UTC) + timedelta(days=1)
    container.upload_blob(HEARTBEAT_BLOB, heartbeat_body({"examined": 1}, "function", tomorrow))
    result = fresh.run(SWEEPER_HEARTBEAT)
    assert result.outcome is FAIL, result.detail
    assert "in the future" in result.detail


def test_soft_delete_on_a_versioning_account_is_not_verifiable(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """With versioning on, a deleted blob becomes a previous version that Undelete Blob does not
    bring back: the probe cannot show soft delete that way and says so, instead of a FAIL."""
    with versioning_service(azurite.port) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), SOFT_DELETE)
    assert result.outcome is ProbeOutcome.NOT_VERIFIABLE, result.detail
    assert "versioning" in result.detail


def sas_without_t_refused_otherwise(
    method: str, path: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """A tag write through a SAS with read+write only, refused for a reason that is not the
    missing permission (an IP or network rule answers 403 AuthorizationFailure)."""
    if method == "PUT" and "comp=tags" in path and "sp=rw&" in path:
        return 403, "AuthorizationFailure"
    return None


def test_a_sas_refused_for_another_reason_is_not_a_pass(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """Only 403 AuthorizationPermissionMismatch shows the missing `t` permission refused."""
    with refusing_service(azurite.port, sas_without_t_refused_otherwise) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(Target(account, fresh.container), SAS_TAG_PERMISSION)
    assert result.outcome is ProbeOutcome.NOT_VERIFIABLE, result.detail
    assert "403 AuthorizationFailure" in result.detail


def delete_answered_but_not_done(
    method: str, path: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """A service that answers 202 Accepted to the pending probe blob's delete and keeps it."""
    if method == "DELETE" and urlsplit(path).path.endswith("/guard-pending"):
        return 202, "Accepted"
    return None


def test_a_delete_that_answers_ok_but_keeps_the_blob_fails(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """The pending blob must be gone after its guarded delete, not merely answered 202."""
    with refusing_service(azurite.port, delete_answered_but_not_done) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(Target(account, fresh.container), TAG_GUARDED_DELETE)
    assert result.outcome is FAIL, result.detail
    assert "still there" in result.detail


@pytest.mark.parametrize(
    ("permanent", "outcome", "fact"),
    [
        ((409, "OperationNotAllowed"), PASS, "refused with 409"),
        ((403, "AuthorizationPermissionMismatch"), ProbeOutcome.NOT_VERIFIABLE, "lacks"),
        (None, FAIL, "permanent delete is allowed"),
    ],
    ids=["refused-409", "no-permission-403", "purged"],
)
def test_permanent_delete_of_a_soft_deleted_snapshot(
    azurite: Azurite,
    fresh: ProbeTarget,
    permanent: tuple[int, str] | None,
    outcome: ProbeOutcome,
    fact: str,
) -> None:
    """With a soft-deleted snapshot to try: 409 passes, a 403 for the identity's missing
    permanentDelete/action is NOT_VERIFIABLE, a purge that goes through fails."""
    with snapshot_soft_deleting_service(azurite.port, permanent) as service:
        account = BlobServiceClient.from_connection_string(service.connection_string)
        result = _single(LiveLooking(account, fresh.container), PERMANENT_DELETE)
    assert result.outcome is outcome, result.detail
    assert fact in result.detail


def requires_https(method: str, path: str, headers: Mapping[str, str]) -> tuple[int, str] | None:
    """An account with secure transfer required: every plain-HTTP request is refused."""
    return 400, "AccountRequiresHttps"


@pytest.mark.parametrize(
    ("refuse", "outcome", "fact"),
    [
        (requires_https, PASS, "400 AccountRequiresHttps"),
        (None, FAIL, "HTTP is served"),
    ],
    ids=["secure-transfer-required", "http-served"],
)
def test_https_only_judges_the_plain_http_answer(
    azurite: Azurite, fresh: ProbeTarget, refuse: Refusal | None, outcome: ProbeOutcome, fact: str
) -> None:
    """The target is named over https; its plain-HTTP twin (a double on the same port) either
    refuses with 400 AccountRequiresHttps (PASS) or answers (Azurite behind it: FAIL)."""
    with refusing_service(azurite.port, refuse or (lambda *_: None)) as service:
        https = BlobServiceClient(
            dev_blob_endpoint(service.port, "https"),
            credential={"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        )
        result = _single(LiveLooking(https, fresh.container), HTTPS_ONLY)
    assert result.outcome is outcome, result.detail
    assert fact in result.detail


class KeylessLiveLooking(LiveLooking):
    """Azurite presented as a live account reached with a token: the probes that excuse the
    account key (which bypasses RBAC) judge what the service answers."""

    @property
    def uses_shared_key(self) -> bool:
        return False


def _through(double: ServiceDouble) -> BlobServiceClient:
    return BlobServiceClient.from_connection_string(double.connection_string)


def _planted(fresh: ProbeTarget, target: Target, suffix: str) -> None:
    """The run's probe blob `suffix` already there, in a container anyone may read."""
    container = fresh.service.get_container_client(fresh.container)
    container.set_container_access_policy(signed_identifiers={}, public_access="container")
    container.upload_blob(target.blob(suffix).blob_name, b"planted")


def test_a_service_that_serves_a_made_up_key_fails_shared_key_off(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """A read signed with a made-up key that is served shows the key is not checked."""
    with misbehaving_service(azurite.port, reads_with_any_key) as double:
        target = LiveLooking(_through(double), fresh.container)
        _planted(fresh, target, "shared-key")
        result = _single(target, SHARED_KEY_OFF)
    assert result.outcome is FAIL, result.detail
    assert "the key is not checked at all" in result.detail


def blob_reads_refused(
    method: str, path: str, headers: Mapping[str, str]
) -> tuple[int, str] | None:
    """A container that refuses anonymous blob reads while its listing stays public."""
    anonymous = "Authorization" not in headers and "sig=" not in path
    blob_path = len(unquote(urlsplit(path).path).split("/", 3)) == 4
    return (404, "ResourceNotFound") if anonymous and blob_path else None


def test_an_anonymous_listing_fails_the_private_container_probe(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """Blobs refused to anonymous readers, but their names listed: the container is public."""
    fresh.service.get_container_client(fresh.container).set_container_access_policy(
        signed_identifiers={}, public_access="container"
    )
    with refusing_service(azurite.port, blob_reads_refused) as double:
        result = _single(Target(_through(double), fresh.container), PRIVATE_CONTAINER)
    assert result.outcome is FAIL, result.detail
    assert "anonymous List Blobs was served" in result.detail


def test_an_anonymous_read_served_fails_no_public_access(fresh: ProbeTarget) -> None:
    """A probe name an anonymous GET is served: the account lets anyone read."""
    target = Target(fresh.service, fresh.container)
    _planted(fresh, target, "public-access")
    result = _single(target, NO_PUBLIC_ACCESS)
    assert result.outcome is FAIL, result.detail
    assert "an anonymous GET was served" in result.detail


def test_a_live_target_named_over_http_fails_https_only(fresh: ProbeTarget) -> None:
    """A live account the run itself reaches over http:// is not HTTPS-only."""
    result = _single(LiveLooking(fresh.service, fresh.container), HTTPS_ONLY)
    assert result.outcome is FAIL, result.detail
    assert "reached over plain HTTP" in result.detail


def test_a_plain_http_read_served_fails_https_only(azurite: Azurite, fresh: ProbeTarget) -> None:
    """The https target's plain-HTTP twin serves the probe blob: HTTP answered with success."""
    with refusing_service(azurite.port, lambda *_: None) as double:
        https = BlobServiceClient(
            dev_blob_endpoint(double.port, "https"),
            credential={"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        )
        target = LiveLooking(https, fresh.container)
        _planted(fresh, target, "plain-http")
        result = _single(target, HTTPS_ONLY)
    assert result.outcome is FAIL, result.detail
    assert "plain-HTTP request with success" in result.detail


def test_a_tag_write_answered_but_not_done_fails_the_role_probe(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """Set Blob Tags answered 204 while the tag stays as it was: the identity did not write it."""
    with misbehaving_service(azurite.port, ignores_tag_writes) as double:
        result = _single(KeylessLiveLooking(_through(double), fresh.container), TAG_WRITE_ROLE)
    assert result.outcome is FAIL, result.detail
    assert "the state tag did not change" in result.detail


@pytest.mark.parametrize(
    ("with_t", "fact"),
    [(False, "without the tag permission (t) wrote"), (True, "with t answered OK but the tags")],
    ids=["accepted-without-t", "unwritten-with-t"],
)
def test_a_sas_tag_write_the_service_misjudges_fails(
    azurite: Azurite, fresh: ProbeTarget, with_t: bool, fact: str
) -> None:
    """A tag write through a SAS without t that is accepted, or one with t that is answered
    but not done, fails the SAS probe."""
    with misbehaving_service(azurite.port, accepts_tag_writes_unwritten(with_t)) as double:
        result = _single(Target(_through(double), fresh.container), SAS_TAG_PERMISSION)
    assert result.outcome is FAIL, result.detail
    assert fact in result.detail


@pytest.mark.parametrize(
    ("front", "lists_deleted", "fact"),
    [
        (keeps_other_bytes, True, "bytes differ from the deleted ones"),
        (None, False, "include=deleted did not list it"),
        (refuses_undelete, True, "listed as deleted but Undelete Blob answered 409"),
        (answers_undelete_without_restoring, False, "the blob did not come back"),
    ],
    ids=["other-bytes", "not-listed", "undelete-refused", "undelete-answered-only"],
)
def test_a_soft_delete_that_loses_something_fails(
    azurite: Azurite,
    fresh: ProbeTarget,
    front: Misbehaviour | None,
    lists_deleted: bool,
    fact: str,
) -> None:
    """A soft delete double, with a misbehaving service in front of it: other bytes back, the
    deleted blob not listed, undelete refused, or undelete answered with nothing back."""
    admin = BlobServiceClient.from_connection_string(azurite.connection_string)
    with (
        soft_deleting_service(azurite.port, admin, lists_deleted=lists_deleted) as soft,
        misbehaving_service(soft.port, front or (lambda _: None), admin) as double,
    ):
        result = _single(Target(_through(double), fresh.container), SOFT_DELETE)
    assert result.outcome is FAIL, result.detail
    assert fact in result.detail


def test_a_service_that_refuses_but_stores_the_losers_bytes_fails(
    azurite: Azurite, fresh: ProbeTarget
) -> None:
    """409 to every create-only upload of an existing name, while its bytes are stored: one
    winner, but not the winner's bytes; and the create-only probe sees the bytes change."""
    with misbehaving_service(azurite.port, stores_then_refuses_existing) as double:
        concurrent = _single(Target(_through(double), fresh.container), CONCURRENT_CREATE)
        create_only = _single(Target(_through(double), fresh.container), CREATE_ONLY)
    assert concurrent.outcome is FAIL, concurrent.detail
    assert "a loser overwrote them" in concurrent.detail
    assert create_only.outcome is FAIL, create_only.detail
    assert "was 409 BlobAlreadyExists and the bytes changed" in create_only.detail


@pytest.mark.parametrize(
    ("misbehave", "fact"),
    [
        (ignores_delete_condition, "a committed blob was deleted under the pending tag guard"),
        (rewrites_then_refuses, "the committed blob's bytes changed"),
        (refuses_guarded_delete, "not deleted under the pending guard: 412 ConditionNotMet"),
        (deletes_then_refuses, "answered 412 ConditionNotMet but the committed blob is gone"),
    ],
    ids=["condition-ignored", "bytes-rewritten", "pending-refused", "deleted-and-refused"],
)
def test_a_guarded_delete_the_service_mishandles_fails(
    azurite: Azurite, fresh: ProbeTarget, misbehave: Misbehaviour, fact: str
) -> None:
    """Each way a service can get the tag-guarded delete wrong fails the probe with its reason."""
    with misbehaving_service(azurite.port, misbehave) as double:
        result = _single(Target(_through(double), fresh.container), TAG_GUARDED_DELETE)
    assert result.outcome is FAIL, result.detail
    assert fact in result.detail


def test_a_seal_refused_but_written_fails(azurite: Azurite, fresh: ProbeTarget) -> None:
    """412 to the seal of a retired blob, while the tag is written anyway: FAIL, not PASS."""
    with misbehaving_service(azurite.port, seals_then_refuses) as double:
        result = _single(Target(_through(double), fresh.container), CONDITIONAL_SEAL)
    assert result.outcome is FAIL, result.detail
    assert "yet the state became 'committed'" in result.detail
