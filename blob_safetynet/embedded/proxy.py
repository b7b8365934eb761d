"""A loopback reverse proxy in front of Azurite: a fixed delay per request, counts by kind,
faults on demand, and a handler a double overrides to answer some requests itself.

Azurite answers in about a millisecond; Azure called from a function does not. Putting this
proxy between a client and Azurite models the cloud round trip, so a benchmark shows what
batching wins there, and its counter shows how many blob-service requests a run really made.
The fault tests use it to make the service fail the way Azure does: 500 and 503 answers,
throttling with Retry-After, connections reset before or after the request reached the
service, and answers stalled past the client's timeout. The recovery double
(`blob_safetynet.embedded.recovery`) answers through it in the demo; the test kit's doubles
(testkit/service_doubles.py) and its `fault_proxy` name are built on it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self
from urllib.parse import parse_qs, parse_qsl, unquote, urlsplit

from blob_safetynet.embedded.azurite import dev_blob_endpoint, dev_connection_string

# Per-connection headers (RFC 9110 section 7.6.1) describe one hop and must not be forwarded.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)


@dataclass(frozen=True)
class Fault:
    """One injected failure. `status` answers without forwarding (the service never saw it);
    `reset` closes the connection with a TCP reset, `"before"` or `"after"` forwarding;
    `stall_s` forwards, then holds the answer that long (past the client's read timeout)."""

    status: int = 0
    retry_after_s: int | None = None
    reset: str | None = None
    stall_s: float = 0.0

    def __post_init__(self) -> None:
        if self.reset not in (None, "before", "after"):
            raise ValueError(f"reset must be 'before' or 'after', not {self.reset!r}")
        if not (self.status or self.reset or self.stall_s):
            raise ValueError("a fault needs a status, a reset or a stall")


SERVER_BUSY = Fault(status=503)
INTERNAL_ERROR = Fault(status=500)


def throttled(retry_after_s: int = 1) -> Fault:
    """Azure's throttling answer: 503 ServerBusy with Retry-After."""
    return Fault(status=503, retry_after_s=retry_after_s)


_ERROR_CODES = {500: "InternalError", 503: "ServerBusy"}


def request_kind(method: str, path: str) -> str:
    """`GET comp=list`, `POST comp=batch`, `DELETE`: how the blob service names an operation."""
    comp = parse_qs(urlsplit(path).query).get("comp")
    return f"{method} comp={comp[0]}" if comp else method


class Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keeps the client's connections alive, as they would be against Azure.
    protocol_version = "HTTP/1.1"
    # Nagle's algorithm can hold small writes back by tens of milliseconds on loopback,
    # which would drown the modeled 10 ms.
    disable_nagle_algorithm = True
    server: LatencyProxyServer
    _connection: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        """Silent: a benchmark's output is its report."""

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    # Skip trailers up to the blank line that ends the message.
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _upstream(self) -> http.client.HTTPConnection:
        # One upstream connection per client connection: a handler instance lives as long
        # as its client's keep-alive connection, and serves its requests one at a time.
        if self._connection is None:
            self._connection = http.client.HTTPConnection(*self.server.upstream, timeout=60)
        return self._connection

    def _forward(self) -> None:
        body = self._read_body()
        kind = request_kind(self.command, self.path)
        self.server.record(kind)
        time.sleep(self.server.delay_s)
        action = self.headers.get("x-ms-lease-action")
        fault = self.server.take_fault(f"{kind} {action}" if action else kind, kind)
        self.server.run_trigger(kind)
        if fault is not None and fault.status:
            self._send_error_status(fault)
            return
        if fault is not None and fault.reset == "before":
            self._reset()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        if body or "Content-Length" in self.headers or "Transfer-Encoding" in self.headers:
            headers["Content-Length"] = str(len(body))
        try:
            response = self._send_upstream(headers, body)
        except OSError as error:
            self.send_error(502, f"upstream unreachable: {error}")
            return
        # The body goes back byte for byte (batch answers are multipart: never re-encoded);
        # http.client has already undone any chunked framing, so the length is re-declared.
        payload = response.read()
        if fault is not None and fault.reset == "after":
            self._reset()
            return
        if fault is not None:
            time.sleep(fault.stall_s)
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if self.command == "HEAD":
            # A HEAD answer declares the blob's length but carries no body.
            self.send_header("Content-Length", response.getheader("Content-Length", "0"))
        elif response.status not in (204, 304) and not 100 <= response.status < 200:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD" and payload:
            self.wfile.write(payload)

    def _send_error_status(self, fault: Fault) -> None:
        body = b"injected fault"
        self.send_response_only(fault.status)
        self.send_header("x-ms-error-code", _ERROR_CODES.get(fault.status, "InjectedFault"))
        if fault.retry_after_s is not None:
            self.send_header("Retry-After", str(fault.retry_after_s))
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _reset(self) -> None:
        """Close with RST (SO_LINGER 0), as a dropped connection looks to the client."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except OSError:
            # The client gave up on a stalled answer, or the connection was reset on purpose.
            self.close_connection = True

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self._connection is not None:
            self._connection.close()

    def _send_upstream(self, headers: dict[str, str], body: bytes) -> http.client.HTTPResponse:
        for attempt in (1, 2):
            connection = self._upstream()
            try:
                connection.request(self.command, self.path, body=body, headers=headers)
                return connection.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # Azurite closed an idle keep-alive connection: reconnect once.
                connection.close()
                self._connection = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_OPTIONS = do_PATCH = _forward


class LatencyProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self, upstream: tuple[str, int], delay_s: float, handler: type[Handler] = Handler
    ) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.upstream = upstream
        self.delay_s = delay_s
        self._counts: Counter[str] = Counter()
        self._faults: dict[str, deque[Fault]] = {}
        self._triggers: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()

    def inject(self, kind: str, faults: list[Fault]) -> None:
        with self._lock:
            self._faults[kind] = deque(faults)

    def take_fault(self, *kinds: str) -> Fault | None:
        with self._lock:
            for kind in kinds:
                queue = self._faults.get(kind)
                if queue:
                    return queue.popleft()
        return None

    def once(self, kind: str, trigger: Callable[[], None]) -> None:
        with self._lock:
            self._triggers[kind] = trigger

    def run_trigger(self, kind: str) -> None:
        with self._lock:
            trigger = self._triggers.pop(kind, None)
        if trigger is not None:
            trigger()

    def record(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    def counts(self) -> Counter[str]:
        with self._lock:
            return Counter(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()


class LatencyProxy:
    """`with LatencyProxy(azurite.port) as proxy:` clients of `proxy.connection_string` pay
    `delay_s` per request; `proxy.counts()` tells how many requests of each kind they made."""

    def __init__(
        self, upstream_port: int, delay_s: float = 0.010, handler: type[Handler] = Handler
    ) -> None:
        self._server = LatencyProxyServer(("127.0.0.1", upstream_port), delay_s, handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name=handler.__name__, daemon=True
        )

    @property
    def port(self) -> int:
        port: int = self._server.server_address[1]
        return port

    @property
    def blob_endpoint(self) -> str:
        return dev_blob_endpoint(self.port)

    @property
    def connection_string(self) -> str:
        return dev_connection_string(self.port)

    def counts(self) -> Counter[str]:
        return self._server.counts()

    @property
    def delay_s(self) -> float:
        """The delay added to every request from now on (the modelled round trip)."""
        return self._server.delay_s

    @delay_s.setter
    def delay_s(self, value: float) -> None:
        self._server.delay_s = value

    def fail_next(self, kind: str, count: int) -> None:
        """Answer the next `count` requests of `kind` (e.g. `POST comp=batch`) with 503
        ServerBusy instead of forwarding them: a throttled or failing service, on demand."""
        self._server.inject(kind, [SERVER_BUSY] * count)

    def inject(self, kind: str, *faults: Fault) -> None:
        """The next requests of `kind` meet `faults`, one each, in order. A lease request's
        kind may name its action (`PUT comp=lease renew`) to hit only that action."""
        self._server.inject(kind, list(faults))

    def once(self, kind: str, trigger: Callable[[], None]) -> None:
        """Call `trigger` when the next request of `kind` arrives, before it is forwarded."""
        self._server.once(kind, trigger)

    def reset(self) -> None:
        self._server.reset()

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


class UpstreamAnswer:
    """An answer a double made (or an upstream answer whose body it rewrote): what
    `Handler._forward` reads of an upstream response."""

    def __init__(self, status: int, reason: str, headers: list[tuple[str, str]], body: bytes):
        self.status, self.reason, self._headers, self._body = status, reason, headers, body

    def read(self) -> bytes:
        return self._body

    def getheaders(self) -> list[tuple[str, str]]:
        return self._headers

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return next((v for k, v in self._headers if k.lower() == name.lower()), default)


def error_body(code: str) -> bytes:
    """The Blob service's XML error body for `code`."""
    return (
        f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
        f"<Message>{code} (test double)</Message></Error>"
    ).encode()


BlobKey = tuple[str, str]


def blob_of(path: str) -> BlobKey | None:
    """(container, blob) a path-style request URL names, or None above blob level."""
    parts = unquote(urlsplit(path).path).split("/", 3)
    return (parts[2], parts[3]) if len(parts) == 4 and parts[3] else None


def tags_in_header(header: str) -> dict[str, str]:
    """The tags of an `x-ms-tags` header (query-string encoded)."""
    return dict(parse_qsl(header, keep_blank_values=True))
