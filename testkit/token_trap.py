"""Where would a credential have gone? A loopback HTTPS proxy that records every request.

Clients reach it through the standard proxy variables (requests, and so azure-core's transport,
honours HTTPS_PROXY and REQUESTS_CA_BUNDLE): for each CONNECT it records the host and port the
client meant to reach, answers the tunnel with TLS under a certificate it issues for that host,
reads the request inside and records its Authorization header, then answers 403. Nothing leaves
the machine and no DNS name is resolved, so a test can aim a client at any host and see
exactly where the token would have been sent.

It is also the managed identity endpoint (App Service's IDENTITY_ENDPOINT protocol, what a
Function uses): `environment()` points DefaultAzureCredential at it, and every token it hands
out is `token`. Token requests are counted in `issued`, apart from `seen`.
"""

from __future__ import annotations

import json
import secrets
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from testkit.tls import new_authority

IDENTITY_HOST = "identity.token-trap.invalid"
"""The identity endpoint's host: only the proxy answers it (`.invalid` never resolves)."""


@dataclass(frozen=True)
class Seen:
    """One request that reached the trap: where it was going and its credential, if any."""

    target: str
    """host:port the client connected for (the CONNECT authority, or an absolute URL's)."""
    method: str
    authorization: str | None


class TokenTrap:
    """Start with `with TokenTrap() as trap:`; apply `trap.environment()` to the process."""

    def __init__(self) -> None:
        self.token = f"trap-token-{secrets.token_hex(8)}"
        self.seen: list[Seen] = []
        self.issued = 0
        self._tmp = tempfile.TemporaryDirectory(prefix="token-trap-")
        self._dir = Path(self._tmp.name)
        self._authority = new_authority()
        self.ca_file = self._dir / "ca.pem"
        self.ca_file.write_bytes(self._authority.pem())
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def environment(self) -> dict[str, str]:
        """Variables that route every HTTP(S) client of the process through the trap and make
        DefaultAzureCredential take its tokens from it (managed identity only)."""
        return {
            "HTTPS_PROXY": self.url,
            "HTTP_PROXY": self.url,
            "NO_PROXY": "",
            "REQUESTS_CA_BUNDLE": str(self.ca_file),
            "IDENTITY_ENDPOINT": f"http://{IDENTITY_HOST}/msi/token",
            "IDENTITY_HEADER": "token-trap",
            "AZURE_TOKEN_CREDENTIALS": "managedidentitycredential",
        }

    def bearers(self) -> list[Seen]:
        """The requests that carried this trap's token."""
        return [seen for seen in self.seen if seen.authorization == f"Bearer {self.token}"]

    def __enter__(self) -> TokenTrap:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        self._tmp.cleanup()

    def record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def issue_token(self) -> dict[str, Any]:
        with self._lock:
            self.issued += 1
        expires = int(time.time()) + 3600
        return {
            "access_token": self.token,
            "expires_on": str(expires),
            "expires_in": 3600,
            "resource": "https://storage.azure.com",
            "token_type": "Bearer",
        }

    def context_for(self, host: str) -> ssl.SSLContext:
        """A server context whose certificate names `host` (issued once per host)."""
        with self._lock:
            if host not in self._contexts:
                name = f"{len(self._contexts)}"
                cert, key = self._dir / f"{name}.pem", self._dir / f"{name}.key"
                self._authority.issue((host,), cert, key)
                context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
                context.load_cert_chain(cert, key)
                self._contexts[host] = context
            return self._contexts[host]


def _handler(trap: TokenTrap) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        tunnel: str | None = None

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_CONNECT(self) -> None:
            target = self.path
            host = target.rpartition(":")[0].strip("[]") or target
            self.send_response(200, "Connection established")
            self.end_headers()
            self.wfile.flush()
            try:
                tls = trap.context_for(host).wrap_socket(self.connection, server_side=True)
            except (ssl.SSLError, OSError, ValueError):
                trap.record(Seen(target, "CONNECT", None))  # the handshake failed: no request
                self.close_connection = True
                return
            self.connection = tls
            self.rfile = tls.makefile("rb")
            self.wfile = tls.makefile("wb")
            self.tunnel = target
            self.handle_one_request()
            self.close_connection = True

        def _answer(self) -> None:
            if self.tunnel is None and urlsplit(self.path).hostname == IDENTITY_HOST:
                self._send(200, json.dumps(trap.issue_token()).encode())
                return
            target = self.tunnel or urlsplit(self.path).netloc
            trap.record(Seen(target, self.command, self.headers.get("Authorization")))
            self._send(403, b"")

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("x-ms-error-code", "AuthorizationFailure")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
            self.close_connection = True

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _answer

    return Handler
