"""Doubles for the verification tests: a token credential Azurite accepts, and proxies in front
of Azurite that answer as a misconfigured or non-conforming Azure account would.

Over 500 lines: a test double (never shipped) whose proxies each answer one way a
non-conforming account would; they share the proxy plumbing.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.message import Message
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobServiceClient

from blob_safetynet.embedded.azurite import dev_connection_string
from blob_safetynet.embedded.proxy import HOP_BY_HOP as _HOP_BY_HOP
from blob_safetynet.embedded.proxy import Handler as _Handler
from blob_safetynet.embedded.proxy import LatencyProxy, LatencyProxyServer, blob_of
from blob_safetynet.embedded.proxy import UpstreamAnswer as _UpstreamAnswer
from blob_safetynet.embedded.proxy import error_body as _error_body
from blob_safetynet.policies.probes import RequestCounter
from testkit.tag_mirror import READS, TagMirror, tags_in_body

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
        mirror = self.server.tag_mirror
        if mirror is None or self.command in READS:
            return self._guarded(headers, body)
        key = blob_of(self.path)
        with self.server.blob_lock(*key) if key else contextlib.nullcontext():
            response = self._guarded(headers, body)
            if not isinstance(response, _UpstreamAnswer):
                mirror.observe(self.command, self.path, headers, body, response.status)
            return response

    def _guarded(self, headers: dict[str, str], body: bytes) -> Any:
        condition = self.headers.get("x-ms-if-tags")
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        if not (self.command == "PUT" and "comp=tags" in self.path and condition):
            return super()._send_upstream(headers, body)
        if len(parts) != 4:
            return super()._send_upstream(headers, body)
        with self.server.blob_lock(parts[2], parts[3]):
            try:
                tags = self._condition_tags(parts[2], parts[3])
            except ResourceNotFoundError:
                return super()._send_upstream(headers, body)
            holds = tags_condition_holds(condition, tags)
            if holds is None:
                return _refusal(400, "InvalidHeaderValue", b"x-ms-if-tags not evaluated")
            if not holds:
                return _refusal(412, "ConditionNotMet", _NOT_MET)
            return super()._send_upstream(headers, body)

    def _condition_tags(self, container: str, blob: str) -> dict[str, str]:
        """The tags the condition is evaluated on: the mirror's, where it holds the base blob
        (a snapshot's or version's condition is read), else Azurite's."""
        query = parse_qs(urlsplit(self.path).query)
        mirror = self.server.tag_mirror
        if mirror is not None and "snapshot" not in query and "versionid" not in query:
            known = mirror.known((container, blob))
            if known is not None:
                return known
        return self._blob_tags(container, blob)

    def _blob_tags(self, container: str, blob: str) -> dict[str, str]:
        """The blob's tags, read straight from Azurite (not through this double)."""
        self.server.count_tag_read()
        return dict(self.server.admin.get_blob_client(container, blob).get_blob_tags())


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
        body = _error_body(code)
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
        response = super()._send_upstream(headers, body)
        if not self.server.lists_deleted:
            return response
        return _with_deleted_entries(self.path, response, self._kept)

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


@dataclass
class Exchange:
    """One request to a blob as a misbehaviour sees it; it may change `headers` before the
    request is forwarded, and act on the blob itself through `blob` (the double's admin
    client, which does not pass through the double)."""

    method: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    blob: BlobClient

    def condition_holds(self) -> bool | None:
        """Whether the request's x-ms-if-tags holds for the blob's tags now (None: no condition)."""
        condition = self.headers.get("x-ms-if-tags")
        return None if condition is None else tags_condition_holds(condition, _tags(self.blob))


Misbehaviour = Callable[[Exchange], tuple[int, str] | None]
"""An exchange -> the (status, error code) to answer without forwarding, or None to forward."""


def _tags_or_none(blob: BlobClient) -> dict[str, str] | None:
    try:
        return dict(blob.get_blob_tags())
    except ResourceNotFoundError:
        return None


def _tags(blob: BlobClient) -> dict[str, str]:
    return _tags_or_none(blob) or {}


class _MisbehavingHandler(_Handler):
    """Hands each blob request to `server.misbehave`, one at a time (so a check and the write
    it decides are one step), and forwards what it leaves alone."""

    server: DoubleServer

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> Any:
        parts = unquote(urlsplit(self.path).path).split("/", 3)
        if len(parts) != 4:
            return super()._send_upstream(headers, body)
        exchange = Exchange(
            self.command,
            parse_qs(urlsplit(self.path).query),
            headers,
            body,
            self.server.admin.get_blob_client(parts[2], parts[3]),
        )
        with self.server.one_at_a_time:
            answer = self.server.misbehave(exchange)
            if answer is None:
                return super()._send_upstream(exchange.headers, body)
        status, code = answer
        if status < 300:
            return _UpstreamAnswer(status, code, [("Content-Length", "0")], b"")
        return _refusal(status, code, _error_body(code))


def _is_tag_write(exchange: Exchange) -> bool:
    return exchange.method == "PUT" and exchange.query.get("comp") == ["tags"]


def _is_create_only_put(exchange: Exchange) -> bool:
    return (
        exchange.method == "PUT"
        and exchange.headers.get("If-None-Match") == "*"
        and "comp" not in exchange.query
    )


def reads_with_any_key(exchange: Exchange) -> tuple[int, str] | None:
    """A service that never checks a Shared Key signature: a key-signed read is served as far
    as the container serves anyone (the signature is dropped, not refused)."""
    if exchange.method in ("GET", "HEAD") and exchange.headers.get("Authorization", "").startswith(
        "SharedKey "
    ):
        del exchange.headers["Authorization"]
    return None


def accepts_tag_writes_unwritten(sas_with_tag_permission: bool) -> Misbehaviour:
    """A service that answers 204 to Set Blob Tags through a SAS with (or, when False,
    without) the `t` permission, and writes nothing; other requests are forwarded."""

    def misbehave(exchange: Exchange) -> tuple[int, str] | None:
        permissions = exchange.query.get("sp", [""])[0]
        with_t = "t" in permissions
        if (
            _is_tag_write(exchange)
            and "sig" in exchange.query
            and with_t is sas_with_tag_permission
        ):
            return 204, "No Content"
        return None

    return misbehave


def ignores_tag_writes(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 204 to every Set Blob Tags and writes nothing."""
    return (204, "No Content") if _is_tag_write(exchange) else None


def answers_undelete_without_restoring(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 200 to Undelete Blob and brings nothing back."""
    undelete = exchange.method == "PUT" and exchange.query.get("comp") == ["undelete"]
    return (200, "OK") if undelete else None


def refuses_undelete(exchange: Exchange) -> tuple[int, str] | None:
    """A service that lists a deleted blob (the double behind it keeps it) but refuses to
    undelete it."""
    undelete = exchange.method == "PUT" and exchange.query.get("comp") == ["undelete"]
    return (409, "OperationNotAllowed") if undelete else None


def keeps_other_bytes(exchange: Exchange) -> tuple[int, str] | None:
    """Before a blob's delete, its bytes are changed (tags kept): a soft delete in front of
    it keeps, and undelete restores, bytes the client never wrote."""
    if exchange.method == "DELETE" and "snapshot" not in exchange.query:
        _rewrite(exchange.blob)
    return None


def _rewrite(blob: BlobClient, data: bytes = b"not the bytes written") -> None:
    tags = _tags(blob)
    blob.upload_blob(data, overwrite=True, tags=tags or None)


def stores_then_refuses_existing(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 409 BlobAlreadyExists to a create-only Put Blob on an existing
    blob, but stores the new bytes anyway (tags from x-ms-tags)."""
    if not _is_create_only_put(exchange) or not exchange.blob.exists():
        return None
    tags = dict(parse_qsl(exchange.headers.get("x-ms-tags", "")))
    exchange.blob.upload_blob(exchange.body, overwrite=True, tags=tags or None)
    return 409, "BlobAlreadyExists"


def ignores_delete_condition(exchange: Exchange) -> tuple[int, str] | None:
    """A service that deletes without evaluating x-ms-if-tags on Delete Blob."""
    if exchange.method == "DELETE" and exchange.condition_holds() is not None:
        exchange.blob.delete_blob(delete_snapshots="include")
        return 202, "Accepted"
    return None


def refuses_guarded_delete(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 412 ConditionNotMet to every tag-guarded Delete Blob, even one
    whose condition holds."""
    return (
        (412, "ConditionNotMet")
        if exchange.method == "DELETE" and exchange.condition_holds() is not None
        else None
    )


def deletes_then_refuses(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 412 to a Delete Blob whose tag condition fails, after deleting
    the blob anyway."""
    if exchange.method == "DELETE" and exchange.condition_holds() is False:
        exchange.blob.delete_blob()
        return 412, "ConditionNotMet"
    return None


def rewrites_then_refuses(exchange: Exchange) -> tuple[int, str] | None:
    """A service that refuses a Delete Blob whose tag condition fails (Azurite's 412), after
    changing the blob's bytes."""
    if exchange.method == "DELETE" and exchange.condition_holds() is False:
        _rewrite(exchange.blob)
    return None


def seals_then_refuses(exchange: Exchange) -> tuple[int, str] | None:
    """A service that answers 412 to a Set Blob Tags whose x-ms-if-tags fails, after writing
    the tags anyway."""
    if _is_tag_write(exchange) and exchange.condition_holds() is False:
        exchange.blob.set_blob_tags(tags_in_body(exchange.body))
        return 412, "ConditionNotMet"
    return None


class DoubleServer(LatencyProxyServer):
    """The latency proxy's server with another handler and the state that handler needs."""

    def __init__(self, upstream_port: int, handler: type[_Handler], **state: Any) -> None:
        super().__init__(("127.0.0.1", upstream_port), delay_s=state.pop("delay_s", 0.0))
        self.RequestHandlerClass = handler
        self.admin: BlobServiceClient = state.pop("admin", None)
        self.refuse: Refusal = state.pop("refuse", lambda *_: None)
        self.misbehave: Misbehaviour = state.pop("misbehave", lambda _: None)
        self.lists_deleted: bool = state.pop("lists_deleted", True)
        self.kept: dict[tuple[str, str], tuple[bytes, dict[str, str], datetime]] = {}
        self.deleted_after: timedelta | None = state.pop("deleted_after", None)
        self.lose: str = state.pop("lose", "")
        self.permanent: tuple[int, str] | None = state.pop("permanent", None)
        self.tag_mirror: TagMirror | None = state.pop("tag_mirror", None)
        self.tag_reads = 0
        """Get Blob Tags the double sent Azurite to evaluate a condition."""
        self.deleted_snapshots: set[tuple[str, str, str]] = set()
        self.lost = False
        self.one_at_a_time = threading.Lock()
        self._blob_locks: dict[tuple[str, str], threading.RLock] = {}
        self._blob_locks_guard = threading.Lock()

    def count_tag_read(self) -> None:
        with self._lock:
            self.tag_reads += 1

    def audit_mirror(self, container: str | None = None) -> tuple[int, list[str]]:
        """`TagMirror.audit` against Azurite; (0, []) without a mirror."""
        if self.tag_mirror is None:
            return 0, []

        def read(key: tuple[str, str]) -> dict[str, str] | None:
            return _tags_or_none(self.admin.get_blob_client(*key))

        return self.tag_mirror.audit(read, container)

    def blob_lock(self, container: str, blob: str) -> threading.RLock:
        """One lock per blob: its tag condition is checked and written as one step, while
        writes to other blobs go on in parallel, as on Azure. Re-entrant, so a handler that checks
        two conditions (an ETag, then x-ms-if-tags) holds it across both and the write."""
        with self._blob_locks_guard:
            return self._blob_locks.setdefault((container, blob), threading.RLock())


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

    @property
    def tag_reads(self) -> int:
        """Get Blob Tags this double sent Azurite to evaluate conditions, since it started."""
        server: DoubleServer = self._server  # type: ignore[assignment]
        return server.tag_reads

    def audit_mirror(self, container: str | None = None) -> tuple[int, list[str]]:
        """`DoubleServer.audit_mirror`: (blobs checked, those that differed, now forgotten)."""
        server: DoubleServer = self._server  # type: ignore[assignment]
        return server.audit_mirror(container)


def non_conforming_service(upstream_port: int, admin: BlobServiceClient) -> ServiceDouble:
    """A service on which a create-only upload overwrites (If-None-Match ignored)."""
    return ServiceDouble(upstream_port, _OverwritingHandler, admin=admin)


def tag_guarding_service(
    upstream_port: int,
    admin: BlobServiceClient | None = None,
    delay_s: float = 0.0,
    *,
    mirror: bool = False,
) -> ServiceDouble:
    """Azurite with the tag condition on Set Blob Tags enforced, as Azure does; `delay_s` per
    request models the cloud round trip, as the latency proxy does (the double's own tag read
    goes straight to Azurite and is neither delayed nor counted). With `mirror`, the condition
    is evaluated on the tags the double saw written (testkit/tag_mirror.py) where it knows the
    blob: for benchmarks only; the default reads Azurite's tags for every condition."""
    admin = admin or BlobServiceClient.from_connection_string(dev_connection_string(upstream_port))
    return ServiceDouble(
        upstream_port,
        _TagGuardHandler,
        admin=admin,
        delay_s=delay_s,
        tag_mirror=TagMirror() if mirror else None,
    )


def refusing_service(upstream_port: int, refuse: Refusal) -> ServiceDouble:
    """Azurite behind a rule that answers some requests as Azure would for a setting Azurite
    does not have, and forwards the rest."""
    return ServiceDouble(upstream_port, _RefusingHandler, refuse=refuse)


def soft_deleting_service(
    upstream_port: int,
    admin: BlobServiceClient,
    deleted_after: timedelta | None = None,
    *,
    lists_deleted: bool = True,
) -> ServiceDouble:
    """Azurite with blob soft delete implemented in front of it (Azurite answers 501); with
    `deleted_after`, deleted blobs are listed as deleted that long after their creation (a
    lifecycle rule's deletion, without waiting days); with `lists_deleted` False, List Blobs
    include=deleted leaves the kept blobs out (undelete still restores them)."""
    return ServiceDouble(
        upstream_port,
        _SoftDeleteHandler,
        admin=admin,
        deleted_after=deleted_after,
        lists_deleted=lists_deleted,
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


def misbehaving_service(
    upstream_port: int, misbehave: Misbehaviour, admin: BlobServiceClient | None = None
) -> ServiceDouble:
    """A blob endpoint in front of `upstream_port` (Azurite, or another double) that lets
    `misbehave` answer or change each blob request; `admin` acts on the blobs (default: the
    development account on the same port)."""
    admin = admin or BlobServiceClient.from_connection_string(dev_connection_string(upstream_port))
    return ServiceDouble(upstream_port, _MisbehavingHandler, admin=admin, misbehave=misbehave)
