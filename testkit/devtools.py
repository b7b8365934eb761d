"""A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
NUL-terminated JSON messages, commands on fd 3, answers on fd 4), standard library only.

https://chromedevtools.github.io/devtools-protocol/ (Target.createTarget, attachToTarget with
`flatten`, Runtime.evaluate, Page.captureScreenshot); the pipe transport is the one Puppeteer
uses (`pipe: true`).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any


class DevToolsError(RuntimeError):
    """The browser answered a command with an error, or not at all."""


class Browser:
    """One headless Chromium; `open(url)` loads a page, `evaluate` runs JavaScript in it."""

    def __init__(self, executable: str, profile: Path, width: int = 1400, height: int = 1000):
        self._commands_read, self._commands_write = os.pipe()
        self._answers_read, self._answers_write = os.pipe()
        # The child reads commands on fd 3 and writes answers on fd 4.
        self._process = subprocess.Popen(  # noqa: S603 (a browser the test chose)
            [
                executable,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--hide-scrollbars",
                f"--window-size={width},{height}",
                f"--user-data-dir={profile}",
                "--remote-debugging-pipe",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=self._wire_fds,
        )
        os.close(self._commands_read)
        os.close(self._answers_write)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None

    def _wire_fds(self) -> None:
        os.dup2(self._commands_read, 3)
        os.dup2(self._answers_write, 4)

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        with contextlib.suppress(DevToolsError, OSError):
            self._send("Browser.close", {}, session=False)
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        for fd in (self._commands_write, self._answers_read):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise DevToolsError("no answer from the browser in time")
            chunk = os.read(self._answers_read, 65536)
            if not chunk:
                raise DevToolsError("the browser closed its DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def _send(
        self, method: str, params: dict[str, Any], *, session: bool = True, timeout: float = 60
    ) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session and self._session is not None:
            command["sessionId"] = self._session
        os.write(self._commands_write, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") != self._next_id:
                continue  # an event, or the answer to another session's command
            if "error" in message:
                raise DevToolsError(f"{method}: {message['error']}")
            result: dict[str, Any] = message.get("result", {})
            return result

    def open(self, url: str, timeout: float = 60) -> None:
        """Load `url` in a new tab and wait until its load event has fired."""
        target = self._send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = self._send(
            "Target.attachToTarget",
            {"targetId": target["targetId"], "flatten": True},
            session=False,
        )
        self._session = attached["sessionId"]
        self._send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout
        while self.evaluate("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise DevToolsError(f"{url} did not finish loading")
            time.sleep(0.05)

    def evaluate(self, expression: str) -> Any:
        """The JSON value of `expression` evaluated in the page."""
        answer = self._send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in answer:
            raise DevToolsError(f"the expression threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self, path: Path) -> None:
        """The whole page as PNG at `path`."""
        shot = self._send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )
        path.write_bytes(base64.b64decode(shot["data"]))

    def emulate_media(self, media: str) -> None:
        """Lay the page out for `media` ("print" or "screen"), as printing would."""
        self._send("Emulation.setEmulatedMedia", {"media": media})

    def print_pdf(self, path: Path) -> bytes:
        """The page printed as Chromium's print dialog would, at the page size its CSS `@page`
        asks for (A4 for the reports), without header or footer; written to `path`."""
        printed = self._send(
            "Page.printToPDF",
            {"preferCSSPageSize": True, "printBackground": True, "displayHeaderFooter": False},
        )
        data = base64.b64decode(printed["data"])
        path.write_bytes(data)
        return data
