"""Who may reach the data: no shared key, no anonymous reader, no plain HTTP, tags by role.

Expected answers, from Microsoft's documentation:
- Shared key disallowed: a request signed with an account key fails with 403 and the error
  code KeyBasedAuthenticationNotPermitted ("key-based authorization is not permitted"); a key
  that is merely wrong fails with 403 AuthenticationFailed (the signature was checked), per
  https://learn.microsoft.com/azure/storage/common/shared-key-authorization-prevent and
  https://learn.microsoft.com/rest/api/storageservices/common-rest-api-error-codes
- Anonymous read: with public access disallowed on the account every anonymous request is
  rejected (409 PublicAccessNotPermitted); on a private container of an account that allows it,
  404 ResourceNotFound,
  https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-prevent
- Secure transfer required: a plain-HTTP request fails with 400 AccountRequiresHttps ("The
  account being accessed does not support http."), common REST API error codes (above).
- A SAS without the `t` permission on Set Blob Tags, or an identity without the data action:
  403 AuthorizationPermissionMismatch,
  https://learn.microsoft.com/rest/api/storageservices/sas-error-codes and
  https://learn.microsoft.com/rest/api/storageservices/set-blob-tags (Authorization).
"""

from __future__ import annotations

import base64
import secrets
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

from azure.core.exceptions import HttpResponseError, ServiceRequestError, ServiceResponseError
from azure.storage.blob import BlobClient, BlobSasPermissions, ContainerClient, generate_blob_sas

from blob_safetynet.policies.probes.base import (
    Observation,
    Probe,
    Target,
    describe_refusal,
    failed,
    not_verifiable,
    passed,
    payload,
    status_and_code,
)
from blob_safetynet.settings.vocabulary import COMMITTED, PENDING, STATE_TAG, tag_condition

SHARED_KEY_DOC = "https://learn.microsoft.com/azure/storage/common/shared-key-authorization-prevent"
ERROR_CODES_DOC = "https://learn.microsoft.com/rest/api/storageservices/common-rest-api-error-codes"
ANONYMOUS_DOC = "https://learn.microsoft.com/azure/storage/blobs/anonymous-read-access-prevent"
SAS_ERRORS_DOC = "https://learn.microsoft.com/rest/api/storageservices/sas-error-codes"
PERMISSION_MISMATCH = (403, "AuthorizationPermissionMismatch")


def check_shared_key_off(target: Target) -> Observation:
    fake_key = base64.b64encode(secrets.token_bytes(64)).decode()
    probe = target.other_client(
        target.blob("shared-key"),
        {"account_name": target.account_name, "account_key": fake_key},
    )
    try:
        probe.get_blob_properties()
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if status == 403 and code == "KeyBasedAuthenticationNotPermitted":
            return passed(f"a request signed with a made-up key was refused with {status} {code}")
        if target.emulator_host is not None:
            accepted = (
                "this run's own requests, signed with the account key, are accepted"
                if target.uses_shared_key
                else "Azurite accepts the account key"
            )
            return not_verifiable(
                f"a made-up key got {status} {code} (a signature check), and {accepted}: the "
                f"target allows shared key; {target.emulator_reason()}"
            )
        if status == 403 and code == "AuthenticationFailed":
            return failed(
                f"the key's signature was checked ({status} {code}) instead of key authorization "
                "being refused: shared key access is allowed"
            )
        return not_verifiable(
            f"a made-up key got {status} {code}, which says nothing about shared key"
        )
    return failed("a request signed with a made-up key was answered: the key is not checked at all")


SHARED_KEY_OFF = Probe(
    id="SNV-SHARED-KEY-OFF",
    title="Shared key authorization is refused",
    proves=("SN-SHARED-KEY-OFF",),
    action=(
        "reads a probe name with a request signed by a made-up account key; it must fail with "
        "403 KeyBasedAuthenticationNotPermitted, not 403 AuthenticationFailed (no key needed)"
    ),
    reference=SHARED_KEY_DOC,
    requests=1,
    on_emulator="NOT_VERIFIABLE: Azurite accepts shared key",
    on_live="PASS with 403 KeyBasedAuthenticationNotPermitted; FAIL with 403 AuthenticationFailed",
    run=check_shared_key_off,
)


def _anonymous_refusal(client: BlobClient) -> tuple[bytes | None, HttpResponseError | None]:
    try:
        return client.download_blob().readall(), None
    except HttpResponseError as error:
        return None, error


ACCESS_REFUSED = frozenset({401, 403, 404, 409})
"""How the service refuses an anonymous reader: 404 ResourceNotFound (a private container),
409 PublicAccessNotPermitted (the account), 401/403 (no or refused authorization; Azurite
answers 403). Anything else (a 400, a 5xx) failed for another reason and shows nothing."""


def check_private_container(target: Target) -> Observation:
    blob = target.blob("anonymous-read")
    data = payload("anonymous")
    target.create(blob, data)
    served, refusal = _anonymous_refusal(target.other_client(blob, None))
    if served is not None:
        return failed("an anonymous GET of a probe blob was served: the container is public")
    assert refusal is not None
    anonymous = ContainerClient.from_container_url(
        target.container.url, credential=None, **target.client_options
    )
    try:
        names = [b.name for b in anonymous.list_blobs(name_starts_with=target.prefix)]
    except HttpResponseError as error:
        listing = error
    else:
        return failed(
            f"an anonymous List Blobs was served ({len(names)} name(s)): the container is public"
        )
    for what, answer in (("GET", refusal), ("List Blobs", listing)):
        if status_and_code(answer)[0] not in ACCESS_REFUSED:
            return not_verifiable(
                f"an anonymous {what} failed with {describe_refusal(answer)}, which is no refusal "
                "of access: it says nothing about the container's setting"
            )
    return passed(
        f"anonymous GET refused with {describe_refusal(refusal)}, anonymous list with "
        f"{describe_refusal(listing)}"
    )


PRIVATE_CONTAINER = Probe(
    id="SNV-PRIVATE-CONTAINER",
    title="Nobody reads or lists the container anonymously",
    proves=("SN-CONTAINERS-PRIVATE",),
    action=(
        "reads a probe blob and lists the run's prefix without credentials; both must be refused "
        "as access (401, 403, 404 or 409); any other error is NOT_VERIFIABLE"
    ),
    reference=ANONYMOUS_DOC,
    requests=3,
    on_emulator="PASS (403); FAIL on a public container",
    on_live="PASS; FAIL when a blob or the listing is served",
    run=check_private_container,
)


def check_no_public_access(target: Target) -> Observation:
    served, refusal = _anonymous_refusal(target.other_client(target.blob("public-access"), None))
    if served is not None or refusal is None:
        return failed("an anonymous GET was served")
    status, code = status_and_code(refusal)
    if status == 409 and code == "PublicAccessNotPermitted":
        return passed(f"an anonymous GET was refused by the account: {status} {code}")
    if target.emulator_host is not None:
        return not_verifiable(
            f"an anonymous GET got {status} {code} (the container's lock, not the account's); "
            f"{target.emulator_reason()}, which has no account-level public access setting"
        )
    if status == 404:
        return failed(
            f"an anonymous GET reached the container ({status} {code}): the account allows public "
            "access, so only the container's setting keeps documents private"
        )
    return not_verifiable(
        f"an anonymous GET got {status} {code}, which does not name the account setting"
    )


NO_PUBLIC_ACCESS = Probe(
    id="SNV-NO-PUBLIC-ACCESS",
    title="The account refuses every anonymous request",
    proves=("SN-NO-PUBLIC-ACCESS",),
    action=(
        "reads a name under the run's prefix without credentials; the account itself must "
        "refuse with 409 PublicAccessNotPermitted"
    ),
    reference=ANONYMOUS_DOC,
    requests=1,
    on_emulator="NOT_VERIFIABLE: no account-level setting",
    on_live="PASS with 409 PublicAccessNotPermitted; FAIL with 404 (only the container is locked)",
    run=check_no_public_access,
)


def _plain_http(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit(("http", netloc, parts.path, parts.query, ""))


def check_https_only(target: Target) -> Observation:
    url = target.blob("plain-http").url
    if urlsplit(url).scheme != "https":
        if target.emulator_host is not None:
            return not_verifiable(
                f"the target itself speaks plain HTTP; {target.emulator_reason()}"
            )
        return failed("the target is reached over plain HTTP")
    # Anonymous on purpose: no token or signature ever travels over plain HTTP.
    plain = target.other_client(target.blob("plain-http"), None, url=_plain_http(url), retries=0)
    try:
        plain.get_blob_properties()
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if status == 400 and code == "AccountRequiresHttps":
            return passed(
                f"a plain-HTTP request was refused with {status} {code} "
                "(the minimum TLS version is judged by the settings rule, not probed)"
            )
        return failed(
            f"the account answered a plain-HTTP request with {status} {code}: HTTP is served"
        )
    except (ServiceRequestError, ServiceResponseError) as error:
        return not_verifiable(
            f"no HTTP answer on {urlsplit(plain.url).netloc}: {type(error).__name__}"
        )
    return failed("the account answered a plain-HTTP request with success")


HTTPS_ONLY = Probe(
    id="SNV-HTTPS-ONLY",
    title="Plain HTTP is refused",
    proves=("SN-HTTPS-TLS",),
    action=(
        "sends an anonymous request for a probe name over http://; it must fail with 400 "
        "AccountRequiresHttps"
    ),
    reference=ERROR_CODES_DOC,
    requests=1,
    on_emulator="NOT_VERIFIABLE: plain HTTP target (or no HTTP listener on the TLS port)",
    on_live="PASS with 400 AccountRequiresHttps; FAIL when HTTP is answered",
    run=check_https_only,
)


def check_tag_write_role(target: Target) -> Observation:
    blob = target.blob("tag-write")
    target.create(blob, payload("tag write"))
    target.set_state(blob, PENDING, COMMITTED)
    written = blob.get_blob_tags().get(STATE_TAG) == COMMITTED
    if target.emulator_host is not None:
        return not_verifiable(
            f"the tag write {'succeeded' if written else 'did not stick'}, but "
            f"{target.emulator_reason()}, which enforces no RBAC: it says nothing about roles"
        )
    if target.uses_shared_key:
        return not_verifiable("the run uses the account key, which bypasses RBAC")
    if not written:
        return failed("Set Blob Tags answered OK but the state tag did not change")
    if target.second is None:
        return passed(
            "the identity in use wrote the state tag (give --second-credential to show that the "
            "role is what grants it)"
        )
    other = target.second.get_blob_client(blob.blob_name)
    try:
        other.set_blob_tags(
            {STATE_TAG: COMMITTED}, if_tags_match_condition=tag_condition(COMMITTED)
        )
    except HttpResponseError as error:
        status, code = status_and_code(error)
        if (status, code) == PERMISSION_MISMATCH:
            return passed(
                f"the identity in use wrote the state tag; the second identity was refused with "
                f"{status} {code}: the role is what grants it"
            )
        return not_verifiable(f"the second identity got {status} {code}, not a missing permission")
    return failed("the second identity, which lacks the uploader role, wrote the state tag")


TAG_WRITE_ROLE = Probe(
    id="SNV-TAG-WRITE-ROLE",
    title="The identity in use may write tags, by its role",
    proves=("SN-TAG-WRITE-ROLE",),
    action=(
        "flips a probe blob's state tag with the identity in use; with --second-credential, the "
        "second identity's tag write must fail with 403 AuthorizationPermissionMismatch"
    ),
    reference="https://learn.microsoft.com/rest/api/storageservices/set-blob-tags",
    requests=5,
    on_emulator="NOT_VERIFIABLE: no RBAC",
    on_live="PASS; with --second-credential also shows the 403 without the role",
    run=check_tag_write_role,
)


def _sas(target: Target, blob: BlobClient, permission: BlobSasPermissions) -> str | Observation:
    expiry = target.now() + timedelta(minutes=15)
    credential = target.service.credential
    key = getattr(credential, "account_key", None)
    if key:
        return generate_blob_sas(
            target.account_name,
            target.container.container_name,
            blob.blob_name,
            account_key=key,
            permission=permission,
            expiry=expiry,
        )
    try:
        delegation = target.service_once().get_user_delegation_key(
            target.now() - timedelta(minutes=5), expiry
        )
    except HttpResponseError as error:
        return not_verifiable(
            f"no user delegation key for this identity ({describe_refusal(error)}): no SAS can be made"
        )
    return generate_blob_sas(
        target.account_name,
        target.container.container_name,
        blob.blob_name,
        user_delegation_key=delegation,
        permission=permission,
        expiry=expiry,
    )


def check_sas_tag_permission(target: Target) -> Observation:
    blob = target.blob("sas-tags")
    target.create(blob, payload("sas"))
    without = _sas(target, blob, BlobSasPermissions(read=True, write=True))
    if isinstance(without, Observation):
        return without
    with_tags = _sas(target, blob, BlobSasPermissions(read=True, write=True, tag=True))
    assert isinstance(with_tags, str)
    tags = {STATE_TAG: PENDING, "probe": "sas"}
    try:
        target.other_client(blob, without).set_blob_tags(
            tags, if_tags_match_condition=tag_condition(PENDING)
        )
    except HttpResponseError as error:
        refusal = error
    else:
        return failed("a SAS without the tag permission (t) wrote blob index tags")
    status, code = status_and_code(refusal)
    if (status, code) != PERMISSION_MISMATCH:
        return not_verifiable(
            f"a SAS without t was refused with {status} {code}, not 403 "
            "AuthorizationPermissionMismatch (the missing permission)"
        )
    try:
        target.other_client(blob, with_tags).set_blob_tags(
            tags, if_tags_match_condition=tag_condition(PENDING)
        )
    except HttpResponseError as error:
        return not_verifiable(f"a SAS with t was refused too ({describe_refusal(error)})")
    if blob.get_blob_tags().get("probe") != "sas":
        return failed("a SAS with t answered OK but the tags did not change")
    return passed(
        f"a SAS without t was refused with {status} {code}; with t the tag write went through"
    )


SAS_TAG_PERMISSION = Probe(
    id="SNV-SAS-TAG-PERMISSION",
    title="A SAS without the tag permission cannot write tags",
    proves=(),
    action=(
        "writes a probe blob's tags through a SAS with read+write only (must fail with 403 "
        "AuthorizationPermissionMismatch) and through one that adds t (must succeed)"
    ),
    reference=SAS_ERRORS_DOC,
    requests=5,
    on_emulator="PASS with the account key; NOT_VERIFIABLE with a token (no user delegation key)",
    on_live="PASS with a user delegation SAS; NOT_VERIFIABLE when the identity may not get a delegation key",
    run=check_sas_tag_permission,
)
