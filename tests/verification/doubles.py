"""Test doubles for the verification tests: a token credential Azurite accepts, and a blob
service that does not honour If-None-Match (a proxy in front of Azurite)."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
import time
from typing import Any
from urllib.parse import unquote, urlsplit

from azure.core.credentials import AccessToken
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.blob import BlobServiceClient

from benchmarks.latency_proxy import LatencyProxy, LatencyProxyServer, _Handler
from policies.probes import RequestCounter

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

    server: OverwritingServer

    def _forward(self) -> None:
        if self.command == "PUT" and self.headers.get("If-None-Match") == "*":
            parts = unquote(urlsplit(self.path).path).split("/", 3)
            if len(parts) == 4 and "comp=block&" not in self.path + "&":
                with contextlib.suppress(ResourceNotFoundError):
                    self.server.admin.get_blob_client(parts[2], parts[3]).delete_blob()
        super()._forward()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class OverwritingServer(LatencyProxyServer):
    def __init__(self, upstream_port: int, admin: BlobServiceClient) -> None:
        super().__init__(("127.0.0.1", upstream_port), delay_s=0.0)
        self.RequestHandlerClass = _OverwritingHandler
        self.admin = admin


class NonConformingService(LatencyProxy):
    """`with NonConformingService(azurite.port, admin) as service:` a blob endpoint (use its
    `connection_string`) on which a create-only upload overwrites."""

    def __init__(self, upstream_port: int, admin: BlobServiceClient) -> None:
        super().__init__(upstream_port, delay_s=0.0)
        self._server.server_close()
        self._server = OverwritingServer(upstream_port, admin)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="non-conforming", daemon=True
        )


_TAG_CONDITION = re.compile(r"\"(?P<name>[^\"]+)\" = '(?P<value>[^']*)'")


class _TagGuardHandler(_Handler):
    """Evaluates x-ms-if-tags on Set Blob Tags itself (Azurite ignores it) and answers 412
    ConditionNotMet when it does not hold, as Azure documents; everything else is forwarded."""

    server: TagGuardServer

    def _forward(self) -> None:
        condition = self.headers.get("x-ms-if-tags")
        if self.command == "PUT" and "comp=tags" in self.path and condition:
            match = _TAG_CONDITION.fullmatch(condition)
            parts = unquote(urlsplit(self.path).path).split("/", 3)
            if match and len(parts) == 4:
                tags = self.server.admin.get_blob_client(parts[2], parts[3]).get_blob_tags()
                if tags.get(match["name"]) != match["value"]:
                    self._refuse()
                    return
        super()._forward()

    def _refuse(self) -> None:
        body = (
            b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ConditionNotMet</Code>'
            b"<Message>The condition specified using HTTP conditional header(s) is not met."
            b"</Message></Error>"
        )
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response_only(
            412, "The condition specified using HTTP conditional header(s) is not met."
        )
        self.send_header("x-ms-error-code", "ConditionNotMet")
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class TagGuardServer(LatencyProxyServer):
    def __init__(self, upstream_port: int, admin: BlobServiceClient) -> None:
        super().__init__(("127.0.0.1", upstream_port), delay_s=0.0)
        self.RequestHandlerClass = _TagGuardHandler
        self.admin = admin


class TagGuardingService(LatencyProxy):
    """Azurite with the tag condition on Set Blob Tags enforced, as Azure does."""

    def __init__(self, upstream_port: int, admin: BlobServiceClient) -> None:
        super().__init__(upstream_port, delay_s=0.0)
        self._server.server_close()
        self._server = TagGuardServer(upstream_port, admin)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="tag-guard", daemon=True
        )
