"""One escaping of untrusted text for every CI agent, on every line a CI step prints.

The GitHub runner and the Azure Pipelines agent read each line of a step's standard output and
standard error for commands, and lines come from .NET's `ReadLine` ("a carriage return, a line
feed, a carriage return followed by a line feed" ends one:
https://learn.microsoft.com/dotnet/api/system.io.textreader.readline):

- Azure Pipelines acts on `##vso[` anywhere in a line (`Command.TryParse`:
  `message.IndexOf("##vso[")`, https://github.com/microsoft/azure-pipelines-agent/blob/master/src/Microsoft.VisualStudio.Services.Agent/Command.cs),
  on stdout and stderr alike (`StepHost.OutputDataReceived += OnDataReceived;
  StepHost.ErrorDataReceived += OnDataReceived;` in the handlers), so a line holding
  `##vso[task.setvariable variable=SAFETYNET_EXIT_CODE;isreadonly=true]0` pins the variable the
  template's gate reads (https://learn.microsoft.com/azure/devops/pipelines/scripts/logging-commands).
  Its `##[group]`, `##[error]`... formatting commands are drawn by the log viewer.
- GitHub acts on a line that starts with `::` once leading white space is trimmed
  (`ActionCommand.TryParseV2`: `message.TrimStart()`, `StartsWith("::")`) and on the older
  `##[` anywhere in a line (`ActionCommand.TryParse`: `message.IndexOf("##[")`,
  https://github.com/actions/runner/blob/main/src/Runner.Common/ActionCommand.cs); GitHub's own
  advice for untrusted output is to stop command processing around it ("Stopping and starting
  workflow commands",
  https://docs.github.com/en/actions/reference/workflows-and-actions/workflow-commands#stopping-and-starting-workflow-commands).

`neutralise` rewrites what would open a command, whichever agent reads the line: `##vso[`
(any case) and `##[` become `**vso[` and `**[` (the Azure agent's own rewrite of `##vso` when it
runs a step with worker commands disabled: `Regex.Replace(line, "##vso", "**vso",
RegexOptions.IgnoreCase)`, https://github.com/microsoft/azure-pipelines-agent/blob/master/src/Agent.Sdk/ProcessInvoker.cs),
and a line whose first characters after any white space, control or format character are `::`
gets them as `**`. `AgentOutput` applies it to every byte the step's process and its children
write to file descriptors 1 and 2; only the step's own command lines bypass it.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import unicodedata
from types import TracebackType
from typing import Final

LINE_BREAK: Final = re.compile(r"(\r\n|\r|\n)")
"""What ends a line for .NET's `TextReader.ReadLine` (CR, LF, CRLF), which both agents read with."""
_OPENERS: Final = re.compile(r"##(?=(?:vso)?\[)", re.IGNORECASE | re.ASCII)
LONGEST_LINE: Final = 1 << 16
"""Bytes held while waiting for a line's end; a longer line is ended there (it is then two
lines for the agent too, each neutralised)."""
_JOIN_SECONDS: Final = 5.0
"""How long the end of the step waits for a child that kept the output open."""


def _blank(char: str) -> bool:
    """Skipped before a line's `::`: what .NET's `TrimStart` removes (white space), and, to be
    safe, control and format characters too."""
    return char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zs", "Zl", "Zp")


def _neutralise_line(line: str) -> str:
    line = _OPENERS.sub("**", line)
    start = 0
    while start < len(line) and _blank(line[start]):
        start += 1
    if line.startswith("::", start):
        line = line[:start] + "**" + line[start + 2 :]
    return line


def neutralise(text: str) -> str:
    """`text` with no line that a CI agent would read as a command (see the module's note);
    line breaks are kept as they are."""
    pieces = LINE_BREAK.split(text)
    return "".join(p if i % 2 else _neutralise_line(p) for i, p in enumerate(pieces))


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


class AgentOutput:
    """While entered, file descriptors 1 and 2 are pipes whose text reaches the agent's stdout
    and stderr line by line through `neutralise`; `command` writes one of the step's own
    command lines to the agent's stdout as it is."""

    def __init__(self) -> None:
        self._agent: dict[int, int] = {}
        self._pumps: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._failed: set[int] = set()

    def __enter__(self) -> AgentOutput:
        sys.stdout.flush()
        sys.stderr.flush()
        for stream in (1, 2):
            self._agent[stream] = os.dup(stream)
            read, write = os.pipe()
            os.dup2(write, stream)
            os.close(write)
            pump = threading.Thread(target=self._pump, args=(read, stream), daemon=True)
            pump.start()
            self._pumps.append(pump)
        return self

    def command(self, line: str) -> None:
        """One command line of the step's own, to the agent's stdout."""
        self._send(1, (line + "\n").encode("utf-8"))

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        for descriptor, agent in self._agent.items():
            os.dup2(agent, descriptor)
        for pump in self._pumps:
            pump.join(_JOIN_SECONDS)
        for agent in self._agent.values():
            os.close(agent)

    def _send(self, stream: int, data: bytes) -> None:
        with self._lock:
            if stream in self._failed:
                return
            try:
                _write_all(self._agent[stream], data)
            except OSError:
                self._failed.add(stream)

    def _pump(self, read: int, stream: int) -> None:
        pending = b""
        try:
            while chunk := os.read(read, 1 << 16):
                pending += chunk
                end = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
                if not end and len(pending) >= LONGEST_LINE:
                    pending, end = pending + b"\n", len(pending) + 1
                if end:
                    self._send(stream, _neutral_bytes(pending[:end]))
                    pending = pending[end:]
            if pending:
                self._send(stream, _neutral_bytes(pending))
        finally:
            os.close(read)


def _neutral_bytes(data: bytes) -> bytes:
    """`neutralise` on bytes, every byte that is not UTF-8 kept as it was."""
    return neutralise(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
