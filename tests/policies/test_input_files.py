"""Every file `audit` reads goes through one reader (untrusted.read_input): a FIFO, a
directory or a device is refused before a byte is read, `-` is standard input (bounded, at
most one option per run), and a suppression may expire at most a horizon ahead."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import threading
import time
from pathlib import Path

import pytest

from blob_safetynet.policies.sources.files import MAX_FILE_BYTES
from testkit.arm_fake import compliant_account
from tests.conftest import RunCli

OPTIONS = ("--from-file", "--suppressions", "--baseline", "--history")


def saved_account(tmp_path: Path, *, shared_key: bool = False) -> Path:
    account = compliant_account("acctfiles")
    account.body["properties"]["allowSharedKeyAccess"] = shared_key
    path = tmp_path / "account.json"
    path.write_text(json.dumps(account.body), encoding="utf-8")
    return path


def argv_for(option: str, value: str, tmp_path: Path) -> list[str]:
    """An audit command line whose `option` is `value` (with a saved account when the
    option is not --from-file itself)."""
    base = [] if option == "--from-file" else ["--from-file", str(saved_account(tmp_path))]
    return ["audit", *base, option, value]


def stdin_of(monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("option", OPTIONS)
def test_a_fifo_is_refused_at_once(tmp_path: Path, run_cli: RunCli, option: str) -> None:
    """A FIFO nobody writes exits 2 in well under a second, saying it is no regular file."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    started = time.monotonic()
    result: list[tuple[int, str, str]] = []
    worker = threading.Thread(
        target=lambda: result.append(run_cli(*argv_for(option, str(fifo), tmp_path)))
    )
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the reader so the test run can end
        with open(fifo, "wb"):
            pass
        worker.join()
        pytest.fail(f"{option} on a FIFO blocked")
    code, _, err = result[0]
    assert (code, "not a regular file (a FIFO)" in err) == (2, True)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(("path", "kind"), [("/dev/zero", "character device"), (".", "directory")])
@pytest.mark.parametrize("option", OPTIONS)
def test_a_device_or_directory_is_refused(
    tmp_path: Path, run_cli: RunCli, option: str, path: str, kind: str
) -> None:
    """/dev/zero and a directory exit 2 with what they are, none read."""
    code, _, err = run_cli(*argv_for(option, path, tmp_path))
    assert code == 2
    assert f"not a regular file (a {kind})" in err


def test_from_file_dash_reads_standard_input(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--from-file -` judges the JSON on standard input: a shared-key account fails."""
    stdin_of(monkeypatch, saved_account(tmp_path, shared_key=True).read_bytes())
    code, out, _ = run_cli("audit", "--from-file", "-", "--format", "json")
    assert code == 1
    findings = json.loads(out)["findings"]
    assert {f["rule"] for f in findings if f["outcome"] == "FAIL"} == {"SN-SHARED-KEY-OFF"}


def test_standard_input_is_bounded(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More than MAX_FILE_BYTES on standard input exits 2 with the bound."""
    stdin_of(monkeypatch, b" " * (MAX_FILE_BYTES + 10))
    code, _, err = run_cli("audit", "--from-file", "-")
    assert code == 2
    assert f"larger than {MAX_FILE_BYTES} bytes" in err


def test_suppressions_dash_reads_standard_input(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--suppressions -` reads the suppressions from standard input."""
    entry = {
        "rule": "SN-SHARED-KEY-OFF",
        "resource": "acctfiles",
        "justification": "legacy client, ticket OPS-12",
        "expires": dt.date.today().isoformat(),
    }
    stdin_of(monkeypatch, json.dumps({"suppressions": [entry]}).encode())
    saved = saved_account(tmp_path, shared_key=True)
    code, out, _ = run_cli(
        "audit", "--from-file", str(saved), "--suppressions", "-", "--format", "json"
    )
    assert code == 3  # the blob service, policy and containers are not in the file
    assert suppressed(out) == {"SN-SHARED-KEY-OFF"}


@pytest.mark.parametrize(
    "argv",
    [["--from-file", "-", "--suppressions", "-"], ["--from-file", "-", "-"]],
    ids=["two-options", "one-option-twice"],
)
def test_standard_input_is_read_by_one_option_only(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    """Two readers of standard input exit 2, naming them, before anything is read."""
    stdin_of(monkeypatch, b"")
    code, _, err = run_cli("audit", *argv)
    assert code == 2
    assert "standard input (-) can be read once" in err


def suppressed(report: str) -> set[str]:
    """The rules a JSON report shows as suppressed FAILs."""
    return {f["rule"] for f in json.loads(report)["findings"] if f.get("suppression")}


def suppressions_file(tmp_path: Path, expires: str) -> Path:
    entry = {
        "rule": "SN-SHARED-KEY-OFF",
        "resource": "acctfiles",
        "justification": "legacy client, ticket OPS-12",
        "expires": expires,
    }
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"suppressions": [entry]}), encoding="utf-8")
    return path


def test_an_expiry_in_9999_is_refused_with_the_reason(tmp_path: Path, run_cli: RunCli) -> None:
    """A suppression expiring in 9999 exits 2: more than a year ahead, with the latest date."""
    saved = saved_account(tmp_path, shared_key=True)
    accepted = suppressions_file(tmp_path, "9999-12-31")
    code, _, err = run_cli("audit", "--from-file", str(saved), "--suppressions", str(accepted))
    latest = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=365)
    assert code == 2
    assert f"more than 365 days ahead (at most {latest})" in err


def test_the_horizon_is_configurable(tmp_path: Path, run_cli: RunCli) -> None:
    """An expiry two years ahead passes with --suppression-horizon-days 800, not without."""
    saved = saved_account(tmp_path, shared_key=True)
    expires = (dt.datetime.now(dt.UTC).date() + dt.timedelta(days=730)).isoformat()
    argv = [
        "audit",
        "--from-file",
        str(saved),
        "--suppressions",
        str(suppressions_file(tmp_path, expires)),
    ]
    assert run_cli(*argv)[0] == 2
    code, out, _ = run_cli(*argv, "--suppression-horizon-days", "800", "--format", "json")
    assert code == 3  # the blob service, policy and containers are not in the file
    assert suppressed(out) == {"SN-SHARED-KEY-OFF"}


@pytest.mark.parametrize("days", ["0", "4000"])
def test_a_horizon_out_of_range_is_bad_usage(tmp_path: Path, run_cli: RunCli, days: str) -> None:
    """A horizon under one day or over ten years exits 2 with the range."""
    saved = saved_account(tmp_path)
    accepted = suppressions_file(tmp_path, dt.date.today().isoformat())
    code, _, err = run_cli(
        "audit", "--from-file", str(saved), "--suppressions", str(accepted),
        "--suppression-horizon-days", days,
    )  # fmt: skip
    assert code == 2
    assert "--suppression-horizon-days must be between 1 and" in err
