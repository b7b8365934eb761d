"""`safetynet history` over the records continuous verification wrote to Azurite."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient

from blob_safetynet.cli.main import main
from blob_safetynet.embedded.azurite import Azurite
from blob_safetynet.policies.continuous.history import SCHEMA, history_name
from blob_safetynet.policies.continuous.run import verify_continuously
from blob_safetynet.policies.probes import Target
from blob_safetynet.policies.probes.liveness import PENDING_LIFECYCLE, SWEEPER_HEARTBEAT


def history(azurite: Azurite, container: ContainerClient, *extra: str) -> list[str]:
    return [
        "history",
        "--connection-string",
        azurite.connection_string,
        "--container",
        container.container_name,
        *extra,
    ]


def two_runs(service: BlobServiceClient, container: ContainerClient) -> list[str]:
    ids = []
    for day in (1, 2):
        run_id = f"{datetime(2026, 11, day, tzinfo=UTC):%Y%m%dT%H%M%SZ}-00000{day}"
        target = Target(service, container.container_name, run_id=run_id)
        verify_continuously(target, probes=[PENDING_LIFECYCLE, SWEEPER_HEARTBEAT])
        ids.append(run_id)
    return ids


def test_the_table_shows_each_checks_outcomes_oldest_run_first(
    azurite: Azurite,
    service_client: BlobServiceClient,
    container: ContainerClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two runs give one line per probe with one mark per run and the newest outcome; nothing
    failed and every record was read: exit 0."""
    first, last = two_runs(service_client, container)

    code = main(history(azurite, container))

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"2 run(s), {first} .. {last}, oldest first" in out
    [lifecycle] = [line for line in out.splitlines() if line.startswith(PENDING_LIFECYCLE.id)]
    assert lifecycle.split()[1:] == ["probe", "NN", "NOT_VERIFIABLE"]


def test_json_lists_every_run_and_every_checks_outcomes(
    azurite: Azurite,
    service_client: BlobServiceClient,
    container: ContainerClient,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--json gives the runs in order and, per check, one outcome per run."""
    ids = two_runs(service_client, container)

    assert main(history(azurite, container, "--json", "--limit", "1")) == 0

    body = json.loads(capsys.readouterr().out)
    assert [run["run_id"] for run in body["runs"]] == ids[1:]
    assert {check["id"]: check["outcomes"] for check in body["checks"]} == {
        PENDING_LIFECYCLE.id: ["NOT_VERIFIABLE"],
        SWEEPER_HEARTBEAT.id: ["NOT_VERIFIABLE"],
    }


def test_a_hostile_record_is_escaped_and_its_failure_counts(
    azurite: Azurite, container: ContainerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record whose check id carries terminal escapes prints them escaped, on one line, and
    its newest FAIL makes the exit code 1."""
    forged = {
        "schema": SCHEMA,
        "run_id": "20261101T000000Z-000001",
        "checks": [{"kind": "rule", "id": "SN-X\x1b[2J\nfake", "outcome": "FAIL", "detail": ""}],
    }
    container.upload_blob(history_name(forged["run_id"]), json.dumps(forged).encode())

    code = main(history(azurite, container))

    out = capsys.readouterr().out
    assert code == 1
    assert "\x1b" not in out
    assert "SN-X\\x1b[2J\\nfake" in out


def test_a_blob_that_is_not_a_record_is_skipped_by_name_and_makes_the_run_incomplete(
    azurite: Azurite, container: ContainerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """Garbage under the history prefix is named on stderr, not printed as data: exit 3."""
    container.upload_blob(history_name("20261101T000000Z-000001"), b"\x00\x01")

    code = main(history(azurite, container))

    captured = capsys.readouterr()
    assert code == 3
    assert "not JSON" in captured.err
    assert "no continuous verification record" in captured.out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--limit", "0"], "--limit must be between 1 and 1000"),
        (["--container", "nope-not-there"], "container 'nope-not-there' does not exist"),
    ],
    ids=["limit", "missing-container"],
)
def test_bad_usage_exits_2_with_a_precise_message(
    azurite: Azurite,
    container: ContainerClient,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    """A limit out of range or a container that does not exist is bad usage: exit 2."""
    code = main([*history(azurite, container), *extra])

    assert code == 2
    assert message in capsys.readouterr().err


def test_the_time_to_recover_is_shown_and_a_forged_one_is_not_trusted(
    azurite: Azurite, container: ContainerClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """Records whose recovery drill passed give the last and slowest time to recover; a value
    that is not a number of seconds (text, negative) counts as absent in the table and JSON."""
    times: list[object] = [1.5, "9999", 0.25, -3]
    for number, seconds in enumerate(times, start=1):
        record = {
            "schema": SCHEMA,
            "run_id": f"20261101T00000{number}Z-00000{number}",
            "checks": [],
            "time_to_recover_s": seconds,
        }
        container.upload_blob(history_name(str(record["run_id"])), json.dumps(record).encode())

    main(history(azurite, container))
    table = capsys.readouterr().out
    main(history(azurite, container, "--json"))
    body = json.loads(capsys.readouterr().out)

    assert (
        "time to recover (the recovery drill): last 0.25 s, slowest 1.50 s, over 2 run(s)" in table
    )
    assert [run["time_to_recover_s"] for run in body["runs"]] == [1.5, None, 0.25, None]
