"""Doubles for the verification tests: a token credential Azurite accepts, and proxies in front
of Azurite that answer as a misconfigured or non-conforming Azure account would."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient

from blob_safetynet.embedded.azurite import dev_connection_string
from blob_safetynet.policies.probes import RequestCounter
from testkit.fault_proxy import _HOP_BY_HOP, LatencyProxy, LatencyProxyServer, _Handler

TENANT = "00000000-0000-0000-0000-000000000000"


def _segment(document: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(document).encode()).rstrip(b"=").decode()


class EmulatorTokenCredential:
    """Hands out an unsigned JWT: Azurite's `--oauth basic` checks issuer, audience and
    lifetime, never the signature (node_modules/azurite/.../BlobTokenAuthenticator.js)."""

    def __init__(self) -> None:
        self.calls = 0

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.calls += 1
        now = int(time.time())
        claims = {
            "aud": "https://storage.azure.com",
            "iss": f"https://sts.windows.net/{TENANT}/",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + 3600,
            "oid": "11111111-1111-1111-1111-111111111111",
        }
        header = {"alg": "HS256", "typ": "JWT"}
        token = f"{_segment(header)}.{_segment(claims)}.c2lnbmF0dXJl"
        return AccessToken(token, now + 3600)


class RecordingCounter(RequestCounter):
    """Counts like the run's own counter and keeps each request's method and URL."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []

    def __call__(self, request: Any) -> None:
        super().__call__(request)
        self.requests.append((request.http_request.method, request.http_request.url))


class _OverwritingHandler(_Handler):
    """Before forwarding a create-only PUT (If-None-Match: *), deletes the existing blob, so
    the write always lands: observably, a service that ignores the condition."""

    server: DoubleServer

    def _forward(self) -> None:
        if self.command == "PUT" and self.headers.get("If-None-Match") == "*":
            parts = unquote(urlsplit(self.path).path).split("/", 3)
            if len(parts) == 4 and "comp=block&" not in self.path + "&":
                with contextlib.suppress(ResourceNotFoundError):
                    self.server.admin.get_blob_client(parts[2], parts[3]).delete_blob()
        super()._forward()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


_TAG_TERM = re.compile(r"\"(?P<name>[^\"]+)\"\s*(?P<op>=|<>)\s*'(?P<value>[^']*)'")
_NOT_MET = (
    b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ConditionNotMet</Code>'
    b"<Message>The condition specified using HTTP conditional header(s) is not met."
    b"</Message></Error>"
)


def tags_condition_holds(condition: str, tags: dict[str, str]) -> bool | None:
    """Whether `x-ms-if-tags` holds for `tags`; None for an expression this double does not
    evaluate (only `"key" = 'value'` and `<>` terms joined by AND). A tag the blob lacks makes
    its term false."""
    holds = True
    for term in condition.split(" AND "):
        match = _TAG_TERM.fullmatch(term.strip())
        if match is None:
            return None
        value = tags.get(match["name"])
        equal = value == match["value"]
        holds = holds and value is not None and (equal if match["op"] == "=" else not equal)
    return holds


class _TagGuardHandler(_Handler):
    """Evaluates x-ms-if-tags on Set Blob Tags itself (Azurite ignores it) and answers 412
    ConditionNotMet when it does not hold, as Azure documents: the tag condition is evaluated
    before the write, which happens only when it holds
    (https://learn.microsoft.com/rest/api/storageservices/set-blob-tags, request header
    x-ms-if-tags; https://learn.microsoft.com/azure/storage/blobs/storage-manage-find-blobs,
    "Conditional blob operations").

    The check and the write happen under the blob's lock, after the proxy's delay and triggers, so a
    tag change another client makes through this double (or a trigger makes just before) is
    seen: the condition is evaluated atomically with the write, as on Azure."""

    server: DoubleServer

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        condition = self.headers.get("x-ms-if-tags")
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        if not (self.command == "PUT" and "comp=tags" in self.path and condition):
            return super()._send_upstream(headers, body)
        if len(parts) != 4:
            return super()._send_upstream(headers, body)
        with self.server.blob_lock(parts[2], parts[3]):
            try:
                tags = self.server.admin.get_blob_client(parts[2], parts[3]).get_blob_tags()
            except ResourceNotFoundError:
                return super()._send_upstream(headers, body)
            holds = tags_condition_holds(condition, tags)
            if holds is None:
                return _refusal(400, "InvalidHeaderValue", b"x-ms-if-tags not evaluated")
            if not holds:
                return _refusal(412, "ConditionNotMet", _NOT_MET)
            return super()._send_upstream(headers, body)


def _refusal(status: int, code: str, body: bytes) -> _UpstreamAnswer:
    headers = [("x-ms-error-code", code), ("Content-Type", "application/xml")]
    return _UpstreamAnswer(status, code, headers, body)


Refusal = Callable[[str, str, Message], tuple[int, str] | None]
"""(method, path, headers) -> the (status, error code) to answer instead of forwarding, or None."""


class _RefusingHandler(_Handler):
    server: DoubleServer

    def _forward(self) -> None:
        refusal = self.server.refuse(self.command, self.path, self.headers)
        if refusal is None:
            super()._forward()
            return
        status, code = refusal
        body = (
            f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
            f"<Message>{code} (test double)</Message></Error>"
        ).encode()
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response_only(status, code)
        self.send_header("x-ms-error-code", code)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


def shared_key_off(method: str, path: str, headers: Message) -> tuple[int, str] | None:
    """An account with allowSharedKeyAccess=false: every key-signed request is refused."""
    if headers.get("Authorization", "").startswith("SharedKey "):
        return 403, "KeyBasedAuthenticationNotPermitted"
    return None


def shared_key_allowed(method: str, path: str, headers: Message) -> tuple[int, str] | None:
    """An account that allows shared key: a request signed with a made-up key fails its
    signature check (the probe's is the only one signing `*/shared-key`)."""
    if headers.get("Authorization", "").startswith("SharedKey ") and path.split("?")[0].endswith(
        "/shared-key"
    ):
        return 403, "AuthenticationFailed"
    return None


def public_access_off(method: str, path: str, headers: Message) -> tuple[int, str] | None:
    """An account with allowBlobPublicAccess=false: every anonymous request is refused."""
    if "Authorization" not in headers and "sig=" not in path:
        return 409, "PublicAccessNotPermitted"
    return None


def public_access_allowed(method: str, path: str, headers: Message) -> tuple[int, str] | None:
    """An account that allows public access, with a private container: 404 to anonymous reads."""
    if "Authorization" not in headers and "sig=" not in path:
        return 404, "ResourceNotFound"
    return None


class _UpstreamAnswer:
    """An upstream response whose body was rewritten; what `_Handler._forward` reads of it."""

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes):
        self.status, self.reason, self._headers, self._body = status, reason, headers, body

    def read(self) -> bytes:
        return self._body

    def getheaders(self) -> list[tuple[str, str]]:
        return self._headers

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return next((v for k, v in self._headers if k.lower() == name.lower()), default)


class _SoftDeleteHandler(_Handler):
    """Blob soft delete on top of Azurite, as Azure documents it: a deleted blob is kept, listed
    with include=deleted (Deleted=true), and Undelete Blob brings it back with its bytes."""

    server: DoubleServer

    def _blob(self) -> tuple[str, str] | None:
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        return (parts[2], parts[3]) if len(parts) == 4 else None

    def _forward(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        where = self._blob()
        if self.command == "PUT" and query.get("comp") == ["undelete"] and where:
            kept = self.server.kept.pop(where, None)
            if kept is not None:
                data, tags, _ = kept
                self.server.admin.get_blob_client(*where).upload_blob(data, tags=tags)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response_only(200 if kept is not None else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.command == "DELETE" and where and "snapshot" not in query:
            blob = self.server.admin.get_blob_client(*where)
            with contextlib.suppress(ResourceNotFoundError):
                created = blob.get_blob_properties().creation_time
                self.server.kept[where] = (
                    blob.download_blob().readall(),
                    blob.get_blob_tags(),
                    created,
                )
        super()._forward()

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        return _with_deleted_entries(self.path, super()._send_upstream(headers, body), self._kept)

    def _kept(self, container: str, prefix: str) -> Iterator[ET.Element]:
        after = self.server.deleted_after
        for (owner, name), (data, _, created) in self.server.kept.items():
            if owner == container and name.startswith(prefix):
                yield _deleted_entry(name, len(data), created, created + after if after else None)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


def _with_deleted_entries(
    path: str, response: Any, entries: Callable[[str, str], Iterator[ET.Element]]
) -> Any:
    """`response` as is, or, for List Blobs with include=deleted, with `entries(container,
    prefix)` appended to its <Blobs>: the soft-deleted items the double pretends to keep."""
    query = parse_qs(urlsplit(path).query)
    include = ",".join(query.get("include", []))
    if query.get("comp") != ["list"] or "deleted" not in include:
        return response
    root = ET.fromstring(response.read())  # noqa: S314 (Azurite's answer on loopback)
    blobs = root.find("Blobs")
    if blobs is not None:
        container = unquote(urlsplit(path).path).split("/")[2]
        blobs.extend(entries(container, query.get("prefix", [""])[0]))
    rewritten = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return _UpstreamAnswer(response.status, response.reason, response.getheaders(), rewritten)


def _deleted_entry(
    name: str, length: int, created: datetime, deleted: datetime | None
) -> ET.Element:
    """A soft-deleted blob as List Blobs include=deleted shows it; deleted now unless told."""
    entry = ET.Element("Blob")
    ET.SubElement(entry, "Name").text = name
    ET.SubElement(entry, "Deleted").text = "true"
    properties = ET.SubElement(entry, "Properties")
    now = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime())
    deleted_time = deleted.strftime("%a, %d %b %Y %H:%M:%S GMT") if deleted else now
    for tag, value in (
        ("Creation-Time", created.strftime("%a, %d %b %Y %H:%M:%S GMT")),
        ("Last-Modified", now),
        ("Etag", "0x8D0000000000000"),
        ("Content-Length", str(length)),
        ("BlobType", "BlockBlob"),
        ("DeletedTime", deleted_time),
        ("RemainingRetentionDays", "7"),
    ):
        ET.SubElement(properties, tag).text = value
    return entry


def soft_delete_off(method: str, path: str, headers: Message) -> tuple[int, str] | None:
    """An account without blob soft delete: the deleted blob is gone, undelete finds nothing."""
    if method == "PUT" and "comp=undelete" in path:
        return 404, "BlobNotFound"
    return None


class _LostAnswerHandler(_Handler):
    """Forwards everything, but drops the answer to the first PUT of a blob whose name ends in
    `server.lose`: the service created it, the client never hears so (a connection lost
    mid-answer), and its retry meets the blob."""

    server: DoubleServer

    def _forward(self) -> None:
        path = unquote(urlsplit(self.path).path)
        if self.command == "PUT" and path.endswith(f"/{self.server.lose}") and not self.server.lost:
            self.server.lost = True
            body = self._read_body()
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            headers["Content-Length"] = str(len(body))
            self._send_upstream(headers, body).read()
            self.close_connection = True
            return
        super()._forward()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class _VersioningHandler(_Handler):
    """An account with blob versioning (and soft delete) on, as Azure documents it: every write
    answers with x-ms-version-id; a deleted blob becomes a previous version, which Undelete
    Blob answers 200 to without bringing the blob back
    (https://learn.microsoft.com/azure/storage/blobs/soft-delete-blob-overview, "Blob soft
    delete and versioning")."""

    server: DoubleServer

    def _forward(self) -> None:
        if self.command == "PUT" and "comp=undelete" in self.path:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response_only(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super()._forward()

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        response = super()._send_upstream(headers, body)
        if self.command != "PUT" or response.status not in (200, 201):
            return response
        version = time.strftime("%Y-%m-%dT%H:%M:%S.0000000Z", time.gmtime())
        answer = [*response.getheaders(), ("x-ms-version-id", version)]
        return _UpstreamAnswer(response.status, response.reason, answer, response.read())

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class _SnapshotSoftDeleteHandler(_Handler):
    """Soft delete for snapshots in front of Azurite: a deleted snapshot is listed with
    include=deleted,snapshots (Deleted=true), and Delete Blob deletetype=permanent on it is
    answered with `server.permanent`: (status, code) as a refusal, or None to purge it."""

    server: DoubleServer

    def _forward(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        snapshot = query.get("snapshot", [""])[0]
        if self.command == "DELETE" and snapshot and len(parts) == 4:
            key = (parts[2], parts[3], snapshot)
            if [v.lower() for v in query.get("deletetype", [])] == ["permanent"]:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.server.permanent is None and key in self.server.deleted_snapshots:
                    self.server.deleted_snapshots.remove(key)
                    self.send_response_only(202)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, code = self.server.permanent or (404, "BlobNotFound")
                self.send_response_only(status, code)
                self.send_header("x-ms-error-code", code)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.server.deleted_snapshots.add(key)
        super()._forward()

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        response = super()._send_upstream(headers, body)
        return _with_deleted_entries(self.path, response, self._deleted_snapshots)

    def _deleted_snapshots(self, container: str, _prefix: str) -> Iterator[ET.Element]:
        for owner, name, snapshot in self.server.deleted_snapshots:
            if owner == container:
                entry = _deleted_entry(name, 0, datetime.now(UTC), None)
                entry.insert(1, _element("Snapshot", snapshot))
                yield entry

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


def _element(tag: str, text: str) -> ET.Element:
    element = ET.Element(tag)
    element.text = text
    return element


class DoubleServer(LatencyProxyServer):
    """The latency proxy's server with another handler and the state that handler needs."""

    def __init__(self, upstream_port: int, handler: type[_Handler], **state: Any) -> None:
        super().__init__(("127.0.0.1", upstream_port), delay_s=state.pop("delay_s", 0.0))
        self.RequestHandlerClass = handler
        self.admin: BlobServiceClient = state.pop("admin", None)
        self.refuse: Refusal = state.pop("refuse", lambda *_: None)
        self.kept: dict[tuple[str, str], tuple[bytes, dict[str, str], datetime]] = {}
        self.deleted_after: timedelta | None = state.pop("deleted_after", None)
        self.lose: str = state.pop("lose", "")
        self.permanent: tuple[int, str] | None = state.pop("permanent", None)
        self.deleted_snapshots: set[tuple[str, str, str]] = set()
        self.lost = False
        self._blob_locks: dict[tuple[str, str], threading.Lock] = {}
        self._blob_locks_guard = threading.Lock()

    def blob_lock(self, container: str, blob: str) -> threading.Lock:
        """One lock per blob: its tag condition is checked and written as one step, while
        writes to other blobs go on in parallel, as on Azure."""
        with self._blob_locks_guard:
            return self._blob_locks.setdefault((container, blob), threading.Lock())


class ServiceDouble(LatencyProxy):
    """`with ServiceDouble(azurite.port, handler, admin=...) as service:` a blob endpoint in
    front of Azurite (use `service.connection_string`) that behaves as `handler` says."""

    def __init__(self, upstream_port: int, handler: type[_Handler], **state: Any) -> None:
        super().__init__(upstream_port, delay_s=0.0)
        self._server.server_close()
        self._server = DoubleServer(upstream_port, handler, **state)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=handler.__name__, daemon=True
        )


def non_conforming_service(upstream_port: int, admin: BlobServiceClient) -> ServiceDouble:
    """A service on which a create-only upload overwrites (If-None-Match ignored)."""
    return ServiceDouble(upstream_port, _OverwritingHandler, admin=admin)


def tag_guarding_service(
    upstream_port: int, admin: BlobServiceClient | None = None, delay_s: float = 0.0
) -> ServiceDouble:
    """Azurite with the tag condition on Set Blob Tags enforced, as Azure does; `delay_s` per
    request models the cloud round trip, as the latency proxy does (the double's own tag read
    goes straight to Azurite and is neither delayed nor counted)."""
    admin = admin or BlobServiceClient.from_connection_string(dev_connection_string(upstream_port))
    return ServiceDouble(upstream_port, _TagGuardHandler, admin=admin, delay_s=delay_s)


def refusing_service(upstream_port: int, refuse: Refusal) -> ServiceDouble:
    """Azurite behind a rule that answers some requests as Azure would for a setting Azurite
    does not have, and forwards the rest."""
    return ServiceDouble(upstream_port, _RefusingHandler, refuse=refuse)


def soft_deleting_service(
    upstream_port: int, admin: BlobServiceClient, deleted_after: timedelta | None = None
) -> ServiceDouble:
    """Azurite with blob soft delete implemented in front of it (Azurite answers 501); with
    `deleted_after`, deleted blobs are listed as deleted that long after their creation (a
    lifecycle rule's deletion, without waiting days)."""
    return ServiceDouble(
        upstream_port, _SoftDeleteHandler, admin=admin, deleted_after=deleted_after
    )


def lost_answer_service(upstream_port: int, suffix: str) -> ServiceDouble:
    """Azurite behind a connection that drops the answer to the first create of `*/suffix`."""
    return ServiceDouble(upstream_port, _LostAnswerHandler, lose=suffix)


def versioning_service(upstream_port: int) -> ServiceDouble:
    """Azurite as an account with blob versioning on (Azurite accepts the setting only)."""
    return ServiceDouble(upstream_port, _VersioningHandler)


def snapshot_soft_deleting_service(
    upstream_port: int, permanent: tuple[int, str] | None
) -> ServiceDouble:
    """Azurite with soft-deleted snapshots; `permanent` answers deletetype=permanent (None:
    the purge goes through)."""
    return ServiceDouble(upstream_port, _SnapshotSoftDeleteHandler, permanent=permanent)
