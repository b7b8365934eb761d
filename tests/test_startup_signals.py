"""Issue 29: SIGINT and SIGTERM while the real `safetynet` console script imports its modules end
the run with 130 or 143 and one line, never a traceback or a raw -15.

A start-up hook (the test's, never shipped; imported by tests/tree_guard's `sitecustomize`) slows
each import of the project, SQLAlchemy and the Azure SDK by a millisecond and writes the module's
name to a file as its import begins; the test sends the signal when a chosen module starts
loading, a random few milliseconds later. The console script runs this tree (tests/tree.py).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import tree

SAFETYNET = tree.CONSOLE_SCRIPT
HOOK = '''
import os, sys, time

class _SlowImports:
    """Each watched import: its name written to the marks file, then a short sleep."""

    def find_spec(self, name, path=None, target=None):
        if name.startswith(("blob_safetynet", "sqlalchemy", "azure")):
            with open(os.environ["STARTUP_TEST_MARKS"], "a") as marks:
                marks.write(name + "\\n")
            time.sleep(0.001)
        return None

sys.meta_path.insert(0, _SlowImports())
'''
MOMENTS = {
    "the first import main makes": "blob_safetynet.cli.commands.common",
    "the command's module": "blob_safetynet.cli.commands.{command}",
    "SQLAlchemy": "sqlalchemy.engine",
    "the Blob SDK": "azure.storage.blob",
}
"""Where in start-up the signal lands: when this module's import begins."""
COMMANDS = ("sweep", "reconcile", "adopt")


def started(marks: Path, module: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if marks.exists() and module in marks.read_text(encoding="utf-8").split():
            return
        assert process.poll() is None, f"exited before importing {module}: {process.stderr}"
        time.sleep(0.001)
    raise AssertionError(f"{module} was never imported")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_during_start_up_exits_128_plus_its_number_with_one_line(
    tmp_path: Path, command: str, sent: signal.Signals
) -> None:
    """At each moment of the imports, the console script exits 130 (SIGINT) or 143 (SIGTERM)
    and says `safetynet: stopped by SIG...` on one line, with no traceback."""
    rng = random.Random(f"{command}-{sent.name}")
    (tmp_path / "slow_imports.py").write_text(HOOK, encoding="utf-8")
    env = tree.environment(
        {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")},
        path=[tmp_path],
        hooks=["slow_imports"],
    )
    for moment, module in MOMENTS.items():
        marks = tmp_path / f"marks-{moment}"
        env["STARTUP_TEST_MARKS"] = str(marks)
        process = subprocess.Popen(
            [str(SAFETYNET), command, "--help"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        started(marks, module.format(command=command), process)
        time.sleep(rng.uniform(0, 0.005))
        process.send_signal(sent)
        _, err = process.communicate(timeout=60)

        assert (process.returncode, err) == (128 + sent, f"safetynet: stopped by {sent.name}\n"), (
            moment
        )
