"""The console script ends with `os._exit` after its atexit handlers and a flush, the normal
exit when a non-daemon thread is still alive: its exit codes, stdout and stderr are those of a
run that ends with the interpreter's own exit (`blob_safetynet.cli.main.console_main`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODULE, ENTRY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "scripts"
]["safetynet"].split(":")
CONSOLE_SCRIPT = f"import sys\nfrom {MODULE} import {ENTRY}\nsys.exit({ENTRY}())\n"
"""What the installer's `safetynet` wrapper runs for the [project.scripts] entry."""
NORMAL_EXIT = "import sys\nfrom blob_safetynet.cli.main import main\nsys.exit(main())\n"
"""The same command ended by the interpreter's own exit, module teardown included."""
ACCOUNT = ROOT / "tests" / "policies" / "data" / "az-storage-account-show.json"


def environment(buffered: bool = True) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAFETYNET_")}
    env["PYTHONPATH"] = str(ROOT)
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


def test_a_large_piped_output_is_complete_and_identical_to_a_normal_exits(tmp_path: Path) -> None:
    """Some 200 KB of JSON through a pipe, block-buffered: every byte arrives, and stdout,
    stderr and the exit code (1, findings) equal those of a run with the normal exit."""
    args = ("audit", "--format", "json", "--from-file", *accounts(tmp_path, 12))
    fast, normal = run(CONSOLE_SCRIPT, *args), run(NORMAL_EXIT, *args)

    assert len(fast.stdout) > 128 * 1024
    assert json.loads(fast.stdout)
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        normal.returncode,
        normal.stdout,
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
