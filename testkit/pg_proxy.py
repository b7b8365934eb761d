"""A loopback TCP proxy in front of PostgreSQL that can lose the server's answer to a COMMIT.

The client's messages are read as the frontend/backend protocol frames them
(https://www.postgresql.org/docs/current/protocol-message-formats.html: an untyped startup
packet, then a type byte and a 4-byte length per message); the server's bytes pass through
untouched. Armed with `lose_next_commit_answer()`, the proxy forwards the next COMMIT of a
transaction that wrote (INSERT, UPDATE, DELETE), lets the server commit it, swallows the answer
and drops the client's connection: the transaction is durable, and the client only sees its
connection drop. `drop_next_commit()` drops the connection instead of forwarding that COMMIT:
the server rolls the transaction back, as when the database goes down before the commit.
`lose_next_statement_answer()` does the same to the next write sent outside a transaction block
(autocommit, no BEGIN: the statement is its own transaction and commits before its answer).
Clients must not negotiate TLS or GSS
encryption through it (`sslmode=disable&gssencmode=disable`, which `url_through` adds).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator

import sqlalchemy as sa

_NEGOTIATION_CODES = frozenset({80877103, 80877104})
"""SSLRequest and GSSENCRequest: answered with one byte, then the real startup packet follows."""
_COMMIT_PREFIXES = (b"COMMIT", b"END")
_END_PREFIXES = (*_COMMIT_PREFIXES, b"ROLLBACK", b"ABORT")
_WRITE_PREFIXES = (b"INSERT", b"UPDATE", b"DELETE")
_BEGIN_PREFIXES = (b"BEGIN", b"START TRANSACTION")
LOSE_ANSWER = "lose answer"
DROP_BEFORE = "drop before"
AT_COMMIT = "commit"
AT_STATEMENT = "statement"


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return data


def _sql_of(kind: bytes, payload: bytes) -> bytes:
    """The SQL of a simple Query ('Q') or a Parse ('P', statement name first), upper case."""
    if kind == b"Q":
        return payload.lstrip().upper()
    if kind == b"P" and b"\x00" in payload:
        return payload.split(b"\x00", 1)[1].lstrip().upper()
    return b""


def _drop(sock: socket.socket) -> None:
    """Shut down first: a close alone leaves the connection open while a thread reads it."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: PostgresProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.upstream, timeout=None)
        self.losing = threading.Event()
        self.wrote = False
        self.in_block = False

    def start(self) -> None:
        threading.Thread(target=self._client_to_server, daemon=True).start()
        threading.Thread(target=self._server_to_client, daemon=True).start()

    def _client_to_server(self) -> None:
        try:
            self._forward_startup()
            while True:
                header = _read_exactly(self.client, 5)
                payload = _read_exactly(self.client, struct.unpack("!I", header[1:])[0] - 4)
                sql = _sql_of(header[:1], payload)
                self.wrote = self.wrote or sql.startswith(_WRITE_PREFIXES)
                fault = self._fault_for(sql)
                if fault == DROP_BEFORE:
                    self.proxy.count_lost()
                    break
                if fault == LOSE_ANSWER:
                    self.losing.set()
                self.server.sendall(header + payload)
        except OSError:
            pass
        self.close()

    def _fault_for(self, sql: bytes) -> str | None:
        """The armed fault when `sql` commits a transaction that wrote, or is a write outside a
        transaction block; ends the transaction."""
        if sql.startswith(_BEGIN_PREFIXES):
            self.in_block = True
        if sql.startswith(_WRITE_PREFIXES) and not self.in_block:
            return self.proxy.take_armed(AT_STATEMENT)
        if not sql.startswith(_END_PREFIXES):
            return None
        self.in_block = False
        wrote, self.wrote = self.wrote, False
        if wrote and sql.startswith(_COMMIT_PREFIXES):
            return self.proxy.take_armed(AT_COMMIT)
        return None

    def _forward_startup(self) -> None:
        while True:
            length = _read_exactly(self.client, 4)
            body = _read_exactly(self.client, struct.unpack("!I", length)[0] - 4)
            self.server.sendall(length + body)
            if struct.unpack("!I", body[:4])[0] not in _NEGOTIATION_CODES:
                return

    def _server_to_client(self) -> None:
        try:
            while True:
                data = self.server.recv(65536)
                if not data:
                    break
                if self.losing.is_set():
                    # The COMMIT reached the server and its answer is here: drop it and the
                    # client's connection, as a network fault right after the commit would.
                    self.proxy.count_lost()
                    break
                self.client.sendall(data)
        except OSError:
            pass
        self.close()

    def close(self) -> None:
        _drop(self.client)
        _drop(self.server)


class PostgresProxy:
    """Clients of `proxy.url_through(url)` reach `upstream` through it; see `postgres_proxy`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._armed: list[tuple[str, str]] = []
        self._lost = 0
        self._thread = threading.Thread(target=self._accept, name="pg-proxy", daemon=True)

    @property
    def port(self) -> int:
        port: int = self._listener.getsockname()[1]
        return port

    def url_through(self, url: str) -> str:
        """`url` with its host and port replaced by this proxy's, encryption negotiation off."""
        parsed = sa.make_url(url)
        routed = parsed.set(host="127.0.0.1", port=self.port).update_query_dict(
            {"sslmode": "disable", "gssencmode": "disable"}
        )
        return routed.render_as_string(hide_password=False)

    def lose_next_commit_answer(self) -> None:
        """The next COMMIT of a write is committed by the server and its answer lost."""
        with self._lock:
            self._armed.append((LOSE_ANSWER, AT_COMMIT))

    def lose_next_statement_answer(self) -> None:
        """The next write sent outside a transaction block (its own commit) is committed by the
        server and its answer lost."""
        with self._lock:
            self._armed.append((LOSE_ANSWER, AT_STATEMENT))

    def drop_next_commit(self) -> None:
        """The next COMMIT of a write never reaches the server: the connection drops first."""
        with self._lock:
            self._armed.append((DROP_BEFORE, AT_COMMIT))

    def take_armed(self, where: str) -> str | None:
        """The next armed fault, when it is armed for a commit point of this kind."""
        with self._lock:
            if not self._armed or self._armed[0][1] != where:
                return None
            return self._armed.pop(0)[0]

    def count_lost(self) -> None:
        with self._lock:
            self._lost += 1

    @property
    def lost(self) -> int:
        """How many COMMITs (or their answers) were lost so far."""
        with self._lock:
            return self._lost

    def start(self) -> None:
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                _Link(self, client).start()
            except OSError:
                _drop(client)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._thread.join(timeout=5)


@contextlib.contextmanager
def postgres_proxy(upstream: tuple[str, int]) -> Iterator[PostgresProxy]:
    """A running proxy to `upstream`; closed (listener and accept thread) at the end."""
    proxy = PostgresProxy(upstream)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.close()
