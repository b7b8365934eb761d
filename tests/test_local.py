"""`safetynet local` run as a real process: it serves, prints how to reach it, stops cleanly."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient

from blob_safetynet.embedded.azurite import DEV_KEY, dev_connection_string
from tests import tree

pytestmark = pytest.mark.e2e  # `safetynet local` as a real process

SAFETYNET = tree.CONSOLE_SCRIPT
START_TIMEOUT_S = 60


@contextmanager
def local(*options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`safetynet local` started with `options`: the process and its first stdout line."""
    process = subprocess.Popen(
        [str(SAFETYNET), "local", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=tree.environment(),
    )
    try:
        assert process.stdout is not None
        yield process, process.stdout.readline()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=START_TIMEOUT_S)


def serves(info: dict[str, Any]) -> bool:
    """A container made, listed and deleted through the printed endpoint."""
    service = BlobServiceClient.from_connection_string(dev_connection_string(info["port"]))
    name = f"local{uuid.uuid4().hex[:8]}"
    service.create_container(name)
    listed = [c.name for c in service.list_containers()]
    service.delete_container(name)
    return name in listed and service.url.rstrip("/") == info["account_url"]


def pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_local_serves_until_stopped_then_exits_0_and_stops_azurite(stop: signal.Signals) -> None:
    """--json prints the endpoint; the emulator answers there; Ctrl-C or SIGTERM ends both, 0."""
    with local("--port", "0", "--json") as (process, line):
        info = json.loads(line)
        assert info["account_name"] == "devstoreaccount1"
        assert serves(info)
        process.send_signal(stop)
        _, err = process.communicate(timeout=START_TIMEOUT_S)
        assert process.returncode == 0
        assert "Traceback" not in err
        assert not pid_alive(info["pid"])


@contextmanager
def text_output(*options: str) -> Iterator[str]:
    """What `safetynet local` prints up to its "running..." line, while it runs."""
    with local(*options) as (process, line):
        rest = [line]
        assert process.stdout is not None
        while "running..." not in rest[-1] and rest[-1]:
            rest.append(process.stdout.readline())
        yield "".join(rest)
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=START_TIMEOUT_S)
    assert process.returncode == 0


def works(connection_string: str) -> bool:
    """A container made, listed and deleted through `connection_string`."""
    service = BlobServiceClient.from_connection_string(connection_string)
    name = f"local{uuid.uuid4().hex[:8]}"
    service.create_container(name)
    listed = [c.name for c in service.list_containers()]
    service.delete_container(name)
    return name in listed


def test_the_text_output_says_where_it_listens_and_how_to_stop_it() -> None:
    """Without --json: the account URL, a connection string that works on this port, the
    published key in full, how to stop."""
    with text_output("--port", "0") as text:
        [connection] = re.findall(r"^connection string: (\S+)$", text, re.MULTILINE)
        assert works(connection)
    assert "http://127.0.0.1:" in text
    assert connection.startswith("DefaultEndpointsProtocol=http;AccountName=devstoreaccount1")
    assert f"key {DEV_KEY}" in text
    assert "<key>" not in text
    assert "***" not in text
    assert "Ctrl-C" in text


def test_json_gives_a_working_connection_string_on_any_port() -> None:
    """--port 0 --json: `connection_string` works as printed and `account_key` is the key."""
    with local("--port", "0", "--json") as (process, line):
        info = json.loads(line)
        assert works(info["connection_string"])
        process.send_signal(signal.SIGINT)
    assert info["account_key"] == DEV_KEY
    assert info["connection_string_shortcut"] is None
    assert f":{info['port']}/" in info["connection_string"]


def test_a_port_in_use_is_refused_with_exit_2() -> None:
    """A busy port is a usage error naming the port and the way out, before Azurite starts."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        with local("--port", str(port), "--json") as (process, line):
            process.wait(timeout=START_TIMEOUT_S)
    assert process.returncode == 2
    assert json.loads(line)["error"]["message"].startswith(f"port {port} on 127.0.0.1 is in use")


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--port", "70000"], "is not a port"), (["--location", "/nonexistent/x"], "not a folder")],
)
def test_bad_options_exit_2_with_a_message(options: list[str], message: str) -> None:
    """Out-of-range ports and missing folders are refused, not passed on to Azurite."""
    result = subprocess.run(
        [str(SAFETYNET), "local", *options],
        capture_output=True,
        text=True,
        check=False,
        env=tree.environment(),
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
