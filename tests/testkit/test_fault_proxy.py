"""The benchmark's latency proxy: delays, counts by kind, forwards answers byte for byte."""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from testkit.fault_proxy import LatencyProxy, request_kind

MULTIPART = (
    b"--batch_1\r\nContent-Type: application/http\r\n\r\nHTTP/1.1 202 Accepted\r\n\r\n--batch_1--"
)


class _Echo(BaseHTTPRequestHandler):
    """Answers with what it received, so the test sees what the proxy forwarded."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        payload = MULTIPART if self.command == "POST" else body or self.path.encode()
        self.send_response(202 if self.command == "POST" else 200)
        self.send_header("Content-Type", "multipart/mixed; boundary=batch_1")
        self.send_header("x-ms-echo", self.command)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _answer


@pytest.fixture
def proxy() -> Iterator[LatencyProxy]:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=upstream.serve_forever, daemon=True)
    thread.start()
    with LatencyProxy(upstream.server_address[1], delay_s=0.05) as running:
        yield running
    upstream.shutdown()
    upstream.server_close()


def test_request_kind_names_the_operation() -> None:
    assert request_kind("GET", "/acct/c?restype=container&comp=list") == "GET comp=list"
    assert request_kind("POST", "/acct/c?restype=container&comp=batch") == "POST comp=batch"
    assert request_kind("DELETE", "/acct/c/blob") == "DELETE"


def test_forwards_faithfully_counts_and_delays(proxy: LatencyProxy) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=5)
    start = time.perf_counter()
    # One keep-alive connection carries every request, as the SDK's pool does.
    connection.request("POST", "/acct/c?restype=container&comp=batch", body=b"sub-requests")
    batch = connection.getresponse()
    assert (batch.status, batch.read()) == (202, MULTIPART)
    assert batch.getheader("x-ms-echo") == "POST"
    connection.request("PUT", "/acct/c/blob", body=b"\x00\x01bytes")
    assert connection.getresponse().read() == b"\x00\x01bytes"
    connection.request("HEAD", "/acct/c/blob")
    head = connection.getresponse()
    assert (head.read(), head.getheader("Content-Length")) == (b"", str(len("/acct/c/blob")))
    connection.request("GET", "/acct/c?restype=container&comp=list")
    assert connection.getresponse().read() == b"/acct/c?restype=container&comp=list"
    elapsed = time.perf_counter() - start
    connection.close()

    assert elapsed >= 4 * 0.05
    assert proxy.counts() == {"POST comp=batch": 1, "PUT": 1, "HEAD": 1, "GET comp=list": 1}
    proxy.reset()
    assert proxy.counts() == {}
