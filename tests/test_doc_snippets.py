"""Every ```python and ```sh block of docs/quickstart.md, docs/protocol.md and docs/adopt.md runs
as written.

Blocks run in page order, like a reader following the page: `sh` blocks in bash (what they
export is seen by the blocks after them), `python` blocks in one namespace (a block continues
the ones before it), all in a fresh folder with the venv's `safetynet` first on PATH. A block
preceded by `<!-- snippet: background -->` is started and left running until the page is done
(then stopped with Ctrl-C, which must exit 0); `<!-- snippet: repository -->` runs in the
clone. The quickstart runs on `safetynet local` at Azurite's default port, as the page says.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.settings.vocabulary import COMMITTED, STATE_TAG
from tests import tree

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
VENV_BIN = Path(sys.executable).parent
BLOCK = re.compile(
    r"(?:^<!-- snippet: (?P<mode>[a-z]+) -->\n)?^```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.MULTILINE | re.DOTALL,
)
RUN = ("python", "sh")
MODES = ("repository", "background")
LOCAL_PORT = 10000
PORT_LOCK = Path("/tmp/safetynet-local-10000.lock")  # noqa: S108 - shared by every checkout
START_TIMEOUT_S = 60


@dataclass(frozen=True)
class Snippet:
    lang: str
    body: str
    mode: str | None
    line: int


def snippets(page: Path) -> list[Snippet]:
    """The page's fenced blocks that are run, with their mode and line number."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in BLOCK.finditer(text):
        if match["lang"] in RUN:
            line = text.count("\n", 0, match.start("body"))
            found.append(Snippet(match["lang"], match["body"], match["mode"], line))
    return found


class Reader:
    """Runs a page's blocks in order in `folder`, carrying exports and Python names along."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.env = tree.environment({**env, "PATH": f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"})
        self.namespace: dict[str, object] = {"__name__": "__snippet__"}
        self.background: list[subprocess.Popen[str]] = []

    def run(self, snippet: Snippet, where: str) -> None:
        if snippet.mode == "background":
            self._start(snippet)
        elif snippet.lang == "sh":
            self._shell(snippet, where)
        else:
            self._python(snippet, where)

    def _shell(self, snippet: Snippet, where: str) -> None:
        cwd = ROOT if snippet.mode == "repository" else self.folder
        exported = self.folder / ".exported"
        script = f"set -euo pipefail\n{snippet.body}\nenv -0 > {exported}\n"
        result = subprocess.run(
            ["bash", "-c", script], cwd=cwd, env=self.env, capture_output=True, text=True
        )
        assert result.returncode == 0, f"{where}: exit {result.returncode}\n{result.stderr}"
        assert "Traceback" not in result.stderr, f"{where}:\n{result.stderr}"
        pairs = exported.read_text().split("\0")
        self.env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)

    def _python(self, snippet: Snippet, where: str) -> None:
        saved_env, saved_cwd = dict(os.environ), Path.cwd()
        os.environ.clear()
        os.environ.update(self.env)
        os.chdir(self.folder)
        try:
            exec(compile(snippet.body, where, "exec"), self.namespace)  # noqa: S102
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)

    def _start(self, snippet: Snippet) -> None:
        process = subprocess.Popen(
            ["bash", "-c", snippet.body],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.background.append(process)
        wait_for_port(LOCAL_PORT, process)

    def stop(self) -> list[tuple[int, str, str]]:
        """Ctrl-C to every background block: each one's exit code, stdout and stderr."""
        outcomes = []
        for process in self.background:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
            out, err = process.communicate(timeout=START_TIMEOUT_S)
            outcomes.append((process.returncode, out, err))
        return outcomes


def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"background block exited {process.returncode}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {START_TIMEOUT_S}s")


@contextmanager
def default_port() -> Iterator[None]:
    """Port 10000 held for this test only, waiting for other checkouts running the same test."""
    with PORT_LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with socket.socket() as probe:
            busy = probe.connect_ex(("127.0.0.1", LOCAL_PORT)) == 0
        assert not busy, f"127.0.0.1:{LOCAL_PORT} is in use; the quickstart needs it free"
        yield


def read_page(page: Path, reader: Reader) -> list[str]:
    """Run the page's blocks; the stdout of each background block once it is stopped."""
    try:
        for snippet in snippets(page):
            reader.run(snippet, f"{page.name}:{snippet.line}")
    finally:
        stopped = reader.stop()
    for code, _, err in stopped:
        assert code == 0, err
        assert "Traceback" not in err
    return [out for _, out, _ in stopped]


@pytest.mark.parametrize("page", ["quickstart.md", "protocol.md", "adopt.md"])
def test_every_run_block_has_a_known_language_mode(page: str) -> None:
    """A mode comment other than the known ones would silently change how a block runs."""
    text = (DOCS / page).read_text(encoding="utf-8")
    assert set(re.findall(r"<!-- snippet: ([a-z]+) -->", text)) <= set(MODES)
    assert len(snippets(DOCS / page)) == text.count("```python") + text.count("```sh")


@pytest.mark.e2e
def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    """Local stack, db init, container, put/read/replace/delete, sweep and reconcile: all exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    reader = Reader(tmp_path, env)
    with default_port():
        [local_output] = read_page(DOCS / "quickstart.md", reader)
    assert "connection string: UseDevelopmentStorage=true" in local_output
    assert reader.namespace["store"] is not None
    assert (tmp_path / "quickstart.db").is_file()


@pytest.mark.e2e
def test_the_protocol_page_runs_as_written(tmp_path: Path, azurite: Azurite) -> None:
    """After the quickstart's steps 1 and 2 (table and container made), its blocks all run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    env["SAFETYNET_CONNECTION_STRING"] = azurite.connection_string
    env["SAFETYNET_DB_URL"] = f"sqlite:///{tmp_path / 'documents.db'}"
    env["SAFETYNET_CONTAINER"] = f"snippets{uuid.uuid4().hex[:12]}"
    reader = Reader(tmp_path, env)
    prepare = Snippet("sh", "safetynet db init\n", None, 0)
    reader.run(prepare, "preparation")
    reader.run(
        Snippet(
            "python",
            "import os\nfrom blob_safetynet.protocol.clients import blob_service_client\n"
            "blob_service_client(connection_string=os.environ['SAFETYNET_CONNECTION_STRING'])"
            ".create_container(os.environ['SAFETYNET_CONTAINER'])\n",
            None,
            0,
        ),
        "preparation",
    )
    read_page(DOCS / "protocol.md", reader)


def test_the_adopt_walk_through_runs_as_written(tmp_path: Path, azurite: Azurite) -> None:
    """An application's own table and untagged blobs: the page's schema changes, db upgrade,
    adopt (dry run, apply), reconcile and the Python put all succeed, the three blobs end
    tagged committed, and the application's own column is what the page says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    env["SAFETYNET_CONNECTION_STRING"] = azurite.connection_string
    reader = Reader(tmp_path, env)
    try:
        read_page(DOCS / "adopt.md", reader)
        container = reader.namespace["container"]
        assert isinstance(container, ContainerClient)
        tags = {b.name: dict(b.tags or {}) for b in container.list_blobs(include=["tags"])}
        assert {name: t.get(STATE_TAG) for name, t in tags.items() if name.startswith("pdf/")} == {
            f"pdf/0{n}.pdf": COMMITTED for n in (1, 2, 3)
        }
        with sqlite3.connect(tmp_path / "invoices.db") as db:
            rows = db.execute("SELECT file_name, status, amount_cents FROM invoices").fetchall()
        assert sorted(rows) == [
            ("2026/01.pdf", "Ready", 1000),
            ("2026/02.pdf", "Ready", 2000),
            ("2026/03.pdf", "Ready", 3000),
            ("2026/04.pdf", "Ready", 4000),
        ]
    finally:
        BlobServiceClient.from_connection_string(azurite.connection_string).delete_container(
            "invoices"
        )
