"""The console script ends with `os._exit` after its atexit handlers and a flush, the normal
exit when a non-daemon thread is still alive: its exit codes, stdout and stderr are those of a
run that ends with the interpreter's own exit (`blob_safetynet.cli.main.console_main`)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from tests import tree

ROOT = tree.TREE
MODULE, ENTRY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "scripts"
]["safetynet"].split(":")
CONSOLE_SCRIPT = f"import sys\nfrom {MODULE} import {ENTRY}\nsys.exit({ENTRY}())\n"
"""What the installer's `safetynet` wrapper runs for the [project.scripts] entry."""
NORMAL_EXIT = "import sys\nfrom blob_safetynet.cli.main import main\nsys.exit(main())\n"
"""The same command ended by the interpreter's own exit, module teardown included."""
ACCOUNT = ROOT / "tests" / "policies" / "data" / "az-storage-account-show.json"


def environment(buffered: bool = True) -> dict[str, str]:
    env = tree.environment({k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")})
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def run(script: str, *args: str, buffered: bool = True) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        cwd=ROOT,
        env=environment(buffered),
        timeout=120,
        check=False,
    )


def accounts(folder: Path, count: int) -> list[str]:
    """`count` saved `az storage account show` outputs, each of its own account."""
    text = ACCOUNT.read_text(encoding="utf-8")
    paths = []
    for index in range(count):
        path = folder / f"account-{index}.json"
        path.write_text(text.replace("acctcli", f"acct{index:03d}"), encoding="utf-8")
        paths.append(str(path))
    return paths


GENERATED = re.compile(rb'"generated": "[^"]*"')


def untimed(report: bytes) -> bytes:
    """A JSON report with its one run-time field, the generation time, blanked."""
    return GENERATED.sub(b'"generated": ""', report, count=1)


def test_a_large_piped_output_is_complete_and_identical_to_a_normal_exits(tmp_path: Path) -> None:
    """Some 200 KB of JSON through a pipe, block-buffered: every byte arrives, and stdout,
    stderr and the exit code (1, findings) equal those of a run with the normal exit (the
    report's generation time aside: the two runs may fall in different seconds)."""
    args = ("audit", "--format", "json", "--from-file", *accounts(tmp_path, 12))
    fast, normal = run(CONSOLE_SCRIPT, *args), run(NORMAL_EXIT, *args)

    assert len(fast.stdout) > 128 * 1024
    assert json.loads(fast.stdout)
    assert (fast.returncode, untimed(fast.stdout), fast.stderr) == (
        normal.returncode,
        untimed(normal.stdout),
        normal.stderr,
    )
    assert fast.returncode == 1


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (("--version",), 0),
        (("sweep", "--help"), 0),
        (("sweep", "--bogus"), 2),
        (("sweep", "--bogus", "--json"), 2),
        (("sweep", "--container", "c", "--connection-string", "UseDevelopmentStorage=true"), 2),
        (("-q", "-v", "history", "--container", "c"), 2),
    ],
)
def test_exit_codes_and_output_are_the_normal_exits(args: tuple[str, ...], code: int) -> None:
    fast, normal = run(CONSOLE_SCRIPT, *args), run(NORMAL_EXIT, *args)

    assert (fast.returncode, fast.stdout, fast.stderr) == (
        normal.returncode,
        normal.stdout,
        normal.stderr,
    )
    assert fast.returncode == code
    assert b"Traceback" not in fast.stderr


PATCHED_MAIN = """
import atexit, sys, threading, time
from pathlib import Path
from blob_safetynet.cli import main as cli

marks, mode = Path(sys.argv[1]), sys.argv[2]
command = cli.main

class Teardown:
    def __del__(self):
        marks.joinpath("torn-down").write_text("yes")

def late_write():
    time.sleep(0.5)
    marks.joinpath("thread").write_text("done")

def main(argv=None):
    atexit.register(print, "printed at exit")
    atexit.register(marks.joinpath("atexit").write_text, "ran")
    code = command(["sweep", "--bogus"])
    if mode == "thread":
        threading.Thread(target=late_write).start()
    cli.teardown = Teardown()
    return code

cli.main = main
sys.argv[1:] = []
cli.console_main()
"""
"""The console entry with `main` wrapped: it registers atexit handlers (one prints, block-
buffered, after `main` flushed), may leave a non-daemon thread working, and leaves an object whose finalizer runs only at module teardown."""


def test_an_atexit_handler_runs_and_the_modules_are_not_torn_down(tmp_path: Path) -> None:
    done = run(PATCHED_MAIN, str(tmp_path), "no thread")

    assert done.returncode == 2, done.stderr
    assert (tmp_path / "atexit").read_text() == "ran"
    assert done.stdout == b"printed at exit\n"
    assert not (tmp_path / "torn-down").exists()


def test_a_non_daemon_thread_left_alive_takes_the_normal_exit(tmp_path: Path) -> None:
    done = run(PATCHED_MAIN, str(tmp_path), "thread")

    assert done.returncode == 2, done.stderr
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", [("--version",), ("sweep", "--bogus", "--json")])
def test_a_closed_stdout_is_one_line_and_exit_5(args: tuple[str, ...], buffered: bool) -> None:
    """The reader of stdout went away: whether the write or the last flush meets it, the run
    ends as a write failing mid-run does, one line on stderr and exit 5, no traceback."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, "-c", CONSOLE_SCRIPT, *args],
            stdout=write,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=environment(buffered),
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)

    line = b"safetynet: internal error, please report it: BrokenPipeError: [Errno 32] Broken pipe\n"
    assert done.returncode == 5
    assert done.stderr.endswith(line)
    assert done.stderr.count(b"safetynet: internal error") == 1
    assert b"Traceback" not in done.stderr
    assert b"Exception ignored" not in done.stderr


BROKEN_PIPE = (
    b"safetynet: internal error, please report it: BrokenPipeError: [Errno 32] Broken pipe\n"
)


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
def test_a_reader_that_leaves_a_large_output_early_is_one_line_and_exit_5(
    tmp_path: Path, buffered: bool
) -> None:
    """Some 200 KB of JSON into a pipe whose reader takes one line and closes it (`| head -1`):
    exit 5 and the one line, also unbuffered, where the interpreter drops the unwritten rest of
    a partial write without an error (never the command's own exit 1)."""
    args = ("audit", "--format", "json", "--from-file", *accounts(tmp_path, 12))
    process = subprocess.Popen(
        [sys.executable, "-c", CONSOLE_SCRIPT, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=environment(buffered),
    )
    assert process.stdout is not None
    assert process.stdout.readline() == b"{\n"
    process.stdout.close()
    _, err = process.communicate(timeout=120)

    assert process.returncode == 5, err
    assert err.endswith(BROKEN_PIPE)
    assert err.count(b"safetynet: internal error") == 1
    assert b"Traceback" not in err


@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize("args", [("--version",), ("sweep", "--bogus", "--json")])
def test_a_stdout_closed_at_the_start_is_one_line_and_exit_5(
    args: tuple[str, ...], buffered: bool
) -> None:
    """Started with descriptor 1 closed (`>&-`, Python's sys.stdout is None): the first write
    ends the run with one line on stderr and exit 5, not a traceback and exit 120."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", sys.executable, "-c", CONSOLE_SCRIPT, *args],
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=environment(buffered),
        timeout=120,
        check=False,
    )

    line = b"safetynet: internal error, please report it: OSError: [Errno 9] standard output is closed\n"
    assert done.returncode == 5, done.stderr
    assert done.stderr.endswith(line)
    assert done.stderr.count(b"safetynet: internal error") == 1
    assert b"Traceback" not in done.stderr


def test_a_stderr_closed_at_the_start_keeps_the_commands_code() -> None:
    """Started with descriptor 2 closed (`2>&-`): what stderr would say is dropped and the run
    ends with the command's own code (2 for a bad option)."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" 2>&-', "sh", sys.executable, "-c", CONSOLE_SCRIPT, "sweep", "-x"],
        capture_output=True,
        cwd=ROOT,
        env=environment(),
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, b"")


LATE_SIGNAL = """
import atexit, sys, threading, time
from pathlib import Path
from blob_safetynet.cli import main as cli

marks, mode = Path(sys.argv[1]), sys.argv[2]
command = cli.main

def slow_exit_handler():
    marks.joinpath("waiting").write_text("atexit")
    time.sleep(60)

def slow_thread():
    while threading.main_thread().is_alive():
        time.sleep(0.01)
    marks.joinpath("waiting").write_text("thread")
    time.sleep(60)

def main(argv=None):
    code = command(["sweep", "--bogus"])
    if mode == "atexit":
        atexit.register(slow_exit_handler)
    else:
        threading.Thread(target=slow_thread).start()
    return code

cli.main = main
sys.argv[1:] = []
cli.console_main()
"""
"""The console entry with `main` wrapped: once the command has returned, an atexit handler or
the normal exit's wait for a non-daemon thread takes a minute, and writes `waiting` first."""


@pytest.mark.parametrize("mode", ["atexit", "thread"])
@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_after_main_returned_exits_128_plus_its_number_with_one_line(
    tmp_path: Path, mode: str, sent: signal.Signals
) -> None:
    """A signal during the atexit handlers, or while the exit waits for a thread, ends the run
    at once with `safetynet: stopped by SIG...` and 130 or 143: no traceback, no raw -15."""
    process = subprocess.Popen(
        [sys.executable, "-c", LATE_SIGNAL, str(tmp_path), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=environment(),
    )
    deadline = time.monotonic() + 60
    while not (tmp_path / "waiting").exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the exit never started waiting"
        time.sleep(0.01)
    process.send_signal(sent)
    _, err = process.communicate(timeout=30)

    assert process.returncode == 128 + sent, err
    assert err.endswith(f"safetynet: stopped by {sent.name}\n".encode())
    assert err.count(b"stopped by") == 1
    assert b"Traceback" not in err
    assert b"Exception ignored" not in err
